// Pooling (max / avg / sum over 1-3 spatial dims) with MXNet's window and divisor rules
// (spec 6.4). Forward uses oneDNN where its semantics match MXNet's exactly; the rest, and
// every backward, are plain loops over one (n, c) plane at a time.
#include <algorithm>
#include <cfloat>
#include <optional>

#include "ops/dtype_policy.h"
#include "ops/infer.h"
#include "ops/nn/block_vec.h"
#include "ops/nn/dnnl_args.h"
#include "ops/nn/nn_util.h"
#include "ops/nn/pool_window.h"
#include "runtime/cpu/dnnl_util.h"

namespace loom {
namespace {

using nn::PoolParam;  // ops/nn/pool_window.h, shared with the GPU kernel

const auto kPoolSchema =
    ParamSchema<PoolParam>()
        .optional("kernel", &PoolParam::kernel, Shape(), "Pooling kernel size (y, x) or (d, y, x).")
        .choice("pool_type", &PoolParam::pool_type, {"max", "avg", "sum", "lp"}, "max",
                "Pooling type to be applied.")
        .optional("global_pool", &PoolParam::global_pool, false,
                  "Ignore kernel size and pool over the whole spatial extent.")
        .optional("cudnn_off", &PoolParam::cudnn_off, false, "Turn off cuDNN (ignored).")
        .choice("pooling_convention", &PoolParam::pooling_convention, {"valid", "full", "same"},
                "valid", "Output size rounding: valid (floor), full (ceil), same.")
        .optional("stride", &PoolParam::stride, Shape(), "Stride; default 1 per dimension.")
        .optional("pad", &PoolParam::pad, Shape(), "Pad on both sides; default 0.")
        .optional("p_value", &PoolParam::p_value, std::optional<int>(), "Lp pooling power.")
        .optional("count_include_pad", &PoolParam::count_include_pad, std::optional<bool>(),
                  "Whether avg pooling divides by a window size that counts padding cells.")
        .optional("layout", &PoolParam::layout, std::optional<std::string>(),
                  "Data layout; only NCW, NCHW and NCDHW are supported.")
        .check([](PoolParam& p) {
          if (p.pool_type == "lp") throw ParamError("pool_type 'lp' is not supported");
          if (p.layout && p.layout->rfind("NC", 0) != 0)
            throw ParamError("layout " + *p.layout + " is not supported on CPU");
          if (p.global_pool) return;
          int nd = p.kernel.ndim();
          if (nd < 1 || nd > 3) throw ParamError("kernel must have 1 to 3 dimensions");
          p.stride = nn::expand_tuple(p.stride, nd, 1, "stride");
          if (p.pooling_convention == "same") {
            // 'same' pads by itself: MXNet takes any all-zero pad and refuses a real one.
            for (int64_t v : p.pad)
              if (v != 0)
                throw ParamError("pooling_convention 'same' pads by itself; pad must be 0, got " +
                                 p.pad.str());
            p.pad = Shape(std::vector<int64_t>(static_cast<size_t>(nd), 0));
          }
          p.pad = nn::expand_tuple(p.pad, nd, 0, "pad");
          for (int i = 0; i < nd; ++i)
            if (p.kernel[i] < 1 || p.stride[i] < 1 || p.pad[i] < 0)
              throw ParamError("kernel and stride must be >= 1 and pad >= 0");
          if (p.pooling_convention == "same" && nd != 1)
            throw ParamError("pooling_convention 'same' is only supported for 1-D pooling");
        });

int64_t pool_out_dim(const PoolParam& p, int i, int64_t in) {
  if (p.global_pool) return 1;
  if (in == 0) return 0;
  const int64_t k = p.kernel[i], s = p.stride[i];
  const char* what = "Pooling output size";
  const int64_t padded = dim_add(in, dim_mul(2, p.pad[i], what), what);
  if (p.pooling_convention == "same") return dim_add(padded, s - 1, what) / s;
  if (padded < k)
    throw ShapeError("pooling window " + std::to_string(k) + " is larger than the padded input " +
                     std::to_string(padded));
  if (p.pooling_convention == "full") return dim_add(padded - k, s - 1, what) / s + 1;
  return (padded - k) / s + 1;
}

void pool_infer_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<PoolParam>();
  const Shape& d = in[0];
  if (d.ndim() == 0) return;
  int nd = d.ndim() - 2;
  if (nd < 1 || nd > 3 || (!p.global_pool && nd != p.kernel.ndim()))
    throw ShapeError(input_label(a, 0) + ": got " + d.str() + " for a " +
                     std::to_string(p.kernel.ndim()) + "-d pooling kernel");
  Shape o{d[0], d[1]};
  for (int i = 0; i < nd; ++i) o.push_back(pool_out_dim(p, i, d[i + 2]));
  merge_shape(out[0], o, "output 0");
}

// The window rules (ops/nn/pool_window.h) are the GPU kernel's too.
using Geometry = nn::PoolGeometry;
using nn::PoolKind;

// Visits every output of one plane with its clipped window and avg divisor.
template <class F>
void for_each_window(const Geometry& g, PoolKind kind, bool include_pad, F&& f) {
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh)
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        int64_t lo[3], hi[3], o[3] = {od, oh, ow};
        const float div = g.clipped(o, kind, include_pad, lo, hi);
        f((od * g.out[1] + oh) * g.out[2] + ow, lo, hi, div);
      }
}

