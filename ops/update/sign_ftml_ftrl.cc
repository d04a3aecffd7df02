// signsgd_update, signum_update, ftml_update, ftrl_update (MXNet 1.9.1
// src/operator/optimizer_op-inl.h), float32:
//   signsgd: w ← (1 − lr·wd)·w − lr·sign(grad)          (rescale_grad/clip_gradient unused)
//   signum:  mom ← μ·mom − (1−μ)·wd·w − (1−μ)·clip(rescale_grad·grad);
//            w ← (1 − lr·wd_lh)·w + lr·sign(mom)
//   ftml:    g = clip(rescale_grad·grad + wd·w, clip_grad); v ← β2·v + (1−β2)·g²;
//            d_t = (1 − β1^t)/lr · (sqrt(v / (1 − β2^t)) + ε);
//            z ← β1·z + (1−β1)·g − (d_t − β1·d)·w; d ← d_t; w ← −z / d_t
//   ftrl:    g = clip(rescale_grad·grad); z += g − (sqrt(n + g²) − sqrt(n))·w/lr; n += g²;
//            w ← (sign(z)·λ1 − z) / ((β + sqrt(n))/lr + wd) · (|z| > λ1)
#include <cmath>

#include "ops/update/more_steps.h"
#include "ops/update/update_util.h"

namespace loom {
namespace {

using update::clip;
using update::clip_bound;
using update::f32;

using update::sgn;  // more_steps.h

using update::SignSGDParam;
const auto kSignSGDSchema =
    ParamSchema<SignSGDParam>()
        .required("lr", &SignSGDParam::lr, update::kDocLr)
        .optional("wd", &SignSGDParam::wd, 0.0, update::kDocWd)
        .optional("rescale_grad", &SignSGDParam::rescale_grad, 1.0, update::kDocRescale)
        .optional("clip_gradient", &SignSGDParam::clip_gradient, -1.0, update::kDocClip);

class SignSGDKernel final : public update::UpdateKernel<SignSGDParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float* w = in[0].data<float>();
    const float* g = in[1].data<float>();
    const update::SignSGDStep step(p_);
    update::apply(out[0].data<float>(), req[0], r, [=](int64_t i) { return step(w[i], g[i]); });
  }
};

using update::SignumParam;
const auto kSignumSchema =
    ParamSchema<SignumParam>()
        .required("lr", &SignumParam::lr, update::kDocLr)
        .optional("momentum", &SignumParam::momentum, 0.0, update::kDocMomentum)
        .optional("wd", &SignumParam::wd, 0.0, update::kDocWd)
        .optional("rescale_grad", &SignumParam::rescale_grad, 1.0, update::kDocRescale)
        .optional("clip_gradient", &SignumParam::clip_gradient, -1.0, update::kDocClip)
        .optional("wd_lh", &SignumParam::wd_lh, 0.0,
                  "The amount of weight decay that does not go into gradient/momentum "
                  "calculations otherwise do weight decay algorithmically only.");

class SignumKernel final : public update::UpdateKernel<SignumParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float* w = in[0].data<float>();
    const float* g = in[1].data<float>();
    float* mom = in[2].data<float>();
    const update::SignumStep step(p_);
    update::apply(out[0].data<float>(), req[0], r,
                  [=](int64_t i) { return step(w[i], g[i], mom[i]); });
  }
};

using update::FTMLParam;
const auto kFTMLSchema =
    ParamSchema<FTMLParam>()
        .required("lr", &FTMLParam::lr, update::kDocLr)
        .optional("beta1", &FTMLParam::beta1, 0.6, "Generally close to 0.5.")
        .optional("beta2", &FTMLParam::beta2, 0.999, "Generally close to 1.")
        .optional("epsilon", &FTMLParam::epsilon, 1e-8, "Epsilon to prevent div 0.")
        .required("t", &FTMLParam::t, "Number of update.")
        .optional("wd", &FTMLParam::wd, 0.0, update::kDocWd)
        .optional("rescale_grad", &FTMLParam::rescale_grad, 1.0, update::kDocRescale)
        .optional("clip_grad", &FTMLParam::clip_grad, -1.0, update::kDocClip);

class FTMLKernel final : public update::UpdateKernel<FTMLParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float* w = in[0].data<float>();
    const float* g = in[1].data<float>();
    float *d = in[2].data<float>(), *v = in[3].data<float>(), *z = in[4].data<float>();
    const update::FTMLStep step(p_);
    update::apply(out[0].data<float>(), req[0], r,
                  [=](int64_t i) { return step(w[i], g[i], d[i], v[i], z[i]); });
  }
};

