// InstanceNorm(eps): normalises each (sample, channel) over its spatial positions, with
// per-channel gamma and beta.
#include "ops/infer.h"
#include "ops/nn/group_affine_norm.h"

namespace loom {
namespace {

struct InstanceNormParam {
  float eps;
};
const auto kInstanceNormSchema =
    ParamSchema<InstanceNormParam>().optional("eps", &InstanceNormParam::eps, 1e-3f, "Added to the variance.");

void infer_instance_norm(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  if (in[0].ndim() < 3)
    throw ShapeError("node '" + a.name + "' (op InstanceNorm): input 0 " + in[0].str() +
                     " needs (N, C, spatial...) dimensions");
  merge_shape(in[1], Shape{in[0][1]}, input_label(a, 1));
  merge_shape(in[2], Shape{in[0][1]}, input_label(a, 2));
  merge_shape(out[0], in[0], "output 0");
}

std::unique_ptr<Kernel> make_instance_norm(const KernelArgs& a) {
  return std::make_unique<nn::GroupAffineNormKernel>(a, nn::instance_norm_layout(a));
}

LOOM_CPU_DTYPES("InstanceNorm", kDTypePolicyFloats);

LOOM_REGISTER_OP("InstanceNorm")
    .describe("Instance normalisation: per sample and channel over spatial positions.")
    .params(kInstanceNormSchema)
    .inputs({"data", "gamma", "beta"})
    .shape_fn(infer_instance_norm)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .kernel(DeviceType::kCPU, make_instance_norm)
    .sample({.attrs = {}, .in_shapes = {{2, 3, 4}, {3}, {3}}})
    .sample({.attrs = {{"eps", "1e-5"}}, .in_shapes = {{2, 2, 3, 2}, {2}, {2}}});

}  // namespace

nn::GroupNormLayout nn::instance_norm_layout(const KernelArgs& a) {
  const Shape& s = a.in_shapes[0];
  return nn::GroupNormLayout{.outer = s[0] * s[1],
                             .reduce = s.numel() / (s[0] * s[1]),
                             .gamma_count = s[1],
                             .eps = a.attrs.param<InstanceNormParam>().eps};
}

}  // namespace loom
