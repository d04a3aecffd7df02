// The softmax arithmetic shared by softmax, log_softmax, SoftmaxActivation and softmin: the input is
// viewed as (outer, n, inner) and normalised along the middle axis. The per-row functions
// are __host__ __device__: the CUDA kernels (softmax.cu) run the rows the CPU loops run.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "ops/elemwise_math.h"
#include "ops/nn/nn_dtype.h"
#include "ops/nn/nn_util.h"

namespace loom::nn {

/// Parameters of softmax and log_softmax (softmax.cc declares their schema).
struct SoftmaxParam {
  int axis;
  std::optional<double> temperature;
  std::optional<std::string> dtype;
  bool use_length;
};
/// Parameters of softmin (softmin.cc).
struct SoftminParam {
  int64_t axis;
  std::optional<double> temperature;
  std::optional<std::string> dtype;
  bool use_length;
};
/// Parameters of SoftmaxActivation (softmax_activation.cc).
struct SoftmaxActParam {
  std::string mode;
};

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

/// SoftmaxActivation's view: the last axis (instance) or axis 1 (channel).
inline SoftmaxView softmax_act_view(const std::string& mode, const Shape& s) {
  if (mode == "channel") {
    if (s.ndim() < 2) throw ShapeError("SoftmaxActivation channel mode needs >= 2-d input");
    return SoftmaxView(s, 1);
  }
  if (s.ndim() == 0) throw ShapeError("SoftmaxActivation needs >= 1-d input");
  return SoftmaxView(s, s.ndim() - 1);
}

/// Loads p[i] in the compute type (float for half_t).
template <class T>
LOOM_HD compute_t<T> sm_ld(const T* p, int64_t i) {
  return static_cast<compute_t<T>>(p[i]);
}
/// p[i] = v, or p[i] += v when `add` (in the compute type, rounded once).
template <class T>
LOOM_HD void sm_st(T* p, int64_t i, compute_t<T> v, bool add) {
  p[i] = add ? T(static_cast<compute_t<T>>(p[i]) + v) : T(v);
}

/// One row of softmax_forward: the row's v.n (`n_all`) entries spaced `stride` apart, of
/// which the first `n` take part (the rest get 0). Exps in the compute type, the sum in
/// double. Shared by the CPU loop and the CUDA kernel (one thread per row).
template <class T>
LOOM_HD void softmax_row_forward(const T* xp, T* yp, int64_t n_all, int64_t n, int64_t stride,
                                 compute_t<T> inv_t, bool log, bool add) {
  using C = compute_t<T>;
  for (int64_t i = n; i < n_all; ++i) sm_st(yp, i * stride, C(0), add);
  if (n <= 0) return;
  C mx = sm_ld(xp, 0);
  for (int64_t i = 1; i < n; ++i) {
    const C v = sm_ld(xp, i * stride);
    mx = v > mx ? v : mx;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += math::fn::exp((sm_ld(xp, i * stride) - mx) * inv_t);
  const C lse = static_cast<C>(math::fn::log(sum));
  const C inv_sum = static_cast<C>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) {
    const C z = (sm_ld(xp, i * stride) - mx) * inv_t;
    sm_st(yp, i * stride, log ? z - lse : math::fn::exp(z) * inv_sum, add);
  }
}

/// One row of softmax_backward (same row layout as softmax_row_forward): softmax
/// y ⊙ (g − Σ g⊙y) / t, log_softmax (g − e^y Σ g) / t; entries past `n` get 0.
template <class T>
LOOM_HD void softmax_row_backward(const T* g, const T* y, T* dx, int64_t n_all, int64_t n,
                                  int64_t stride, compute_t<T> inv_t, bool log, bool add) {
  using C = compute_t<T>;
  for (int64_t i = n; i < n_all; ++i) sm_st(dx, i * stride, C(0), add);
  double dot = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i * stride;
    dot += log ? sm_ld(g, k) : sm_ld(g, k) * sm_ld(y, k);
  }
  const C d = static_cast<C>(dot);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i * stride;
    const C r = log ? sm_ld(g, k) - math::fn::exp(sm_ld(y, k)) * d : sm_ld(y, k) * (sm_ld(g, k) - d);
    sm_st(dx, k, r * inv_t, add);
  }
}

/// Row r's length, clamped into [0, n] (len: the use_length input, null = every row full).
template <class L>
LOOM_HD int64_t softmax_row_len(const L* len, int64_t r, int64_t n) {
  if (!len) return n;
  const int64_t l = static_cast<int64_t>(len[r]);
  return l < 0 ? 0 : l > n ? n : l;
}

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
      const int64_t base = o * v.n * v.inner + j;
      softmax_row_forward(x + base, y + base, v.n, softmax_row_len(len, o * v.inner + j, v.n),
                          v.inner, inv_t, log, add);
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
      const int64_t base = o * v.n * v.inner + j;
      softmax_row_backward(g + base, y + base, dx + base, v.n,
                           softmax_row_len(len, o * v.inner + j, v.n), v.inner, inv_t, log, add);
    }
}

// ---- softmin (computed in double throughout, as its CPU kernel always did) ----

/// p[i] = v rounded to T (through the compute type), or p[i] += that rounded value.
template <class T>
LOOM_HD void softmin_st(T* p, int64_t i, double v, bool add) {
  const T w = T(static_cast<compute_t<T>>(v));
  p[i] = add ? T(static_cast<compute_t<T>>(p[i]) + static_cast<compute_t<T>>(w)) : w;
}

/// One row of softmin: y = softmax(z), z = x · neg_inv_t (neg_inv_t = −1/t), shifted by
/// the row's maximum of z; n entries spaced `stride` apart.
template <class T>
LOOM_HD void softmin_row_forward(const T* x, T* y, int64_t n, int64_t stride, double neg_inv_t,
                                 bool add) {
  double zmax = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    const double z = static_cast<double>(sm_ld(x, i * stride)) * neg_inv_t;
    zmax = zmax < z ? z : zmax;  // std::max's rule (a NaN z is skipped)
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i)
    sum += math::fn::exp(static_cast<double>(sm_ld(x, i * stride)) * neg_inv_t - zmax);
  for (int64_t i = 0; i < n; ++i) {
    const double z = static_cast<double>(sm_ld(x, i * stride)) * neg_inv_t;
    softmin_st(y, i * stride, math::fn::exp(z - zmax) / sum, add);
  }
}

/// One row of softmin's gradient: dx = −y ⊙ (g − Σ g⊙y) / t.
template <class T>
LOOM_HD void softmin_row_backward(const T* g, const T* y, T* dx, int64_t n, int64_t stride,
                                  double t, bool add) {
  double dot = 0;
  for (int64_t i = 0; i < n; ++i)
    dot += static_cast<double>(sm_ld(g, i * stride)) * static_cast<double>(sm_ld(y, i * stride));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i * stride;
    const double v =
        -static_cast<double>(sm_ld(y, k)) * (static_cast<double>(sm_ld(g, k)) - dot) / t;
    softmin_st(dx, k, v, add);
  }
}

}  // namespace loom::nn
