// The GPU sweep's bucket case: _loom_bucket's multi-tensor kernel against its per-tensor
// launches (LOOM_CUDA_BUCKET_MULTI=0) and against the CPU.
#pragma once

#include "runtime/base.h"

namespace loom {

/// For every inner op the multi-tensor GPU kernel covers (sgd, sgd_mom, nag_mom, adam,
/// adamw, rmsprop, rmspropalex, LAMB's two phases, _loom_accumulate, _loom_ema_update), a
/// bucket of four tensors of different sizes (none empty: shape inference reads a 0 dim as
/// unknown) with per-tensor wds where the op has wd runs forward on `dev` with the
/// multi-tensor kernel and with one launch per tensor (LOOM_CUDA_BUCKET_MULTI=0), from the
/// same inputs: outputs and updated states must agree with each other to 1e-6 and with the
/// CPU kernel to 2e-4 (relative and absolute). With `dev` = CPU all three runs are the CPU
/// kernel (the case's own code). Prints one line per failure; returns the number of failures.
int run_bucket_case(Device dev);

}  // namespace loom
