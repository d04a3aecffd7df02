// GPU kernels of the data-parallel ops _loom_allreduce (allreduce.cc), _loom_broadcast_once
// (broadcast_once.cc) and the overlapped _loom_allreduce_plan/_start/_wait
// (allreduce_overlap.cc, bottom of this file), on device buffers through the communicator's
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
#include "ops/dist/overlap_plan.h"
#include "ops/dist/stream_join.h"
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

__global__ void fill_value(float* out, float v) { *out = v; }

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

using cuda::require_device_backend;

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
  cuda::StreamJoin join_;
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
      fill_value<<<1, 1, 0, s>>>(out[0].data<float>(), 1.f);
      cuda::check_launch("fill_value");
    }
  }

 private:
  dist_ops::BroadcastOnceParam p_;
  dist::Communicator& comm_;
  bool done_ = false;
  cuda::StreamJoin join_;
};

// ---- the overlapped path: _loom_allreduce_plan, _loom_allreduce_start, _loom_allreduce_wait ----
//
// The plan, its buckets and the order in which buckets start are the CPU kernels' (Plan,
// overlap_plan.h). On the device a start node's complete bucket forks the NCCL stream from
// the executor's (an event) and issues its allreduces there without waiting, so backward's
// later nodes run on the executor's stream while NCCL reduces the bucket; the wait node makes
// the executor's stream wait for the NCCL stream (an event): no host wait anywhere.
// Start and wait are predicated (step_last) and, being collectives, read the predicate on the
// host. They are not capturable: what each call issues is decided by the plan's host-side
// bookkeeping (which tensors arrived, which bucket is next), which a replay would skip.

// Orders the communicator's stream with the executor's (nothing to order in a job of one
// rank: the "local" back end's in-place, unscaled allreduce touches no memory).
class NcclOrder final : public dist_ops::DeviceOrder {
 public:
  explicit NcclOrder(const dist::Communicator& c)
      : comm_(static_cast<cudaStream_t>(c.device_stream())) {}
  void fork(void* stream) override {
    if (comm_) join_.fork(static_cast<cudaStream_t>(stream), comm_);
  }
  void join(void* stream) override {
    if (comm_) join_.join(static_cast<cudaStream_t>(stream), comm_);
  }

 private:
  cudaStream_t comm_;
  cuda::StreamJoin join_;
};

// The plan handle a start or wait node reads: copied to the host on the node's first call
// (always eager) and kept, since a node's handle input is its plan node's for the bind.
int read_handle(const NDArray& h, cudaStream_t s) {
  float v = 0;
  cuda::check(cudaMemcpyAsync(&v, h.craw(), sizeof v, cudaMemcpyDeviceToHost, s),
              "_loom_allreduce handle: cudaMemcpyAsync");
  cuda::check(cudaStreamSynchronize(s), "_loom_allreduce handle: cudaStreamSynchronize");
  return static_cast<int>(v);
}

dist_ops::Plan& device_plan(int handle, const std::string& node, const char* op) {
  dist_ops::Plan& plan = dist_ops::find_plan(handle, node, op);
  if (!plan.on_device())
    throw dist::DistError("node '" + node + "' (op " + op + ") runs on a GPU but " +
                          plan.where() + " is bound on the CPU");
  return plan;
}

class PlanGpuKernel final : public Kernel {
 public:
  explicit PlanGpuKernel(const KernelArgs& a) : slot_(a) {
    dist::Communicator& comm = dist::world();
    require_device_backend(comm, slot_.plan().where());
    slot_.plan().set_device(std::make_unique<NcclOrder>(comm));
  }
  bool capturable() const override { return false; }
  void forward(const OpContext& ctx, std::span<const NDArray>, std::span<const Req> req,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    slot_.plan().begin_call(s);
    if (req[0] != Req::kNull) {
      fill_value<<<1, 1, 0, s>>>(out[0].data<float>(), static_cast<float>(slot_.handle()));
      cuda::check_launch("fill_value");
    }
  }

 private:
  dist_ops::PlanSlot slot_;
};

class StartGpuKernel final : public Kernel {
 public:
  explicit StartGpuKernel(const KernelArgs& a)
      : name_(a.attrs.name),
        index_(static_cast<size_t>(a.attrs.param<dist_ops::StartParam>().index)) {}
  bool capturable() const override { return false; }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    if (handle_ == 0) handle_ = read_handle(in[1], s);
    dist_ops::Plan& plan = device_plan(handle_, name_, "_loom_allreduce_start");
    if (index_ >= plan.size())
      throw dist::DistError("node '" + name_ + "' (op _loom_allreduce_start): index " +
                            std::to_string(index_) + " but " + plan.where() + " has " +
                            std::to_string(plan.size()) + " tensors");
    if (!out[0].same_memory(in[0]) && out[0].nbytes() > 0)
      cuda::check(cudaMemcpyAsync(out[0].raw(), in[0].craw(), out[0].nbytes(),
                                  cudaMemcpyDeviceToDevice, s),
                  "_loom_allreduce_start: cudaMemcpyAsync");
    plan.arrive(index_, out[0], name_, s);
  }

 private:
  std::string name_;
  size_t index_;
  int handle_ = 0;
};

class WaitGpuKernel final : public Kernel {
 public:
  explicit WaitGpuKernel(const KernelArgs& a) : name_(a.attrs.name) {}
  bool capturable() const override { return false; }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    const size_t n = out.size();
    if (handle_ == 0) handle_ = read_handle(in[n], s);
    dist_ops::Plan& plan = device_plan(handle_, name_, "_loom_allreduce_wait");
    if (plan.size() != n)
      throw dist::DistError("node '" + name_ + "' (op _loom_allreduce_wait): " +
                            std::to_string(n) + " tensors but " + plan.where() + " has " +
                            std::to_string(plan.size()));
    for (size_t i = 0; i < n; ++i)
      if (!out[i].same_memory(in[i]))
        throw dist::DistError("node '" + name_ + "' (op _loom_allreduce_wait): output " +
                              std::to_string(i) + " must be written in place into input " +
                              std::to_string(i));
    plan.finish(s);
  }

 private:
  std::string name_;
  int handle_ = 0;
};

template <class K>
KernelFactory make() {
  return [](const KernelArgs& a) { return std::unique_ptr<Kernel>(std::make_unique<K>(a)); };
}

LOOM_REGISTER_OP("_loom_allreduce").kernel(DeviceType::kGPU, make<AllreduceGpuKernel>());
LOOM_REGISTER_OP("_loom_broadcast_once").kernel(DeviceType::kGPU, make<BroadcastOnceGpuKernel>());
LOOM_REGISTER_OP("_loom_allreduce_plan").kernel(DeviceType::kGPU, make<PlanGpuKernel>());
LOOM_REGISTER_OP("_loom_allreduce_start").kernel(DeviceType::kGPU, make<StartGpuKernel>());
LOOM_REGISTER_OP("_loom_allreduce_wait").kernel(DeviceType::kGPU, make<WaitGpuKernel>());

}  // namespace
}  // namespace loom
