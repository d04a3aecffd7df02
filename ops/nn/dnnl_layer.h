// A oneDNN layer with weights (convolution, deconvolution) run on Loom's arrays. The
// forward, backward-data and backward-weights primitives are built once per bind. Every
// tensor goes through a LayoutBridge: when a primitive chose a layout other than the one
// Loom's array has (weights are plain; activations plain or channel-blocked, as the
// executor's layout plan chose) the tensor is reordered per call (weights change in
// training), and outputs the primitives cannot accumulate go through scratch. The primitives'
// memory arguments are made once too (PrimitiveArgs); calls only point them at their buffers.
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ops/nn/dnnl_args.h"
#include "ops/nn/nn_util.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/cpu/thread_cap.h"

namespace loom::nn {

/// The descriptors of Loom's arrays around a weighted layer: data, weights, bias (zero desc
/// when absent), output, and the gradients of data and output.
struct LayerDescs {
  dnnl::memory::desc src, weights, bias, dst, diff_src, diff_dst;
};

class DnnlWeightedLayer {
 public:
  /// `arrays` describes Loom's arrays; the primitive descriptors may have chosen any
  /// layouts for src/weights/dst (bias must be plain). Primitives built with
  /// scratchpad_mode::user get their scratchpad from the kernel workspace (shared with every
  /// other kernel) instead of oneDNN's own allocation.
  DnnlWeightedLayer(const dnnl::primitive_desc& fwd, const dnnl::primitive_desc& bwd_data,
                    const dnnl::primitive_desc& bwd_weights, const LayerDescs& arrays)
      : fwd_(fwd),
        bwd_data_(bwd_data),
        bwd_weights_(bwd_weights),
        bias_(arrays.bias),
        sp_fwd_(fwd.scratchpad_desc()),
        sp_bd_(bwd_data.scratchpad_desc()),
        sp_bw_(bwd_weights.scratchpad_desc()),
        f_src_(arrays.src, fwd.src_desc(0)),
        f_w_(arrays.weights, fwd.weights_desc(0)),
        f_dst_(arrays.dst, fwd.dst_desc(0)),
        d_ddst_(arrays.diff_dst, bwd_data.diff_dst_desc(0)),
        d_w_(arrays.weights, bwd_data.weights_desc(0)),
        d_dsrc_(arrays.diff_src, bwd_data.diff_src_desc(0)),
        w_src_(arrays.src, bwd_weights.src_desc(0)),
        w_ddst_(arrays.diff_dst, bwd_weights.diff_dst_desc(0)),
        w_dw_(arrays.weights, bwd_weights.diff_weights_desc(0)),
        w_db_(arrays.bias, arrays.bias),
        arr_src_(arrays.src),
        arr_dst_(arrays.dst),
        has_bias_(arrays.bias.get_size() > 0),
        impl_("fwd=" + std::string(fwd.impl_info_str()) + " bwd_data=" + bwd_data.impl_info_str() +
              " bwd_weights=" + bwd_weights.impl_info_str()) {
    a_fwd_.add(DNNL_ARG_SRC, f_src_.chosen());
    a_fwd_.add(DNNL_ARG_WEIGHTS, f_w_.chosen());
    if (has_bias_) a_fwd_.add(DNNL_ARG_BIAS, bias_);
    a_fwd_.add(DNNL_ARG_DST, f_dst_.chosen());
    a_fwd_.add(DNNL_ARG_SCRATCHPAD, sp_fwd_);
    a_bd_.add(DNNL_ARG_DIFF_DST, d_ddst_.chosen());
    a_bd_.add(DNNL_ARG_WEIGHTS, d_w_.chosen());
    a_bd_.add(DNNL_ARG_DIFF_SRC, d_dsrc_.chosen());
    a_bd_.add(DNNL_ARG_SCRATCHPAD, sp_bd_);
    a_bw_.add(DNNL_ARG_SRC, w_src_.chosen());
    a_bw_.add(DNNL_ARG_DIFF_DST, w_ddst_.chosen());
    a_bw_.add(DNNL_ARG_DIFF_WEIGHTS, w_dw_.chosen());
    if (has_bias_) a_bw_.add(DNNL_ARG_DIFF_BIAS, bias_);
    a_bw_.add(DNNL_ARG_SCRATCHPAD, sp_bw_);
  }

