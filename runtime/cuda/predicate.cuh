// Device-side predicates of step graphs. A predicated node (`__pred__`, DESIGN.md "Training
// steps as graphs") runs only while its (1,) predicate is non-zero. On a GPU the executor
// does not read it on the host: it passes the predicate's device pointer in OpContext::pred
// and every launch of the node's kernel returns early when it points to 0, so a micro-step
// needs no host round trip and can be recorded once as a CUDA Graph.
//
// The convention for a predicated op's GPU kernel:
//   - override `bool device_predicate() const { return true; }`;
//   - pass `cuda::pred_of(ctx)` to every kernel it launches;
//   - start every __global__ function with `if (cuda::skip(pred)) return;`.
// A skipped call must leave all outputs and states as they were (nothing else is needed).
#pragma once

#include <cuda_runtime.h>

#include "ops/op.h"

namespace loom::cuda {

/// Device code: true when the node's predicate says "do nothing this call". `pred` is
/// null for unpredicated nodes (and in CPU-driven tests): the node runs.
__device__ __forceinline__ bool skip(const float* pred) { return pred != nullptr && *pred == 0.f; }

/// Host code: the predicate pointer to hand to the node's launches (null: always run).
inline const float* pred_of(const OpContext& ctx) { return ctx.pred; }

}  // namespace loom::cuda
