// LAMB in two phases (MXNet 1.9 src/operator/optimizer_op-inl.h); the norms between them are
// ordinary ops (Python: r1 = weight.norm(), r2 = g.norm()).
//   lamb_update_phase1(weight, grad, mean, var) -> g:
//     gr = clip(rescale_grad·grad, clip_gradient);  mean ← β1·mean + (1−β1)·gr;
//     var ← β2·var + (1−β2)·gr²;  with bias_correction m̂ = mean/(1−β1ᵗ), v̂ = var/(1−β2ᵗ)
//     (else m̂ = mean, v̂ = var);  g = m̂/(√v̂ + ε) + wd·w.
//   lamb_update_phase2(weight, g, r1, r2) -> w: r1 ← max(r1, lower_bound) if lower_bound >= 0,
//     min(r1, upper_bound) if upper_bound >= 0;  ratio = r1/r2, or 1 when r1 or r2 is 0;
//     w ← w − lr·ratio·g.  r1, r2 are one-element arrays.
#include <algorithm>
#include <cmath>

#include "ops/update/more_steps.h"
#include "ops/update/update_util.h"

namespace loom {
namespace {

using update::clip;
using update::clip_bound;
using update::f32;

using update::LambPhase1Param;  // more_steps.h, with the steps (shared with optimizers.cu)
const auto kPhase1Schema =
    ParamSchema<LambPhase1Param>()
        .optional("beta1", &LambPhase1Param::beta1, 0.9, update::kDocBeta1)
        .optional("beta2", &LambPhase1Param::beta2, 0.999, update::kDocBeta2)
        .optional("epsilon", &LambPhase1Param::epsilon, 1e-6, update::kDocEpsilon)
        .required("t", &LambPhase1Param::t, "Index update count.")
        .optional("bias_correction", &LambPhase1Param::bias_correction, true,
                  "Whether to use bias correction.")
        .required("wd", &LambPhase1Param::wd, update::kDocWd)
        .optional("rescale_grad", &LambPhase1Param::rescale_grad, 1.0, update::kDocRescale)
        .optional("clip_gradient", &LambPhase1Param::clip_gradient, -1.0, update::kDocClip)
        .optional("t_input", &LambPhase1Param::t_input, false,
                  "Read the update count t from an extra trailing one-element input `t` "
                  "instead of the attribute (training-step graphs). Off by default: MXNet's "
                  "op.");

using update::LambPhase2Param;
const auto kPhase2Schema =
    ParamSchema<LambPhase2Param>()
        .required("lr", &LambPhase2Param::lr, update::kDocLr)
        .optional("lower_bound", &LambPhase2Param::lower_bound, -1.0,
                  "Lower limit of the weight norm r1; negative = no limit.")
        .optional("upper_bound", &LambPhase2Param::upper_bound, -1.0,
                  "Upper limit of the weight norm r1; negative = no limit.")
        .optional("lr_input", &LambPhase2Param::lr_input, false, update::kDocLrInput);

class LambPhase1Kernel final : public update::UpdateKernel<LambPhase1Param> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float* w = in[0].data<float>();
    const float* g = in[1].data<float>();
    float* mean = in[2].data<float>();
    float* var = in[3].data<float>();
    const update::LambPhase1Step step(p_);
    float c1, c2;
    step.corrections(p_.t_input ? std::round(double{in[4].data<float>()[0]}) : double(p_.t), c1,
                     c2);
    update::apply(out[0].data<float>(), req[0], r,
                  [=](int64_t i) { return step(c1, c2, w[i], g[i], mean[i], var[i]); });
  }
};

class LambPhase2Kernel final : public update::UpdateKernel<LambPhase2Param> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float* w = in[0].data<float>();
    const float* g = in[1].data<float>();
    const float base = update::scalar_or(in, 4, p_.lr_input, p_.lr);
    const float lr =
        update::LambPhase2Rate(p_)(base, in[2].data<float>()[0], in[3].data<float>()[0]);
    update::apply(out[0].data<float>(), req[0], r,
                  [=](int64_t i) { return w[i] - lr * g[i]; });
  }
};

LOOM_REGISTER_OP("lamb_update_phase1")
    .describe("First phase of the LAMB update: updates mean and var in place and returns the "
              "bias-corrected Adam direction plus wd*weight.")
    .params(kPhase1Schema)
    .inputs([](const OpAttrs& a) {
      return update::names_with({"weight", "grad", "mean", "var"},
                                a.param<LambPhase1Param>().t_input, "t");
    })
    .shape_fn(update::shapes_with_scalars(4))
    .aux({2, 3})
    .zero_grad()
    .cpu<LambPhase1Kernel>()
    .sample({.attrs = {{"t", "3"}, {"wd", "0.01"}},
             .in_shapes = {{3, 4}, {3, 4}, {3, 4}, {3, 4}},
             .in_kinds = {"normal", "normal", "normal", "positive"},
             .check_grad = false})
    .sample({.attrs = {{"t", "1"}, {"wd", "0"}, {"bias_correction", "False"},
                       {"rescale_grad", "0.5"}, {"clip_gradient", "0.3"}, {"beta1", "0.8"}},
             .in_shapes = {{8}, {8}, {8}, {8}},
             .in_kinds = {"normal", "normal", "zeros", "positive"},
             .check_grad = false})
    .sample({.attrs = {{"t", "100"}, {"wd", "0.01"}, {"t_input", "True"}},
             .in_shapes = {{5}, {5}, {5}, {5}, {1}},
             .in_kinds = {"normal", "normal", "normal", "positive", "ones"},
             .check_grad = false});

LOOM_REGISTER_OP("lamb_update_phase2")
    .describe("Second phase of the LAMB update: w -= lr * (r1/r2) * g, with r1 (the weight "
              "norm, optionally bounded) and r2 (the norm of g) one-element inputs.")
    .params(kPhase2Schema)
    .inputs([](const OpAttrs& a) {
      return update::names_with({"weight", "g", "r1", "r2"}, a.param<LambPhase2Param>().lr_input);
    })
    .shape_fn(update::shapes_with_scalars(2))
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<LambPhase2Kernel>()
    .sample({.attrs = {{"lr", "0.1"}},
             .in_shapes = {{3, 4}, {3, 4}, {1}, {1}},
             .in_kinds = {"normal", "normal", "positive", "positive"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.1"}, {"lower_bound", "1.5"}, {"upper_bound", "1.8"}},
             .in_shapes = {{6}, {6}, {1}, {1}},
             .in_kinds = {"normal", "normal", "positive", "positive"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "9"}, {"lr_input", "True"}},
             .in_shapes = {{4}, {4}, {1}, {1}, {1}},
             .in_kinds = {"normal", "normal", "positive", "positive", "positive"},
             .check_grad = false});

}  // namespace
}  // namespace loom
