// _loom_lr's schedule as plain numbers, evaluated by the CPU kernel (lr_schedule.cc) and, on
// the device, by the CUDA kernel (step_ops.cu): the CPU tests check the code the GPU runs.
// Everything in double, rounded to float32 once, as the header of lr_schedule.cc describes.
#pragma once

#include <cstdint>

#include "ops/elemwise_math.h"
#include "ops/op.h"

namespace loom::update {

struct LrSchedule {
  enum Kind { kConstant, kFactor, kMultiFactor, kCosine, kPoly };
  /// multifactor's `steps` beyond this many entries are refused (lr_schedule.cc).
  static constexpr int kMaxSteps = 64;
  int kind = kConstant;
  double lr = 0;
  int64_t step = 1;
  int n_steps = 0;
  int64_t steps[kMaxSteps] = {};
  double factor = 1, stop_factor_lr = 0;
  int64_t max_update = 0;
  double final_lr = 0, pwr = 1;
  int64_t warmup_steps = 0;
  double warmup_begin_lr = 0, warmup_final_lr = -1;
  bool warmup_constant = false;
  double scale = 1;
  bool adam_bias = false;
  double beta1 = 0.9, beta2 = 0.999;

  /// The scheduler's learning rate at step t (before scale and bias correction).
  LOOM_HD double schedule(double t) const {
    if (t < static_cast<double>(warmup_steps)) {
      if (warmup_constant) return warmup_begin_lr;
      const double fin = warmup_final_lr < 0 ? lr : warmup_final_lr;
      return warmup_begin_lr + (fin - warmup_begin_lr) * t / static_cast<double>(warmup_steps);
    }
    if (kind == kFactor) {
      double v = lr;
      const int64_t n =
          t > static_cast<double>(step)
              ? static_cast<int64_t>(math::fn::floor((t - 1) / static_cast<double>(step)))
              : 0;
      for (int64_t i = 0; i < n; ++i) {
        v *= factor;
        if (v < stop_factor_lr) {
          v = stop_factor_lr;
          if (factor <= 1) break;  // stays clamped
        }
      }
      return v;
    }
    if (kind == kMultiFactor) {
      double v = lr;
      for (int i = 0; i < n_steps; ++i)
        if (t > static_cast<double>(steps[i])) v *= factor;
      return v;
    }
    if (kind == kCosine || kind == kPoly) {
      const double mu = static_cast<double>(max_update);
      const double u = t < mu ? t : mu;
      const double frac =
          (u - static_cast<double>(warmup_steps)) / static_cast<double>(max_update - warmup_steps);
      if (kind == kCosine) return final_lr + (lr - final_lr) * (1 + math::fn::cos(M_PI * frac)) / 2;
      return final_lr + (lr - final_lr) * math::fn::pow(1 - frac, pwr);
    }
    return lr;
  }

  /// _loom_lr's output for the step counter value `t_in` (rounded to the nearest integer).
  LOOM_HD float at(float t_in) const {
    const double t = math::fn::round(static_cast<double>(t_in));
    double v = schedule(t) * scale;
    if (adam_bias)
      v *= math::fn::sqrt(1. - math::fn::pow(beta2, t)) / (1. - math::fn::pow(beta1, t));
    return static_cast<float>(v);
  }
};

/// The schedule of a _loom_lr node (lr_schedule.cc; throws ParamError for more than
/// kMaxSteps multifactor steps).
LrSchedule lr_schedule(const OpAttrs& a);

}  // namespace loom::update
