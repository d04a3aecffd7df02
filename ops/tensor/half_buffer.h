// float16 operands of kernels that compute in float (dot, batch_dot, like MXNet's CPU
// float16 paths): a float copy of a half array, and storing a float result back honouring
// req. Internal to ops/tensor/.
#pragma once

#include <vector>

#include "ops/op.h"
#include "runtime/dtype_traits.h"

namespace loom::tensor {

/// The values of a float16 array as floats (empty for a none array).
inline std::vector<float> half_to_float(const NDArray& a) {
  std::vector<float> v;
  if (a.is_none()) return v;
  v.resize(static_cast<size_t>(a.size()));
  const half_t* p = a.cdata<half_t>();
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(p[i]);
  return v;
}

/// dst = v (kWrite/kInplace) or dst += v (kAdd, summed in float, rounded once); kNull: nothing.
inline void store_half(const std::vector<float>& v, const NDArray& dst, Req req) {
  if (req == Req::kNull) return;
  half_t* p = dst.data<half_t>();
  for (size_t i = 0; i < v.size(); ++i)
    p[i] = half_t(req == Req::kAdd ? static_cast<float>(p[i]) + v[i] : v[i]);
}

}  // namespace loom::tensor
