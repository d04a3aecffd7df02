// adam_update's parameters and per-element update, shared by the CPU kernel (adam.cc) and
// the CUDA kernel (updates.cu). No OpenMP here: .cu files include it.
#pragma once

#include "ops/update/update_math.h"

namespace loom::update {

struct AdamParam {
  double lr, beta1, beta2, epsilon, wd, rescale_grad, clip_gradient;
  bool lazy_update, lr_input;
};

/// g = clip(rescale_grad·grad + wd·w) (weight decay clipped too, as MXNet);
/// mean ← β1·mean + (1−β1)·g; var ← β2·var + (1−β2)·g²; w ← w − lr·mean/(√var + ε).
struct AdamStep {
  float b1, b2, eps, wd, rs, c;
  explicit AdamStep(const AdamParam& p)
      : b1(static_cast<float>(p.beta1)),
        b2(static_cast<float>(p.beta2)),
        eps(static_cast<float>(p.epsilon)),
        wd(static_cast<float>(p.wd)),
        rs(static_cast<float>(p.rescale_grad)),
        c(clip_bound(p.clip_gradient)) {}
  LOOM_HD float operator()(float lr, float w, float g, float& mean, float& var) const {
    const float gr = clip(g * rs + w * wd, c);
    const float m = b1 * mean + (1.f - b1) * gr;
    const float v = b2 * var + (1.f - b2) * gr * gr;
    mean = m;
    var = v;
    return w - lr * m / (math::fn::sqrt(v) + eps);
  }
};

}  // namespace loom::update
