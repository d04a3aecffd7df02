// Element-wise math shared by the CPU loops and the CUDA kernels: each functor is a
// __host__ __device__ struct, so the CPU tests cover the GPU's arithmetic too.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define LOOM_HD __host__ __device__ __forceinline__
#else
#define LOOM_HD inline
#endif

namespace loom::math {

// ---- unary: y = f(x); grad: dx = g * d(x, y) ----
struct Identity {
  LOOM_HD static float f(float x) { return x; }
  LOOM_HD static float d(float, float) { return 1.f; }
};
struct Negative {
  LOOM_HD static float f(float x) { return -x; }
  LOOM_HD static float d(float, float) { return -1.f; }
};
struct Relu {
  LOOM_HD static float f(float x) { return x > 0.f ? x : 0.f; }
  LOOM_HD static float d(float x, float) { return x > 0.f ? 1.f : 0.f; }
};
struct Sigmoid {
  LOOM_HD static float f(float x) { return 1.f / (1.f + expf(-x)); }
  LOOM_HD static float d(float, float y) { return y * (1.f - y); }
};
struct Tanh {
  LOOM_HD static float f(float x) { return tanhf(x); }
  LOOM_HD static float d(float, float y) { return 1.f - y * y; }
};
struct SoftRelu {  // log(1 + e^x), x for x > 20 as MXNet
  LOOM_HD static float f(float x) { return x > 20.f ? x : log1pf(expf(x)); }
  LOOM_HD static float d(float x, float) { return 1.f / (1.f + expf(-x)); }
};
struct SoftSign {
  LOOM_HD static float f(float x) { return x / (1.f + fabsf(x)); }
  LOOM_HD static float d(float x, float) {
    float a = 1.f + fabsf(x);
    return 1.f / (a * a);
  }
};
struct Exp {
  LOOM_HD static float f(float x) { return expf(x); }
  LOOM_HD static float d(float, float y) { return y; }
};
struct Log {
  LOOM_HD static float f(float x) { return logf(x); }
  LOOM_HD static float d(float x, float) { return 1.f / x; }
};
struct Sqrt {
  LOOM_HD static float f(float x) { return sqrtf(x); }
  LOOM_HD static float d(float, float y) { return 0.5f / y; }
};
struct Square {
  LOOM_HD static float f(float x) { return x * x; }
  LOOM_HD static float d(float x, float) { return 2.f * x; }
};
struct Abs {
  LOOM_HD static float f(float x) { return fabsf(x); }
  LOOM_HD static float d(float x, float) { return x > 0.f ? 1.f : (x < 0.f ? -1.f : 0.f); }
};

struct Rsqrt {
  LOOM_HD static float f(float x) { return 1.f / sqrtf(x); }
  LOOM_HD static float d(float, float y) { return -0.5f * y * y * y; }
};
struct Reciprocal {
  LOOM_HD static float f(float x) { return 1.f / x; }
  LOOM_HD static float d(float, float y) { return -y * y; }
};
struct Log1p {
  LOOM_HD static float f(float x) { return log1pf(x); }
  LOOM_HD static float d(float x, float) { return 1.f / (1.f + x); }
};
struct Expm1 {
  LOOM_HD static float f(float x) { return expm1f(x); }
  LOOM_HD static float d(float, float y) { return y + 1.f; }
};
// Piecewise-constant functions: the gradient is zero everywhere it exists.
struct Sign {
  LOOM_HD static float f(float x) { return x > 0.f ? 1.f : (x < 0.f ? -1.f : 0.f); }
  LOOM_HD static float d(float, float) { return 0.f; }
};
struct Floor {
  LOOM_HD static float f(float x) { return floorf(x); }
  LOOM_HD static float d(float, float) { return 0.f; }
};
struct Ceil {
  LOOM_HD static float f(float x) { return ceilf(x); }
  LOOM_HD static float d(float, float) { return 0.f; }
};
struct Round {  // half away from zero, as MXNet's round
  LOOM_HD static float f(float x) { return roundf(x); }
  LOOM_HD static float d(float, float) { return 0.f; }
};
struct Rint {  // to the nearest integer, ties to even (the default rounding mode)
  LOOM_HD static float f(float x) { return rintf(x); }
  LOOM_HD static float d(float, float) { return 0.f; }
};
struct Trunc {  // toward zero (MXNet's trunc and fix)
  LOOM_HD static float f(float x) { return truncf(x); }
  LOOM_HD static float d(float, float) { return 0.f; }
};

// Trigonometric and hyperbolic functions and their inverses, as MXNet's mshadow_op.
struct Sin {
  LOOM_HD static float f(float x) { return sinf(x); }
  LOOM_HD static float d(float x, float) { return cosf(x); }
};
struct Cos {
  LOOM_HD static float f(float x) { return cosf(x); }
  LOOM_HD static float d(float x, float) { return -sinf(x); }
};
struct Tan {
  LOOM_HD static float f(float x) { return tanf(x); }
  LOOM_HD static float d(float, float y) { return 1.f + y * y; }
};
struct Arcsin {
  LOOM_HD static float f(float x) { return asinf(x); }
  LOOM_HD static float d(float x, float) { return 1.f / sqrtf(1.f - x * x); }
};
struct Arccos {
  LOOM_HD static float f(float x) { return acosf(x); }
  LOOM_HD static float d(float x, float) { return -1.f / sqrtf(1.f - x * x); }
};
struct Arctan {
  LOOM_HD static float f(float x) { return atanf(x); }
  LOOM_HD static float d(float x, float) { return 1.f / (1.f + x * x); }
};
struct Sinh {
  LOOM_HD static float f(float x) { return sinhf(x); }
  LOOM_HD static float d(float x, float) { return coshf(x); }
};
struct Cosh {
  LOOM_HD static float f(float x) { return coshf(x); }
  LOOM_HD static float d(float x, float) { return sinhf(x); }
};
struct Arcsinh {
  LOOM_HD static float f(float x) { return asinhf(x); }
  LOOM_HD static float d(float x, float) { return 1.f / sqrtf(x * x + 1.f); }
};
struct Arccosh {
  LOOM_HD static float f(float x) { return acoshf(x); }
  LOOM_HD static float d(float x, float) { return 1.f / sqrtf(x * x - 1.f); }
};
struct Arctanh {
  LOOM_HD static float f(float x) { return atanhf(x); }
  LOOM_HD static float d(float x, float) { return 1.f / (1.f - x * x); }
};
struct Degrees {
  LOOM_HD static float f(float x) { return x * (180.f / 3.14159265358979323846f); }
  LOOM_HD static float d(float, float) { return 180.f / 3.14159265358979323846f; }
};
struct Radians {
  LOOM_HD static float f(float x) { return x * (3.14159265358979323846f / 180.f); }
  LOOM_HD static float d(float, float) { return 3.14159265358979323846f / 180.f; }
};

// Further exponents, logarithms and roots.
struct Log2 {
  LOOM_HD static float f(float x) { return log2f(x); }
  LOOM_HD static float d(float x, float) { return 1.f / (x * 0.69314718055994530942f); }
};
struct Log10 {
  LOOM_HD static float f(float x) { return log10f(x); }
  LOOM_HD static float d(float x, float) { return 1.f / (x * 2.30258509299404568402f); }
};
struct Cbrt {
  LOOM_HD static float f(float x) { return cbrtf(x); }
  LOOM_HD static float d(float, float y) { return 1.f / (3.f * y * y); }
};
struct Rcbrt {  // x^(-1/3); its derivative -x^(-4/3)/3 is -y^4/3
  LOOM_HD static float f(float x) { return 1.f / cbrtf(x); }
  LOOM_HD static float d(float, float y) { return -(y * y) * (y * y) / 3.f; }
};
struct Erf {
  LOOM_HD static float f(float x) { return erff(x); }
  LOOM_HD static float d(float x, float) { return 1.12837916709551257390f * expf(-x * x); }
};

// ---- binary: z = f(a, b); grads: da = g * da(a, b), db = g * db(a, b) ----
struct Add {
  LOOM_HD static float f(float a, float b) { return a + b; }
  LOOM_HD static float da(float, float) { return 1.f; }
  LOOM_HD static float db(float, float) { return 1.f; }
};
struct Sub {
  LOOM_HD static float f(float a, float b) { return a - b; }
  LOOM_HD static float da(float, float) { return 1.f; }
  LOOM_HD static float db(float, float) { return -1.f; }
};
struct Mul {
  LOOM_HD static float f(float a, float b) { return a * b; }
  LOOM_HD static float da(float, float b) { return b; }
  LOOM_HD static float db(float a, float) { return a; }
};
struct Div {
  LOOM_HD static float f(float a, float b) { return a / b; }
  LOOM_HD static float da(float, float b) { return 1.f / b; }
  LOOM_HD static float db(float a, float b) { return -a / (b * b); }
};
struct Power {
  LOOM_HD static float f(float a, float b) { return powf(a, b); }
  LOOM_HD static float da(float a, float b) { return b * powf(a, b - 1.f); }
  LOOM_HD static float db(float a, float b) { return powf(a, b) * logf(a); }
};
// Ties send the gradient to the left operand, as MXNet (ge / lt and le / gt).
struct Maximum {
  LOOM_HD static float f(float a, float b) { return a > b ? a : b; }
  LOOM_HD static float da(float a, float b) { return a >= b ? 1.f : 0.f; }
  LOOM_HD static float db(float a, float b) { return a < b ? 1.f : 0.f; }
};
struct Minimum {
  LOOM_HD static float f(float a, float b) { return a < b ? a : b; }
  LOOM_HD static float da(float a, float b) { return a <= b ? 1.f : 0.f; }
  LOOM_HD static float db(float a, float b) { return a > b ? 1.f : 0.f; }
};

/// smooth_l1 with sigma b: 0.5 (b a)^2 where |a| < 1/b^2, else |a| - 0.5/b^2 (Fast R-CNN's
/// box loss). Only the data operand is differentiated.
struct SmoothL1 {
  LOOM_HD static float f(float a, float b) {
    const float b2 = b * b, ax = fabsf(a);
    return ax < 1.f / b2 ? 0.5f * b2 * a * a : ax - 0.5f / b2;
  }
  LOOM_HD static float da(float a, float b) {
    const float b2 = b * b;
    return fabsf(a) < 1.f / b2 ? b2 * a : (a > 0.f ? 1.f : -1.f);
  }
  LOOM_HD static float db(float, float) { return 0.f; }
};

/// Applies an output request: kWrite/kInplace store, kAdd accumulates.
LOOM_HD void assign_req(float* dst, int req_add, float v) {
  if (req_add) *dst += v;
  else *dst = v;
}

}  // namespace loom::math