  /// All of Loom's arrays plain.
  DnnlWeightedLayer(const dnnl::primitive_desc& fwd, const dnnl::primitive_desc& bwd_data,
                    const dnnl::primitive_desc& bwd_weights, const dnnl::memory::desc& src,
                    const dnnl::memory::desc& weights, const dnnl::memory::desc& bias,
                    const dnnl::memory::desc& dst)
      : DnnlWeightedLayer(fwd, bwd_data, bwd_weights,
                          LayerDescs{src, weights, bias, dst, src, dst}) {}

  /// The implementations oneDNN chose, e.g. "fwd=gemm:jit bwd_data=... bwd_weights=...".
  const std::string& impl_info() const { return impl_; }

  /// The layouts the forward primitive chose for data and output.
  const dnnl::memory::desc& fwd_src_desc() const { return f_src_.chosen(); }
  const dnnl::memory::desc& fwd_dst_desc() const { return f_dst_.chosen(); }

  /// Adds the inference forward with post-ops (`pd`: a plain (F) bias; `weights` describes
  /// Loom's weight array, output channels outermost): an affine map folded into weights and
  /// bias, a sum, an eltwise or prelu post-op. Data and output are reordered between Loom's
  /// arrays and the primitive's layouts where they differ; a sum then needs
  /// `reorder_sum` (the other operand is reordered in, the result back), and is refused
  /// otherwise.
  bool enable_post_ops(const dnnl::primitive_desc& pd, const dnnl::memory::desc& weights,
                       const PostOps& ops, bool reorder_sum = false) {
    // May throw (nothing changed then). Only ever reordered into the primitive's layout.
    dnnl_util::LayoutBridge src(arr_src_, pd.src_desc(0)), dst(arr_dst_, pd.dst_desc(0));
    if (ops.sum && !dst.same() && !reorder_sum) return false;
    dnnl_util::LayoutBridge w(weights, pd.weights_desc(0), /*to_only=*/true);
    dnnl::primitive p(pd);
    aff_src_ = src;
    aff_dst_ = dst;
    aff_w_ = w;
    aff_fwd_ = p;
    aff_bias_desc_ = pd.weights_desc(1);
    sp_aff_ = pd.scratchpad_desc();
    aff_impl_ = pd.impl_info_str();
    post_ = ops;
    prelu_index_ = ops.sum ? 1 : 0;  // the activation follows the sum
    a_aff_ = PrimitiveArgs();
    a_aff_.add(DNNL_ARG_SRC, aff_src_.chosen());
    a_aff_.add(DNNL_ARG_WEIGHTS, aff_w_.chosen());
    a_aff_.add(DNNL_ARG_BIAS, aff_bias_desc_);
    a_aff_.add(DNNL_ARG_DST, aff_dst_.chosen());
    if (ops.act.kind == FusedActivation::kPrelu) {  // one slope per output channel
      dnnl::memory::dims d(static_cast<size_t>(f_dst_.chosen().dims().size()), 1);
      d[1] = static_cast<int64_t>(aff_bias_desc_.get_size() / sizeof(float));
      a_aff_.add(prelu_arg(), dnnl_util::plain_md(d));
    }
    a_aff_.add(DNNL_ARG_SCRATCHPAD, sp_aff_);
    return true;
  }
  bool has_post_ops() const { return aff_fwd_.has_value(); }
  const std::string& post_ops_impl_info() const { return aff_impl_; }

  size_t workspace_bytes() const {
    size_t aff =
        has_post_ops() ? in_bytes(aff_src_) + out_bytes(aff_dst_) + align64(sp_aff_.get_size()) : 0;
    size_t fwd = std::max(
        aff, in_bytes(f_src_) + in_bytes(f_w_) + out_bytes(f_dst_) + align64(sp_fwd_.get_size()));
    size_t bwd = in_bytes(d_ddst_) + in_bytes(d_w_) + out_bytes(d_dsrc_) + in_bytes(w_src_) +
                 in_bytes(w_ddst_) + out_bytes(w_dw_) + out_bytes(w_db_);
    bwd += align64(std::max(sp_bd_.get_size(), sp_bw_.get_size()));
    return std::max(fwd, bwd);
  }

