// The GPU sweep's step-graph case: a make_step graph run on a device against the CPU.
#pragma once

#include <string>

#include "runtime/base.h"

namespace loom {

/// Runs a training-step graph (FullyConnected + LinearRegressionOutput, gradient
/// accumulation k=2, momentum SGD, model EMA) for several micro-steps on `dev` and on the
/// CPU from the same weights and batches, comparing every argument, aux state (accumulators,
/// momenta, EMA shadows, counters) and output after each call. On a GPU the executor records
/// the micro-step as a CUDA Graph and replays it (checked through cuda_graph_status); with
/// `dev` = CPU the device side runs the plain path (no chunked chains) against the fused
/// one. Prints one line per failure and a summary; returns the number of failures. When an
/// op of the step graph has no kernel for the device yet, prints which and returns 0 (the
/// registry test, tests/unit/test_gpu_registry.cc, keeps that list).
int run_step_graph_case(Device dev);

}  // namespace loom
