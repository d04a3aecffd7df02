// Convolution (1-D, 2-D, 3-D, grouped) on oneDNN convolution primitives (spec 6.2).
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "ops/dtype_policy.h"
#include "ops/infer.h"
#include "ops/nn/conv_params.h"
#include "ops/nn/conv_split.h"
#include "ops/nn/conv_subsample.h"
#include "ops/nn/depthwise.h"
#include "ops/nn/dnnl_layer.h"
#include "ops/nn/winograd.h"
#include "runtime/cpu/thread_team.h"

namespace loom {
namespace {

using nn::ConvParam;  // ops/nn/conv_params.h, shared with the cuDNN kernel

const auto kConvSchema =
    ParamSchema<ConvParam>()
        .required("kernel", &ConvParam::kernel,
                  "Convolution kernel size: (w,), (h, w) or (d, h, w).")
        .optional("stride", &ConvParam::stride, Shape(), "Stride; default 1 per dimension.")
        .optional("dilate", &ConvParam::dilate, Shape(), "Dilation; default 1 per dimension.")
        .optional("pad", &ConvParam::pad, Shape(), "Zero pad on both sides; default 0.")
        .required("num_filter", &ConvParam::num_filter, "Number of output channels.")
        .optional("num_group", &ConvParam::num_group, 1, "Number of channel groups.")
        .optional("workspace", &ConvParam::workspace, 1024, "Workspace limit in MB (ignored).")
        .optional("no_bias", &ConvParam::no_bias, false, "Whether to disable bias parameter.")
        .optional("cudnn_tune", &ConvParam::cudnn_tune, std::optional<std::string>(),
                  "cuDNN algorithm choice (ignored on CPU).")
        .optional("cudnn_off", &ConvParam::cudnn_off, false, "Turn off cuDNN (ignored).")
        .optional("layout", &ConvParam::layout, std::optional<std::string>(),
                  "Data layout; only NCW, NCHW and NCDHW are supported.")
        .check([](ConvParam& p) {
          int nd = p.kernel.ndim();
          if (nd < 1 || nd > 3) throw ParamError("kernel must have 1 to 3 dimensions");
          p.stride = nn::expand_tuple(p.stride, nd, 1, "stride");
          p.dilate = nn::expand_tuple(p.dilate, nd, 1, "dilate");
          p.pad = nn::expand_tuple(p.pad, nd, 0, "pad");
          for (int i = 0; i < nd; ++i)
            if (p.kernel[i] < 1 || p.stride[i] < 1 || p.dilate[i] < 1 || p.pad[i] < 0)
              throw ParamError("kernel, stride and dilate must be >= 1 and pad >= 0");
          if (p.num_filter < 1 || p.num_group < 1 || p.num_filter % p.num_group != 0)
            throw ParamError("num_filter must be a positive multiple of num_group");
          static const char* kLayouts[] = {"NCW", "NCHW", "NCDHW"};
          if (p.layout && *p.layout != kLayouts[nd - 1])
            throw ParamError("layout " + *p.layout + " is not supported on CPU (use " +
                             kLayouts[nd - 1] + ")");
        });

int64_t conv_out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p) {
  if (in == 0) return 0;
  const char* what = "Convolution output size";
  const int64_t span = dim_add(dim_mul(k - 1, d, what), 1, what);
  const int64_t padded = dim_add(in, dim_mul(2, p, what), what);
  if (padded < span)
    throw ShapeError("input size " + std::to_string(in) + " with pad " + std::to_string(p) +
                     " is smaller than the dilated kernel " + std::to_string(span));
  return (padded - span) / s + 1;
}

void conv_infer_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<ConvParam>();
  int nd = p.kernel.ndim();
  Shape& data = in[0];
  if (data.ndim() != 0 && data.ndim() != nd + 2)
    throw ShapeError(input_label(a, 0) + ": expected " + std::to_string(nd + 2) +
                     "-d input for a " + std::to_string(nd) + "-d kernel, got " + data.str());
  Shape w{p.num_filter, 0};
  for (int i = 0; i < nd; ++i) w.push_back(p.kernel[i]);
  merge_shape(in[1], w, input_label(a, 1));
  if (!p.no_bias) merge_shape(in[2], Shape{p.num_filter}, input_label(a, 2));
  if (data.ndim() == 0 && in[1][1] > 0) data = Shape(std::vector<int64_t>(nd + 2, 0));
  if (data.ndim() == 0) return;
  if (data[1] == 0 && in[1][1] > 0) data[1] = in[1][1] * p.num_group;
  if (data[1] > 0 && data[1] % p.num_group != 0)
    throw ShapeError(input_label(a, 0) + ": " + std::to_string(data[1]) +
                     " channels are not divisible by num_group " + std::to_string(p.num_group));
  if (data[1] > 0) {
    Shape wfull{p.num_filter, data[1] / p.num_group};
    for (int i = 0; i < nd; ++i) wfull.push_back(p.kernel[i]);
    merge_shape(in[1], wfull, input_label(a, 1));
  }
  if (out[0].ndim() == nd + 2) {
    // Back from a known output: the batch, and a spatial size where the stride is 1
    // (in = out - 1 + dilated kernel - 2 pad), as MXNet's incomplete inference does.
    if (data[0] == 0) data[0] = out[0][0];
    for (int i = 0; i < nd; ++i)
      if (data[i + 2] == 0 && out[0][i + 2] > 0 && p.stride[i] == 1) {
        const int64_t v = out[0][i + 2] - 1 + (p.kernel[i] - 1) * p.dilate[i] + 1 - 2 * p.pad[i];
        if (v > 0) data[i + 2] = v;
      }
  }
  Shape o{data[0], p.num_filter};
  for (int i = 0; i < nd; ++i)
    o.push_back(conv_out_dim(data[i + 2], p.kernel[i], p.stride[i], p.dilate[i], p.pad[i]));
  merge_shape(out[0], o, "output 0");
}

