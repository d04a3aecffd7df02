// _hypot (same shapes), broadcast_hypot (NumPy broadcasting) and _hypot_scalar: element-wise
// sqrt(a^2 + b^2). Gradients: da = dy * a / h, db = dy * b / h (summed over broadcast axes);
// the scalar is a constant. Float dtypes.
#include <cmath>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/hypot_math.h"

namespace loom {
namespace {

// Per-operand element strides over the output's dimensions (0 along broadcast axes).
struct HypotPlan {
  Shape out;
  std::vector<int64_t> stride[2];
  bool scalar = false;
  double s = 0;
  template <class Fn>
  void each(Fn fn) const {  // fn(o, ia, ib), serial (the backward accumulates)
    const int nd = out.ndim();
    std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
    const int64_t n = out.numel();
    for (int64_t o = 0; o < n; ++o) {
      int64_t ia = 0, ib = 0;
      for (int d = 0; d < nd; ++d) {
        ia += idx[static_cast<size_t>(d)] * stride[0][static_cast<size_t>(d)];
        ib += idx[static_cast<size_t>(d)] * stride[1][static_cast<size_t>(d)];
      }
      fn(o, ia, ib);
      for (int d = nd - 1; d >= 0; --d) {
        if (++idx[static_cast<size_t>(d)] < out[d]) break;
        idx[static_cast<size_t>(d)] = 0;
      }
    }
  }
};

HypotPlan make_plan(const KernelArgs& a, bool scalar) {
  HypotPlan p;
  p.out = a.out_shapes[0];
  p.scalar = scalar;
  const int nd = p.out.ndim();
  for (int k = 0; k < (scalar ? 1 : 2); ++k) {
    const Shape& s = a.in_shapes[static_cast<size_t>(k)];
    auto& st = p.stride[k];
    st.assign(static_cast<size_t>(nd), 0);
    int64_t acc = 1;
    for (int d = s.ndim() - 1, od = nd - 1; d >= 0; --d, --od) {
      st[static_cast<size_t>(od)] = s[d] == 1 ? 0 : acc;
      acc *= s[d];
    }
  }
  if (scalar) {
    p.stride[1].assign(static_cast<size_t>(nd), 0);
    p.s = tensor::hypot_scalar(a.attrs);
  }
  return p;
}

class HypotKernel final : public Kernel {
 public:
  HypotKernel(const KernelArgs& a, bool scalar)
      : p_(make_plan(a, scalar)),
        t_(tensor::check_dtypes(a, tensor::kFloatDTypes)),
        what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* a = in[0].cdata<T>();
          const T* b = p_.scalar ? nullptr : in[1].cdata<T>();
          T* y = out[0].data<T>();
          p_.each([&](int64_t o, int64_t ia, int64_t ib) {
            const double bv = b ? static_cast<double>(tensor::to_c(b[ib])) : p_.s;
            const double v = tensor::hypot_value(static_cast<double>(tensor::to_c(a[ia])), bv);
            tensor::store_t<T>(y + o, req[0], tensor::from_c<T>(static_cast<compute_t<T>>(v)));
          });
        },
        what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* g = og[0].cdata<T>();
          const T* a = in[0].cdata<T>();
          const T* b = p_.scalar ? nullptr : in[1].cdata<T>();
          const size_t nin = p_.scalar ? 1 : 2;
          std::vector<double> acc[2];
          for (size_t k = 0; k < nin; ++k)
            if (req[k] != Req::kNull) acc[k].assign(static_cast<size_t>(ig[k].size()), 0.0);
          p_.each([&](int64_t o, int64_t ia, int64_t ib) {
            const double av = tensor::to_c(a[ia]);
            const double bv = b ? static_cast<double>(tensor::to_c(b[ib])) : p_.s;
            const double h = tensor::hypot_value(av, bv), gv = tensor::to_c(g[o]);
            if (!acc[0].empty()) acc[0][static_cast<size_t>(ia)] += tensor::hypot_grad(gv, av, h);
            if (!acc[1].empty()) acc[1][static_cast<size_t>(ib)] += tensor::hypot_grad(gv, bv, h);
          });
          for (size_t k = 0; k < nin; ++k) {
            if (req[k] == Req::kNull) continue;
            const auto& v = acc[k];
            tensor::write_t<T>(ig[k].data<T>(), req[k], ig[k].size(), [&](int64_t i) {
              return tensor::from_c<T>(static_cast<compute_t<T>>(v[static_cast<size_t>(i)]));
            });
          }
        },
        what_);
  }

 private:
  HypotPlan p_;
  DType t_;
  std::string what_;
};

struct HypotScalarParam {
  double scalar;
  bool is_int;
};
const auto kHypotScalarSchema =
    ParamSchema<HypotScalarParam>()
        .optional("scalar", &HypotScalarParam::scalar, 1.0, "The scalar operand.")
        .optional("is_int", &HypotScalarParam::is_int, true,
                  "Whether the scalar is an integer (accepted for MXNet compatibility).");

[[maybe_unused]] const bool kHypotRegistered = [] {
  register_op("_hypot")
      .describe("Element-wise sqrt(a^2 + b^2) of two arrays of one shape.")
      .inputs({"lhs", "rhs"})
      .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
      .kernel(DeviceType::kCPU,
              [](const KernelArgs& a) { return std::make_unique<HypotKernel>(a, false); })
      .sample({.attrs = {}, .in_shapes = {{2, 3}, {2, 3}}})
      .sample({.attrs = {}, .in_shapes = {{4}, {4}}});
  register_op("broadcast_hypot")
      .describe("Element-wise sqrt(a^2 + b^2) with NumPy broadcasting.")
      .inputs({"lhs", "rhs"})
      .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
        if (in[0].ndim() == 0 || in[1].ndim() == 0) return;
        merge_shape(out[0], tensor::broadcast_shape(a, in[0], in[1]), "output 0");
      })
      .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
      .kernel(DeviceType::kCPU,
              [](const KernelArgs& a) { return std::make_unique<HypotKernel>(a, false); })
      .sample({.attrs = {}, .in_shapes = {{2, 3}, {1, 3}}})
      .sample({.attrs = {}, .in_shapes = {{2, 1, 4}, {3, 1}}});
  register_op("_hypot_scalar")
      .describe("Element-wise sqrt(x^2 + scalar^2).")
      .params(kHypotScalarSchema)
      .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
      .kernel(DeviceType::kCPU,
              [](const KernelArgs& a) { return std::make_unique<HypotKernel>(a, true); })
      .sample({.attrs = {{"scalar", "1.5"}}, .in_shapes = {{2, 3}}})
      .sample({.attrs = {{"scalar", "-2"}, {"is_int", "False"}}, .in_shapes = {{5}}});
  return true;
}();

}  // namespace
}  // namespace loom