// The kernel works in its input's layout (the data and its gradient share one): planes are
// processed in groups of B channels stored interleaved (B = 1: plain, one (n, c) plane per
// group; B = 8/16: oneDNN nChw8c/nChw16c, group (n, c/B) holds cell i of lane j at
// i * B + j). An output (and its gradient) in another layout goes through scratch.
class PoolKernel final : public Kernel {
 public:
  explicit PoolKernel(const KernelArgs& a) : p_(a.attrs.param<PoolParam>()) {
    g_ = nn::make_pool_geometry(p_, a.in_shapes[0], a.out_shapes[0]);
    kind_ = p_.pool_type == "max"   ? PoolKind::kMax
            : p_.pool_type == "avg" ? PoolKind::kAvg
                                    : PoolKind::kSum;
    include_pad_ = p_.count_include_pad.value_or(true);
    layout_ = a.layout(LayoutSlot::kIn, 0);
    Layout out_layout = a.layout(LayoutSlot::kOut, 0);
    // Maps of 1x1 (global pooling before a classifier) are the same bytes in every layout
    // (the layout plan blocks only channel counts the block divides): no reorder.
    // LOOM_POOL_1X1_NO_REORDER=0 reorders them anyway.
    const Shape& os = a.out_shapes[0];
    bool one_by_one = os.ndim() >= 3;
    for (int i = 2; i < os.ndim(); ++i) one_by_one = one_by_one && os[i] == 1;
    if (one_by_one && os[1] % layout_block(out_layout) == 0 && os[1] % layout_block(layout_) == 0 &&
        !env_off("LOOM_POOL_1X1_NO_REORDER"))
      out_layout = layout_;
    if (out_layout != layout_) {
      auto dims = dnnl_util::to_dims(a.out_shapes[0]);
      out_bridge_.emplace(dnnl_util::layout_md(dims, out_layout),
                          dnnl_util::layout_md(dims, layout_));
    }
    make_dnnl(a);
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const float* x = in[0].data<float>();
    float* y_out = out[0].data<float>();
    const bool add_out = nn::is_add(req[0]);
    // In the input's layout: the output itself, or scratch reordered into it afterwards.
    float* y = out_bridge_ ? static_cast<float*>(out_scratch(ctx.workspace)) : y_out;
    const bool add = out_bridge_ ? false : add_out;
    if (dnnl_fwd_ && !add) {
      args_.set(DNNL_ARG_SRC, x);
      args_.set(DNNL_ARG_DST, y);
      args_.execute(*dnnl_fwd_);
    } else {
      switch (layout_block(layout_)) {
        case 16:
          forward_loop<16>(x, y, add);
          break;
        case 8:
          forward_loop<8>(x, y, add);
          break;
        default:
          forward_loop<1>(x, y, add);
      }
    }
    if (out_bridge_) out_bridge_->from_chosen(y, y_out, add_out);
  }

