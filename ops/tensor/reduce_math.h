// The arithmetic of the reductions over axes (sum, mean, max, min, prod), shared by the CPU
// kernels (reduce.cc; double accumulators) and the CUDA kernels (broadcast_reduce.cu; float):
// how partial results combine, and each input element's share of the output gradient.
#pragma once

#include <cmath>

#include "ops/elemwise_math.h"

namespace loom::math {

/// Running sum (sum, mean; mean scales the result afterwards).
struct SumReduce {
  template <class T>
  LOOM_HD static T init() { return T(0); }
  template <class T>
  LOOM_HD static T combine(T acc, T v) { return acc + v; }
};
/// Running maximum; a NaN wins, as in NumPy and MXNet (v != v only for NaN).
struct MaxReduce {
  template <class T>
  LOOM_HD static T init() { return -T(INFINITY); }
  template <class T>
  LOOM_HD static T combine(T m, T v) { return v > m || v != v ? v : m; }
};
/// Running minimum; a NaN wins.
struct MinReduce {
  template <class T>
  LOOM_HD static T init() { return T(INFINITY); }
  template <class T>
  LOOM_HD static T combine(T m, T v) { return v < m || v != v ? v : m; }
};
/// Running product.
struct ProdReduce {
  template <class T>
  LOOM_HD static T init() { return T(1); }
  template <class T>
  LOOM_HD static T combine(T acc, T v) { return acc * v; }
};

// An input element x's gradient from its output y and the output gradient g (sum and mean
// pass g through, mean scaled by 1/n).

/// max/min: every element equal to the extremum receives the gradient, as MXNet.
struct ExtremumGrad {
  template <class T>
  LOOM_HD static T grad(T g, T x, T y) { return x == y ? g : T(0); }
};
/// prod: g * y / x, as MXNet (the output divided by the input).
struct ProdGrad {
  template <class T>
  LOOM_HD static T grad(T g, T x, T y) { return g * (y / x); }
};

}  // namespace loom::math
