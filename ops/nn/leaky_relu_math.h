// LeakyReLU's parameters and per-element arithmetic, shared by the CPU kernel
// (leaky_relu.cc) and the CUDA kernel (leaky_relu.cu): the CPU tests check the code the GPU
// runs. C is the compute type (float, or double for float64 arrays on the CPU).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "ops/elemwise_math.h"
#include "runtime/base.h"

namespace loom::nn {

struct LeakyParam {
  std::string act_type;
  float slope, lower_bound, upper_bound;
};

enum class LeakyAct : int { kLeaky, kPrelu, kRrelu, kElu, kSelu, kGelu };

/// The act_type parameter as a LeakyAct.
inline LeakyAct act_from_name(const std::string& n) {
  if (n == "leaky") return LeakyAct::kLeaky;
  if (n == "prelu") return LeakyAct::kPrelu;
  if (n == "rrelu") return LeakyAct::kRrelu;
  if (n == "elu") return LeakyAct::kElu;
  if (n == "selu") return LeakyAct::kSelu;
  return LeakyAct::kGelu;
}

/// y for input v. `a` is the slope of x < 0: the `slope` parameter (leaky, elu), the
/// element's gamma (prelu) or mask value (rrelu); selu and gelu ignore it.
template <class C>
LOOM_HD C leaky_value(LeakyAct t, C v, C a) {
  const C alpha = static_cast<C>(1.6732632423543772), lambda = static_cast<C>(1.0507009873554805);
  const C inv_sqrt2 = static_cast<C>(0.70710678118654752);
  switch (t) {
    case LeakyAct::kLeaky:
    case LeakyAct::kPrelu:
    case LeakyAct::kRrelu:
      return v > 0 ? v : a * v;
    case LeakyAct::kElu:
      return v > 0 ? v : a * math::fn::expm1(v);
    case LeakyAct::kSelu:
      return lambda * (v > 0 ? v : alpha * math::fn::expm1(v));
    default:
      return C(0.5) * v * (C(1) + math::fn::erf(v * inv_sqrt2));
  }
}

/// dy/dx at input v (same `a` as leaky_value).
template <class C>
LOOM_HD C leaky_deriv(LeakyAct t, C v, C a) {
  const C alpha = static_cast<C>(1.6732632423543772), lambda = static_cast<C>(1.0507009873554805);
  const C inv_sqrt2 = static_cast<C>(0.70710678118654752);
  const C inv_sqrt2pi = static_cast<C>(0.39894228040143268);
  switch (t) {
    case LeakyAct::kLeaky:
    case LeakyAct::kPrelu:
    case LeakyAct::kRrelu:
      return v > 0 ? C(1) : a;
    case LeakyAct::kElu:
      return v > 0 ? C(1) : a * math::fn::exp(v);
    case LeakyAct::kSelu:
      return lambda * (v > 0 ? C(1) : alpha * math::fn::exp(v));
    default:
      return C(0.5) * (C(1) + math::fn::erf(v * inv_sqrt2)) +
             v * inv_sqrt2pi * math::fn::exp(C(-0.5) * v * v);
  }
}

// MXNet broadcasts prelu's gamma over data axes 0 and 1 only: gamma's dims align with those
// from the right, each equal or 1 ((C,) -> (1, C), (N, C) -> (N, C), (1,) -> shared).
// Returns gamma's extent along axes 0 and 1; throws ShapeError when it does not fit.
inline std::pair<int64_t, int64_t> prelu_gamma_dims(const Shape& gamma, const Shape& data,
                                                    const std::string& what) {
  int64_t e[2] = {1, 1};
  int s = gamma.ndim() - 1;
  for (int i = 1; i >= 0 && s >= 0; --i)
    if (data[i] == gamma[s] || gamma[s] == 1) e[i] = gamma[s--];
  if (s != -1)
    throw ShapeError(what + ": cannot broadcast gamma " + gamma.str() + " to data " + data.str() +
                     " (gamma spans data axes 0 and 1 only)");
  return {e[0], e[1]};
}

/// prelu: the gamma element of plain-layout data element i. Data is (N, channels, inner...),
/// gamma (gamma_n, gamma_c), each extent 1 (shared) or full.
LOOM_HD int64_t prelu_gamma_index(int64_t i, int64_t inner, int64_t channels, int64_t gamma_n,
                                  int64_t gamma_c) {
  const int64_t c = gamma_c == 1 ? 0 : (i / inner) % channels;
  const int64_t n = gamma_n == 1 ? 0 : i / (inner * channels);
  return n * gamma_c + c;
}

}  // namespace loom::nn
