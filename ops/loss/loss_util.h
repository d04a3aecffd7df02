// Helpers shared by the loss-head operators (SoftmaxOutput, the regression outputs,
// SVMOutput, MakeLoss): normalisation modes, float32 checks and req-aware stores.
#pragma once

#include <string>
#include <vector>

#include "ops/dtype_policy.h"
#include "ops/elemwise_math.h"
#include "ops/op.h"

namespace loom::loss {

/// MXNet's `normalization` choices of SoftmaxOutput and MakeLoss.
inline const std::vector<std::string>& normalization_choices() {
  static const std::vector<std::string> c = {"null", "batch", "valid"};
  return c;
}

/// Loss kernels are CPU float32 only; throws DTypePolicyError naming the op otherwise.
inline void require_float32(const KernelArgs& a) {
  auto check = [&](DType t, const std::string& what) {
    if (t != DType::kFloat32)
      throw DTypePolicyError("node '" + a.attrs.name + "' (op " + a.attrs.op->name + "): " +
                             what + " has dtype " + dtype_name(t) +
                             "; the CPU kernel takes float32 only");
  };
  for (size_t i = 0; i < a.in_types.size(); ++i) check(a.in_types[i], "input " + std::to_string(i));
  for (size_t i = 0; i < a.out_types.size(); ++i)
    check(a.out_types[i], "output " + std::to_string(i));
}

/// Writes (kWrite, kInplace) or accumulates (kAdd) `v` into `*dst`; callers skip kNull.
inline void store(float* dst, Req req, float v) { math::assign_req(dst, req == Req::kAdd, v); }

/// MXNet's label-to-class conversion: C truncation of the float label. Where that cast is
/// undefined (NaN, |label| >= 2^31) x86 gives INT32_MIN; that value is returned instead.
LOOM_HD int64_t class_of(float label) {
  if (!(label > -2147483648.f && label < 2147483648.f)) return INT32_MIN;
  return static_cast<int>(label);
}

/// OpenMP threshold: below this many elements, loops run serially.
constexpr int64_t kParallelMin = 1 << 15;

}  // namespace loom::loss