class ConvKernel final : public nn::WeightedLayerKernel {
 public:
  explicit ConvKernel(const KernelArgs& a)
      : WeightedLayerKernel(a.attrs.param<ConvParam>().no_bias), p_(a.attrs.param<ConvParam>()) {
    using namespace dnnl;
    using dnnl_util::any_md;
    using dnnl_util::plain_md;
    using dnnl_util::to_dims;
    int nd = p_.kernel.ndim();
    const Shape& ws = a.in_shapes[1];
    // Small layers (batch 1 of mobile networks) build and run their primitives on one
    // thread: waking the other threads would cost more than it saves.
    const double in_n = static_cast<double>(a.in_shapes[0].numel());
    const double out_n = static_cast<double>(a.out_shapes[0].numel());
    const double w_n = static_cast<double>(ws.numel());
    const double flops = 2.0 * out_n * w_n / static_cast<double>(ws[0]),
                 bytes = 4.0 * (in_n + out_n + w_n);
    threads_ = dnnl_util::threads_for_work(flops, bytes);
    // Such layers, and in inference somewhat larger ones that run direct or depthwise and
    // whose weights are no larger than their activations, may instead run split by output
    // channels over Loom's thread team, one part per OpenMP thread (counted before the cap).
    // (A split layer keeps its weights in its parts' primitives: ResNet-50 b1 with its
    // weight-heavy 1x1 layers split too peaked 16 MB higher, above MXNet, for no gain.)
    const bool band = w_n <= in_n + out_n && dnnl_util::team_split_worth(flops, bytes);
    if (nn::team_split_enabled() && (threads_ == 1 || band)) team_threads_ = omp_get_max_threads();
    dnnl_util::ThreadCap cap(threads_);
    memory::dims wdims = to_dims(ws);
    if (p_.num_group > 1) {  // (F, C/G, k...) is (G, F/G, C/G, k...) in row-major order
      wdims[0] = ws[0] / p_.num_group;
      wdims.insert(wdims.begin(), p_.num_group);
    }
    memory::dims strides, dilates, pad;
    for (int i = 0; i < nd; ++i) {
      strides.push_back(p_.stride[i]);
      dilates.push_back(p_.dilate[i] - 1);  // oneDNN counts the gaps
      pad.push_back(p_.pad[i]);
    }
    // oneDNN picks every layout (its direct JIT kernels want blocked activations, and its
    // plain-layout gemm backward is slow, 100x for depthwise); the layer reorders to and from
    // Loom's arrays where their layouts differ.
    auto src = any_md(to_dims(a.in_shapes[0])), dst = any_md(to_dims(a.out_shapes[0]));
    auto w = any_md(wdims);
    auto bias = p_.no_bias ? memory::desc() : plain_md({p_.num_filter});
    const auto& eng = dnnl_util::engine();
    const auto fwd = prop_kind::forward_training;
    // Builds the three primitives with one algorithm. Their scratchpads (large for
    // Winograd) come out of the shared kernel workspace.
    primitive_attr attr;
    attr.set_scratchpad_mode(scratchpad_mode::user);
    strides_ = strides, dilates_ = dilates, pad_ = pad, wdims_ = wdims;
    in_shape_ = a.in_shapes[0], out_shape_ = a.out_shapes[0];
    in_layout_ = a.layout(LayoutSlot::kIn, 0), out_layout_ = a.layout(LayoutSlot::kOut, 0);
    auto build = [&](algorithm algo) {
      algo_ = algo;
      auto fd =
          p_.no_bias
              ? convolution_forward::desc(fwd, algo, src, w, dst, strides, dilates, pad, pad)
              : convolution_forward::desc(fwd, algo, src, w, bias, dst, strides, dilates, pad, pad);
      convolution_forward::primitive_desc fpd(fd, attr, eng);
      // Data with fewer channels than a block (an RGB input layer) would be zero-padded to a
      // whole block for the direct backward-data kernel: gemm on plain arrays is ~5x faster.
      int block = dnnl_util::preferred_channel_block();
      bool plain_bwd_data = p_.num_group == 1 && block > 1 && a.in_shapes[0][1] % block != 0;
      convolution_backward_data::desc any_bd(algo, src, w, dst, strides, dilates, pad, pad);
      convolution_backward_data::primitive_desc bdpd(any_bd, attr, eng, fpd);
      if (plain_bwd_data) {
        convolution_backward_data::primitive_desc plain(
            {algo, plain_md(to_dims(a.in_shapes[0])), plain_md(wdims),
             plain_md(to_dims(a.out_shapes[0])), strides, dilates, pad, pad},
            attr, eng, fpd);
        // Never trade a JIT kernel for oneDNN's reference one (orders of magnitude slower).
        if (std::string(plain.impl_info_str()).find("ref") == std::string::npos) bdpd = plain;
      }
      auto wd = p_.no_bias ? convolution_backward_weights::desc(algo, src, w, dst, strides, dilates,
                                                                pad, pad)
                           : convolution_backward_weights::desc(algo, src, w, bias, dst, strides,
                                                                dilates, pad, pad);
      convolution_backward_weights::primitive_desc bwpd(wd, attr, eng, fpd);
      // Loom's arrays: data and output (and their gradients) plain or channel-blocked, as
      // the executor's layout plan chose; weights plain.
      auto md = [&](const Shape& s, LayoutSlot::Kind k) {
        return dnnl_util::layout_md(to_dims(s), a.layout(k, 0));
      };
      layer_.emplace(fpd, bdpd, bwpd,
                     nn::LayerDescs{.src = md(a.in_shapes[0], LayoutSlot::kIn),
                                    .weights = plain_md(wdims),
                                    .bias = bias,
                                    .dst = md(a.out_shapes[0], LayoutSlot::kOut),
                                    .diff_src = md(a.in_shapes[0], LayoutSlot::kInGrad),
                                    .diff_dst = md(a.out_shapes[0], LayoutSlot::kOutGrad)});
    };
    if (use_winograd(a)) {
      try {
        build(algorithm::convolution_winograd);
        if (layer_->impl_info().find("ref") != std::string::npos) layer_.reset();
      } catch (const dnnl::error&) {
        layer_.reset();  // shapes the Winograd kernels do not take run direct
      }
    }
    try {
      if (!layer_) build(algorithm::convolution_direct);
    } catch (const dnnl::error& e) {
      dnnl_util::rethrow(e, "Convolution node '" + a.attrs.name + "'");
    }
    dnnl_util::record_impl("Convolution " + a.in_shapes[0].str() + " w" + ws.str() + " g" +
                           std::to_string(p_.num_group) + " " + layer_->impl_info());
    desc_ = "Convolution " + a.in_shapes[0].str() + " w" + ws.str() + " g" +
            std::to_string(p_.num_group);
    own_winograd_training(a);
  }

