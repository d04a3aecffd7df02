// logical_not: 1 where the element is zero, else 0, in the input's dtype (MXNet 1.9.1's legacy
// op; NaN is non-zero, so it gives 0). Not differentiable: zero gradient.
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/unary_extra_math.h"

namespace loom {
namespace {

class LogicalNotKernel final : public Kernel {
 public:
  explicit LogicalNotKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kNumericDTypes)), what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_numeric(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* x = in[0].cdata<T>();
          const T one = convert_value<T>(1), zero = convert_value<T>(0);
          tensor::write_t<T>(out[0].data<T>(), req[0], in[0].size(),
                             [=](int64_t i) { return math::LogicalNot::is_zero(tensor::to_c(x[i])) ? one : zero; });
        },
        what_);
  }
  void backward(const OpContext&, std::span<const NDArray>, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] != Req::kNull) tensor::fill_req(ig[0], req[0], 0.f);
  }

 private:
  DType t_;
  std::string what_;
};

LOOM_REGISTER_OP("logical_not")
    .describe("Element-wise logical not: 1 where x == 0, else 0, in the input dtype.")
    .deps(GradDeps{.out_grad = false, .in_data = false, .out_data = false})
    .zero_grad()
    .inplace_pairs({{0, 0}})
    .cpu<LogicalNotKernel>()
    .sample({.attrs = {}, .in_shapes = {{2, 3}}, .in_kinds = {"index:3"}, .check_grad = false})
    .sample({.attrs = {}, .in_shapes = {{4, 5}}, .check_grad = false});

}  // namespace
}  // namespace loom
