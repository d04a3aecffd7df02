// GPU kernels of the blocking data-parallel ops _loom_allreduce (allreduce.cc) and
// _loom_broadcast_once (broadcast_once.cc), on device buffers through the communicator's
// "nccl" back end (runtime/dist/nccl). The bucket plan, its cross-rank check and the runs of
// adjacent tensors are the CPU kernels' (allreduce_plan.h, adjacent_runs.h).
//
// Stream order without host waits: the node records an event on the executor's stream, the
// NCCL stream waits for it, the collectives are issued there (non-blocking; their requests
// are dropped, nothing polls them), and the executor's stream waits for an event recorded on
// the NCCL stream after them. Stream capture follows the event into the NCCL stream and back,
// so a recording holds the collectives (NCCL >= 2.9 supports capture).
//
// Predicates: neither kernel says device_predicate(). A collective cannot be skipped from
// inside the device (every rank must issue it, and a skipped NCCL call still exchanges data),
// so a predicated _loom_allreduce (step graphs: switched by step_last) reads its predicate on
// the host, the executor's fallback, which also keeps that executor from being recorded.
//
// World size 1 (the "local" back end, whose collectives are host copies) needs no
// communicator: the identity times `scale`, one small kernel per run. With more ranks the
// back end must be "nccl"; "mpi" takes host memory and is refused at bind.
#include <cuda_fp16.h>

#include "ops/dist/adjacent_runs.h"
#include "ops/dist/allreduce_plan.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

template <class T>
__global__ void scale_kernel(T* x, int64_t n, double a) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = static_cast<T>(static_cast<double>(x[i]) * a);
}

__global__ void scale_half_kernel(__half* x, int64_t n, float a) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = __float2half(__half2float(x[i]) * a);
}

__global__ void fill_one(float* out) { *out = 1.f; }

void scale_run(const dist_ops::Run& r, double a, cudaStream_t s) {
  const auto n = static_cast<int64_t>(r.count);
  if (n == 0) return;
  const unsigned g = cuda::grid_size(n);
  switch (r.dtype) {
    case DType::kFloat32:
      scale_kernel<<<g, cuda::kBlockSize, 0, s>>>(static_cast<float*>(r.data), n, a);
      break;
    case DType::kFloat64:
      scale_kernel<<<g, cuda::kBlockSize, 0, s>>>(static_cast<double*>(r.data), n, a);
      break;
    case DType::kFloat16:
      scale_half_kernel<<<g, cuda::kBlockSize, 0, s>>>(static_cast<__half*>(r.data), n,
                                                       static_cast<float>(a));
      break;
    default:
      throw Error(std::string("_loom_allreduce (GPU): cannot scale ") + dtype_name(r.dtype));
  }
  cuda::check_launch("scale_kernel");
}

