// The model EMA's parameters, decay schedules and per-element step, shared by the CPU
// kernels (ema.cc) and the CUDA kernels (updates.cu). No OpenMP here: .cu files include it.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "ops/update/update_math.h"

namespace loom::update {

struct EmaParam {
  double decay;
  std::string schedule, init;
  double tau, gamma, power, min_decay;
  int64_t update_after_step, start_step;
};

/// The decay schedule of ema.cc's header as plain numbers (usable on the device).
struct EmaSchedule {
  enum Kind { kConstant, kTf, kYolov5, kTimm };
  int kind = kConstant;
  bool copy_init = true;
  double decay_ = 0, tau = 1, gamma = 1, power = 1, min_decay = 0;
  double update_after_step = 0, start_step = 0;

  /// The decay for real step t, in double.
  LOOM_HD double decay(double t) const {
    if (t <= update_after_step) return 0;
    if (copy_init && t <= 1) return 0;
    if (t < start_step) return 0;
    const double c = t - start_step;
    if (kind == kTf) {
      const double r = (1 + c) / (10 + c);
      return r < decay_ ? r : decay_;
    }
    if (kind == kYolov5) return decay_ * (1 - ::exp(-c / tau));
    if (kind == kTimm) {
      const double s = c - 1;
      if (s <= 0) return 0;
      const double d = 1 - ::pow(1 + s / gamma, -power);
      const double lo = d < decay_ ? d : decay_;
      return lo > min_decay ? lo : min_decay;
    }
    return decay_;
  }
};

/// The schedule of any P with EmaParam's members (the whole and the sharded EMA).
template <class P>
EmaSchedule ema_schedule(const P& p) {
  EmaSchedule e;
  e.kind = p.schedule == "tf"       ? EmaSchedule::kTf
           : p.schedule == "yolov5" ? EmaSchedule::kYolov5
           : p.schedule == "timm"   ? EmaSchedule::kTimm
                                    : EmaSchedule::kConstant;
  e.copy_init = p.init == "copy";
  e.decay_ = p.decay;
  e.tau = p.tau;
  e.gamma = p.gamma;
  e.power = p.power;
  e.min_decay = p.min_decay;
  e.update_after_step = static_cast<double>(p.update_after_step);
  e.start_step = static_cast<double>(p.start_step);
  return e;
}

/// One element of the EMA (whole and sharded): the same expression, so sharded and whole
/// shadows round alike.
LOOM_HD float ema_step(float d, float om, float e, float w) { return d * e + om * w; }

/// The debias norm's update: 1 on a copy step (d = 0), else d·norm + (1 − d).
LOOM_HD float ema_norm_step(float d, float norm) { return d == 0.f ? 1.f : d * norm + (1.f - d); }

/// _loom_ema_debias of one element: ema / norm (a division: ema = w·q gives back w exactly),
/// or ema when norm == 0 (no update yet).
LOOM_HD float ema_debias(float ema, float norm) { return norm == 0.f ? ema : ema / norm; }

}  // namespace loom::update
