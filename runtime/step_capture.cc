#include "runtime/step_capture.h"

namespace loom {

PredicatePath predicate_path(DeviceType dev, bool predicated, bool kernel_device_predicate) {
  if (!predicated) return PredicatePath::kNone;
  // CPU kernels run on the calling thread: reading the flag there costs nothing.
  if (dev == DeviceType::kCPU || !kernel_device_predicate) return PredicatePath::kHost;
  return PredicatePath::kDevice;
}

CaptureDecision decide_capture(const CaptureFacts& f) {
  if (!f.env.empty() && f.env != "0" && f.env != "1")
    throw Error("LOOM_CUDA_GRAPH must be 0 (never record CUDA Graphs) or 1 (record any GPU "
                "graph), got '" + f.env + "'");
  if (f.device != DeviceType::kGPU) return {false, "CUDA Graph: off (not a GPU executor)"};
  if (f.env == "0") return {false, "CUDA Graph: off (LOOM_CUDA_GRAPH=0)"};
  const CudaGraphMode mode = f.env == "1" ? CudaGraphMode::kOn : f.mode;
  if (mode == CudaGraphMode::kOff) return {false, "CUDA Graph: off (BindOptions::cuda_graph)"};
  if (mode == CudaGraphMode::kAuto && !f.step_graph)
    return {false, "CUDA Graph: off (not a step graph; cuda_graph=on or LOOM_CUDA_GRAPH=1 "
                   "records it)"};
  if (!f.blockers.empty()) {
    std::string why = "CUDA Graph: off for this executor: " + f.blockers[0];
    if (f.blockers.size() > 1)
      why += " (and " + std::to_string(f.blockers.size() - 1) + " more node(s))";
    return {false, why, true};
  }
  return {true, "CUDA Graph: on (recorded on the second call, replayed after)"};
}

void CaptureCache::run(int key, DeviceBackend& backend, int id,
                       const std::function<void()>& call) {
  Entry& e = entries_[key];
  if (e.graph) {
    e.graph->launch();
    ++replays_;
    return;
  }
  if (e.failed || e.calls++ == 0) {
    call();
    return;
  }
  std::string why;
  e.graph = backend.capture(id, call, &why);
  if (!e.graph) {
    // Nothing of this call ran while recording: run it now.
    e.failed = true;
    failure_ = "CUDA Graph recording failed, running eagerly: " + why;
    call();
    return;
  }
  ++recordings_;
  e.graph->launch();
}

}  // namespace loom
