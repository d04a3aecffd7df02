// reverse (alias flip)(axis): reverses the order of elements along each listed axis. The
// gradient reverses the head gradient the same way (an IndexMap scatter).
#include "ops/infer.h"
#include "ops/tensor/index_map.h"

namespace loom {
namespace {

struct ReverseParam {
  Shape axis;
};
const auto kReverseSchema = ParamSchema<ReverseParam>().required(
    "axis", &ReverseParam::axis, "The axes along which to reverse elements.");

std::vector<bool> reversed_axes(const OpAttrs& a, int ndim) {
  std::vector<bool> rev(static_cast<size_t>(ndim), false);
  const std::string what = "node '" + a.name + "' (op " + a.op->name + "): axis";
  for (int64_t ax : a.param<ReverseParam>().axis.dims()) {
    const int k = tensor::norm_axis(ax, ndim, what);
    if (rev[static_cast<size_t>(k)])
      throw ParamError(what + " " + std::to_string(ax) + " is listed twice");
    rev[static_cast<size_t>(k)] = true;
  }
  return rev;
}

void infer_reverse(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) {
    if (out[0].ndim() != 0) merge_shape(in[0], out[0], "input 0");
    return;
  }
  reversed_axes(a, in[0].ndim());
  merge_shape(out[0], in[0], "output 0");
}

std::unique_ptr<Kernel> make_reverse(const KernelArgs& a) {
  const Shape& s = a.in_shapes[0];
  const auto rev = reversed_axes(a.attrs, s.ndim());
  tensor::IndexMap m(s, s);
  for (int d = 0; d < s.ndim(); ++d) {
    if (rev[static_cast<size_t>(d)])
      m.dims.push_back({.src = d, .begin = s[d] - 1, .step = -1});
    else
      m.dims.push_back({.src = d});
  }
  return std::make_unique<tensor::IndexMapKernel>(a, std::move(m));
}

LOOM_REGISTER_OP("reverse")
    .describe("Reverses the order of elements along the given axes.")
    .alias("flip")
    .params(kReverseSchema)
    .shape_fn(infer_reverse)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .kernel(DeviceType::kCPU, make_reverse)
    .sample({.attrs = {{"axis", "(0,)"}}, .in_shapes = {{3, 4}}})
    .sample({.attrs = {{"axis", "(1, -1)"}}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"axis", "2"}}, .in_shapes = {{2, 1, 5}}});

}  // namespace
}  // namespace loom
