// SGD updates: sgd_update, sgd_mom_update and nag_mom_update (MXNet 1.9
// src/operator/optimizer_op-inl.h). With g = clip(rescale_grad·grad, clip_gradient):
//   sgd_update:     w ← (1 − lr·wd)·w − lr·g
//   sgd_mom_update: mom ← momentum·mom − lr·wd·w − lr·g;  w ← w + mom
//   nag_mom_update: g' = g + wd·w;  mom ← momentum·mom − lr·g';  w ← w + momentum·mom − lr·g'
// Weight decay is added after clipping here (it is clipped with the gradient in Adam). The
// per-element updates are the functors of sgd.h, shared with the CUDA kernels (updates.cu).
#include "ops/update/sgd.h"
#include "ops/update/update_util.h"

namespace loom {
namespace {

using update::SGDMomParam;
using update::SGDParam;

const auto kSGDSchema =
    ParamSchema<SGDParam>()
        .required("lr", &SGDParam::lr, update::kDocLr)
        .optional("wd", &SGDParam::wd, 0.0, update::kDocWd)
        .optional("rescale_grad", &SGDParam::rescale_grad, 1.0, update::kDocRescale)
        .optional("clip_gradient", &SGDParam::clip_gradient, -1.0, update::kDocClip)
        .optional("lazy_update", &SGDParam::lazy_update, true, update::kDocLazy)
        .optional("lr_input", &SGDParam::lr_input, false, update::kDocLrInput);

/// sgd_mom_update's parameters; nag_mom_update has the same except lazy_update.
ParamSchema<SGDMomParam> mom_schema(bool lazy_update) {
  ParamSchema<SGDMomParam> s;
  s.required("lr", &SGDMomParam::lr, update::kDocLr)
      .optional("momentum", &SGDMomParam::momentum, 0.0, update::kDocMomentum)
      .optional("wd", &SGDMomParam::wd, 0.0, update::kDocWd)
      .optional("rescale_grad", &SGDMomParam::rescale_grad, 1.0, update::kDocRescale)
      .optional("clip_gradient", &SGDMomParam::clip_gradient, -1.0, update::kDocClip);
  if (lazy_update) s.optional("lazy_update", &SGDMomParam::lazy_update, true, update::kDocLazy);
  s.optional("lr_input", &SGDMomParam::lr_input, false, update::kDocLrInput);
  return s;
}
const auto kSGDMomSchema = mom_schema(true);
const auto kNAGMomSchema = mom_schema(false);

// One kernel for the three: Step is the per-element update of sgd.h (the CUDA kernels of
// updates.cu run the same one); `kMom` = the op has a momentum state (input 2).
template <class Step, class P, bool kMom>
class SGDFamilyKernel final : public update::UpdateKernel<P> {
 public:
  explicit SGDFamilyKernel(const KernelArgs& a) : update::UpdateKernel<P>(a), step_(this->p_) {}
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float* w = in[0].data<float>();
    const float* g = in[1].data<float>();
    float* mom = kMom ? in[2].data<float>() : nullptr;
    const float lr = update::scalar_or(in, kMom ? 3 : 2, this->p_.lr_input, this->p_.lr);
    const Step step = step_;
    update::apply(out[0].data<float>(), req[0], r, [=](int64_t i) {
      float unused = 0.f;
      return step(lr, w[i], g[i], kMom ? mom[i] : unused);
    });
  }

 private:
  Step step_;
};
using SGDKernel = SGDFamilyKernel<update::SGDStep, SGDParam, false>;
using SGDMomKernel = SGDFamilyKernel<update::SGDMomStep, SGDMomParam, true>;
using NAGMomKernel = SGDFamilyKernel<update::NAGMomStep, SGDMomParam, true>;

LOOM_REGISTER_OP("sgd_update")
    .describe("SGD update: w = (1 - lr*wd)*w - lr*clip(rescale_grad*grad, clip_gradient).")
    .params(kSGDSchema)
    .inputs([](const OpAttrs& a) {
      return update::names_with({"weight", "grad"}, a.param<SGDParam>().lr_input);
    })
    .shape_fn(update::shapes_with_scalars(2))
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<SGDKernel>()
    .sample({.attrs = {{"lr", "0.1"}, {"wd", "0.01"}}, .in_shapes = {{3, 4}, {3, 4}},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.05"}, {"rescale_grad", "2"}, {"clip_gradient", "0.5"}},
             .in_shapes = {{7}, {7}},
             .check_grad = false})
    .sample({.attrs = {{"lr", "9"}, {"wd", "0.1"}, {"lr_input", "True"}},
             .in_shapes = {{5}, {5}, {1}},
             .in_kinds = {"normal", "normal", "positive"},
             .check_grad = false});

LOOM_REGISTER_OP("sgd_mom_update")
    .describe("SGD with momentum: mom = momentum*mom - lr*wd*w - lr*clip(rescale_grad*grad); "
              "w += mom. mom is updated in place.")
    .params(kSGDMomSchema)
    .inputs([](const OpAttrs& a) {
      return update::names_with({"weight", "grad", "mom"}, a.param<SGDMomParam>().lr_input);
    })
    .shape_fn(update::shapes_with_scalars(3))
    .aux({2})
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<SGDMomKernel>()
    .sample({.attrs = {{"lr", "0.1"}, {"momentum", "0.9"}, {"wd", "0.01"}},
             .in_shapes = {{3, 4}, {3, 4}, {3, 4}},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.1"}, {"momentum", "0.5"}, {"clip_gradient", "0.3"},
                       {"rescale_grad", "0.5"}},
             .in_shapes = {{5}, {5}, {5}},
             .in_kinds = {"normal", "normal", "zeros"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "9"}, {"momentum", "0.9"}, {"wd", "0.1"}, {"lr_input", "True"}},
             .in_shapes = {{5}, {5}, {5}, {1}},
             .in_kinds = {"normal", "normal", "normal", "positive"},
             .check_grad = false});

LOOM_REGISTER_OP("nag_mom_update")
    .describe("Nesterov momentum: g = clip(rescale_grad*grad) + wd*w; mom = momentum*mom - "
              "lr*g; w += momentum*mom - lr*g. mom is updated in place.")
    .params(kNAGMomSchema)
    .inputs([](const OpAttrs& a) {
      return update::names_with({"weight", "grad", "mom"}, a.param<SGDMomParam>().lr_input);
    })
    .shape_fn(update::shapes_with_scalars(3))
    .aux({2})
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<NAGMomKernel>()
    .sample({.attrs = {{"lr", "0.1"}, {"momentum", "0.9"}, {"wd", "0.01"}},
             .in_shapes = {{3, 4}, {3, 4}, {3, 4}},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.2"}, {"momentum", "0.8"}, {"clip_gradient", "0.4"}},
             .in_shapes = {{6}, {6}, {6}},
             .check_grad = false})
    .sample({.attrs = {{"lr", "9"}, {"momentum", "0.8"}, {"wd", "0.1"}, {"lr_input", "True"}},
             .in_shapes = {{6}, {6}, {6}, {1}},
             .in_kinds = {"normal", "normal", "normal", "positive"},
             .check_grad = false});

}  // namespace
}  // namespace loom
