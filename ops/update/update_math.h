// Element math shared by the update ops' CPU kernels and their CUDA kernels (no OpenMP, no
// kernel classes: .cu files include it).
#pragma once

#include <limits>

#include "ops/elemwise_math.h"

namespace loom::update {

/// min(max(v, -b), b), passing NaN through as mshadow's clip does.
LOOM_HD float clip(float v, float b) { return v > b ? b : (v < -b ? -b : v); }

/// The bound clip() uses for an MXNet `clip_gradient` (or `clip_weights`) value. MXNet clips
/// when the value is >= 0 (so 0 clips to zero, although its docs say "<= 0 turns clipping
/// off") and not when it is negative; +inf makes the disabled case branch-free and exact.
inline float clip_bound(double c) {
  return c >= 0 ? static_cast<float>(c) : std::numeric_limits<float>::infinity();
}

}  // namespace loom::update
