// Modulo's arithmetic (MXNet's mod / rmod: the result takes the divisor's sign, through fmod in
// double; a zero divisor gives 0) and its divisor gradient, shared by the CPU kernels (mod.cc)
// and the CUDA kernels of _mod, _mod_scalar and _rmod_scalar (elemwise_extra.cu).
#pragma once

#include <cmath>

#include "ops/elemwise_math.h"

namespace loom::tensor {

/// _mod_scalar's and _rmod_scalar's parameters (mod.cc declares the schema).
struct ModScalarParam {
  double scalar;
  bool is_int;
};

/// x % y for signed (and floating) operands, in double.
LOOM_HD double mod_double(double x, double y) {
  if (y == 0) return 0.0;
  if (y < 0) {
    if (x < 0) return -::fmod(-x, -y);
    const double m = ::fmod(x, -y);
    return m + (m != 0 ? y : 0.0);
  }
  if (x < 0) {
    const double m = ::fmod(-x, y);
    return -m + (m != 0 ? y : 0.0);
  }
  return ::fmod(x, y);
}

/// d(a % b)/db = −floor(a / b), the quotient and floor in the compute type C (float for
/// float32, as MXNet's floorf).
template <class C>
LOOM_HD double mod_rgrad_c(C a, C b) {
  const C q = a / b;
  return -static_cast<double>(math::fn::floor(q));
}

/// broadcast_mod's functor for the GPU broadcast kernel (broadcast_reduce.cu), as HypotF.
struct ModF {
  LOOM_HD static float f(float a, float b) { return static_cast<float>(mod_double(a, b)); }
  LOOM_HD static float da(float, float) { return 1.f; }
  LOOM_HD static float db(float a, float b) { return static_cast<float>(mod_rgrad_c<float>(a, b)); }
};

}  // namespace loom::tensor
