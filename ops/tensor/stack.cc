// stack(num_args, axis): joins num_args arrays of one shape along a new axis. The gradient
// hands each input its slice of the output gradient.
#include <tuple>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/split_concat.h"

namespace loom {
namespace {

using tensor::StackParam;  // split_concat.h (shared with split_concat.cu)
const auto kStackSchema = ParamSchema<StackParam>()
                              .required("num_args", &StackParam::num_args, "Number of inputs.")
                              .optional("axis", &StackParam::axis, int64_t{0},
                                        "Position of the new axis in the output.")
                              .check([](StackParam& p) {
                                check_input_count(p.num_args, "num_args");
                              });

void infer_stack(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<StackParam>();
  Shape common;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].ndim()) merge_shape(common, in[i], input_label(a, i));
  if (common.ndim() == 0 && out[0].ndim() > 1) {  // inputs from the output
    int ax = tensor::norm_axis(p.axis, out[0].ndim(), "node '" + a.name + "' (op stack): axis");
    auto d = out[0].dims();
    d.erase(d.begin() + ax);
    common = Shape(std::move(d));
  }
  if (common.ndim() == 0) return;
  for (size_t i = 0; i < in.size(); ++i) merge_shape(in[i], common, input_label(a, i));
  int ax = tensor::norm_axis(p.axis, common.ndim() + 1, "node '" + a.name + "' (op stack): axis");
  auto d = common.dims();
  d.insert(d.begin() + ax, p.num_args);
  merge_shape(out[0], Shape(std::move(d)), "output 0");
}

class StackKernel final : public Kernel {
 public:
  explicit StackKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kNumericDTypes | tensor::dtype_bit(DType::kBool))),
        what_(tensor::node_label(a)) {
    std::tie(outer_, inner_) =
        tensor::stack_rows(a.attrs.param<StackParam>(), a.in_shapes[0], "axis");
    n_ = static_cast<int64_t>(a.in_shapes.size());
  }
  // The output as (outer, n, inner): input k fills the k-th inner block of every outer row.
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    dispatch_dtype(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* y = out[0].data<T>();
      const bool add = req[0] == Req::kAdd;
      for (int64_t k = 0; k < n_; ++k) {
        const T* x = in[static_cast<size_t>(k)].cdata<T>();
        for (int64_t o = 0; o < outer_; ++o) {
          T* dst = y + (o * n_ + k) * inner_;
          const T* src = x + o * inner_;
          for (int64_t i = 0; i < inner_; ++i)
            dst[i] = add ? tensor::add_value<T>(dst[i], src[i]) : src[i];
        }
      }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g = og[0].cdata<T>();
      for (int64_t k = 0; k < n_; ++k) {
        const Req r = req[static_cast<size_t>(k)];
        if (r == Req::kNull) continue;
        T* dx = ig[static_cast<size_t>(k)].data<T>();
        for (int64_t o = 0; o < outer_; ++o) {
          const T* src = g + (o * n_ + k) * inner_;
          T* dst = dx + o * inner_;
          for (int64_t i = 0; i < inner_; ++i)
            dst[i] = r == Req::kAdd ? tensor::add_value<T>(dst[i], src[i]) : src[i];
        }
      }
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
  int64_t outer_ = 1, inner_ = 1, n_ = 0;
};

LOOM_REGISTER_OP("stack")
    .describe("Joins arrays of one shape along a new axis.")
    .params(kStackSchema)
    .inputs([](const OpAttrs& a) {
      std::vector<std::string> v;
      for (int i = 0; i < a.param<StackParam>().num_args; ++i) v.push_back("arg" + std::to_string(i));
      return v;
    })
    .shape_fn(infer_stack)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .cpu<StackKernel>()
    .sample({.attrs = {{"num_args", "3"}}, .in_shapes = {{2, 3}, {2, 3}, {2, 3}}})
    .sample({.attrs = {{"num_args", "2"}, {"axis", "-1"}}, .in_shapes = {{2, 3}, {2, 3}}})
    .sample({.attrs = {{"num_args", "2"}, {"axis", "1"}}, .in_shapes = {{2, 1, 3}, {2, 1, 3}}});

}  // namespace
}  // namespace loom
