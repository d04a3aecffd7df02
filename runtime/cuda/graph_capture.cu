// CUDA Graph recording (runtime/cuda/graph_capture.h).
#include "runtime/cuda/graph_capture.h"

#include <exception>

#include "runtime/cuda/cuda_context.h"

namespace loom::cuda {
namespace {

class CudaGraph final : public DeviceGraph {
 public:
  CudaGraph(int id, cudaGraphExec_t exec) : id_(id), exec_(exec) {}
  // No check: an executor may be destroyed after the CUDA runtime has begun unloading.
  ~CudaGraph() override { (void)cudaGraphExecDestroy(exec_); }
  void launch() override {
    cudaStream_t s = stream(id_);
    set_device(id_);
    check(cudaGraphLaunch(exec_, s), "cudaGraphLaunch");
  }

 private:
  int id_;
  cudaGraphExec_t exec_;
};

}  // namespace

std::unique_ptr<DeviceGraph> capture_graph(int id, const std::function<void()>& work,
                                           std::string* why) {
  cudaStream_t s = stream(id);
  set_device(id);
  check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  std::string failed;
  try {
    work();
  } catch (const std::exception& e) {
    failed = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  if (failed.empty() && end != cudaSuccess)
    failed = std::string("cudaStreamEndCapture: ") + cudaGetErrorName(end) + " (" +
             cudaGetErrorString(end) + ")";
  cudaGraphExec_t exec = nullptr;
  if (failed.empty()) {
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    if (e != cudaSuccess)
      failed = std::string("cudaGraphInstantiate: ") + cudaGetErrorName(e) + " (" +
               cudaGetErrorString(e) + ")";
  }
  if (graph) (void)cudaGraphDestroy(graph);
  if (!failed.empty()) {
    (void)cudaGetLastError();  // the invalidated capture's error is ours, not the next call's
    if (why) *why = failed;
    return nullptr;
  }
  return std::make_unique<CudaGraph>(id, exec);
}

}  // namespace loom::cuda
