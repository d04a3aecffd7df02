// RMSProp updates (MXNet 1.9 src/operator/optimizer_op-inl.h). With
// g = clip(rescale_grad·grad + wd·w, clip_gradient) (weight decay clipped, as in Adam):
//   rmsprop_update (Tieleman & Hinton): n ← (1−γ1)·g² + γ1·n;  w ← w − lr·g/√(n + ε)
//   rmspropalex_update (centered, Graves 2013): n ← (1−γ1)·g² + γ1·n;
//     g_avg ← (1−γ1)·g + γ1·g_avg;  delta ← γ2·delta − lr·g/√(n − g_avg² + ε);  w ← w + delta
// then w ← clip(w, clip_weights) when clip_weights >= 0. ε sits inside the square root.
#include <cmath>

#include "ops/update/more_steps.h"
#include "ops/update/update_util.h"

namespace loom {
namespace {

using update::clip;
using update::clip_bound;
using update::f32;

using update::RMSPropParam;  // more_steps.h, with the steps (shared with optimizers.cu)
ParamSchema<RMSPropParam> rmsprop_schema(bool centered) {
  ParamSchema<RMSPropParam> s;
  s.required("lr", &RMSPropParam::lr, update::kDocLr);
  if (centered) {
    s.optional("gamma1", &RMSPropParam::gamma1, 0.95, "Decay rate.")
        .optional("gamma2", &RMSPropParam::gamma2, 0.9, "Decay rate.");
  } else {
    s.optional("gamma1", &RMSPropParam::gamma1, 0.95, "The decay rate of momentum estimates.");
  }
  s.optional("epsilon", &RMSPropParam::epsilon, 1e-8, update::kDocEpsilon)
      .optional("wd", &RMSPropParam::wd, 0.0, update::kDocWd)
      .optional("rescale_grad", &RMSPropParam::rescale_grad, 1.0, update::kDocRescale)
      .optional("clip_gradient", &RMSPropParam::clip_gradient, -1.0, update::kDocClip)
      .optional("clip_weights", &RMSPropParam::clip_weights, -1.0, update::kDocClipWeights)
      .optional("lr_input", &RMSPropParam::lr_input, false, update::kDocLrInput);
  return s;
}

class RMSPropKernel final : public update::UpdateKernel<RMSPropParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float* w = in[0].data<float>();
    const float* g = in[1].data<float>();
    float* n = in[2].data<float>();
    const float lr = update::scalar_or(in, 3, p_.lr_input, p_.lr);
    const update::RMSPropStep step(p_);
    update::apply(out[0].data<float>(), req[0], r,
                  [=](int64_t i) { return step(lr, w[i], g[i], n[i]); });
  }
};

class RMSPropAlexKernel final : public update::UpdateKernel<RMSPropParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float* w = in[0].data<float>();
    const float* g = in[1].data<float>();
    float* n = in[2].data<float>();
    float* ga = in[3].data<float>();
    float* delta = in[4].data<float>();
    const float lr = update::scalar_or(in, 5, p_.lr_input, p_.lr);
    const update::RMSPropAlexStep step(p_);
    update::apply(out[0].data<float>(), req[0], r,
                  [=](int64_t i) { return step(lr, w[i], g[i], n[i], ga[i], delta[i]); });
  }
};

LOOM_REGISTER_OP("rmsprop_update")
    .describe("RMSProp update (Tieleman & Hinton): n = (1-gamma1)*g^2 + gamma1*n; "
              "w -= lr*g/sqrt(n + epsilon). n is updated in place.")
    .params(rmsprop_schema(false))
    .inputs([](const OpAttrs& a) {
      return update::names_with({"weight", "grad", "n"}, a.param<RMSPropParam>().lr_input);
    })
    .shape_fn(update::shapes_with_scalars(3))
    .aux({2})
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<RMSPropKernel>()
    .sample({.attrs = {{"lr", "0.01"}, {"wd", "0.1"}},
             .in_shapes = {{3, 4}, {3, 4}, {3, 4}},
             .in_kinds = {"normal", "normal", "positive"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.1"}, {"gamma1", "0.9"}, {"clip_gradient", "0.5"},
                       {"clip_weights", "0.8"}, {"rescale_grad", "2"}},
             .in_shapes = {{10}, {10}, {10}},
             .in_kinds = {"normal", "normal", "zeros"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "9"}, {"wd", "0.1"}, {"lr_input", "True"}},
             .in_shapes = {{5}, {5}, {5}, {1}},
             .in_kinds = {"normal", "normal", "positive", "positive"},
             .check_grad = false});

LOOM_REGISTER_OP("rmspropalex_update")
    .describe("Centered RMSProp (Graves 2013); n, g and delta are updated in place.")
    .params(rmsprop_schema(true))
    .inputs([](const OpAttrs& a) {
      return update::names_with({"weight", "grad", "n", "g", "delta"},
                                a.param<RMSPropParam>().lr_input);
    })
    .shape_fn(update::shapes_with_scalars(5))
    .aux({2, 3, 4})
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<RMSPropAlexKernel>()
    // n >= g_avg² keeps n - g_avg² non-negative ("ones" vs "unit").
    .sample({.attrs = {{"lr", "0.01"}, {"wd", "0.1"}},
             .in_shapes = {{3, 4}, {3, 4}, {3, 4}, {3, 4}, {3, 4}},
             .in_kinds = {"normal", "normal", "ones", "unit", "normal"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.05"}, {"gamma1", "0.9"}, {"gamma2", "0.5"},
                       {"clip_gradient", "0.5"}, {"clip_weights", "1"}},
             .in_shapes = {{7}, {7}, {7}, {7}, {7}},
             .in_kinds = {"normal", "normal", "zeros", "zeros", "zeros"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "9"}, {"wd", "0.1"}, {"lr_input", "True"}},
             .in_shapes = {{4}, {4}, {4}, {4}, {4}, {1}},
             .in_kinds = {"normal", "normal", "ones", "unit", "normal", "positive"},
             .check_grad = false});

}  // namespace
}  // namespace loom
