// depth_to_space / space_to_depth(block_size) on NCHW data (MXNet 1.9.1, DCR order):
// depth_to_space maps (N, C, H, W) to (N, C/b^2, H*b, W*b) with
//   out[n, c, h*b + i, w*b + j] = in[n, (i*b + j) * C/b^2 + c, h, w],
// and space_to_depth is its inverse. Both are permutations; the gradient applies the inverse.
#include "ops/infer.h"
#include "ops/tensor/gather_kernel.h"

namespace loom {
namespace {

struct BlockParam {
  int64_t block_size;
};
const auto kBlockSchema =
    ParamSchema<BlockParam>()
        .required("block_size", &BlockParam::block_size, "The size of the spatial block.")
        .check([](BlockParam& p) {
          if (p.block_size < 1)
            throw ParamError("block_size must be positive, got " + std::to_string(p.block_size));
        });

// Output shape; throws naming the node when the input does not divide.
template <bool kToSpace>
Shape block_out(const OpAttrs& a, const Shape& s) {
  const int64_t b = a.param<BlockParam>().block_size;
  const std::string what = "node '" + a.name + "' (op " + a.op->name + "): " + input_label(a, 0);
  if (s.ndim() != 4) throw ShapeError(what + ": expected 4-D NCHW data, got " + s.str());
  if (kToSpace) {
    if (s[1] % (b * b) != 0)
      throw ShapeError(what + ": channels " + std::to_string(s[1]) + " of " + s.str() +
                       " are not a multiple of block_size^2 = " + std::to_string(b * b));
    return Shape{s[0], s[1] / (b * b), dim_mul(s[2], b, "depth_to_space height"),
                 dim_mul(s[3], b, "depth_to_space width")};
  }
  if (s[2] % b != 0 || s[3] % b != 0)
    throw ShapeError(what + ": height and width of " + s.str() +
                     " must be multiples of block_size " + std::to_string(b));
  return Shape{s[0], dim_mul(s[1], b * b, "space_to_depth channels"), s[2] / b, s[3] / b};
}

template <bool kToSpace>
std::unique_ptr<Kernel> make_block(const KernelArgs& a) {
  const int64_t b = a.attrs.param<BlockParam>().block_size;
  const Shape& s = a.in_shapes[0];
  const Shape o = block_out<kToSpace>(a.attrs, s);
  // The (N, C, H, W) of the deep side and the (N, C', H', W') of the spatial side.
  const Shape& deep = kToSpace ? s : o;
  const Shape& wide = kToSpace ? o : s;
  const int64_t cw = wide[1], hd = deep[2], wd = deep[3];
  std::vector<int64_t> src(static_cast<size_t>(o.numel()));
  // For every (deep index, spatial index) pair: which flat position each side has.
  int64_t di = 0;
  for (int64_t n = 0; n < deep[0]; ++n)
    for (int64_t cd = 0; cd < deep[1]; ++cd) {
      const int64_t blk = cd / cw, c = cd % cw, i = blk / b, j = blk % b;
      for (int64_t h = 0; h < hd; ++h)
        for (int64_t w = 0; w < wd; ++w, ++di) {
          const int64_t wi = ((n * cw + c) * wide[2] + h * b + i) * wide[3] + w * b + j;
          if (kToSpace)
            src[static_cast<size_t>(wi)] = di;
          else
            src[static_cast<size_t>(di)] = wi;
        }
    }
  return std::make_unique<tensor::GatherKernel>(a, std::move(src));
}

template <bool kToSpace>
void register_block(const char* name, const char* doc) {
  register_op(name)
      .describe(doc)
      .params(kBlockSchema)
      .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
        if (in[0].ndim() == 0) return;
        merge_shape(out[0], block_out<kToSpace>(a, in[0]), "output 0");
      })
      .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
      .kernel(DeviceType::kCPU, make_block<kToSpace>)
      .sample({.attrs = {{"block_size", "2"}},
               .in_shapes = {kToSpace ? Shape{2, 8, 2, 3} : Shape{2, 2, 4, 6}}})
      .sample({.attrs = {{"block_size", "3"}},
               .in_shapes = {kToSpace ? Shape{1, 9, 1, 2} : Shape{1, 1, 3, 6}}});
}

[[maybe_unused]] const bool kDepthToSpaceRegistered = [] {
  register_block<true>("depth_to_space",
                       "Moves blocks of channels into spatial blocks: (N, C, H, W) to "
                       "(N, C/b^2, H*b, W*b).");
  register_block<false>(
      "space_to_depth",
      "Moves spatial blocks into channels: (N, C, H, W) to (N, C*b^2, H/b, W/b).");
  return true;
}();

}  // namespace
}  // namespace loom