  /// Forward. With `cached_weights` (inference) the weights array's reorder is kept between
  /// calls and reused while the array provably has not changed: its storage never handed
  /// out a mutable pointer and its write version is the one the reorder was made from
  /// (Storage::version).
  void forward(const float* src, const NDArray& weights, const float* b, float* dst, Req req,
               void* workspace, bool cached_weights) {
    if (req == Req::kNull) return;
    ScratchCursor ws(workspace);
    a_fwd_.set(DNNL_ARG_SRC, in_chosen(f_src_, src, ws.take(in_bytes(f_src_))));
    void* w_scratch = ws.take(in_bytes(f_w_));
    if (cached_weights && !f_w_.same() && weights.device().type == DeviceType::kCPU &&
        !weights.storage()->escaped())
      a_fwd_.set(DNNL_ARG_WEIGHTS, cached_weights_for(weights));
    else
      a_fwd_.set(DNNL_ARG_WEIGHTS, in_chosen(f_w_, weights.cdata<float>(), w_scratch));
    if (has_bias_) a_fwd_.set(DNNL_ARG_BIAS, b);
    void* target = f_dst_.target(dst, ws.take(out_bytes(f_dst_)), is_add(req));
    a_fwd_.set(DNNL_ARG_DST, target);
    if (sp_fwd_.get_size()) a_fwd_.set(DNNL_ARG_SCRATCHPAD, ws.take(sp_fwd_.get_size()));
    a_fwd_.execute(fwd_);
    f_dst_.finish(target, dst, is_add(req));
  }

  /// Inference forward with the post-ops enable_post_ops built, into `dst`. The affine map
  /// y * scale[f] + shift[f] per output channel f is the convolution with weights
  /// w * scale[f] and bias b * scale[f] + shift[f]; the weights (scaled or not) are kept in
  /// the primitive's layout while the weight array provably has not changed (as for
  /// cached_weights) and the scale is the same; escaped weights are redone on every call.
  /// With a sum, dst holds the other operand; with prelu, ops.act.slope has one slope per
  /// output channel.
  bool forward_post_ops(const float* src, const NDArray& weights, const float* b, float* dst,
                        const PostOps& ops, void* workspace) {
    if (!aff_fwd_ || weights.device().type != DeviceType::kCPU) return false;
    const size_t nf = static_cast<size_t>(aff_bias_desc_.get_size() / sizeof(float));
    std::span<const float> scale = post_.affine ? ops.scale : std::span<const float>();
    std::span<const float> shift = post_.affine ? ops.shift : std::span<const float>();
    if (post_.affine != ops.affine || post_.sum != ops.sum || post_.act.kind != ops.act.kind)
      return false;
    if (post_.affine && (scale.size() != nf || shift.size() != nf)) return false;
    if (post_.act.kind == FusedActivation::kPrelu && ops.act.slope.size() != nf) return false;
    if (nf == 0 || static_cast<size_t>(weights.size()) % nf != 0) return false;
    const auto& st = weights.storage();
    const bool cacheable = !st->escaped();
    uint64_t version = st->version();
    NDArray wbuf = a_cache_.buffer;
    if (!cacheable || a_cache_.owner.lock() != st || a_cache_.offset != weights.offset() ||
        a_cache_.version != version || a_cache_.buffer.is_none() ||
        !std::equal(scale.begin(), scale.end(), a_cache_.scale.begin(), a_cache_.scale.end())) {
      const size_t per = static_cast<size_t>(weights.size()) / nf;
      const float* w = weights.cdata<float>();
      // Plain, output channels outermost. Kept only when it is the primitive's layout; a
      // temporary otherwise, from the heap (freed to the system, not to the device pool).
      NDArray folded;
      std::vector<float> tmp;
      float* fw;
      if (aff_w_.same()) {
        folded = NDArray(Shape{weights.size()}, DType::kFloat32);
        fw = folded.data<float>();
      } else {
        tmp.resize(static_cast<size_t>(weights.size()));
        fw = tmp.data();
      }
      for (size_t f = 0; f < nf; ++f) {
        const float sc = scale.empty() ? 1.f : scale[f];
        for (size_t k = 0; k < per; ++k) fw[f * per + k] = w[f * per + k] * sc;
      }
      if (aff_w_.same()) {
        wbuf = folded;
      } else {
        const auto bytes = static_cast<int64_t>(aff_w_.scratch_bytes());
        if (!cacheable || wbuf.is_none() || wbuf.nbytes() != static_cast<size_t>(bytes))
          wbuf = NDArray(Shape{bytes}, DType::kUint8);
        aff_w_.to_chosen(fw, wbuf.raw());
      }
      if (cacheable) {
        a_cache_.buffer = wbuf;
        a_cache_.owner = st;
        a_cache_.offset = weights.offset();
        a_cache_.version = version;
        a_cache_.scale.assign(scale.begin(), scale.end());
      }
    }
    a_bias_.resize(nf);
    for (size_t f = 0; f < nf; ++f)
      a_bias_[f] = scale.empty() ? (b ? b[f] : 0.f) : (b ? b[f] : 0.f) * scale[f] + shift[f];
    ScratchCursor ws(workspace);
    a_aff_.set(DNNL_ARG_SRC, in_chosen(aff_src_, src, ws.take(in_bytes(aff_src_))));
    a_aff_.set(DNNL_ARG_WEIGHTS, wbuf.raw());
    a_aff_.set(DNNL_ARG_BIAS, a_bias_.data());
    // With a sum the output is Loom's array, holding the other operand: used in place when
    // it has the primitive's layout, else reordered into scratch first.
    void* scratch = ws.take(out_bytes(aff_dst_));
    void* target = aff_dst_.target(dst, scratch, false);
    if (post_.sum && target != dst) aff_dst_.to_chosen(dst, scratch);
    a_aff_.set(DNNL_ARG_DST, target);
    if (post_.act.kind == FusedActivation::kPrelu) a_aff_.set(prelu_arg(), ops.act.slope.data());
    if (sp_aff_.get_size()) a_aff_.set(DNNL_ARG_SCRATCHPAD, ws.take(sp_aff_.get_size()));
    a_aff_.execute(*aff_fwd_);
    aff_dst_.finish(target, dst, false);
    return true;
  }