  // The training forward and the data gradient through Loom's own Winograd where
  // own_winograd_training chose it; small inference layers split over the team
  // (forward_plain_split); the rest on oneDNN.
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    // Inference keeps oneDNN's forward with its cached weight reorder (fused layers take
    // wino_ instead).
    if (!wino_fwd_ || !ctx.is_train || req[0] == Req::kNull ||
        in[1].device().type != DeviceType::kCPU) {
      if (!forward_plain_split(ctx, in, req, out)) WeightedLayerKernel::forward(ctx, in, req, out);
      return;
    }
    dnnl_util::ThreadCap cap(threads_);
    const float* b = no_bias_ ? nullptr : in[2].cdata<float>();
    wino_fwd_->forward(in[0].cdata<float>(), in[1], {}, b, out[0].data<float>(),
                       nn::is_add(req[0]), FusedActivation{}, ctx.workspace);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (!wino_bwd_ || in[1].device().type != DeviceType::kCPU)
      return WeightedLayerKernel::backward(ctx, og, in, out, req, ig);
    // What oneDNN still computes: the data gradient when it is not here, the weight (and
    // bias) gradient when the Winograd weight gradient is off.
    std::vector<Req> rest(req.begin(), req.end());
    rest[0] = Req::kNull;
    const bool own_w = wino_wgrad_ && req[1] != Req::kNull;
    if (own_w) {
      rest[1] = Req::kNull;
      if (!no_bias_) rest[2] = Req::kNull;
    }
    WeightedLayerKernel::backward(ctx, og, in, out, rest, ig);
    dnnl_util::ThreadCap cap(threads_);
    if (req[0] != Req::kNull)
      wino_bwd_->forward(og[0].cdata<float>(), in[1], {}, nullptr, ig[0].data<float>(),
                         nn::is_add(req[0]), FusedActivation{}, ctx.workspace);
    if (!own_w) return;
    wino_wgrad_->compute(in[0].cdata<float>(), og[0].cdata<float>(), ig[1].data<float>(),
                         nn::is_add(req[1]), ctx.workspace);
    if (!no_bias_ && req[2] != Req::kNull)
      bias_grad(og[0].cdata<float>(), ig[2].data<float>(), nn::is_add(req[2]));
  }

  // db[k] = [db[k] +] the sum of the channel-blocked output gradient over batch and map.
  void bias_grad(const float* dy, float* db, bool add) const {
    const int block = layout_block(out_layout_);
    const int64_t n = out_shape_[0], kb_n = out_shape_[1] / block,
                  hw = out_shape_[2] * out_shape_[3];
#pragma omp parallel for schedule(static)
    for (int64_t kb = 0; kb < kb_n; ++kb) {
      std::vector<double> acc(static_cast<size_t>(block), 0.0);
      for (int64_t i = 0; i < n; ++i) {
        const float* p = dy + (i * kb_n + kb) * hw * block;
        for (int64_t x = 0; x < hw; ++x)
          for (int j = 0; j < block; ++j) acc[static_cast<size_t>(j)] += p[x * block + j];
      }
      for (int j = 0; j < block; ++j) {
        const float v = static_cast<float>(acc[static_cast<size_t>(j)]);
        float& d = db[kb * block + j];
        d = add ? d + v : v;
      }
    }
  }

  // Inference post-ops: a following BatchNorm folded into the weights and bias, a residual
  // sum, an activation (ReLU/leaky as eltwise, PReLU as prelu with per-channel slopes), with
  // the same algorithm and data/output layouts as the forward.
  bool fuse_post_ops(const PostOps& ops) override {
    using namespace dnnl;
    dnnl_util::ThreadCap cap(threads_);
    wino_.reset();
    dw_.reset();
    sub_.reset();
    split_.reset();
    // An activation of the input as it is read: only Loom's depthwise kernel applies one.
    if (ops.pre.kind != FusedActivation::kNone) return own_depthwise_post_ops(ops);
    if (own_depthwise_post_ops(ops) || own_winograd_post_ops(ops) ||
        subsample_post_ops(ops, /*preferred=*/false))
      return true;
    primitive_attr attr;
    attr.set_scratchpad_mode(scratchpad_mode::user);
    attr.set_post_ops(nn::make_post_ops(ops, /*with_prelu=*/true));
    // Inference primitives first (the weights are only ever reordered into their layout, so
    // f32 Winograd 2x3's format serves too), then the training forward's implementation.
    // A 3x3 layer the forward runs direct (maps too small for Winograd's 4x3 tiles) first
    // tries oneDNN's inference-only Winograd 2x3 kernel (LOOM_CONV_WINOGRAD_INFER=0: not).
    const bool wino_infer = !env_off("LOOM_CONV_WINOGRAD_INFER");
    std::vector<algorithm> algos{algo_};
    if (algo_ == algorithm::convolution_direct && winograd_shape() && dnnl_util::has_winograd() &&
        !env_off("LOOM_CONV_WINOGRAD") && wino_infer)
      algos.insert(algos.begin(), algorithm::convolution_winograd);
    for (auto algo : algos) {
      if (algo == algorithm::convolution_direct &&
          (own_layout_post_ops(ops, attr) || split_post_ops(ops)))
        return true;
      for (auto prop : {prop_kind::forward_inference, prop_kind::forward_training}) {
        try {
          convolution_forward::desc d(prop, algo, layer_->fwd_src_desc(), dnnl_util::any_md(wdims_),
                                      dnnl_util::plain_md({p_.num_filter}), layer_->fwd_dst_desc(),
                                      strides_, dilates_, pad_, pad_);
          convolution_forward::primitive_desc pd(d, attr, dnnl_util::engine());
          const std::string impl = pd.impl_info_str();
          if (impl.find("ref") != std::string::npos) continue;
          // Only 2x3, and only with at most 8 MB of weights in its format (1.8x the plain size):
          // Winograd's 4x3 tiles on 7x7 maps at batch 16 were 1.1x faster for 200 MB more, and
          // 2x3 on 512-channel layers costs 17 MB each (ResNet-50 b1 went 76 MB past MXNet's
          // peak memory with them).
          const bool is_2x3 = impl.find("wino_2x3") != std::string::npos;
          if ((algo != algo_ && !is_2x3) || (is_2x3 && !wino_infer)) continue;
          if (algo != algo_ && pd.weights_desc().get_size() > (size_t{8} << 20)) continue;
          if (!layer_->enable_post_ops(pd, dnnl_util::plain_md(wdims_), ops)) return false;
        } catch (const dnnl::error&) {
          continue;
        }
        record_post_ops(ops);
        return true;
      }
    }
    return false;
  }
  void record_post_ops(const PostOps& ops) const {
    dnnl_util::record_impl(post_ops_label(ops) + layer_->post_ops_impl_info());
  }
  // "Convolution (shape) w(shape) gG +affine+sum+act " for the implementation records.
  std::string post_ops_label(const PostOps& ops) const {
    static const char* kAct[] = {"", "+relu", "+leaky", "+prelu"};
    const std::string pre = ops.pre.kind ? std::string("+in_") + (kAct[ops.pre.kind] + 1) : "";
    return desc_ + " " + pre + (ops.affine ? "+affine" : "") + (ops.sum ? "+sum" : "") +
           kAct[ops.act.kind] + " ";
  }

  // Layers whose weights outweigh their activations (the deep layers at batch 1, where every
  // call streams the weights from memory) run their inference primitive on the activation
  // layout oneDNN prefers for them when that is a brgemm kernel (nhwc with AVX-512 in oneDNN
  // 2.6; none with AVX2): 7x7x512 3x3 layers 0.77 -> 0.55 ms, 14x14 stride-2 0.41 -> 0.27 ms
  // (tests/bench/conv_onednn.cc COLD=1, 2 threads). Data and output are reordered between
  // Loom's layout and that one per call (small maps: a few microseconds).
  // LOOM_CONV_OWN_LAYOUT=0 keeps Loom's layouts.
  bool own_layout_post_ops(const PostOps& ops, const dnnl::primitive_attr& attr) {
    using namespace dnnl;
    if (env_off("LOOM_CONV_OWN_LAYOUT") || p_.kernel.ndim() != 2) return false;
    const auto& src = layer_->fwd_src_desc();
    const auto& dst = layer_->fwd_dst_desc();
    const size_t wbytes = static_cast<size_t>(dnnl_util::plain_md(wdims_).get_size());
    if (wbytes < 4 * (src.get_size() + dst.get_size())) return false;
    try {
      convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct,
                                  dnnl_util::any_md(src.dims()), dnnl_util::any_md(wdims_),
                                  dnnl_util::plain_md({p_.num_filter}),
                                  dnnl_util::any_md(dst.dims()), strides_, dilates_, pad_, pad_);
      convolution_forward::primitive_desc pd(d, attr, dnnl_util::engine());
      if (std::string(pd.impl_info_str()).find("brg") == std::string::npos) return false;
      if (subsample_post_ops(ops, /*preferred=*/true)) return true;
      if (!layer_->enable_post_ops(pd, dnnl_util::plain_md(wdims_), ops, /*reorder_sum=*/true))
        return false;
    } catch (const dnnl::error&) {
      return false;
    }
    record_post_ops(ops);
    return true;
  }

  bool forward_post_ops(const OpContext& ctx, std::span<const NDArray> in, const NDArray& dst,
                        const PostOps& ops) override {
    if (dw_) return forward_own_depthwise(ctx, in, dst, ops);
    if (ops.pre.kind != FusedActivation::kNone) return false;
    if (wino_) return forward_own_winograd(ctx, in, dst, ops);
    if (sub_) return forward_subsample(ctx, in, dst, ops);
    if (split_) return forward_split(ctx, in, dst, ops);
    if ((ctx.is_train && ops.sum) || !layer_->has_post_ops()) return false;
    dnnl_util::ThreadCap cap(threads_);
    const float* b = no_bias_ ? nullptr : in[2].cdata<float>();
    return layer_->forward_post_ops(in[0].cdata<float>(), in[1], b, dst.data<float>(), ops,
                                    ctx.workspace);
  }

  size_t workspace_bytes() const override {
    auto of = [](const auto& k) { return k ? k->workspace_bytes() : size_t{0}; };
    return std::max({layer_->workspace_bytes(), of(wino_), of(sub_), of(split_), of(wino_fwd_),
                     of(wino_bwd_), of(wino_wgrad_)});
  }

 private:
  // Layers the one-thread policy caps (threads_ == 1), and in inference those below
  // LOOM_TEAM_SPLIT_US (dnnl_util::team_split_worth), split by output channel blocks over
  // Loom's thread team, one one-thread oneDNN primitive per team thread
  // (ops/nn/conv_split.h): with passive OpenMP waiting an OpenMP region would cost more than
  // such a layer, while the team's workers spin between back-to-back layers. 2-D ungrouped or
  // depthwise layers with a channel-blocked output of at least two blocks, where the direct
  // algorithm would run: layers that take Winograd 2x3 or Loom's own Winograd, a weight-bound
  // layer's brgemm kernel (own_layout_post_ops) or the strided-1x1 subsample keep them (a 7x7x128
  // 3x3 layer at batch 1 was faster on one thread with Winograd 2x3 than split in two with
  // direct kernels). LOOM_TEAM_SPLIT=0 turns it off.
  // `record`: add the implementation record (not for the plain split, built at a call).
  bool split_post_ops(const PostOps& ops, bool record = true) {
    if (team_threads_ < 2 || !nn::team_split_enabled()) return false;
    const Shape &i = in_shape_, &o = out_shape_;
    const bool depthwise = p_.num_group == i[1] && p_.num_filter == i[1] && p_.num_group > 1;
    if (p_.kernel.ndim() != 2 || (p_.num_group != 1 && !depthwise)) return false;
    if (depthwise && !dw_split_wanted()) return false;
    nn::SplitConvShape s{i[0],         i[1],        i[2],         i[3],         o[1],
                         o[2],         o[3],        p_.kernel[0], p_.kernel[1], p_.stride[0],
                         p_.stride[1], p_.pad[0],   p_.pad[1],    p_.dilate[0], p_.dilate[1],
                         in_layout_,   out_layout_, depthwise};
    try {
      dnnl_util::ThreadCap one(1);
      split_ = std::make_unique<nn::SplitConv>(s, ops, team_threads_);
    } catch (const dnnl::error&) {
      return false;
    }
    split_ops_ = ops;
    if (record) dnnl_util::record_impl(post_ops_label(ops) + split_->impl_info());
    return true;
  }

  // Inference calls of a layer with no post-ops fused split too (built at the first one).
  // False: not split, run the plain forward.
  bool forward_plain_split(const OpContext& ctx, std::span<const NDArray> in,
                           std::span<const Req> req, std::span<const NDArray> out) {
    if (!ctx.is_train && req[0] == Req::kWrite && team_threads_ >= 2 &&
        in[1].device().type == DeviceType::kCPU) {
      if (!plain_split_tried_) {
        // Only where its scratchpads fit in the workspace the bind sized without it.
        plain_split_tried_ = true;
        const size_t declared = workspace_bytes();
        dnnl_util::ThreadCap cap(1);
        std::unique_ptr<nn::SplitConv> fused = std::move(split_);
        if (split_post_ops(PostOps{}, /*record=*/false) && split_->workspace_bytes() <= declared)
          plain_split_ = std::move(split_);
        split_ = std::move(fused);
      }
      if (plain_split_) {
        dnnl_util::ThreadCap cap(1);
        plain_split_->forward(in[0].cdata<float>(), in[1], {},
                              no_bias_ ? nullptr : in[2].cdata<float>(), {}, out[0].data<float>(),
                              ctx.workspace);
        return true;
      }
    }
    return false;
  }

  // oneDNN's depthwise layers (ReLU or none: MobileNet's) split too unless
  // LOOM_TEAM_SPLIT_DW=0: MobileNet v1 b1 (AVX-512, 2 threads, SCHED_FIFO A/B beside another
  // engineer's builds) 7.11/9.64/9.39 ms unsplit, 7.22/9.63/9.51 with only the 1x1 split,
  // 6.90/8.66/8.56 with the depthwise layers split as well.
  static bool dw_split_wanted() { return !env_off("LOOM_TEAM_SPLIT_DW"); }

  bool forward_split(const OpContext& ctx, std::span<const NDArray> in, const NDArray& dst,
                     const PostOps& ops) {
    if (ctx.is_train || in[1].device().type != DeviceType::kCPU) return false;
    if (ops.affine != split_ops_.affine || ops.sum != split_ops_.sum ||
        ops.act.kind != split_ops_.act.kind)
      return false;
    const size_t nf = static_cast<size_t>(p_.num_filter);
    if (ops.affine && (ops.scale.size() != nf || ops.shift.size() != nf)) return false;
    if (ops.act.kind == FusedActivation::kPrelu && ops.act.slope.size() != nf) return false;
    dnnl_util::ThreadCap cap(1);
    split_->forward(in[0].cdata<float>(), in[1], ops.affine ? ops.scale : std::span<const float>(),
                    fused_bias(in, ops), ops.act.slope, dst.data<float>(), ctx.workspace);
    return true;
  }

  // Strided 1x1 2-D layers (ResNet's downsampling 1x1 layers and projection shortcuts) as a
  // subsample of the input and a stride-1 1x1 primitive on Loom's layouts
  // (ops/nn/conv_subsample.h), as OpenVINO runs them. oneDNN 2.6's jit_1x1 kernels already
  // subsample internally (the same speed either way), but its brgemm 1x1 kernels, which
  // own_layout_post_ops picks for weight-heavy layers with AVX-512, run strided layers
  // slower (ResNet-50's 1024->2048 14x14 shortcut + BN + ReLU at batch 1: 2.42 ms, 2.26 ms
  // subsampled; 2.3x with escaped weights; DESIGN.md): `preferred` is set there, where it
  // replaces them.
  // LOOM_CONV_SUBSAMPLE_1X1=0 turns it off, =1 takes every such layer (tests).
  bool subsample_post_ops(const PostOps& ops, bool preferred) {
    const char* env = std::getenv("LOOM_CONV_SUBSAMPLE_1X1");
    const std::string mode = env ? env : "";
    if (mode == "0" || (mode != "1" && !preferred)) return false;
    if (p_.kernel.ndim() != 2 || p_.num_group != 1 || ops.act.kind == FusedActivation::kPrelu)
      return false;
    for (int i = 0; i < 2; ++i)
      if (p_.kernel[i] != 1 || p_.dilate[i] != 1 || p_.pad[i] != 0) return false;
    if (p_.stride[0] == 1 && p_.stride[1] == 1) return false;
    const Shape &i = in_shape_, &o = out_shape_;
    nn::SubsampleShape s{i[0], i[1],         i[2],         i[3],       o[1],       o[2],
                         o[3], p_.stride[0], p_.stride[1], in_layout_, out_layout_};
    try {
      sub_ = std::make_unique<nn::SubsampleConv1x1>(s, ops);
    } catch (const dnnl::error&) {
      return false;
    }
    sub_ops_ = ops;
    dnnl_util::record_impl(post_ops_label(ops) + "subsample_1x1 " + sub_->impl_info());
    return true;
  }

  bool forward_subsample(const OpContext& ctx, std::span<const NDArray> in, const NDArray& dst,
                         const PostOps& ops) {
    if (ctx.is_train || in[1].device().type != DeviceType::kCPU) return false;
    if (ops.affine != sub_ops_.affine || ops.sum != sub_ops_.sum ||
        ops.act.kind != sub_ops_.act.kind)
      return false;
    const size_t nf = static_cast<size_t>(p_.num_filter);
    if (ops.affine && (ops.scale.size() != nf || ops.shift.size() != nf)) return false;
    dnnl_util::ThreadCap cap(threads_);
    const float* bias = fused_bias(in, ops);
    sub_->forward(in[0].cdata<float>(), in[1], ops.affine ? ops.scale : std::span<const float>(),
                  bias, dst.data<float>(), ctx.workspace);
    return true;
  }

  // Loom's own inference Winograd F(4x4, 3x3) (ops/nn/winograd.h) for 3x3 stride-1 layers
  // on channel-blocked activations with enough 4x4 output tiles for its transforms to pay
  // and transformed weights of at most kOwnWinogradMaxWeightBytes (4x the plain size), on
  // every ISA: oneDNN 2.6 has no Winograd with AVX2, and with AVX-512 this one is as fast as
  // its inference kernels or a few percent faster in ResNets, faster under load, with less
  // memory (DESIGN.md). PReLU stays with oneDNN. LOOM_CONV_OWN_WINOGRAD=0
  // turns it off, =1 forces it wherever the shapes allow (any size; tests).
  bool own_winograd_post_ops(const PostOps& ops) {
    const char* env = std::getenv("LOOM_CONV_OWN_WINOGRAD");
    const std::string mode = env ? env : "";
    if (mode == "0" || !winograd_shape() || ops.act.kind == FusedActivation::kPrelu) return false;
    const int block = layout_block(in_layout_);
    if (block < 8 || layout_block(out_layout_) != block) return false;
    const Shape &i = in_shape_, &o = out_shape_;
    nn::WinogradShape ws{i[0], i[1], i[2], i[3], o[1], o[2], o[3], p_.pad[0], p_.pad[1], block};
    if (ws.c % block || ws.k % block) return false;
    if (mode != "1") {
      if (ws.tiles() < kOwnWinogradMinTiles || ws.weight_bytes() > kOwnWinogradMaxWeightBytes)
        return false;
    }
    try {
      wino_ = std::make_unique<nn::WinogradConv>(ws);
    } catch (const dnnl::error&) {
      return false;
    }
    wino_ops_ = ops;
    dnnl_util::record_impl(post_ops_label(ops) + wino_->impl_info());
    return true;
  }
  static constexpr int64_t kOwnWinogradMinTiles = 16;
  // 9.4 MB for 256 channels; 512-channel layers (38 MB each) would take ResNet-50 past
  // MXNet's peak memory.
  static constexpr int64_t kOwnWinogradMaxWeightBytes = int64_t{10} << 20;

  bool forward_own_winograd(const OpContext& ctx, std::span<const NDArray> in, const NDArray& dst,
                            const PostOps& ops) {
    if (ctx.is_train || in[1].device().type != DeviceType::kCPU) return false;
    if (ops.affine != wino_ops_.affine || ops.sum != wino_ops_.sum ||
        ops.act.kind != wino_ops_.act.kind)
      return false;
    const size_t nf = static_cast<size_t>(p_.num_filter);
    if (ops.affine && (ops.scale.size() != nf || ops.shift.size() != nf)) return false;
    dnnl_util::ThreadCap cap(threads_);
    const float* bias = fused_bias(in, ops);
    wino_->forward(in[0].cdata<float>(), in[1], ops.affine ? ops.scale : std::span<const float>(),
                   bias, dst.data<float>(), ops.sum, ops.act, ctx.workspace);
    return true;
  }

  // Loom's Winograd F(4x4, 3x3) for the forward and the data gradient of 3x3 stride-1 layers
  // where oneDNN has no Winograd (AVX2 in oneDNN 2.6): the data gradient of a 3x3 stride-1
  // convolution is itself one, over the output gradient with the weights transposed and
  // rotated (pad 2 - pad). Same shape limits as in inference (enough tiles, at most
  // kOwnWinogradMaxWeightBytes of transformed weights); the transformed weights go into the
  // shared workspace each call (they change every step). Weight and bias gradients stay on
  // oneDNN. LOOM_CONV_OWN_WINOGRAD_TRAIN=0 turns it off, =1 takes every shape it can (tests),
  // =all also where oneDNN has Winograd.
  void own_winograd_training(const KernelArgs& a) {
    const char* env = std::getenv("LOOM_CONV_OWN_WINOGRAD_TRAIN");
    const std::string mode = env ? env : "";
    if (mode == "0" || !winograd_shape() || p_.pad[0] > 2 || p_.pad[1] > 2) return;
    if (mode != "1" && mode != "all" && dnnl_util::has_winograd()) return;
    const int block = layout_block(in_layout_);
    if (block < 8 || layout_block(out_layout_) != block ||
        layout_block(a.layout(LayoutSlot::kInGrad, 0)) != block ||
        layout_block(a.layout(LayoutSlot::kOutGrad, 0)) != block)
      return;
    const Shape &i = in_shape_, &o = out_shape_;
    nn::WinogradShape fs{i[0], i[1], i[2], i[3], o[1], o[2], o[3], p_.pad[0], p_.pad[1], block};
    nn::WinogradShape bs{o[0], o[1], o[2], o[3], i[1],          i[2],
                         i[3], 2 - p_.pad[0], 2 - p_.pad[1], block, /*data_grad=*/true};
    if (fs.c % block || fs.k % block) return;
    if (mode != "1" &&
        (fs.tiles() < kOwnWinogradMinTiles || fs.weight_bytes() > kOwnWinogradMaxWeightBytes))
      return;
    dnnl_util::ThreadCap cap(threads_);
    try {
      wino_fwd_ = std::make_unique<nn::WinogradConv>(fs, -1, /*cache_weights=*/false);
      wino_bwd_ = std::make_unique<nn::WinogradConv>(bs, -1, /*cache_weights=*/false);
      if (!env_off("LOOM_CONV_OWN_WINOGRAD_WGRAD"))
        wino_wgrad_ = std::make_unique<nn::WinogradWeightGrad>(fs);
    } catch (const dnnl::error&) {
      wino_fwd_.reset();
      wino_bwd_.reset();
      wino_wgrad_.reset();
      return;
    }
    dnnl_util::record_impl(desc_ + " training fwd+bwd_data " + wino_fwd_->impl_info() +
                           (wino_wgrad_ ? " +wgrad " + wino_wgrad_->impl_info() : ""));
  }

  // The bias after a folded BatchNorm (b * scale + shift) in fused_bias_, or the plain bias,
  // or null for none.
  const float* fused_bias(std::span<const NDArray> in, const PostOps& ops) {
    const float* b = no_bias_ ? nullptr : in[2].cdata<float>();
    if (!ops.affine) return b;
    const size_t nf = static_cast<size_t>(p_.num_filter);
    fused_bias_.resize(nf);
    for (size_t f = 0; f < nf; ++f) fused_bias_[f] = (b ? b[f] : 0.f) * ops.scale[f] + ops.shift[f];
    return fused_bias_.data();
  }

  // Loom's own depthwise kernel (ops/nn/depthwise.h) for 2-D layers with one filter per
  // channel on channel-blocked activations, where the chain ends in PReLU: oneDNN 2.6's JIT
  // kernels cannot apply it, and a separate in-place pass over the output cost more than the
  // whole convolution (MobileFaceNet's depthwise layers 1.3-1.7x faster with AVX-512, 1.3-1.9x
  // capped at AVX2, tests/bench/mobile_layers.cc dw). With ReLU or nothing oneDNN's jit_dw
  // kernel is 5-25% faster and keeps the layer. It also takes an activation of its input
  // (PostOps::pre: the PReLU after MobileFaceNet's 1x1 expansions). LOOM_CONV_OWN_DEPTHWISE=0
  // turns it off, =1 takes every activation (tests).
  bool own_depthwise_post_ops(const PostOps& ops) {
    const char* env = std::getenv("LOOM_CONV_OWN_DEPTHWISE");
    const std::string mode = env ? env : "";
    if (mode == "0" || (mode != "1" && ops.act.kind != FusedActivation::kPrelu &&
                        ops.pre.kind == FusedActivation::kNone))
      return false;
    const Shape &i = in_shape_, &o = out_shape_;
    if (p_.kernel.ndim() != 2 || p_.num_group != i[1] || p_.num_filter != i[1]) return false;
    const int block = layout_block(in_layout_);
    if (layout_block(out_layout_) != block) return false;
    nn::DepthwiseShape s{i[0],      i[1],         i[2],         i[3],         o[2],
                         o[3],      p_.kernel[0], p_.kernel[1], p_.stride[0], p_.stride[1],
                         p_.pad[0], p_.pad[1],    p_.dilate[0], p_.dilate[1], block};
    if (!nn::depthwise_supported(s)) return false;
    dw_ = std::make_unique<nn::DepthwiseConv>(s, threads_ == 1 ? 1 : omp_get_max_threads());
    dw_ops_ = ops;
    dw_weights_ = {};
    dnnl_util::record_impl(post_ops_label(ops) + "own_depthwise");
    return true;
  }

  bool forward_own_depthwise(const OpContext& ctx, std::span<const NDArray> in, const NDArray& dst,
                             const PostOps& ops) {
    if (ctx.is_train || in[1].device().type != DeviceType::kCPU) return false;
    if (ops.affine != dw_ops_.affine || ops.sum != dw_ops_.sum ||
        ops.act.kind != dw_ops_.act.kind || ops.pre.kind != dw_ops_.pre.kind)
      return false;
    const size_t nf = static_cast<size_t>(p_.num_filter);
    if (ops.affine && (ops.scale.size() != nf || ops.shift.size() != nf)) return false;
    if (ops.act.kind == FusedActivation::kPrelu && ops.act.slope.size() != nf) return false;
    if (ops.pre.kind == FusedActivation::kPrelu && ops.pre.slope.size() != nf) return false;
    // Repack the weights (scale folded in) unless they provably did not change.
    const std::span<const float> scale = ops.affine ? ops.scale : std::span<const float>();
    if (!dw_weights_.matches(in[1], scale)) {
      dw_->pack_weights(in[1].cdata<float>(), scale);
      dw_weights_.remember(in[1], scale);
    }
    static_assert(int{nn::DepthwiseAct::kPrelu} == int{FusedActivation::kPrelu} &&
                  int{nn::DepthwiseAct::kLeaky} == int{FusedActivation::kLeaky} &&
                  int{nn::DepthwiseAct::kRelu} == int{FusedActivation::kRelu});
    const nn::DepthwiseAct act{static_cast<nn::DepthwiseAct::Kind>(ops.act.kind), ops.act.alpha,
                               ops.act.slope};
    const nn::DepthwiseAct pre{static_cast<nn::DepthwiseAct::Kind>(ops.pre.kind), ops.pre.alpha,
                               ops.pre.slope};
    if (team_threads_ < 2) {
      dw_->forward(in[0].cdata<float>(), fused_bias(in, ops), dst.data<float>(), ops.sum, act, pre);
      return true;
    }
    // A small layer: its output rows split over the thread team (as split_post_ops).
    dw_->set_bias(fused_bias(in, ops));
    const float* x = in[0].cdata<float>();
    float* y = dst.data<float>();
    cpu::ThreadTeam::global().run(team_threads_, [&](int part) {
      dw_->forward_part(x, y, ops.sum, act, part, team_threads_, pre);
    });
    return true;
  }

  // Winograd F(4x4, 3x3) for 3x3 stride-1 undilated ungrouped 2-D convolutions over enough
  // output positions: 1.8-2.4x faster than direct in all three passes for b16 at 14x14 and
  // up, 1.2-1.9x for b1 at 28x28 and up, slower below (its transforms do not amortise), and
  // at 7x7 its scratch grows past 100 MB for 1.2x. Results differ from direct convolution by
  // float rounding (~1e-5 relative). Only where oneDNN has Winograd kernels for the CPU
  // (AVX-512 in oneDNN 2.x); elsewhere direct. LOOM_CONV_WINOGRAD=0 turns it off.
  bool use_winograd(const KernelArgs& a) const {
    if (env_off("LOOM_CONV_WINOGRAD") || !dnnl_util::has_winograd()) return false;
    if (!winograd_shape()) return false;
    const Shape& o = a.out_shapes[0];
    return o[2] * o[3] >= 14 * 14 && o[0] * o[2] * o[3] >= 784;
  }

  // 3x3 stride-1 undilated ungrouped 2-D: the layers oneDNN's Winograd kernels take.
  bool winograd_shape() const {
    if (p_.kernel.ndim() != 2 || p_.num_group != 1) return false;
    for (int i = 0; i < 2; ++i)
      if (p_.kernel[i] != 3 || p_.stride[i] != 1 || p_.dilate[i] != 1) return false;
    return true;
  }

  ConvParam p_;
  Shape in_shape_, out_shape_;
  Layout in_layout_ = Layout::kPlain, out_layout_ = Layout::kPlain;
  std::unique_ptr<nn::WinogradConv> wino_;  // own inference Winograd (replaces post-ops)
  // own Winograd for the plain forward and the data gradient (own_winograd_training)
  std::unique_ptr<nn::WinogradConv> wino_fwd_, wino_bwd_;
  std::unique_ptr<nn::WinogradWeightGrad> wino_wgrad_;  // LOOM_CONV_OWN_WINOGRAD_WGRAD=0: oneDNN
  PostOps wino_ops_;
  std::unique_ptr<nn::DepthwiseConv> dw_;  // own inference depthwise (replaces post-ops)
  PostOps dw_ops_;
  std::unique_ptr<nn::SubsampleConv1x1> sub_;  // strided 1x1 as subsample + stride 1
  PostOps sub_ops_;
  std::unique_ptr<nn::SplitConv> split_;        // small layer split over the thread team
  std::unique_ptr<nn::SplitConv> plain_split_;  // the same without post-ops (forward)
  bool plain_split_tried_ = false;
  PostOps split_ops_;
  int team_threads_ = 0;  // parts when the layer may split (0: it may not)
  nn::WeightVersion dw_weights_;  // the weights dw_ holds packed
  std::vector<float> fused_bias_;
  dnnl::algorithm algo_ = dnnl::algorithm::convolution_direct;
  dnnl::memory::dims strides_, dilates_, pad_, wdims_;
  std::string desc_;
};

