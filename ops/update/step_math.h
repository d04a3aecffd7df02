// The arithmetic of the training-step state ops (_loom_counter, _loom_step_predicate,
// _loom_accumulate) and their parameters, shared by the CPU kernels (step_state.cc) and the
// CUDA kernels (updates.cu). No OpenMP here: .cu files include it.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/update/update_math.h"

namespace loom::update {

struct CounterParam {
  int64_t step;
};
struct PredicateParam {
  int64_t k, r, offset;
};
struct AccumulateParam {
  double scale;
};

/// _loom_counter: t += step; the new t.
LOOM_HD float counter_step(float& t, float step) { return t += step; }

/// _loom_step_predicate: 1 if (round(t) + offset) mod k == r (non-negative mod) else 0.
LOOM_HD float step_predicate(float t, int64_t k, int64_t r, int64_t offset) {
  const int64_t v = static_cast<int64_t>(llround(static_cast<double>(t))) + offset;
  const int64_t m = ((v % k) + k) % k;
  return m == r ? 1.f : 0.f;
}

/// _loom_accumulate: acc = (first ? 0 : acc) + scale * g, never reading acc on the first
/// micro-step; the new acc.
LOOM_HD float accumulate_step(float& acc, float g, float scale, bool first) {
  return acc = first ? scale * g : acc + scale * g;
}

}  // namespace loom::update
