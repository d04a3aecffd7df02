// tile(reps): repeats the whole array reps[d] times along each axis (NumPy's tile: the
// shorter of shape and reps is padded with leading 1s). The gradient sums the copies.
#include "ops/infer.h"
#include "ops/tensor/index_map.h"

namespace loom {
namespace {

struct TileParam {
  Shape reps;
};
const auto kTileSchema = ParamSchema<TileParam>().required(
    "reps", &TileParam::reps, "Repetitions per axis (aligned to the last axes).");

// Input shape padded to the output's rank, and the output shape.
std::pair<Shape, Shape> tile_shapes(const OpAttrs& a, const Shape& in) {
  const Shape& reps = a.param<TileParam>().reps;
  const int nd = std::max(in.ndim(), reps.ndim());
  Shape s = tensor::pad_shape(in, nd), r = tensor::pad_shape(reps, nd), o = s;
  for (int d = 0; d < nd; ++d) {
    if (r[d] < 0)
      throw ShapeError("node '" + a.name + "' (op tile): reps " + reps.str() + " has a negative entry");
    o[d] = dim_mul(s[d], r[d], "tile output");
  }
  return {s, o};
}

void infer_tile(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  merge_shape(out[0], tile_shapes(a, in[0]).second, "output 0");
}

std::unique_ptr<Kernel> make_tile(const KernelArgs& a) {
  auto [s, o] = tile_shapes(a.attrs, a.in_shapes[0]);
  tensor::IndexMap m(s, o);
  for (int d = 0; d < o.ndim(); ++d)
    m.dims.push_back({.src = d, .kind = tensor::IndexMap::Kind::kModulo, .n = s[d]});
  m.injective = o.numel() == s.numel();
  return std::make_unique<tensor::IndexMapKernel>(a, std::move(m));
}

LOOM_REGISTER_OP("tile")
    .describe("Repeats the whole array along each axis.")
    .params(kTileSchema)
    .shape_fn(infer_tile)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .kernel(DeviceType::kCPU, make_tile)
    .sample({.attrs = {{"reps", "(2, 3)"}}, .in_shapes = {{2, 2}}})
    .sample({.attrs = {{"reps", "(2,)"}}, .in_shapes = {{2, 1, 3}}})
    .sample({.attrs = {{"reps", "(2, 1, 2)"}}, .in_shapes = {{3, 2}}});

}  // namespace
}  // namespace loom
