// The CPU dtype policy: which element types an operator's CPU kernel computes correctly.
// Ops declare it next to their registration; the executor and the imperative runner check
// every node against it when they create kernels (at bind), so a kernel never silently
// reinterprets float64/float16/int data as float32.
//
//   LOOM_CPU_DTYPES("LayerNorm", {DType::kFloat32, DType::kFloat64, DType::kFloat16});
//   LOOM_CPU_DTYPES("reshape_like", kDTypePolicyFloats, {.any_inputs = {1}});
//
// An op without a declaration is not checked (its kernel may still check for itself);
// tests/unit/test_dtype_audit.cc runs every op with float64/float16/int32 inputs and fails
// for any op that computes wrong numbers instead of refusing.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "ops/op.h"

namespace loom {

/// Thrown at bind when a node's dtypes are outside its op's CPU dtype policy.
class DTypePolicyError : public BindError {
  using BindError::BindError;
};

/// Exemptions from the policy for one op.
struct DTypePolicyOptions {
  /// Input positions of any dtype (shape sources, labels and indices the kernel converts).
  std::vector<int> any_inputs;
  /// Output positions of any dtype (fixed-dtype outputs such as indices).
  std::vector<int> any_outputs;
};

/// What one op's CPU kernel accepts: every checked input and output dtype is in `dtypes`.
struct DTypePolicy {
  std::vector<DType> dtypes;
  DTypePolicyOptions options;
  bool allows(DType t) const;
  /// "float32, float64, float16"
  std::string list() const;
};

inline const std::vector<DType> kDTypePolicyF32 = {DType::kFloat32};
inline const std::vector<DType> kDTypePolicyFloats = {DType::kFloat32, DType::kFloat64,
                                                      DType::kFloat16};

/// Declares (or replaces) the CPU dtype policy of `op` (canonical name or alias).
void declare_cpu_dtypes(const std::string& op, std::vector<DType> dtypes,
                        DTypePolicyOptions options = {});
/// The op's policy, or nullptr when it declared none.
const DTypePolicy* find_cpu_dtype_policy(const std::string& op);

/// Throws DTypePolicyError naming the node, op, input/output index and dtype and listing the
/// dtypes the op takes, when the node is on a CPU device and one of its dtypes is outside
/// its op's policy. `in` may include a predicated node's trailing predicate (never checked).
void check_dtype_policy(const OpAttrs& a, Device dev, const std::vector<DType>& in,
                        const std::vector<DType>& out);

/// Declares a CPU dtype policy at static-initialisation time (in an op's .cc).
#define LOOM_CPU_DTYPES(op, ...)                                                          \
  [[maybe_unused]] static const bool LOOM_CONCAT(loom_cpu_dtypes_, __COUNTER__) =        \
      (::loom::declare_cpu_dtypes(op, __VA_ARGS__), true)

}  // namespace loom
