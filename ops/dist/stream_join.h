// Ordering a communicator's stream (the NCCL back end's) with an executor's stream by CUDA
// events, without host waits: shared by the data-parallel GPU kernels (ops/dist/dist_ops.cu,
// ops/update/shard.cu). Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "runtime/cuda/cuda_context.h"
#include "runtime/dist/communicator.h"

namespace loom::cuda {

// A job of several ranks on GPU buffers needs a back end whose collectives take them.
inline void require_device_backend(const dist::Communicator& c, const std::string& where) {
  if (c.size() > 1 && c.device_stream() == nullptr)
    throw dist::DistError(where + ": on a GPU the collectives need the nccl back end "
                          "(LOOM_DIST_BACKEND=nccl, under an MPI launcher); this job's back end "
                          "is '" + std::string(c.backend()) + "', whose collectives take host "
                          "memory");
}

// Events ordering the executor's stream and the communicator's stream, made on first use
// (on the executor's device, current after cuda::stream_of).
class StreamJoin {
 public:
  StreamJoin() = default;
  StreamJoin(const StreamJoin&) = delete;
  StreamJoin& operator=(const StreamJoin&) = delete;
  ~StreamJoin() {
    if (ready_) cudaEventDestroy(ready_);
    if (done_) cudaEventDestroy(done_);
  }
  /// `comm` waits for the work queued so far on `exec`.
  void fork(cudaStream_t exec, cudaStream_t comm) {
    if (!ready_) {
      cuda::check(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
      cuda::check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
    }
    cuda::check(cudaEventRecord(ready_, exec), "cudaEventRecord (executor stream)");
    cuda::check(cudaStreamWaitEvent(comm, ready_, 0), "cudaStreamWaitEvent (nccl stream)");
  }
  /// `exec` waits for the work queued so far on `comm`.
  void join(cudaStream_t exec, cudaStream_t comm) {
    cuda::check(cudaEventRecord(done_, comm), "cudaEventRecord (nccl stream)");
    cuda::check(cudaStreamWaitEvent(exec, done_, 0), "cudaStreamWaitEvent (executor stream)");
  }

 private:
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
};

}  // namespace loom::cuda
