// Element-wise functors of small ops outside elemwise_math.h (logical_not, the straight-through
// estimators, gradientmultiplier, _contrib_quadratic, _contrib_div_sqrt_dim), shared by their CPU
// kernels and the CUDA kernels (elemwise_extra.cu). Same shape as elemwise_math.h's functors:
// y = f(x), dx = g · d(x, y); C is the compute type.
#pragma once

#include "ops/elemwise_math.h"

namespace loom::tensor {

/// _contrib_gradientmultiplier's parameters (ste_index_copy.cc declares the schema).
struct GradMultParam {
  double scalar;
  bool is_int;
};
/// _contrib_quadratic's parameters (small_contrib.cc).
struct QuadraticParam {
  float a, b, c;
};

}  // namespace loom::tensor

namespace loom::math {

/// logical_not: 1 where x == 0 (NaN is non-zero), else 0. Not differentiable.
struct LogicalNot {
  template <class C>
  LOOM_HD static bool is_zero(C x) {
    return x == C(0);
  }
  template <class C>
  LOOM_HD static C f(C x) {
    return is_zero(x) ? C(1) : C(0);
  }
  template <class C>
  LOOM_HD static C d(C, C) {
    return C(0);
  }
};

/// _contrib_round_ste: round half away from zero; the gradient passes straight through.
struct RoundSte {
  template <class C>
  LOOM_HD static C f(C x) {
    return fn::round(x);
  }
  template <class C>
  LOOM_HD static C d(C, C) {
    return C(1);
  }
};

/// _contrib_sign_ste: sign (0 for 0 and NaN); the gradient passes straight through.
struct SignSte {
  template <class C>
  LOOM_HD static C f(C v) {
    return v > C(0) ? C(1) : (v < C(0) ? C(-1) : C(0));
  }
  template <class C>
  LOOM_HD static C d(C, C) {
    return C(1);
  }
};

/// _contrib_gradientmultiplier: identity; the gradient is multiplied by s.
struct GradMultiplier {
  double s;
  template <class C>
  LOOM_HD C f(C x) const {
    return x;
  }
  template <class C>
  LOOM_HD C d(C, C) const {
    return static_cast<C>(s);
  }
};

/// _contrib_quadratic: a·x² + b·x + c; derivative 2·a·x + b.
struct Quadratic {
  float a, b, c;
  template <class C>
  LOOM_HD C f(C v) const {
    return C(a) * v * v + C(b) * v + C(c);
  }
  template <class C>
  LOOM_HD C d(C v, C) const {
    return 2 * C(a) * v + C(b);
  }
};

/// _contrib_div_sqrt_dim: x · s, s = 1/√(last dimension); derivative s.
struct Scale {
  double s;
  template <class C>
  LOOM_HD C f(C x) const {
    return x * static_cast<C>(s);
  }
  template <class C>
  LOOM_HD C d(C, C) const {
    return static_cast<C>(s);
  }
};

}  // namespace loom::math
