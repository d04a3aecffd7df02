// hard_sigmoid(alpha, beta): y = clip(alpha * x + beta, 0, 1). The gradient is alpha * dy where
// 0 < alpha * x + beta < 1 (strictly, as MXNet 1.9.1), else 0. The element arithmetic is in
// clip_math.h (shared with the CUDA kernel, elemwise_extra.cu).
#include "ops/tensor/clip_math.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

using tensor::HardSigmoidParam;
const auto kHardSigmoidSchema =
    ParamSchema<HardSigmoidParam>()
        .optional("alpha", &HardSigmoidParam::alpha, 0.2f, "Slope of hard sigmoid.")
        .optional("beta", &HardSigmoidParam::beta, 0.5f, "Bias of hard sigmoid.");

class HardSigmoidKernel final : public Kernel {
 public:
  explicit HardSigmoidKernel(const KernelArgs& a)
      : p_(a.attrs.param<HardSigmoidParam>()),
        t_(tensor::check_dtypes(a, tensor::kFloatDTypes)),
        what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* x = in[0].cdata<T>();
          const auto a = p_.alpha, b = p_.beta;
          tensor::write_t<T>(out[0].data<T>(), req[0], in[0].size(), [=](int64_t i) {
            return tensor::from_c<T>(tensor::hard_sigmoid_value(tensor::to_c(x[i]), a, b));
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
          const auto a = p_.alpha, b = p_.beta;
          tensor::write_t<T>(ig[0].data<T>(), req[0], ig[0].size(), [=](int64_t i) {
            return tensor::from_c<T>(
                tensor::hard_sigmoid_grad(tensor::to_c(x[i]), tensor::to_c(g[i]), a, b));
          });
        },
        what_);
  }

 private:
  HardSigmoidParam p_;
  DType t_;
  std::string what_;
};

LOOM_REGISTER_OP("hard_sigmoid")
    .describe("Element-wise clip(alpha * x + beta, 0, 1).")
    .params(kHardSigmoidSchema)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<HardSigmoidKernel>()
    .sample({.attrs = {}, .in_shapes = {{3, 4}}, .in_kinds = {"normal"}})
    .sample({.attrs = {{"alpha", "0.7"}, {"beta", "0.3"}}, .in_shapes = {{2, 5}}});

}  // namespace
}  // namespace loom
