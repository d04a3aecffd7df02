// Float indices as MXNet's indexing ops read them (pick, take, Embedding, softmax_cross_entropy): truncated toward
// zero, then clipped into [0, n) or wrapped modulo n. Compared in float first, so NaN and
// huge values never reach an integer cast (undefined behaviour).
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/elemwise_math.h"

namespace loom::tensor {

/// int(v) clipped into [0, n). Host and device code (the GPU gathers and loss heads).
LOOM_HD int64_t clip_index(float v, int64_t n) {
  if (!(v > 0.f)) return 0;
  return v >= static_cast<float>(n - 1) ? n - 1 : static_cast<int64_t>(v);
}

/// int(v) modulo n, in [0, n) (non-finite values give 0).
LOOM_HD int64_t wrap_index(float v, int64_t n) {
  if (!(v - v == 0.f)) return 0;  // not finite (inf - inf and NaN - NaN are NaN)
  const int64_t k = static_cast<int64_t>(::fmodf(::truncf(v), static_cast<float>(n)));
  return k < 0 ? k + n : k;
}

}  // namespace loom::tensor
