// SwapAxis / swapaxes(dim1, dim2): exchanges two axes. The gradient swaps them back.
#include "ops/infer.h"
#include "ops/tensor/index_map.h"

namespace loom {
namespace {

struct SwapAxisParam {
  int64_t dim1, dim2;
};
const auto kSwapAxisSchema =
    ParamSchema<SwapAxisParam>()
        .optional("dim1", &SwapAxisParam::dim1, int64_t{0}, "The first axis.")
        .optional("dim2", &SwapAxisParam::dim2, int64_t{0}, "The second axis.");

std::pair<int, int> axes_of(const OpAttrs& a, int ndim) {
  const auto& p = a.param<SwapAxisParam>();
  const std::string what = "node '" + a.name + "' (op SwapAxis): axis";
  return {tensor::norm_axis(p.dim1, ndim, what), tensor::norm_axis(p.dim2, ndim, what)};
}

void infer_swap(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  auto [i, j] = axes_of(a, in[0].ndim());
  Shape o = in[0];
  std::swap(o[i], o[j]);
  merge_shape(out[0], o, "output 0");
}

std::unique_ptr<Kernel> make_swap(const KernelArgs& a) {
  const Shape& s = a.in_shapes[0];
  auto [i, j] = axes_of(a.attrs, s.ndim());
  Shape o = s;
  std::swap(o[i], o[j]);
  tensor::IndexMap m(s, o);
  for (int d = 0; d < o.ndim(); ++d) m.dims.push_back({.src = d == i ? j : d == j ? i : d});
  return std::make_unique<tensor::IndexMapKernel>(a, std::move(m));
}

LOOM_REGISTER_OP("SwapAxis")
    .describe("Exchanges two axes.")
    .alias("swapaxes")
    .params(kSwapAxisSchema)
    .shape_fn(infer_swap)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .kernel(DeviceType::kCPU, make_swap)
    .sample({.attrs = {{"dim1", "0"}, {"dim2", "2"}}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"dim1", "1"}, {"dim2", "-1"}}, .in_shapes = {{2, 3, 4, 2}}})
    .sample({.attrs = {}, .in_shapes = {{3, 2}}});

}  // namespace
}  // namespace loom
