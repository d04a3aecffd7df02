// Constant-filled arrays: zeros_like / ones_like (shape and type of the input; zero
// gradient) and _zeros / _ones (no inputs; shape and dtype parameters).
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

/// Fills out[0] with a constant of any dtype (kAdd adds it).
template <int kValue>
class FillKernel final : public Kernel {
 public:
  explicit FillKernel(const KernelArgs&) {}
  void forward(const OpContext&, std::span<const NDArray>, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull || (req[0] == Req::kAdd && kValue == 0)) return;
    if (req[0] == Req::kAdd) {  // adds one, in any dtype
      dispatch_dtype(out[0].dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T one = convert_value<T>(kValue);
        tensor::write_t<T>(out[0].data<T>(), Req::kAdd, out[0].size(), [=](int64_t) { return one; });
      });
      return;
    }
    if (kValue == 0)
      out[0].zero();
    else
      out[0].fill(kValue);
  }
  void backward(const OpContext&, std::span<const NDArray>, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    for (size_t k = 0; k < ig.size(); ++k)
      if (req[k] != Req::kNull && req[k] != Req::kAdd) ig[k].zero();
  }
};

template <int kValue>
void like_op(const char* name, const char* doc) {
  register_op(name)
      .describe(doc)
      .deps(GradDeps{false, false, false})
      .zero_grad()
      .template cpu<FillKernel<kValue>>()
      .layouts([](const OpAttrs&, const std::vector<Shape>& in) {
        return elementwise_layout_rule(static_cast<int>(in.size()), 1);
      })
      .sample({.attrs = {}, .in_shapes = {{2, 3}}, .check_grad = false});
}

struct InitParam {
  Shape shape;
  std::string ctx, dtype;
};
const auto kInitSchema =
    ParamSchema<InitParam>()
        .optional("shape", &InitParam::shape, Shape(), "Shape of the output.")
        .optional("ctx", &InitParam::ctx, std::string(), "Device context (ignored).")
        .optional("dtype", &InitParam::dtype, std::string("float32"), "Output type.")
        .check([](InitParam& p) { dtype_from_string(p.dtype); });

template <int kValue>
void init_op(const char* name, const char* doc) {
  register_op(name)
      .describe(doc)
      .params(kInitSchema)
      .inputs(std::vector<std::string>{})
      .shape_fn([](const OpAttrs& a, std::vector<Shape>&, std::vector<Shape>& out) {
        // -1 (or 0) dims are unknown and come from the consumers (MXNet's legacy rule:
        // sym.ones(shape=(2, -1)) + x takes x's second dim).
        Shape s = a.param<InitParam>().shape;
        for (auto& d : s.dims())
          if (d < 0) d = 0;
        merge_shape(out[0], s, "output 0");
      })
      .type_fn([](const OpAttrs& a, std::vector<DType>&, std::vector<DType>& out) {
        merge_type(out[0], dtype_from_string(a.param<InitParam>().dtype), "output 0");
      })
      .deps(GradDeps{false, false, false})
      .zero_grad()
      .template cpu<FillKernel<kValue>>()
      .layouts([](const OpAttrs&, const std::vector<Shape>& in) {
        return elementwise_layout_rule(static_cast<int>(in.size()), 1);
      })
      .sample({.attrs = {{"shape", "(2, 3)"}}, .in_shapes = {}, .check_grad = false})
      .sample({.attrs = {{"shape", "(4,)"}, {"dtype", "float32"}},
               .in_shapes = {},
               .check_grad = false});
}

// Registered at static-initialisation time like LOOM_REGISTER_OP, through one helper.
[[maybe_unused]] const bool kInitOpsRegistered = [] {
  like_op<0>("zeros_like", "An array of zeros with the input's shape and type.");
  like_op<1>("ones_like", "An array of ones with the input's shape and type.");
  init_op<0>("_zeros", "An array of zeros of the given shape and dtype.");
  init_op<1>("_ones", "An array of ones of the given shape and dtype.");
  return true;
}();

}  // namespace
}  // namespace loom
