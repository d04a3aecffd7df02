// gamma's and gammaln's arithmetic in double (values and the digamma function of their
// gradients), shared by the CPU kernel (gamma.cc) and the CUDA kernel (elemwise_extra.cu).
#pragma once

#include <cmath>

#include "ops/elemwise_math.h"

namespace loom::tensor {

/// ψ(x): reflection for x < 0.5 (ψ(x) = ψ(1 − x) − π/tan(πx)), the recurrence
/// ψ(x) = ψ(x + 1) − 1/x up to x >= 6, then the asymptotic series. Poles (0, −1, ...) give
/// NaN. No recursion, so device code can run it.
LOOM_HD double digamma(double x) {
  const double pi = 3.14159265358979323846;
  if (x <= 0 && x == ::floor(x)) return NAN;
  double refl = 0;
  if (x < 0.5) {
    refl = -(pi / ::tan(pi * x));
    x = 1 - x;
  }
  double acc = 0;
  while (x < 6) {
    acc -= 1 / x;
    x += 1;
  }
  const double r = 1 / (x * x);
  const double series =
      r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r * (1.0 / 132)))));
  return (acc + ::log(x) - 0.5 / x - series) + refl;
}

/// Γ(x), or ln|Γ(x)| with `log`.
LOOM_HD double gamma_value(double x, bool log) { return log ? ::lgamma(x) : ::tgamma(x); }

/// dy/dx: ψ(x) for gammaln, Γ(x)·ψ(x) for gamma.
LOOM_HD double gamma_deriv(double x, bool log) {
  return log ? digamma(x) : ::tgamma(x) * digamma(x);
}

}  // namespace loom::tensor
