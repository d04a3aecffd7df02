// Adam updates (MXNet 1.9 src/operator/optimizer_op-inl.h, contrib/adamw-inl.h).
//
// adam_update(weight, grad, mean, var): g = clip(rescale_grad·grad + wd·w, clip_gradient)
//   (weight decay IS clipped here, unlike SGD); mean ← β1·mean + (1−β1)·g;
//   var ← β2·var + (1−β2)·g²; w ← w − lr·mean/(√var + ε). No bias correction: MXNet's Python
//   Adam folds √(1−β2ᵗ)/(1−β1ᵗ) into lr.
//
// AdamW, decoupled weight decay: g = clip(rescale_grad·grad, clip_gradient), the same moments,
//   w ← w − eta·(lr·mean/(√var + ε) + wd·w). If rescale_grad is NaN, ±Inf or 0 the update is
//   skipped (the dynamic loss-scaling overflow case): states untouched, new weight = weight.
// Two forms:
//   _adamw_update(weight, grad, mean, var, rescale_grad): MXNet's own op (there is no
//     `_contrib_adamw_update` op in MXNet 1.9.1; mx.nd.contrib.adamw_update is a Python
//     wrapper around it). rescale_grad is a one-element float32 input read on the host.
//     MXNet also overwrites `grad` with the rescaled, clipped gradient as a side effect; Loom
//     leaves grad untouched.
//   adamw_update(weight, grad, mean, var): Loom's form with rescale_grad as a float attribute
//     (default 1), like adam_update; same results as mx.nd.contrib.adamw_update given a float.
#include <cmath>

#include "ops/update/adam.h"
#include "ops/update/more_steps.h"
#include "ops/update/update_util.h"

namespace loom {
namespace {

using update::clip;
using update::clip_bound;
using update::f32;

using update::AdamParam;
const auto kAdamSchema =
    ParamSchema<AdamParam>()
        .required("lr", &AdamParam::lr, update::kDocLr)
        .optional("beta1", &AdamParam::beta1, 0.9, update::kDocBeta1)
        .optional("beta2", &AdamParam::beta2, 0.999, update::kDocBeta2)
        .optional("epsilon", &AdamParam::epsilon, 1e-8, update::kDocEpsilon)
        .optional("wd", &AdamParam::wd, 0.0, update::kDocWd)
        .optional("rescale_grad", &AdamParam::rescale_grad, 1.0, update::kDocRescale)
        .optional("clip_gradient", &AdamParam::clip_gradient, -1.0, update::kDocClip)
        .optional("lazy_update", &AdamParam::lazy_update, true, update::kDocLazy)
        .optional("lr_input", &AdamParam::lr_input, false, update::kDocLrInput);

using update::AdamWParam;  // more_steps.h, with the step (shared with optimizers.cu)
constexpr const char* kDocEtaInput =
    "Read eta (the schedule multiplier of both the Adam step and the weight decay) from an "
    "extra trailing one-element input `eta` instead of the attribute (training-step graphs). "
    "Off by default: MXNet's op.";
constexpr const char* kDocEta = "Learning rate schedule multiplier.";
ParamSchema<AdamWParam> adamw_schema(bool rescale_attr) {
  ParamSchema<AdamWParam> s;
  s.required("lr", &AdamWParam::lr, update::kDocLr)
      .optional("beta1", &AdamWParam::beta1, 0.9, update::kDocBeta1)
      .optional("beta2", &AdamWParam::beta2, 0.999, update::kDocBeta2)
      .optional("epsilon", &AdamWParam::epsilon, 1e-8, update::kDocEpsilon)
      .optional("wd", &AdamWParam::wd, 0.0, update::kDocWd)
      .required("eta", &AdamWParam::eta, kDocEta);
  if (rescale_attr)
    s.optional("rescale_grad", &AdamWParam::rescale_grad, 1.0,
               "Rescale gradient to grad = rescale_grad*grad. If NaN, Inf or 0, the update is "
               "skipped.");
  s.optional("clip_gradient", &AdamWParam::clip_gradient, -1.0, update::kDocClip)
      .optional("lr_input", &AdamWParam::lr_input, false, kDocEtaInput);
  return s;
}

// The per-element update is update::AdamStep (adam.h), which the CUDA kernel runs too.
class AdamKernel final : public update::UpdateKernel<AdamParam> {
 public:
  explicit AdamKernel(const KernelArgs& a) : UpdateKernel(a), step_(p_) {}
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float* w = in[0].data<float>();
    const float* g = in[1].data<float>();
    float* mean = in[2].data<float>();
    float* var = in[3].data<float>();
    const float lr = update::scalar_or(in, 4, p_.lr_input, p_.lr);
    const update::AdamStep step = step_;
    update::apply(out[0].data<float>(), req[0], r,
                  [=](int64_t i) { return step(lr, w[i], g[i], mean[i], var[i]); });
  }