using update::FtrlParam;
const auto kFtrlSchema =
    ParamSchema<FtrlParam>()
        .required("lr", &FtrlParam::lr, update::kDocLr)
        .optional("lamda1", &FtrlParam::lamda1, 0.01, "The L1 regularization coefficient.")
        .optional("beta", &FtrlParam::beta, 1.0, "Per-Coordinate Learning Rate beta.")
        .optional("wd", &FtrlParam::wd, 0.0, update::kDocWd)
        .optional("rescale_grad", &FtrlParam::rescale_grad, 1.0, update::kDocRescale)
        .optional("clip_gradient", &FtrlParam::clip_gradient, -1.0, update::kDocClip);

class FtrlKernel final : public update::UpdateKernel<FtrlParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float* w = in[0].data<float>();
    const float* g = in[1].data<float>();
    float *z = in[2].data<float>(), *n = in[3].data<float>();
    const update::FtrlStep step(p_);
    update::apply(out[0].data<float>(), req[0], r,
                  [=](int64_t i) { return step(w[i], g[i], z[i], n[i]); });
  }
};

[[maybe_unused]] const bool kSignFtmlFtrlRegistered = [] {
  register_op("signsgd_update")
      .describe("SignSGD update: w = (1 - lr*wd)*w - lr*sign(grad).")
      .params(kSignSGDSchema)
      .inputs({"weight", "grad"})
      .shape_fn(update::shapes_with_scalars(2))
      .inplace_pairs({{0, 0}})
      .zero_grad()
      .cpu<SignSGDKernel>()
      .sample({.attrs = {{"lr", "0.1"}, {"wd", "0.01"}}, .in_shapes = {{3, 4}, {3, 4}},
               .check_grad = false});
  register_op("signum_update")
      .describe("Signum update: mom = momentum*mom - (1-momentum)*(wd*w + clip(rescale_grad*"
                "grad)); w = (1 - lr*wd_lh)*w + lr*sign(mom). mom is updated in place.")
      .params(kSignumSchema)
      .inputs({"weight", "grad", "mom"})
      .shape_fn(update::shapes_with_scalars(3))
      .aux({2})
      .inplace_pairs({{0, 0}})
      .zero_grad()
      .cpu<SignumKernel>()
      .sample({.attrs = {{"lr", "0.1"}, {"momentum", "0.9"}, {"wd", "0.01"}, {"wd_lh", "0.1"}},
               .in_shapes = {{3, 4}, {3, 4}, {3, 4}},
               .check_grad = false})
      .sample({.attrs = {{"lr", "0.05"}, {"momentum", "0.5"}, {"clip_gradient", "0.3"},
                         {"rescale_grad", "0.5"}},
               .in_shapes = {{5}, {5}, {5}},
               .check_grad = false});
  register_op("ftml_update")
      .describe("FTML (Follow the Moving Leader) update; d, v and z are updated in place.")
      .params(kFTMLSchema)
      .inputs({"weight", "grad", "d", "v", "z"})
      .shape_fn(update::shapes_with_scalars(5))
      .aux({2, 3, 4})
      .inplace_pairs({{0, 0}})
      .zero_grad()
      .cpu<FTMLKernel>()
      .sample({.attrs = {{"lr", "0.1"}, {"t", "2"}, {"wd", "0.01"}},
               .in_shapes = {{3, 4}, {3, 4}, {3, 4}, {3, 4}, {3, 4}},
               .in_kinds = {"normal", "normal", "positive", "positive", "normal"},
               .check_grad = false})
      .sample({.attrs = {{"lr", "0.05"}, {"t", "1"}, {"clip_grad", "0.3"}, {"beta1", "0.5"}},
               .in_shapes = {{5}, {5}, {5}, {5}, {5}},
               .in_kinds = {"normal", "normal", "zeros", "zeros", "zeros"},
               .check_grad = false});
  register_op("ftrl_update")
      .describe("FTRL (Follow the Regularized Leader) update; z and n are updated in place.")
      .params(kFtrlSchema)
      .inputs({"weight", "grad", "z", "n"})
      .shape_fn(update::shapes_with_scalars(4))
      .aux({2, 3})
      .inplace_pairs({{0, 0}})
      .zero_grad()
      .cpu<FtrlKernel>()
      .sample({.attrs = {{"lr", "0.1"}, {"wd", "0.01"}, {"lamda1", "0.2"}},
               .in_shapes = {{3, 4}, {3, 4}, {3, 4}, {3, 4}},
               .in_kinds = {"normal", "normal", "normal", "positive"},
               .check_grad = false})
      .sample({.attrs = {{"lr", "0.05"}, {"clip_gradient", "0.3"}, {"beta", "0.5"}},
               .in_shapes = {{5}, {5}, {5}, {5}},
               .in_kinds = {"normal", "normal", "zeros", "zeros"},
               .check_grad = false});
  return true;
}();

}  // namespace
}  // namespace loom
