// Which executors record their calls as device graphs (CUDA Graphs), and each executor's
// cache of recorded calls. Device-free: the recording itself is DeviceBackend::capture, so
// the rules and the record/replay sequence are unit-tested on machines without a GPU.
//
// The rule (DESIGN.md "GPU executor"): a recorded call replays the same kernels on the same
// pointers with the same arguments. Shapes and arrays are fixed per bind; every value that
// changes from call to call must live in device memory (step counters, predicates, lr);
// a kernel that reads host state per call, waits for the device or runs host code declares
// `Kernel::capturable() == false` and keeps its executor eager.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/base.h"
#include "runtime/device.h"

namespace loom {

/// BindOptions::cuda_graph.
enum class CudaGraphMode {
  kAuto,  ///< record GPU step graphs (graphs with predicated or in-place update nodes)
  kOn,    ///< record any GPU graph whose kernels can be recorded
  kOff,   ///< never record
};

/// How a predicated node (`__pred__`) learns whether to run this call.
enum class PredicatePath {
  kNone,    ///< not predicated: it always runs
  kHost,    ///< the executor reads the predicate on the host and skips the call (CPU; a GPU
            ///< kernel without Kernel::device_predicate(): a copy and a wait per call)
  kDevice,  ///< the kernel reads it on the device (OpContext::pred) and exits early
};
PredicatePath predicate_path(DeviceType dev, bool predicated, bool kernel_device_predicate);

/// What decide_capture looks at, gathered by the executor at bind.
struct CaptureFacts {
  DeviceType device = DeviceType::kCPU;
  CudaGraphMode mode = CudaGraphMode::kAuto;
  /// The value of LOOM_CUDA_GRAPH: "" (unset), "0" (never record) or "1" (as kOn).
  std::string env;
  /// The graph has predicated nodes or writes arrays in place (`__inplace__`): a step graph.
  bool step_graph = false;
  /// One entry per node that cannot be recorded, e.g. "node 'c' (Custom) runs host code".
  std::vector<std::string> blockers;
};

struct CaptureDecision {
  bool record = false;
  /// One line saying why (not), for the log and Executor::cuda_graph_status().
  std::string note;
  /// Recording was wanted but a node prevents it (the executor logs `note` then).
  bool blocked = false;
};

/// Applies the rule. Throws Error when `env` is neither empty, "0" nor "1".
CaptureDecision decide_capture(const CaptureFacts& f);

/// The recorded calls of one executor, one per key (which step list, is_train). The first
/// call of a key runs eagerly (warm-up: lazily created handles, pooled allocations, plans
/// copied to the device), the second is recorded and launched, later calls replay it. A
/// failed recording runs that call eagerly, never records that key again and keeps the
/// reason in failure().
class CaptureCache {
 public:
  /// Runs `call` (which queues device work on `id`'s stream) for `key` as described above.
  void run(int key, DeviceBackend& backend, int id, const std::function<void()>& call);
  /// Forgets every recording (something a recording baked in has changed).
  void clear() { entries_.clear(); }
  size_t recordings() const { return recordings_; }
  size_t replays() const { return replays_; }
  /// Why the last failed recording failed ("" when none has).
  const std::string& failure() const { return failure_; }

 private:
  struct Entry {
    int calls = 0;
    bool failed = false;
    std::unique_ptr<DeviceGraph> graph;
  };
  std::map<int, Entry> entries_;
  size_t recordings_ = 0, replays_ = 0;
  std::string failure_;
};

}  // namespace loom
