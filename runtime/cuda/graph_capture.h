// CUDA Graph recording behind DeviceBackend::capture: the executor records a whole call
// (a training micro-step: forward, backward, accumulation, update, EMA) once and replays it
// with one cudaGraphLaunch per call. Which executors record, and when, is decided on the
// host side (runtime/step_capture.h); this file only talks to CUDA.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "runtime/device.h"

namespace loom::cuda {

/// Records the work `work` queues on `stream(id)` (stream capture in thread-local mode: only
/// this thread's CUDA calls take part) and instantiates it as a graph. Returns null with
/// `why` set when `work` threw or made a call that cannot be recorded (a synchronisation, a
/// copy to pageable host memory, the legacy default stream): the recording is then dropped.
/// Nothing `work` queued has run on the device either way.
std::unique_ptr<DeviceGraph> capture_graph(int id, const std::function<void()>& work,
                                           std::string* why);

}  // namespace loom::cuda
