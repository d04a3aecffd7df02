// argmax / argmin(axis, keepdims) and argmax_channel: the index of the largest (smallest)
// element along an axis, or of the flattened array when axis is None, in the input dtype; ties give
// the first, and a NaN counts as the extreme (the first NaN's index, as NumPy). Not
// differentiable (zero gradient).
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/reduce_extra_math.h"
#include "ops/tensor/reduce_extra_params.h"

namespace loom {
namespace {

using tensor::ArgDims;
using tensor::ArgParam;
using tensor::arg_dims;

const auto kArgSchema =
    ParamSchema<ArgParam>()
        .optional("axis", &ArgParam::axis, std::optional<int64_t>(),
                  "The axis to reduce (None: the flattened array).")
        .optional("keepdims", &ArgParam::keepdims, false, "Keep the reduced axis with size 1.");

template <bool kMax>
class ArgKernel final : public Kernel {
 public:
  // Any numeric dtype; the index is written in the input's dtype (as MXNet).
  ArgKernel(const KernelArgs& a, ArgDims d)
      : d_(std::move(d)), t_(tensor::check_dtypes(a, tensor::kNumericDTypes)), what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].cdata<T>();
      T* y = out[0].data<T>();
      for (int64_t o = 0; o < d_.outer; ++o)
        for (int64_t i = 0; i < d_.inner; ++i) {
          // The scan of reduce_extra_math.h (the GPU kernel's): first extreme, NaN wins.
          const int64_t best = math::arg_extreme<kMax>(x + o * d_.n * d_.inner + i, d_.n, d_.inner,
                                                       [](T v) { return tensor::to_c(v); });
          tensor::store_t<T>(y + o * d_.inner + i, req[0], convert_value<T>(best));
        }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray>, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] != Req::kNull) tensor::fill_req(ig[0], req[0], 0.f);
  }

 private:
  ArgDims d_;
  DType t_;
  std::string what_;
};

template <bool kMax>
void register_arg(const char* name, const char* doc) {
  register_op(name)
      .describe(doc)
      .params(kArgSchema)
      .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
        if (!in[0].known()) return;
        const auto& p = a.param<ArgParam>();
        merge_shape(out[0], arg_dims(a, in[0], p.axis, p.keepdims).out, "output 0");
      })
      .deps(GradDeps{.out_grad = false, .in_data = false, .out_data = false})
      .zero_grad()
      .kernel(DeviceType::kCPU,
              [](const KernelArgs& a) -> std::unique_ptr<Kernel> {
                const auto& p = a.attrs.param<ArgParam>();
                return std::make_unique<ArgKernel<kMax>>(a, arg_dims(a.attrs, a.in_shapes[0], p.axis, p.keepdims));
              })
      .sample({.attrs = {{"axis", "1"}}, .in_shapes = {{3, 4}}, .check_grad = false})
      .sample({.attrs = {}, .in_shapes = {{2, 3}}, .check_grad = false})
      .sample({.attrs = {{"axis", "0"}, {"keepdims", "True"}}, .in_shapes = {{3, 2, 2}}, .check_grad = false})
      // a scan of 300: the GPU kernel's block-per-output path (reduce_extra.cu)
      .sample({.attrs = {{"axis", "1"}}, .in_shapes = {{2, 300}}, .check_grad = false});
}

[[maybe_unused]] const bool kArgmaxRegistered = [] {
  register_arg<true>("argmax", "Index of the largest element along an axis (first on ties).");
  register_arg<false>("argmin", "Index of the smallest element along an axis (first on ties).");
  register_op("argmax_channel")
      .describe("Index of the largest element along the last axis.")
      .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
        if (!in[0].known()) return;
        merge_shape(out[0], arg_dims(a, in[0], -1, false).out, "output 0");
      })
      .deps(GradDeps{.out_grad = false, .in_data = false, .out_data = false})
      .zero_grad()
      .kernel(DeviceType::kCPU,
              [](const KernelArgs& a) -> std::unique_ptr<Kernel> {
                return std::make_unique<ArgKernel<true>>(a, arg_dims(a.attrs, a.in_shapes[0], -1, false));
              })
      .sample({.attrs = {}, .in_shapes = {{3, 4}}, .check_grad = false});
  return true;
}();

}  // namespace
}  // namespace loom
