// Element-type helpers for the multi-dtype neural-network kernels (float32, float64, and
// float16 computed in float32 as MXNet does): loads into the compute type, stores honouring
// req, and dispatch from the node's dtype. The ops declare the same set as their CPU dtype
// policy (ops/dtype_policy.h), so the dispatch below never sees another dtype at run time.
#pragma once

#include <string>

#include "ops/dtype_policy.h"
#include "runtime/dtype_traits.h"

namespace loom::nn {

/// p[i] in the compute type (float for half_t).
template <class T>
inline compute_t<T> ld(const T* p, int64_t i) {
  return static_cast<compute_t<T>>(p[i]);
}

/// p[i] = v, or p[i] += v when `add` (in the compute type, rounded once).
template <class T>
inline void st(T* p, int64_t i, compute_t<T> v, bool add) {
  if (add)
    p[i] = T(static_cast<compute_t<T>>(p[i]) + v);
  else
    p[i] = T(v);
}

/// fn(type_tag<T>{}) for T in float, double, half_t; throws DTypePolicyError otherwise.
template <class Fn>
decltype(auto) dispatch_floats(DType t, Fn&& fn, const std::string& what) {
  switch (t) {
    case DType::kFloat32: return fn(type_tag<float>{});
    case DType::kFloat64: return fn(type_tag<double>{});
    case DType::kFloat16: return fn(type_tag<half_t>{});
    default: break;
  }
  throw DTypePolicyError(what + ": dtype " + dtype_name(t) +
                         " is not supported by the CPU kernel; it takes float32, float64, float16");
}

}  // namespace loom::nn
