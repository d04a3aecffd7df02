// erfinv's arithmetic in double, shared by the CPU kernel (erfinv_khatri_rao.cc) and the CUDA
// kernel (elemwise_extra.cu).
#pragma once

#include <cmath>

#include "ops/elemwise_math.h"

namespace loom::tensor {

/// erfinv in double: Giles' single-precision approximation refined by two Newton steps on
/// erf (each step doubles the correct digits), so the result is exact to double rounding.
LOOM_HD double erfinv_d(double x) {
  if (x != x || x < -1 || x > 1) return NAN;  // NaN in, or outside [-1, 1]
  if (x == 1) return INFINITY;
  if (x == -1) return -INFINITY;
  double w = -::log((1.0 - x) * (1.0 + x)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = ::sqrt(w) - 3.0;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double y = p * x;
  const double k = 2.0 / ::sqrt(M_PI);
  for (int it = 0; it < 2; ++it) {
    const double err = ::erf(y) - x;
    y -= err / (k * ::exp(-y * y));
  }
  return y;
}

/// The gradient g·(√π/2)·exp(y²) at output y = erfinv(x).
LOOM_HD double erfinv_grad(double g, double y) {
  const double half_sqrt_pi = 0.5 * ::sqrt(M_PI);
  return g * half_sqrt_pi * ::exp(y * y);
}

}  // namespace loom::tensor
