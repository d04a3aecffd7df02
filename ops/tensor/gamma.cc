// gamma and gammaln (log |Γ(x)|), element-wise on float dtypes. Gradients use the digamma
// function ψ: d Γ(x) = Γ(x) ψ(x), d lnΓ(x) = ψ(x) (as MXNet 1.9.1).
#include <cmath>
#include <numbers>

#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

// ψ(x): reflection for x < 0.5, the recurrence ψ(x) = ψ(x + 1) - 1/x up to x >= 6, then the
// asymptotic series. Poles (0, -1, ...) give NaN.
double digamma(double x) {
  if (x <= 0 && x == std::floor(x)) return std::nan("");
  if (x < 0.5) return digamma(1 - x) - std::numbers::pi / std::tan(std::numbers::pi * x);
  double acc = 0;
  while (x < 6) {
    acc -= 1 / x;
    x += 1;
  }
  const double r = 1 / (x * x);
  const double series =
      r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r * (1.0 / 132)))));
  return acc + std::log(x) - 0.5 / x - series;
}

template <bool kLog>
class GammaKernel final : public Kernel {
 public:
  explicit GammaKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kFloatDTypes)), what_(tensor::node_label(a)) {}
  static double value(double x) { return kLog ? std::lgamma(x) : std::tgamma(x); }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* x = in[0].cdata<T>();
          tensor::write_t<T>(out[0].data<T>(), req[0], in[0].size(), [=](int64_t i) {
            return tensor::from_c<T>(static_cast<compute_t<T>>(value(tensor::to_c(x[i]))));
          });
        },
        what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T *g = og[0].cdata<T>(), *x = in[0].cdata<T>();
          tensor::write_t<T>(ig[0].data<T>(), req[0], ig[0].size(), [=](int64_t i) {
            const double xv = tensor::to_c(x[i]);
            const double d = kLog ? digamma(xv) : std::tgamma(xv) * digamma(xv);
            return tensor::from_c<T>(static_cast<compute_t<T>>(tensor::to_c(g[i]) * d));
          });
        },
        what_);
  }

 private:
  DType t_;
  std::string what_;
};

template <bool kLog>
void register_gamma(const char* name, const char* doc) {
  register_op(name)
      .describe(doc)
      .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
      .template cpu<GammaKernel<kLog>>()
      .sample({.attrs = {}, .in_shapes = {{2, 3}}, .in_kinds = {"positive"}})
      .sample({.attrs = {}, .in_shapes = {{4, 1, 5}}, .in_kinds = {"above1"}})
      .sample({.attrs = {}, .in_shapes = {{6}}, .in_kinds = {"unit"}});
}

[[maybe_unused]] const bool kRegistered = [] {
  register_gamma<false>("gamma", "Element-wise gamma function.");
  register_gamma<true>("gammaln", "Element-wise log of the absolute value of the gamma function.");
  return true;
}();

}  // namespace
}  // namespace loom
