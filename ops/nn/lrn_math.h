// LRN's window arithmetic, shared by the CPU kernel (lrn.cc) and the GPU kernel
// (pool_lrn.cu): n = knorm + (alpha/nsize)·Σ x² over the nsize channels centred on c
// (clipped to the tensor), y = x·n^(−β), and the gradient
// dx_c = g_c·n_c^(−β) − (2αβ/nsize)·x_c·Σ_{k in window(c)} g_k·x_k·n_k^(−β−1).
// Tensors are (N, C, inner); `base` is the flat index of channel 0 at one (n, inner) spot.
#pragma once

#include <cstdint>

#include "ops/elemwise_math.h"

namespace loom::nn {

/// LRN's parameters (the schema is in lrn.cc).
struct LRNParam {
  float alpha, beta, knorm;
  int nsize;
};

struct LRNMath {
  int64_t channels, inner, half;     // half = nsize / 2
  float knorm, alpha_n, beta, coef;  // alpha_n = alpha / nsize, coef = 2·alpha·beta / nsize

  static LRNMath make(int64_t channels, int64_t inner, int nsize, float alpha, float beta,
                      float knorm) {
    return {channels, inner, nsize / 2, knorm, alpha / nsize, beta, 2.f * alpha * beta / nsize};
  }
  LOOM_HD int64_t lo(int64_t c) const { return c - half > 0 ? c - half : 0; }
  LOOM_HD int64_t hi(int64_t c) const { return c + half < channels - 1 ? c + half : channels - 1; }
  /// n at channel c.
  LOOM_HD float norm(const float* x, int64_t base, int64_t c) const {
    float sq = 0;
    for (int64_t k = lo(c); k <= hi(c); ++k) {
      const float v = x[base + k * inner];
      sq += v * v;
    }
    return knorm + alpha_n * sq;
  }
  LOOM_HD float output(float x, float n) const { return x * math::fn::pow(n, -beta); }
  /// dx at channel c from the output gradient g, the data and the saved norms.
  LOOM_HD float grad(const float* g, const float* x, const float* n, int64_t base,
                     int64_t c) const {
    float acc = 0;
    for (int64_t k = lo(c); k <= hi(c); ++k) {
      const int64_t t = base + k * inner;
      acc += g[t] * x[t] * math::fn::pow(n[t], -beta - 1.f);
    }
    const int64_t i = base + c * inner;
    return g[i] * math::fn::pow(n[i], -beta) - coef * x[i] * acc;
  }
};

}  // namespace loom::nn
