// gamma and gammaln (log |Γ(x)|), element-wise on float dtypes. Gradients use the digamma
// function ψ: d Γ(x) = Γ(x) ψ(x), d lnΓ(x) = ψ(x) (as MXNet 1.9.1). The arithmetic is in
// gamma_math.h (shared with the CUDA kernel, elemwise_extra.cu).
#include <cmath>

#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/gamma_math.h"

namespace loom {
namespace {

template <bool kLog>
class GammaKernel final : public Kernel {
 public:
  explicit GammaKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kFloatDTypes)), what_(tensor::node_label(a)) {}
  static double value(double x) { return tensor::gamma_value(x, kLog); }
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
            const double d = tensor::gamma_deriv(xv, kLog);
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

[[maybe_unused]] const bool kGammaRegistered = [] {
  register_gamma<false>("gamma", "Element-wise gamma function.");
  register_gamma<true>("gammaln", "Element-wise log of the absolute value of the gamma function.");
  return true;
}();

}  // namespace
}  // namespace loom
