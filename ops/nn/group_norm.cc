// GroupNorm(num_groups, eps, output_mean_var): normalises each (sample, group of channels)
// over the group's channels and positions; gamma and beta hold one value per group (as in
// MXNet 1.9.1); hidden outputs mean and std are (N, num_groups).
#include "ops/infer.h"
#include "ops/nn/group_affine_norm.h"

namespace loom {
namespace {

struct GroupNormParam {
  int64_t num_groups;
  float eps;
  bool output_mean_var;
};
const auto kGroupNormSchema =
    ParamSchema<GroupNormParam>()
        .optional("num_groups", &GroupNormParam::num_groups, int64_t{1}, "Number of channel groups.")
        .optional("eps", &GroupNormParam::eps, 1e-5f, "Added to the variance.")
        .optional("output_mean_var", &GroupNormParam::output_mean_var, false,
                  "Also output the mean and standard deviation.")
        .check([](GroupNormParam& p) {
          if (p.num_groups < 1) throw ParamError("num_groups must be positive");
        });

void infer_group_norm(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  const int64_t g = a.param<GroupNormParam>().num_groups;
  if (in[0].ndim() < 2 || in[0][1] % g != 0)
    throw ShapeError("node '" + a.name + "' (op GroupNorm): input 0 " + in[0].str() +
                     " needs a channel axis divisible by num_groups " + std::to_string(g));
  merge_shape(in[1], Shape{g}, input_label(a, 1));
  merge_shape(in[2], Shape{g}, input_label(a, 2));
  merge_shape(out[0], in[0], "output 0");
  merge_shape(out[1], Shape{in[0][0], g}, "output 1");
  merge_shape(out[2], Shape{in[0][0], g}, "output 2");
}

std::unique_ptr<Kernel> make_group_norm(const KernelArgs& a) {
  return std::make_unique<nn::GroupAffineNormKernel>(a, nn::group_norm_layout(a));
}

LOOM_CPU_DTYPES("GroupNorm", kDTypePolicyFloats);

LOOM_REGISTER_OP("GroupNorm")
    .describe("Group normalisation over groups of channels, with per-group scale and shift.")
    .params(kGroupNormSchema)
    .inputs({"data", "gamma", "beta"})
    .outputs({"output", "mean", "std"})
    .visible_outputs([](const OpAttrs& a) { return a.param<GroupNormParam>().output_mean_var ? 3 : 1; })
    .shape_fn(infer_group_norm)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .kernel(DeviceType::kCPU, make_group_norm)
    .sample({.attrs = {{"num_groups", "2"}}, .in_shapes = {{2, 4, 3}, {2}, {2}}})
    .sample({.attrs = {}, .in_shapes = {{2, 3, 2, 2}, {1}, {1}}})
    .sample({.attrs = {{"num_groups", "3"}, {"output_mean_var", "True"}}, .in_shapes = {{1, 6, 2}, {3}, {3}}});

}  // namespace

nn::GroupNormLayout nn::group_norm_layout(const KernelArgs& a) {
  const Shape& s = a.in_shapes[0];
  const auto& p = a.attrs.param<GroupNormParam>();
  return nn::GroupNormLayout{.outer = s[0] * p.num_groups,
                             .reduce = s.numel() / (s[0] * p.num_groups),
                             .gamma_count = p.num_groups,
                             .eps = p.eps};
}

}  // namespace loom
