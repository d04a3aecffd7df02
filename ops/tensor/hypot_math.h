// The arithmetic of _hypot, broadcast_hypot and _hypot_scalar (in double, rounded once), shared
// by the CPU kernel (hypot.cc) and the CUDA kernels of _hypot and _hypot_scalar
// (elemwise_extra.cu).
#pragma once

#include <cmath>

#include "ops/elemwise_math.h"
#include "ops/op.h"

namespace loom::tensor {

/// √(a² + b²) without overflow (the C library's hypot).
LOOM_HD double hypot_value(double a, double b) { return ::hypot(a, b); }
/// The gradient g·x/h reaching operand x of h = hypot(a, b).
LOOM_HD double hypot_grad(double g, double x, double h) { return g * x / h; }

/// broadcast_hypot's functor for the GPU broadcast kernel (broadcast_reduce.cu): value and
/// partial derivatives in double, rounded to float (the kernel multiplies by the head
/// gradient and sums broadcast axes in float; the CPU does both in double).
struct HypotF {
  LOOM_HD static float f(float a, float b) { return static_cast<float>(hypot_value(a, b)); }
  LOOM_HD static float da(float a, float b) {
    return static_cast<float>(hypot_grad(1.0, a, hypot_value(a, b)));
  }
  LOOM_HD static float db(float a, float b) {
    return static_cast<float>(hypot_grad(1.0, b, hypot_value(a, b)));
  }
};

/// _hypot_scalar's scalar operand (1 when absent).
inline double hypot_scalar(const OpAttrs& a) {
  return a.dict.count("scalar") ? parse_float(a.dict.at("scalar")) : 1.0;
}

}  // namespace loom::tensor