  /// Gradients for data, weights and bias (each skipped when its req is kNull).
  void backward(const float* diff_dst, const float* src, const float* w, float* diff_src,
                float* diff_w, float* diff_b, Req req_src, Req req_w, Req req_b,
                void* workspace) const {
    ScratchCursor ws(workspace);
    void* dd_buf = ws.take(in_bytes(d_ddst_));
    void* w_buf = ws.take(in_bytes(d_w_));
    void* ds_buf = ws.take(out_bytes(d_dsrc_));
    void* src_buf = ws.take(in_bytes(w_src_));
    void* wdd_buf = ws.take(in_bytes(w_ddst_));
    void* dw_buf = ws.take(out_bytes(w_dw_));
    void* db_buf = ws.take(out_bytes(w_db_));
    void* sp_buf = ws.take(std::max(sp_bd_.get_size(), sp_bw_.get_size()));
    if (req_src != Req::kNull) {
      void* target = d_dsrc_.target(diff_src, ds_buf, is_add(req_src));
      a_bd_.set(DNNL_ARG_DIFF_DST, in_chosen(d_ddst_, diff_dst, dd_buf));
      a_bd_.set(DNNL_ARG_WEIGHTS, in_chosen(d_w_, w, w_buf));
      a_bd_.set(DNNL_ARG_DIFF_SRC, target);
      if (sp_bd_.get_size()) a_bd_.set(DNNL_ARG_SCRATCHPAD, sp_buf);
      a_bd_.execute(bwd_data_);
      d_dsrc_.finish(target, diff_src, is_add(req_src));
    }
    bool want_b = has_bias_ && req_b != Req::kNull;
    if (req_w == Req::kNull && !want_b) return;
    // One primitive computes both; a gradient nobody asked for goes to scratch.
    void* w_target = req_w == Req::kNull ? dw_buf : w_dw_.target(diff_w, dw_buf, is_add(req_w));
    void* b_target = want_b ? w_db_.target(diff_b, db_buf, is_add(req_b)) : db_buf;
    a_bw_.set(DNNL_ARG_SRC, in_chosen(w_src_, src, src_buf));
    a_bw_.set(DNNL_ARG_DIFF_DST, in_chosen(w_ddst_, diff_dst, wdd_buf));
    a_bw_.set(DNNL_ARG_DIFF_WEIGHTS, w_target);
    if (has_bias_) a_bw_.set(DNNL_ARG_DIFF_BIAS, b_target);
    if (sp_bw_.get_size()) a_bw_.set(DNNL_ARG_SCRATCHPAD, sp_buf);
    a_bw_.execute(bwd_weights_);
    if (req_w != Req::kNull) w_dw_.finish(w_target, diff_w, is_add(req_w));
    if (want_b) w_db_.finish(b_target, diff_b, is_add(req_b));
  }

 private:
  // The primitive-layout pointer of an input: `plain` itself when the layouts agree, else
  // `scratch` after reordering into it.
  static const void* in_chosen(const dnnl_util::LayoutBridge& b, const float* plain,
                               void* scratch) {
    if (b.same()) return plain;
    b.to_chosen(plain, scratch);
    return scratch;
  }
  // The prelu post-op's slopes (after the sum, when there is one).
  int prelu_arg() const { return DNNL_ARG_ATTR_MULTIPLE_POST_OP(prelu_index_) | DNNL_ARG_WEIGHTS; }

