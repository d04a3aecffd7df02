// The softmax arithmetic shared by softmax, log_softmax and SoftmaxActivation: the input is
// viewed as (outer, n, inner) and normalised along the middle axis.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/nn/nn_dtype.h"
#include "ops/nn/nn_util.h"

namespace loom::nn {

/// The (outer, n, inner) view of `s` around `axis`.
struct SoftmaxView {
  int64_t outer = 1, n = 1, inner = 1;
  SoftmaxView(const Shape& s, int axis) {
    for (int i = 0; i < s.ndim(); ++i) {
      if (i < axis)
        outer *= s[i];
      else if (i == axis)
        n = s[i];
      else
        inner *= s[i];
    }
  }
};

/// y = softmax(x / t) (or its log when `log`) along the middle axis of `v`; T is float,
/// double or half_t (computed in float, sums in double). With `len` (one entry per
/// (outer, inner) position, softmax's use_length), only the first len entries of each row
/// take part and the rest of the row is 0.
template <class T>
void softmax_forward(const T* x, T* y, const SoftmaxView& v, float t, bool log, bool add,
                     const int64_t* len = nullptr) {
  using C = compute_t<T>;
  const C inv_t = C(1) / static_cast<C>(t);
#pragma omp parallel for collapse(2) if (v.outer * v.inner > 256)
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t j = 0; j < v.inner; ++j) {
      const T* xp = x + o * v.n * v.inner + j;
      T* yp = y + o * v.n * v.inner + j;
      const int64_t n = len ? std::clamp<int64_t>(len[o * v.inner + j], 0, v.n) : v.n;
      for (int64_t i = n; i < v.n; ++i) st(yp, i * v.inner, C(0), add);
      if (n == 0) continue;
      C mx = ld(xp, 0);
      for (int64_t i = 1; i < n; ++i) mx = std::max(mx, ld(xp, i * v.inner));
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += std::exp((ld(xp, i * v.inner) - mx) * inv_t);
      const C lse = static_cast<C>(std::log(sum));
      const C inv_sum = static_cast<C>(1.0 / sum);
      for (int64_t i = 0; i < n; ++i) {
        C z = (ld(xp, i * v.inner) - mx) * inv_t;
        st(yp, i * v.inner, log ? z - lse : std::exp(z) * inv_sum, add);
      }
    }
}

/// dx from the head gradient g and the forward output y:
/// softmax: y ⊙ (g − Σ g⊙y) / t; log_softmax: (g − e^y Σ g) / t. With `len`, entries past
/// a row's length get gradient 0.
template <class T>
void softmax_backward(const T* g, const T* y, T* dx, const SoftmaxView& v, float t, bool log,
                      bool add, const int64_t* len = nullptr) {
  using C = compute_t<T>;
  const C inv_t = C(1) / static_cast<C>(t);
#pragma omp parallel for collapse(2) if (v.outer * v.inner > 256)
  for (int64_t o = 0; o < v.outer; ++o)
    for (int64_t j = 0; j < v.inner; ++j) {
      int64_t base = o * v.n * v.inner + j;
      const int64_t n = len ? std::clamp<int64_t>(len[o * v.inner + j], 0, v.n) : v.n;
      for (int64_t i = n; i < v.n; ++i) st(dx, base + i * v.inner, C(0), add);
      double dot = 0;
      for (int64_t i = 0; i < n; ++i) {
        int64_t k = base + i * v.inner;
        dot += log ? ld(g, k) : ld(g, k) * ld(y, k);
      }
      const C d = static_cast<C>(dot);
      for (int64_t i = 0; i < n; ++i) {
        int64_t k = base + i * v.inner;
        C r = log ? ld(g, k) - std::exp(ld(y, k)) * d : ld(y, k) * (ld(g, k) - d);
        st(dx, k, r * inv_t, add);
      }
    }
}

}  // namespace loom::nn