  // The gradient of each output goes to the first maximal cell of its window (max), or is
  // spread evenly over the real cells of its window (avg: 1/divisor each; sum: 1 each).
  // With req=add the windows' contributions are summed in scratch first, so the result is
  // exactly the write-mode gradient added once.
  size_t workspace_bytes() const override {
    return nn::align64(g_.planes * g_.in_size() * sizeof(float)) +
           (out_bridge_ ? out_bridge_->scratch_bytes() : 0);
  }

  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    const float* gy = og[0].data<float>();
    if (out_bridge_)
      gy = static_cast<const float*>(
          out_bridge_->to_chosen(gy, out_scratch(ctx.workspace)).get_data_handle());
    const float* x = kind_ == PoolKind::kMax ? in[0].data<float>() : nullptr;
    const bool add = nn::is_add(req[0]);
    float* gx = add ? static_cast<float*>(ctx.workspace) : ig[0].data<float>();
    const int64_t total = g_.planes * g_.in_size();
    switch (layout_block(layout_)) {
      case 16:
        backward_loop<16>(gy, x, gx);
        break;
      case 8:
        backward_loop<8>(gy, x, gx);
        break;
      default:
        backward_loop<1>(gy, x, gx);
    }
    if (add) dnnl_util::add_to(ig[0].data<float>(), gx, total);
  }

 private:
  // Scratch for the output (or its gradient) in the input's layout, after the add-mode
  // gradient scratch.
  void* out_scratch(void* workspace) const {
    return static_cast<char*>(workspace) + nn::align64(g_.planes * g_.in_size() * sizeof(float));
  }

  template <int B>
  void forward_loop(const float* x, float* y, bool add) const {
    const int64_t isz = g_.in_size(), osz = g_.out_size(), groups = g_.planes / B;
#pragma omp parallel for if (g_.planes * osz > 4096)
    for (int64_t c = 0; c < groups; ++c) {
      const float* xp = x + c * isz * B;
      float* yp = y + c * osz * B;
      for_each_window(
          g_, kind_, include_pad_, [&](int64_t o, const int64_t* lo, const int64_t* hi, float div) {
            float acc[B];
            for (int j = 0; j < B; ++j) acc[j] = kind_ == PoolKind::kMax ? -FLT_MAX : 0.f;
            bool any = false;
            for (int64_t d = lo[0]; d < hi[0]; ++d)
              for (int64_t h = lo[1]; h < hi[1]; ++h)
                for (int64_t w = lo[2]; w < hi[2]; ++w) {
                  const float* v = xp + ((d * g_.in[1] + h) * g_.in[2] + w) * B;
                  for (int j = 0; j < B; ++j)
                    acc[j] = kind_ == PoolKind::kMax ? std::max(acc[j], v[j]) : acc[j] + v[j];
                  any = true;
                }
            for (int j = 0; j < B; ++j)
              nn::store(yp, o * B + j, nn::pool_result(kind_, acc[j], any, div), add);
          });
    }
  }

  // Each group of B planes zeroes its own gradient block, then adds every window's share.
  // Max pooling sends a window's gradient to its first maximal cell, as MXNet does (lane by
  // lane in a blocked layout: a branch-free running maximum over the channel block).
  template <int B>
  void backward_loop(const float* gy, const float* x, float* gx) const {
    const int64_t isz = g_.in_size(), osz = g_.out_size(), groups = g_.planes / B;
    // Offsets in a group's block as int32 lanes (a vector select per cell).
    const bool lanes32 = isz * B < (int64_t{1} << 31);
#pragma omp parallel for if (g_.planes * osz > 4096)
    for (int64_t c = 0; c < groups; ++c) {
      const float* xp = x ? x + c * isz * B : nullptr;
      float* gp = gx + c * isz * B;
      std::fill(gp, gp + isz * B, 0.f);
      if constexpr (B > 1) {
        if (lanes32) {
          backward_block<B>(gy + c * osz * B, xp, gp);
          continue;
        }
      }
      for_each_window(g_, kind_, include_pad_,
                      [&](int64_t o, const int64_t* lo, const int64_t* hi, float div) {
                        const float* g = gy + (c * osz + o) * B;
                        int64_t best[B];
                        float best_v[B];
                        for (int j = 0; j < B; ++j) best[j] = -1, best_v[j] = -FLT_MAX;
                        for (int64_t d = lo[0]; d < hi[0]; ++d)
                          for (int64_t h = lo[1]; h < hi[1]; ++h)
                            for (int64_t w = lo[2]; w < hi[2]; ++w) {
                              int64_t i = ((d * g_.in[1] + h) * g_.in[2] + w) * B;
                              for (int j = 0; j < B; ++j) {
                                if (kind_ != PoolKind::kMax)
                                  gp[i + j] += g[j] / div;
                                else if (best[j] < 0 || xp[i + j] > best_v[j])
                                  best[j] = i + j, best_v[j] = xp[i + j];
                              }
                            }
                        for (int j = 0; j < B; ++j)
                          if (best[j] >= 0) gp[best[j]] += g[j];
                      });
    }
  }

  // One group of a blocked layout (B lanes per cell), vectorised over the lanes. The first
  // cell of a window starts the running maximum (so a window of -inf or NaN still picks its
  // first cell, as the scalar loop does); later cells replace it only when strictly greater.
  template <int B>
  void backward_block(const float* g, const float* xp, float* gp) const {
    using V = nn::block_vec::Vec<B>;
    using VI = nn::block_vec::Lanes<B>;
    for_each_window(g_, kind_, include_pad_,
                    [&](int64_t o, const int64_t* lo, const int64_t* hi, float div) {
                      const V gv = nn::block_vec::load<B>(g + o * B);
                      if (lo[0] >= hi[0] || lo[1] >= hi[1] || lo[2] >= hi[2]) return;
                      if (kind_ != PoolKind::kMax) {
                        const V share = gv / div;
                        for (int64_t d = lo[0]; d < hi[0]; ++d)
                          for (int64_t h = lo[1]; h < hi[1]; ++h)
                            for (int64_t w = lo[2]; w < hi[2]; ++w) {
                              float* p = gp + ((d * g_.in[1] + h) * g_.in[2] + w) * B;
                              nn::block_vec::store<B>(p, nn::block_vec::load<B>(p) + share);
                            }
                        return;
                      }
                      const int32_t first =
                          static_cast<int32_t>(((lo[0] * g_.in[1] + lo[1]) * g_.in[2] + lo[2]) * B);
                      V best = nn::block_vec::load<B>(xp + first);
                      VI at = VI{} + first;
                      for (int64_t d = lo[0]; d < hi[0]; ++d)
                        for (int64_t h = lo[1]; h < hi[1]; ++h)
                          for (int64_t w = lo[2]; w < hi[2]; ++w) {
                            const int32_t i =
                                static_cast<int32_t>(((d * g_.in[1] + h) * g_.in[2] + w) * B);
                            const V v = nn::block_vec::load<B>(xp + i);
                            const auto gt = v > best;
                            best = gt ? v : best;
                            at = gt ? VI{} + i : at;
                          }
                      for (int j = 0; j < B; ++j) gp[at[j] + j] += gv[j];
                    });
  }

  // oneDNN max pooling ignores padding like MXNet; its avg modes divide by the full kernel or
  // by the real cells, which matches MXNet unless a 'full' window runs past the padded border.
  void make_dnnl(const KernelArgs& a) {
    if (kind_ == PoolKind::kSum || p_.pooling_convention == "same") return;
    int nd = a.in_shapes[0].ndim() - 2;
    dnnl::memory::dims strides, kernel, pl, pr;
    for (int j = 3 - nd; j < 3; ++j) {
      int64_t r = (g_.out[j] - 1) * g_.s[j] + g_.k[j] - g_.in[j] - g_.p[j];
      if (g_.p[j] >= g_.k[j] || r >= g_.k[j]) return;  // windows made only of padding
      if (kind_ == PoolKind::kAvg && include_pad_ && r > g_.p[j]) return;
      strides.push_back(g_.s[j]);
      kernel.push_back(g_.k[j]);
      pl.push_back(g_.p[j]);
      pr.push_back(std::max(r, g_.p[j]));  // floor-consistent for valid, exact for full
    }
    auto algo = kind_ == PoolKind::kMax ? dnnl::algorithm::pooling_max
                : include_pad_          ? dnnl::algorithm::pooling_avg_include_padding
                                        : dnnl::algorithm::pooling_avg_exclude_padding;
    src_md_ = dnnl_util::layout_md(dnnl_util::to_dims(a.in_shapes[0]), layout_);
    dst_md_ = dnnl_util::layout_md(dnnl_util::to_dims(a.out_shapes[0]), layout_);
    try {
      dnnl::pooling_forward::primitive_desc pd(
          {dnnl::prop_kind::forward_inference, algo, src_md_, dst_md_, strides, kernel, pl, pr},
          dnnl_util::engine());
      dnnl_fwd_.emplace(pd);
      args_.add(DNNL_ARG_SRC, src_md_);
      args_.add(DNNL_ARG_DST, dst_md_);
      dnnl_util::record_impl("Pooling " + a.in_shapes[0].str() + " " + p_.pool_type +
                             " fwd=" + pd.impl_info_str());
    } catch (const dnnl::error&) {
      dnnl_fwd_.reset();  // shapes oneDNN rejects take the plain loop
    }
  }

  PoolParam p_;
  Geometry g_;
  PoolKind kind_;
  bool include_pad_;
  Layout layout_ = Layout::kPlain;                     // of the input and its gradient
  std::optional<dnnl_util::LayoutBridge> out_bridge_;  // output's layout <-> layout_
  dnnl::memory::desc src_md_, dst_md_;
  std::optional<dnnl::primitive> dnnl_fwd_;
  nn::PrimitiveArgs args_;
};

