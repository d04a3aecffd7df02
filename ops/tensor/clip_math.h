// clip's and hard_sigmoid's parameters and per-element arithmetic, shared by their CPU
// kernels (unary_math.cc, hard_sigmoid.cc) and the CUDA kernels (elemwise_extra.cu).
#pragma once

#include "ops/elemwise_math.h"

namespace loom::tensor {

struct ClipParam {
  float a_min, a_max;
};
struct HardSigmoidParam {
  float alpha, beta;
};

/// clip's forward as MXNet: x compares with the float bounds in double, and a clipped
/// element becomes the bound converted to T (tlo, thi).
template <class T>
LOOM_HD T clip_value(T x, double lo, double hi, T tlo, T thi) {
  const double v = static_cast<double>(x);
  return v > hi ? thi : v < lo ? tlo : x;
}
/// The gradient passes where the input was inside [lo, hi].
LOOM_HD bool clip_passes(double v, double lo, double hi) { return !(v < lo || v > hi); }

/// hard_sigmoid: clip(a·x + b, 0, 1) in the compute type C.
template <class C>
LOOM_HD C hard_sigmoid_value(C x, float a, float b) {
  const C v = a * x + b;
  return v > 1 ? C(1) : v < 0 ? C(0) : v;
}
/// hard_sigmoid's gradient: a·g where 0 < a·x + b < 1 (strictly, as MXNet), else 0.
template <class C>
LOOM_HD C hard_sigmoid_grad(C x, C g, float a, float b) {
  const C v = a * x + b;
  return v > 0 && v < 1 ? g * a : C(0);
}

}  // namespace loom::tensor
