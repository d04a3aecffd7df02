// LayerNorm(axis, eps, output_mean_var): normalises along one axis (default the last) with
// gamma and beta of that axis's length; hidden outputs mean and std (sqrt(var + eps)) have
// the data's shape with that axis 1.
#include "ops/infer.h"
#include "ops/nn/group_affine_norm.h"

namespace loom {
namespace {

struct LayerNormParam {
  int64_t axis;
  float eps;
  bool output_mean_var;
};
const auto kLayerNormSchema =
    ParamSchema<LayerNormParam>()
        .optional("axis", &LayerNormParam::axis, int64_t{-1}, "The axis to normalise along.")
        .optional("eps", &LayerNormParam::eps, 1e-5f, "Added to the variance.")
        .optional("output_mean_var", &LayerNormParam::output_mean_var, false,
                  "Also output the mean and standard deviation.");

void infer_layer_norm(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  int ax = tensor::norm_axis(a.param<LayerNormParam>().axis, in[0].ndim(), "node '" + a.name + "' (op LayerNorm): axis");
  merge_shape(in[1], Shape{in[0][ax]}, input_label(a, 1));
  merge_shape(in[2], Shape{in[0][ax]}, input_label(a, 2));
  merge_shape(out[0], in[0], "output 0");
  Shape stat = in[0];
  stat[ax] = 1;
  merge_shape(out[1], stat, "output 1");
  merge_shape(out[2], stat, "output 2");
}

std::unique_ptr<Kernel> make_layer_norm(const KernelArgs& a) {
  return std::make_unique<nn::GroupAffineNormKernel>(a, nn::layer_norm_layout(a));
}

LOOM_CPU_DTYPES("LayerNorm", kDTypePolicyFloats);

LOOM_REGISTER_OP("LayerNorm")
    .describe("Layer normalisation along one axis with a learned scale and shift.")
    .params(kLayerNormSchema)
    .inputs({"data", "gamma", "beta"})
    .outputs({"output", "mean", "std"})
    .visible_outputs([](const OpAttrs& a) { return a.param<LayerNormParam>().output_mean_var ? 3 : 1; })
    .shape_fn(infer_layer_norm)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .kernel(DeviceType::kCPU, make_layer_norm)
    .sample({.attrs = {}, .in_shapes = {{3, 5}, {5}, {5}}})
    .sample({.attrs = {{"axis", "1"}, {"eps", "0.01"}}, .in_shapes = {{2, 3, 4}, {3}, {3}}})
    .sample({.attrs = {{"output_mean_var", "True"}}, .in_shapes = {{2, 2, 3}, {3}, {3}}});

}  // namespace

nn::GroupNormLayout nn::layer_norm_layout(const KernelArgs& a) {
  const auto& p = a.attrs.param<LayerNormParam>();
  const Shape& s = a.in_shapes[0];
  int ax = tensor::norm_axis(p.axis, s.ndim(), "axis");
  nn::GroupNormLayout l{.reduce = s[ax], .gamma_by_reduce = true, .eps = p.eps};
  for (int d = 0; d < ax; ++d) l.outer *= s[d];
  for (int d = ax + 1; d < s.ndim(); ++d) l.inner *= s[d];
  return l;
}

}  // namespace loom