// float32 only: oneDNN/naive float kernels; MXNet's CPU tests of Pooling use float32.
LOOM_CPU_DTYPES("Pooling", kDTypePolicyF32);

LOOM_REGISTER_OP("Pooling")
    .describe("Max, average or sum pooling over the spatial dimensions of (N, C, ...) input.")
    .params(kPoolSchema)
    .shape_fn(pool_infer_shape)
    .deps([](const OpAttrs& a) {
      return GradDeps{
          .out_grad = true, .in_data = a.param<PoolParam>().pool_type == "max", .out_data = false};
    })
    .cpu<PoolKernel>()
    // 2-D pooling may run on channel-blocked data: the data and its gradient in one layout,
    // the output and its gradient in one (the same, or reordered through scratch).
    .layouts([](const OpAttrs&, const std::vector<Shape>& in) {
      if (in.empty() || in[0].ndim() != 4) return LayoutRule{};
      return LayoutRule{{{{LayoutSlot::kIn, 0}, {LayoutSlot::kInGrad, 0}},
                         {{LayoutSlot::kOut, 0}, {LayoutSlot::kOutGrad, 0}}},
                        true};
    })
    .sample({.attrs = {{"kernel", "(2, 2)"}, {"stride", "(2, 2)"}}, .in_shapes = {{2, 3, 5, 5}}})
    .sample({.attrs = {{"kernel", "(3, 3)"},
                       {"stride", "(2, 2)"},
                       {"pad", "(1, 1)"},
                       {"pool_type", "avg"},
                       {"pooling_convention", "full"}},
             .in_shapes = {{2, 3, 6, 6}}})
    .sample({.attrs = {{"kernel", "(1, 1)"}, {"pool_type", "avg"}, {"global_pool", "True"}},
             .in_shapes = {{2, 3, 5, 5}}});

}  // namespace
}  // namespace loom