 private:
  update::AdamStep step_;
};

/// kTensorScale: rescale_grad is input 4 (_adamw_update), else the attribute (adamw_update).
template <bool kTensorScale>
class AdamWKernel final : public update::UpdateKernel<AdamWParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float rs = kTensorScale ? in[4].data<float>()[0] : f32(p_.rescale_grad);
    if (update::adamw_skips(rs)) {
      update::keep_weight(in[0], out[0], req[0], r);
      return;
    }
    const float* w = in[0].data<float>();
    const float* g = in[1].data<float>();
    float* mean = in[2].data<float>();
    float* var = in[3].data<float>();
    const float eta = update::scalar_or(in, kTensorScale ? 5 : 4, p_.lr_input, p_.eta);
    const update::AdamWStep step(p_);
    update::apply(out[0].data<float>(), req[0], r,
                  [=](int64_t i) { return step(eta, rs, w[i], g[i], mean[i], var[i]); });
  }
};

LOOM_REGISTER_OP("adam_update")
    .describe("Adam update without bias correction; mean and var are updated in place. "
              "Weight decay is added to the gradient before clipping.")
    .params(kAdamSchema)
    .inputs([](const OpAttrs& a) {
      return update::names_with({"weight", "grad", "mean", "var"}, a.param<AdamParam>().lr_input);
    })
    .shape_fn(update::shapes_with_scalars(4))
    .aux({2, 3})
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<AdamKernel>()
    .sample({.attrs = {{"lr", "0.01"}, {"wd", "0.1"}},
             .in_shapes = {{3, 4}, {3, 4}, {3, 4}, {3, 4}},
             .in_kinds = {"normal", "normal", "normal", "positive"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.05"}, {"beta1", "0.8"}, {"beta2", "0.99"}, {"epsilon", "1e-6"},
                       {"rescale_grad", "0.5"}, {"clip_gradient", "0.2"}, {"wd", "0.3"}},
             .in_shapes = {{9}, {9}, {9}, {9}},
             .in_kinds = {"normal", "normal", "zeros", "zeros"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "9"}, {"wd", "0.1"}, {"lr_input", "True"}},
             .in_shapes = {{5}, {5}, {5}, {5}, {1}},
             .in_kinds = {"normal", "normal", "normal", "positive", "positive"},
             .check_grad = false});

LOOM_REGISTER_OP("adamw_update")
    .describe("AdamW update (decoupled weight decay) with rescale_grad as an attribute; mean "
              "and var are updated in place. Skipped if rescale_grad is NaN, Inf or 0.")
    .params(adamw_schema(true))
    .inputs([](const OpAttrs& a) {
      return update::names_with({"weight", "grad", "mean", "var"},
                                a.param<AdamWParam>().lr_input, "eta");
    })
    .shape_fn(update::shapes_with_scalars(4))
    .aux({2, 3})
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<AdamWKernel<false>>()
    .sample({.attrs = {{"lr", "0.01"}, {"eta", "0.5"}, {"wd", "0.1"}},
             .in_shapes = {{3, 4}, {3, 4}, {3, 4}, {3, 4}},
             .in_kinds = {"normal", "normal", "normal", "positive"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.02"}, {"eta", "1"}, {"rescale_grad", "2"},
                       {"clip_gradient", "0.5"}},
             .in_shapes = {{8}, {8}, {8}, {8}},
             .in_kinds = {"normal", "normal", "zeros", "zeros"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.5"}, {"eta", "9"}, {"wd", "0.1"}, {"lr_input", "True"}},
             .in_shapes = {{5}, {5}, {5}, {5}, {1}},
             .in_kinds = {"normal", "normal", "normal", "positive", "positive"},
             .check_grad = false});

LOOM_REGISTER_OP("_adamw_update")
    .describe("MXNet's AdamW update: rescale_grad is a one-element input; the update is "
              "skipped (weight kept, states untouched) if it is NaN, Inf or 0.")
    .params(adamw_schema(false))
    .inputs([](const OpAttrs& a) {
      return update::names_with({"weight", "grad", "mean", "var", "rescale_grad"},
                                a.param<AdamWParam>().lr_input, "eta");
    })
    .aux({2, 3})
    .shape_fn(update::shapes_with_scalars(4))
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<AdamWKernel<true>>()
    .sample({.attrs = {{"lr", "0.01"}, {"eta", "0.5"}, {"wd", "0.1"}, {"clip_gradient", "1"}},
             .in_shapes = {{3, 4}, {3, 4}, {3, 4}, {3, 4}, {1}},
             .in_kinds = {"normal", "normal", "normal", "positive", "positive"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.5"}, {"eta", "9"}, {"wd", "0.1"}, {"lr_input", "True"}},
             .in_shapes = {{3}, {3}, {3}, {3}, {1}, {1}},
             .in_kinds = {"normal", "normal", "normal", "positive", "positive", "positive"},
             .check_grad = false});

}  // namespace
}  // namespace loom