  const void* cached_weights_for(const NDArray& weights) {
    const auto& st = weights.storage();
    uint64_t version = st->version();
    if (w_cache_.owner.lock() != st || w_cache_.offset != weights.offset() ||
        w_cache_.version != version || w_cache_.buffer.is_none()) {
      if (w_cache_.buffer.is_none())
        w_cache_.buffer = NDArray(Shape{static_cast<int64_t>(f_w_.scratch_bytes())}, DType::kUint8);
      f_w_.to_chosen(weights.cdata<float>(), w_cache_.buffer.raw());
      w_cache_.owner = st;
      w_cache_.offset = weights.offset();
      w_cache_.version = version;
    }
    return w_cache_.buffer.raw();
  }

  // The forward weights in the primitive's layout, and which array version they came from.
  struct WeightCache {
    std::weak_ptr<Storage> owner;
    size_t offset = 0;
    uint64_t version = 0;
    NDArray buffer;
  } w_cache_;

  // Scratch for an input: only when it must be reordered.
  static size_t in_bytes(const dnnl_util::LayoutBridge& b) {
    return b.same() ? 0 : align64(b.scratch_bytes());
  }
  // Scratch for an output: when reordered or accumulated.
  static size_t out_bytes(const dnnl_util::LayoutBridge& b) { return align64(b.scratch_bytes()); }

  // The inference forward with post-ops (enable_post_ops) and its (scaled) weights.
  PostOps post_;
  int prelu_index_ = 0;
  std::optional<dnnl::primitive> aff_fwd_;
  dnnl_util::LayoutBridge aff_w_, aff_src_, aff_dst_;
  dnnl::memory::desc aff_bias_desc_, sp_aff_;
  std::string aff_impl_;
  struct AffineCache {
    std::weak_ptr<Storage> owner;
    size_t offset = 0;
    uint64_t version = 0;
    std::vector<float> scale;
    NDArray buffer;
  } a_cache_;
  std::vector<float> a_bias_;
  PrimitiveArgs a_aff_;

  // Memory arguments of the forward, backward-data and backward-weights primitives.
  // (backward is const to its callers: its arguments are call state).
  PrimitiveArgs a_fwd_;
  mutable PrimitiveArgs a_bd_, a_bw_;
  dnnl::primitive fwd_, bwd_data_, bwd_weights_;
  dnnl::memory::desc bias_;
  dnnl::memory::desc sp_fwd_, sp_bd_, sp_bw_;  // user-mode scratchpads (zero size otherwise)
  dnnl_util::LayoutBridge f_src_, f_w_, f_dst_, d_ddst_, d_w_, d_dsrc_, w_src_, w_ddst_, w_dw_,
      w_db_;
  dnnl::memory::desc arr_src_, arr_dst_;  // Loom's data and output arrays
  bool has_bias_;
  std::string impl_;
};

/// The kernel shared by Convolution and Deconvolution: inputs (data,
/// weight[, bias]) through one DnnlWeightedLayer that the derived constructor builds.
class WeightedLayerKernel : public Kernel {
 public:
  explicit WeightedLayerKernel(bool no_bias) : no_bias_(no_bias) {}
  size_t workspace_bytes() const override { return layer_->workspace_bytes(); }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    dnnl_util::ThreadCap cap(threads_);
    // Inputs are only read: cdata leaves their storage trackable (weights can stay cached).
    const float* b = no_bias_ ? nullptr : in[2].cdata<float>();
    layer_->forward(in[0].cdata<float>(), in[1], b, out[0].data<float>(), req[0], ctx.workspace,
                    /*cached_weights=*/!ctx.is_train);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    dnnl_util::ThreadCap cap(threads_);
    auto ptr = [&](size_t i) { return ig[i].is_none() ? nullptr : ig[i].data<float>(); };
    Req rb = no_bias_ ? Req::kNull : req[2];
    layer_->backward(og[0].cdata<float>(), in[0].cdata<float>(), in[1].cdata<float>(), ptr(0),
                     ptr(1), no_bias_ ? nullptr : ptr(2), req[0], req[1], rb, ctx.workspace);
  }

 protected:
  bool no_bias_;
  // OpenMP threads the primitives were built for (0: all; 1 for small layers, see
  // dnnl_util::threads_for_work); every call runs under the same cap.
  int threads_ = 0;
  std::optional<DnnlWeightedLayer> layer_;
};

}  // namespace loom::nn