// A job of several ranks on GPU buffers needs a back end whose collectives take them.
void require_device_backend(const dist::Communicator& c, const std::string& where) {
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

class AllreduceGpuKernel final : public Kernel {
 public:
  explicit AllreduceGpuKernel(const KernelArgs& a)
      : p_(a.attrs.param<dist_ops::AllreduceParam>()), comm_(dist::init()) {
    where_ = dist_ops::where(a.attrs.name, "_loom_allreduce", comm_);
    if (p_.world_size > 0 && p_.world_size != comm_.size())
      throw dist::DistError(where_ + ": the step graph was built for " +
                            std::to_string(p_.world_size) +
                            " ranks (its gradient scale assumes it); rebuild it for this job");
    for (DType t : a.in_types)
      if (t != DType::kFloat32 && t != DType::kFloat64 && t != DType::kFloat16)
        throw Error(where_ + ": the GPU kernel reduces float16, float32 and float64, got " +
                    dtype_name(t));
    require_device_backend(comm_, where_);
    dist_ops::BucketPlan plan = dist_ops::plan_buckets(
        a.attrs.name, a.in_shapes, a.in_types, dist_ops::mib(p_.first_bucket_mb),
        dist_ops::mib(p_.bucket_mb));
    buckets_ = std::move(plan.buckets);
    if (comm_.size() > 1)
      comm_.check_same("bucket plan of " + where_, plan.text.data(), plan.text.size());
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    for (size_t i = 0; i < in.size(); ++i)
      if (!out[i].same_memory(in[i]) && out[i].nbytes() > 0)
        cuda::check(cudaMemcpyAsync(out[i].raw(), in[i].craw(), out[i].nbytes(),
                                    cudaMemcpyDeviceToDevice, s),
                    "_loom_allreduce: cudaMemcpyAsync");
    if (comm_.size() == 1) {
      if (p_.scale != 1.0)
        for (const auto& b : buckets_)
          for (const dist_ops::Run& r : dist_ops::adjacent_runs(out, b)) scale_run(r, p_.scale, s);
      return;
    }
    auto ns = static_cast<cudaStream_t>(comm_.device_stream());
    join_.fork(s, ns);
    for (const auto& b : buckets_)
      for (const dist_ops::Run& r : dist_ops::adjacent_runs(out, b))
        comm_.iallreduce(r.data, r.data, r.count, r.dtype, dist::ReduceOp::kSum, p_.scale);
    join_.join(s, ns);
  }

 private:
  dist_ops::AllreduceParam p_;
  dist::Communicator& comm_;
  std::string where_;
  std::vector<std::vector<size_t>> buckets_;
  StreamJoin join_;
};

class BroadcastOnceGpuKernel final : public Kernel {
 public:
  explicit BroadcastOnceGpuKernel(const KernelArgs& a)
      : p_(a.attrs.param<dist_ops::BroadcastOnceParam>()), comm_(dist::init()) {
    const std::string where = dist_ops::where(a.attrs.name, "_loom_broadcast_once", comm_);
    if (p_.root >= comm_.size())
      throw dist::DistError(where + ": root " + std::to_string(p_.root) + " is not a rank of " +
                            std::to_string(comm_.size()));
    if (comm_.size() == 1) return;
    require_device_backend(comm_, where);
    std::string mine = a.attrs.name + " " + p_.signature;
    for (size_t i = 0; i < a.in_shapes.size(); ++i) {
      mine += ' ';  // appended piecewise: GCC 12 warns (-Wrestrict) on " " + string&&
      mine += a.in_shapes[i].str();
      mine += dtype_name(a.in_types[i]);
    }
    comm_.check_same("step graph, shapes and dtypes of " + where, mine.data(), mine.size());
  }

  // The broadcasts run on the first call only, which the executor always runs eagerly
  // (CaptureCache records from the second call on), so the blocking broadcasts' host waits
  // never meet a capture; later calls only write the (1,) output.
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    if (!done_ && comm_.size() > 1) {
      auto ns = static_cast<cudaStream_t>(comm_.device_stream());
      join_.fork(s, ns);
      for (const NDArray& x : in)
        if (x.size() > 0)
          comm_.broadcast(x.raw(), static_cast<size_t>(x.size()), x.dtype(), p_.root);
      join_.join(s, ns);
    }
    done_ = true;
    if (req[0] != Req::kNull) {
      fill_one<<<1, 1, 0, s>>>(out[0].data<float>());
      cuda::check_launch("fill_one");
    }
  }

 private:
  dist_ops::BroadcastOnceParam p_;
  dist::Communicator& comm_;
  bool done_ = false;
  StreamJoin join_;
};

template <class K>
KernelFactory make() {
  return [](const KernelArgs& a) { return std::unique_ptr<Kernel>(std::make_unique<K>(a)); };
}

LOOM_REGISTER_OP("_loom_allreduce").kernel(DeviceType::kGPU, make<AllreduceGpuKernel>());
LOOM_REGISTER_OP("_loom_broadcast_once").kernel(DeviceType::kGPU, make<BroadcastOnceGpuKernel>());

}  // namespace
}  // namespace loom
