// shape_array / size_array: the input's shape (one int64 per dimension) or element count
// (one int64), as MXNet 1.9.1. They read only the shape, so any input dtype works; the
// gradient is zero.
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

template <bool kSize>
class ShapeArrayKernel final : public Kernel {
 public:
  explicit ShapeArrayKernel(const KernelArgs& a) : shape_(a.in_shapes[0]) {
    if (a.out_types[0] != DType::kInt64)
      throw Error(tensor::node_label(a) + ": output dtype must be int64, got " +
                  dtype_name(a.out_types[0]));
  }
  void forward(const OpContext&, std::span<const NDArray>, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    int64_t* y = out[0].data<int64_t>();
    if (kSize) {
      tensor::store_t<int64_t>(y, req[0], shape_.numel());
      return;
    }
    for (int d = 0; d < shape_.ndim(); ++d) tensor::store_t<int64_t>(y + d, req[0], shape_[d]);
  }
  void backward(const OpContext&, std::span<const NDArray>, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] != Req::kNull) tensor::fill_req(ig[0], req[0], 0.f);
  }

 private:
  Shape shape_;
};

template <bool kSize>
void register_shape_op(const char* name, const char* doc) {
  register_op(name)
      .describe(doc)
      .shape_fn([](const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
        if (kSize) {
          merge_shape(out[0], Shape{1}, "output 0");
          return;
        }
        if (in[0].ndim() == 0) return;
        merge_shape(out[0], Shape{in[0].ndim()}, "output 0");
      })
      .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
        merge_type(out[0], DType::kInt64, "output 0");
        if (in[0] == DType::kUnknown) in[0] = DType::kFloat32;
      })
      .deps(GradDeps{.out_grad = false, .in_data = false, .out_data = false})
      .zero_grad()
      .template cpu<ShapeArrayKernel<kSize>>()
      .sample({.attrs = {}, .in_shapes = {{2, 3, 4}}, .check_grad = false})
      .sample({.attrs = {}, .in_shapes = {{5}}, .check_grad = false});
}

[[maybe_unused]] const bool kShapeArrayRegistered = [] {
  register_shape_op<false>("shape_array", "The input's shape as a 1-D int64 array.");
  register_shape_op<true>("size_array", "The input's element count as a (1,) int64 array.");
  return true;
}();

}  // namespace
}  // namespace loom
