// repeat(repeats, axis): repeats each element along an axis (axis None: of the flattened
// array, giving 1-D). The gradient sums the copies.
#include "ops/infer.h"
#include "ops/tensor/index_map.h"

namespace loom {
namespace {

struct RepeatParam {
  int64_t repeats;
  std::optional<int64_t> axis;
};
const auto kRepeatSchema =
    ParamSchema<RepeatParam>()
        .required("repeats", &RepeatParam::repeats, "Copies of each element.")
        .optional("axis", &RepeatParam::axis, std::optional<int64_t>(),
                  "The axis to repeat along (None: the flattened array).")
        .check([](RepeatParam& p) {
          if (p.repeats < 1) throw ParamError("repeats must be positive");
        });

// The (possibly flattened) input shape, the output shape and the repeated axis.
struct RepeatShapes {
  Shape in, out;
  int axis;
};
RepeatShapes repeat_shapes(const OpAttrs& a, const Shape& in) {
  const auto& p = a.param<RepeatParam>();
  RepeatShapes r{p.axis ? in : Shape{in.numel()}, Shape(), 0};
  if (p.axis) r.axis = tensor::norm_axis(*p.axis, in.ndim(), "node '" + a.name + "' (op repeat): axis");
  r.out = r.in;
  r.out[r.axis] = dim_mul(r.in[r.axis], p.repeats, "repeat output");
  return r;
}

void infer_repeat(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].known()) return;
  merge_shape(out[0], repeat_shapes(a, in[0]).out, "output 0");
}

std::unique_ptr<Kernel> make_repeat(const KernelArgs& a) {
  auto r = repeat_shapes(a.attrs, a.in_shapes[0]);
  tensor::IndexMap m(r.in, r.out);
  for (int d = 0; d < r.out.ndim(); ++d)
    m.dims.push_back(d == r.axis ? tensor::IndexMap::Dim{.src = d,
                                                         .kind = tensor::IndexMap::Kind::kDivide,
                                                         .n = a.attrs.param<RepeatParam>().repeats}
                                 : tensor::IndexMap::Dim{.src = d});
  m.injective = a.attrs.param<RepeatParam>().repeats == 1;
  return std::make_unique<tensor::IndexMapKernel>(a, std::move(m));
}

LOOM_REGISTER_OP("repeat")
    .describe("Repeats each element along an axis.")
    .params(kRepeatSchema)
    .shape_fn(infer_repeat)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .kernel(DeviceType::kCPU, make_repeat)
    .sample({.attrs = {{"repeats", "2"}, {"axis", "1"}}, .in_shapes = {{2, 3}}})
    .sample({.attrs = {{"repeats", "3"}}, .in_shapes = {{2, 2}}})
    .sample({.attrs = {{"repeats", "2"}, {"axis", "-3"}}, .in_shapes = {{2, 1, 3}}});

}  // namespace
}  // namespace loom
