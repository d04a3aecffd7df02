// Dropout: inverted dropout in training (or mode=always), identity otherwise. The hidden
// output `mask` holds 0 or 1/(1-p) per element; backward is dy * mask. The keep decision is
// dropout.h's, which the CUDA kernel (dropout.cu) shares; the draws differ (see there).
#include <algorithm>
#include <limits>
#include <type_traits>

#include "ops/dtype_policy.h"
#include "ops/infer.h"
#include "ops/tensor/dropout.h"
#include "ops/tensor/tensor_util.h"
#include "runtime/dtype_traits.h"

namespace loom {
namespace {

using tensor::DropoutParam;

void infer_dropout(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  Shape s;
  merge_shape(s, in[0], input_label(a, 0));
  merge_shape(s, out[0], "output 0");
  merge_shape(s, out[1], "output 1 (mask)");
  in[0] = out[0] = out[1] = s;
  if (s.ndim() > 0)
    for (int64_t ax : a.param<DropoutParam>().axes) tensor::norm_axis(ax, s.ndim(), "axes entry");
}

class DropoutKernel final : public Kernel {
 public:
  explicit DropoutKernel(const KernelArgs& a)
      : p_(a.attrs.param<DropoutParam>()), dtype_(a.in_types[0]) {
    const Shape& s = a.in_shapes[0];
    Shape m = s;
    for (int64_t ax : p_.axes) m[tensor::norm_axis(ax, s.ndim(), "axes entry")] = 1;
    shared_ = m != s;
    if (shared_) {
      plan_ = tensor::make_bcast_plan(m, s, s);
      ws_ = static_cast<size_t>(m.numel() * dtype_size(dtype_));
      small_n_ = m.numel();
    }
  }
  size_t workspace_bytes() const override { return ws_; }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    on_type([&](auto tag) { forward_t<typename decltype(tag)::type>(ctx, in, req, out); });
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    on_type([&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *g = og[0].data<T>(), *mask = out[1].data<T>();
      write(ig[0].data<T>(), req[0], ig[0].size(), [=](int64_t i) { return cv(g[i]) * cv(mask[i]); });
    });
  }

 private:
  // float32, float64, float16 (computed in float, as MXNet's half_t).
  template <class Fn>
  void on_type(Fn&& fn) const {
    switch (dtype_) {
      case DType::kFloat64: return fn(type_tag<double>{});
      case DType::kFloat16: return fn(type_tag<half_t>{});
      default: return fn(type_tag<float>{});
    }
  }
  template <class T>
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  template <class T>
  static C<T> cv(T v) { return static_cast<C<T>>(v); }
  // dst[i] = v(i) (write), dst[i] += v(i) (add).
  template <class T, class Fn>
  static void write(T* dst, Req req, int64_t n, Fn v) {
    if constexpr (std::is_same_v<T, float>) {
      tensor::write(dst, req, n, v);
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = T(req == Req::kAdd ? cv(dst[i]) + v(i) : v(i));
    }
  }

  template <class T>
  void forward_t(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
                 std::span<const NDArray> out) {
    const T* x = in[0].data<T>();
    T* mask = out[1].data<T>();
    const int64_t n = in[0].size();
    if (!(ctx.is_train || p_.mode == "always") || p_.p == 0.f) {
      tensor::copy_req(out[0], in[0], req[0]);
      std::fill(mask, mask + n, T(1.f));
      return;
    }
    if (!ctx.rng) throw Error("Dropout: no random generator in the op context");
    if (p_.p >= 1.f) {
      // MXNet scales the 0/1 mask by 1/(1-p) = inf: every element (and its gradient) is
      // 0 * inf = NaN. Loom gives the same rather than a silently different 0.
      std::fill(mask, mask + n, T(std::numeric_limits<float>::quiet_NaN()));
      write(out[0].data<T>(), req[0], n, [=](int64_t i) { return cv(x[i]) * cv(mask[i]); });
      return;
    }
    const float scale = 1.f / (1.f - p_.p);
    if (shared_) {
      T* small = static_cast<T*>(ctx.workspace);
      draw(*ctx.rng, small, small_n_, scale);
      tensor::bcast_for(plan_, [=](int64_t i, int64_t m, int64_t) { mask[i] = small[m]; });
    } else {
      draw(*ctx.rng, mask, n, scale);
    }
    write(out[0].data<T>(), req[0], n, [=](int64_t i) { return cv(x[i]) * cv(mask[i]); });
  }

  // Keeps each element with probability 1-p: two 24-bit uniforms per 64-bit draw (the same
  // draws whatever the dtype).
  template <class T>
  void draw(std::mt19937_64& rng, T* m, int64_t n, float scale) const {
    const float p = p_.p;
    for (int64_t i = 0; i < n; i += 2) {
      uint64_t r = rng();
      m[i] = T(tensor::dropout_mask(static_cast<uint32_t>(r & 0xffffff), p, scale));
      if (i + 1 < n)
        m[i + 1] = T(tensor::dropout_mask(static_cast<uint32_t>((r >> 32) & 0xffffff), p, scale));
    }
  }
  DropoutParam p_;
  DType dtype_;
  bool shared_ = false;
  tensor::BcastPlan plan_;
  int64_t small_n_ = 0;
  size_t ws_ = 0;
};

LOOM_REGISTER_OP("Dropout")
    .describe("Inverted dropout: keeps elements with probability 1-p, scaled by 1/(1-p).")
    .params(tensor::dropout_schema())
    .outputs({"output", "mask"})
    .visible_outputs([](const OpAttrs&) { return 1; })
    .shape_fn(infer_dropout)
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      DType t = DType::kUnknown;
      merge_type(t, in[0], input_label(a, 0));
      merge_type(t, out[0], "output 0");
      if (t == DType::kUnknown) return;
      in[0] = out[0] = out[1] = t;
    })
    .deps(GradDeps{true, false, true})
    .inplace_pairs({{0, 0}})
    .cpu<DropoutKernel>()
    .sample({.attrs = {}, .in_shapes = {{4, 5}}, .check_grad = false, .is_train = true})
    .sample({.attrs = {{"p", "0.3"}, {"axes", "(1,)"}},
             .in_shapes = {{3, 4, 2}},
             .check_grad = false,
             .is_train = true})
    .sample({.attrs = {{"p", "0.2"}}, .in_shapes = {{2, 3}}});

}  // namespace

LOOM_CPU_DTYPES("Dropout", kDTypePolicyFloats);

}  // namespace loom