// float32 only: oneDNN/naive float kernels; MXNet's CPU tests of Convolution use float32.
LOOM_CPU_DTYPES("Convolution", kDTypePolicyF32);

LOOM_REGISTER_OP("Convolution")
    .describe("Computes N-D convolution on (N, C, ...) input with (F, C/G, k...) weights.")
    .params(kConvSchema)
    .inputs([](const OpAttrs& a) {
      return a.param<ConvParam>().no_bias ? std::vector<std::string>{"data", "weight"}
                                          : std::vector<std::string>{"data", "weight", "bias"};
    })
    .shape_fn(conv_infer_shape)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<ConvKernel>()
    // 2-D convolution takes data, output and both gradients in any layout, each on its own.
    .layouts([](const OpAttrs&, const std::vector<Shape>& in) {
      if (in.empty() || in[0].ndim() != 4) return LayoutRule{};
      return LayoutRule{{{{LayoutSlot::kIn, 0}},
                         {{LayoutSlot::kOut, 0}},
                         {{LayoutSlot::kInGrad, 0}},
                         {{LayoutSlot::kOutGrad, 0}}},
                        true};
    })
    .sample({.attrs = {{"kernel", "(3, 3)"}, {"num_filter", "4"}, {"pad", "(1, 1)"}},
             .in_shapes = {{2, 3, 5, 5}, {4, 3, 3, 3}, {4}}})
    .sample({.attrs = {{"kernel", "(3, 2)"},
                       {"num_filter", "4"},
                       {"stride", "(2, 1)"},
                       {"dilate", "(1, 2)"},
                       {"num_group", "2"},
                       {"no_bias", "True"}},
             .in_shapes = {{2, 4, 5, 6}, {4, 2, 3, 2}}})
    .sample(
        {.attrs = {{"kernel", "(3,)"}, {"num_filter", "3"}, {"num_group", "3"}, {"pad", "(1,)"}},
         .in_shapes = {{2, 3, 7}, {3, 1, 3}, {3}}});

}  // namespace
}  // namespace loom
