// GPU kernels of the sharded model EMA _loom_ema_shard_update (ema.cc, DESIGN.md "Sharded
// EMA") and of the sharded optimizer's collectives _loom_shard_reduce_scatter,
// _loom_shard_norms and _loom_shard_all_gather and of _loom_shard_update (shard.cc; bottom of
// this file). The rank's range and its pieces of the weight tensors come from the CPU kernel's
// planning (update::shard_range, shard_plan.h); the decay schedule and the per-element step are
// ema_math.h's, so the device computes the CPU's expression element for element. The step
// itself never communicates (the gathers happen outside the step graph), so the kernel needs
// no communicator stream. Predicated (step_last) on the device, per runtime/cuda/predicate.cuh:
// every launch exits when the predicate is 0, so a step graph holding it can be recorded.
#include <algorithm>

#include "ops/dist/stream_join.h"
#include "ops/update/ema_math.h"
#include "ops/update/shard_plan.h"
#include "runtime/cuda/elementwise.cuh"
#include "runtime/cuda/predicate.cuh"
#include "runtime/dist/communicator.h"

namespace loom {
namespace {

// Once per call: the decay for step t into *d_out and, with zero_debias, the norm's update.
__global__ void shard_decay_kernel(const float* pred, update::EmaSchedule sch, const float* t,
                                   float* norm, float* d_out) {
  if (cuda::skip(pred)) return;
  const float d = static_cast<float>(sch.decay(static_cast<double>(t[0])));
  *d_out = d;
  if (norm) *norm = update::ema_norm_step(d, *norm);
}

// One piece: shard[i] = w[i] on a copy step (d = 0), else d·shard[i] + (1 − d)·w[i].
__global__ void shard_ema_kernel(const float* pred, const float* decay, float* shard,
                                 const float* w, int64_t n) {
  if (cuda::skip(pred)) return;
  const float d = *decay, om = 1.f - d;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    shard[i] = d == 0.f ? w[i] : update::ema_step(d, om, shard[i], w[i]);
}

// out (=|+=) shard, when the output is not the shard itself.
__global__ void shard_out_kernel(const float* pred, const float* shard, float* out, int64_t n,
                                 int add) {
  if (cuda::skip(pred)) return;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = add ? out[i] + shard[i] : shard[i];
}

class EmaShardGpuKernel final : public Kernel {
 public:
  explicit EmaShardGpuKernel(const KernelArgs& a)
      : p_(a.attrs.param<update::EmaShardParam>()), sch_(update::ema_schedule(p_)) {
    cuda::require_float32(a);
    const dist::Communicator& comm = dist::init();
    if (comm.size() != p_.world_size)
      throw dist::DistError("node '" + a.attrs.name + "' (op _loom_ema_shard_update) on rank " +
                            std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) +
                            ": the step graph shards the EMA over " +
                            std::to_string(p_.world_size) + " ranks; rebuild it for this job");
    std::vector<int64_t> sizes;
    for (size_t i = 1; i <= static_cast<size_t>(p_.num_tensors); ++i)
      sizes.push_back(a.in_shapes[i].numel());
    segs_ = update::shard_range(sizes, comm.rank(), p_.world_size, 1).segs;
    n_ = a.in_shapes[0].numel();
  }
  bool device_predicate() const override { return true; }
  size_t workspace_bytes() const override { return sizeof(float); }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    const float* pred = cuda::pred_of(ctx);
    const size_t n = static_cast<size_t>(p_.num_tensors);
    float* d = static_cast<float*>(ctx.workspace);
    float* shard = in[0].data<float>();
    shard_decay_kernel<<<1, 1, 0, s>>>(pred, sch_, in[n + 1].data<float>(),
                                       in.size() > n + 2 ? in[n + 2].data<float>() : nullptr, d);
    cuda::check_launch("shard_decay_kernel");
    for (const update::ShardSeg& g : segs_) {
      shard_ema_kernel<<<cuda::grid_size(g.len), cuda::kBlockSize, 0, s>>>(
          pred, d, shard + g.dst, in[g.tensor].cdata<float>() + g.src, g.len);
      cuda::check_launch("shard_ema_kernel");
    }
    float* o = out[0].data<float>();
    if (o != shard && req[0] != Req::kNull && n_ > 0) {
      shard_out_kernel<<<cuda::grid_size(n_), cuda::kBlockSize, 0, s>>>(pred, shard, o, n_,
                                                                        req[0] == Req::kAdd);
      cuda::check_launch("shard_out_kernel");
    }
  }

 private:
  update::EmaShardParam p_;
  update::EmaSchedule sch_;
  std::vector<update::ShardSeg> segs_;
  int64_t n_ = 0;
};

// ---- the sharded optimizer's collectives (shard.cc) ----
//
// The layout (which piece of which tensor goes where in the padded buffer) is the CPU
// kernels' (update::make_layout). Packing and unpacking are one cudaMemcpyAsync per piece
// (about one per tensor, plus one per rank boundary) on the executor's stream; the
// collectives run in place on the padded buffer on the NCCL stream, forked from and joined
// to the executor's stream by events (cuda::StreamJoin): no host wait. The nodes are
// predicated (step_last) and, being collectives, read the predicate on the host. A job of one
// rank needs no collective (the chunk is the whole buffer).

class ShardGpuBase : public Kernel {
 public:
  explicit ShardGpuBase(const KernelArgs& a) : p_(a.attrs.param<update::ShardParam>()) {
    cuda::require_float32(a);
    comm_ = &dist::init();
    where_ = "node '" + a.attrs.name + "' (op " + a.attrs.op->name + ") on rank " +
             std::to_string(comm_->rank()) + " of " + std::to_string(comm_->size());
    if (comm_->size() != p_.world_size)
      throw dist::DistError(where_ + ": the step graph shards the optimizer over " +
                            std::to_string(p_.world_size) + " ranks; rebuild it for this job");
    cuda::require_device_backend(*comm_, where_);
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < static_cast<size_t>(p_.num_tensors); ++i)
      sizes.push_back(a.in_shapes[i].numel());
    l_ = update::make_layout(sizes, p_.world_size, comm_->rank());
  }

 protected:
  bool several() const { return comm_->size() > 1; }
  cudaStream_t comm_stream() const { return static_cast<cudaStream_t>(comm_->device_stream()); }
  void copy(float* dst, const float* src, int64_t n, cudaStream_t s) const {
    cuda::check(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float),
                                cudaMemcpyDeviceToDevice, s),
                where_.c_str());
  }

  update::ShardParam p_;
  dist::Communicator* comm_;
  std::string where_;
  update::ShardLayout l_;
  cuda::StreamJoin join_;
};

class ReduceScatterGpuKernel final : public ShardGpuBase {
 public:
  using ShardGpuBase::ShardGpuBase;
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    float* flat = out[0].data<float>();
    for (const update::Piece& p : l_.all)
      copy(flat + p.dst, in[p.tensor].cdata<float>() + p.src, p.len, s);
    for (int64_t q : l_.padding)
      cuda::check(cudaMemsetAsync(flat + q, 0, sizeof(float), s), where_.c_str());
    if (!several()) return;
    join_.fork(s, comm_stream());
    comm_->ireduce_scatter(flat, flat + l_.rank * l_.count, static_cast<size_t>(l_.count),
                           DType::kFloat32);
    join_.join(s, comm_stream());
  }
};

class AllGatherGpuKernel final : public ShardGpuBase {
 public:
  using ShardGpuBase::ShardGpuBase;
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    const auto n = static_cast<size_t>(p_.num_tensors);
    float* f = in[n].data<float>();
    if (several()) {
      join_.fork(s, comm_stream());
      comm_->iall_gather(f + l_.rank * l_.count, f, static_cast<size_t>(l_.count),
                         DType::kFloat32);
      join_.join(s, comm_stream());
    }
    for (const update::Piece& p : l_.all)
      copy(out[p.tensor].data<float>() + p.src, f + p.dst, p.len, s);
    if (!out[n].same_memory(in[n])) copy(out[n].data<float>(), f, in[n].size(), s);
  }
};

// Sums of squares of one piece of a weight (into *sx) and of the direction (into *sy), in
// double: a block reduction, then one atomic add per block (so the order of the additions,
// and the last bits of the norms, vary from run to run; the CPU sums per thread in order).
__global__ void sumsq_kernel(const float* x, const float* y, int64_t n, double* sx, double* sy) {
  __shared__ double bx[cuda::kBlockSize], by[cuda::kBlockSize];
  double ax = 0, ay = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    ax += double{x[i]} * x[i];
    ay += double{y[i]} * y[i];
  }
  bx[threadIdx.x] = ax;
  by[threadIdx.x] = ay;
  __syncthreads();
  for (unsigned h = blockDim.x / 2; h > 0; h /= 2) {
    if (threadIdx.x < h) {
      bx[threadIdx.x] += bx[threadIdx.x + h];
      by[threadIdx.x] += by[threadIdx.x + h];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(sx, bx[0]);
    atomicAdd(sy, by[0]);
  }
}

__global__ void norms_kernel(const double* sums, int64_t n, float* r1, float* r2) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    r1[i] = static_cast<float>(::sqrt(sums[i]));
    r2[i] = static_cast<float>(::sqrt(sums[n + i]));
  }
}

class NormsGpuKernel final : public ShardGpuBase {
 public:
  using ShardGpuBase::ShardGpuBase;
  size_t workspace_bytes() const override {
    return 2 * static_cast<size_t>(p_.num_tensors) * sizeof(double);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    const auto n = static_cast<size_t>(p_.num_tensors);
    auto* sums = static_cast<double*>(ctx.workspace);
    cuda::check(cudaMemsetAsync(sums, 0, 2 * n * sizeof(double), s), where_.c_str());
    const float* g = in[n].cdata<float>() + l_.rank * l_.count;
    for (const update::Piece& p : l_.own) {
      const unsigned blocks = std::min(cuda::grid_size(p.len), 1024u);
      sumsq_kernel<<<blocks, cuda::kBlockSize, 0, s>>>(in[p.tensor].cdata<float>() + p.src,
                                                       g + p.dst, p.len, sums + p.tensor,
                                                       sums + n + p.tensor);
      cuda::check_launch("sumsq_kernel");
    }
    if (several()) {
      join_.fork(s, comm_stream());
      comm_->iallreduce(sums, sums, 2 * n, DType::kFloat64);
      join_.join(s, comm_stream());
    }
    norms_kernel<<<cuda::grid_size(static_cast<int64_t>(n)), cuda::kBlockSize, 0, s>>>(
        sums, static_cast<int64_t>(n), out[0].data<float>(), out[1].data<float>());
    cuda::check_launch("norms_kernel");
  }
};

// ---- _loom_shard_update: the inner update op's GPU kernel on views of the own range ----
//
// As the CPU kernel runs the inner op's CPU kernel: one inner GPU kernel per own piece, bound
// at bind to the piece's length, run on views (update::piece_views, the CPU kernel's) that
// write over the gradient's chunk of `flat`. It communicates nothing, so it takes the device
// predicate when every inner kernel does (the update ops do): it passes the node's context,
// predicate and workspace included, to each inner kernel in turn (one stream, so the
// workspace is shared).
class ShardUpdateGpuKernel final : public Kernel {
 public:
  explicit ShardUpdateGpuKernel(const KernelArgs& a)
      : p_(a.attrs.param<update::ShardUpdateParam>()) {
    cuda::require_float32(a);
    const dist::Communicator& comm = dist::init();
    const std::string where = "node '" + a.attrs.name + "' (op _loom_shard_update) on rank " +
                              std::to_string(comm.rank()) + " of " + std::to_string(comm.size());
    if (comm.size() != p_.world)
      throw dist::DistError(where + ": the step graph shards the optimizer over " +
                            std::to_string(p_.world) + " ranks; rebuild it for this job");
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < p_.n; ++i) sizes.push_back(a.in_shapes[i].numel());
    l_ = update::make_layout(sizes, p_.world, comm.rank());
    auto f = p_.inner->kernels.find(DeviceType::kGPU);
    if (f == p_.inner->kernels.end())
      throw Error(where + ": op '" + p_.inner->name + "' has no GPU kernel");
    starts_ = update::scalar_starts(p_);
    for (const update::Piece& pc : l_.own) {
      std::vector<Shape> is(p_.m, Shape{1}), os = {Shape{pc.len}};
      for (size_t j = 0; j < p_.full; ++j) is[j] = Shape{pc.len};
      std::vector<DType> it(p_.m, DType::kFloat32), ot = {DType::kFloat32};
      auto k = f->second(KernelArgs{p_.attrs[pc.tensor], is, os, it, ot, a.device});
      device_pred_ = device_pred_ && k->device_predicate();
      capturable_ = capturable_ && k->capturable();
      workspace_ = std::max(workspace_, k->workspace_bytes());
      kernels_.push_back(std::move(k));
    }
  }
  bool device_predicate() const override { return device_pred_; }
  bool capturable() const override { return capturable_; }
  size_t workspace_bytes() const override { return workspace_; }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    const update::PieceViews pv = update::piece_views(p_, l_, starts_, in, out[0]);
    static const Req kWrite[1] = {Req::kWrite};
    for (size_t s = 0; s < kernels_.size(); ++s)
      kernels_[s]->forward(ctx, pv.in[s], kWrite, std::span<const NDArray>(&pv.out[s], 1));
  }

 private:
  const update::ShardUpdateParam& p_;
  update::ShardLayout l_;
  std::vector<size_t> starts_;
  std::vector<std::unique_ptr<Kernel>> kernels_;  ///< per own piece
  bool device_pred_ = true, capturable_ = true;
  size_t workspace_ = 0;
};

template <class K>
KernelFactory make() {
  return [](const KernelArgs& a) { return std::unique_ptr<Kernel>(std::make_unique<K>(a)); };
}

LOOM_REGISTER_OP("_loom_ema_shard_update").kernel(DeviceType::kGPU, make<EmaShardGpuKernel>());
LOOM_REGISTER_OP("_loom_shard_reduce_scatter")
    .kernel(DeviceType::kGPU, make<ReduceScatterGpuKernel>());
LOOM_REGISTER_OP("_loom_shard_all_gather").kernel(DeviceType::kGPU, make<AllGatherGpuKernel>());
LOOM_REGISTER_OP("_loom_shard_norms").kernel(DeviceType::kGPU, make<NormsGpuKernel>());
LOOM_REGISTER_OP("_loom_shard_update").kernel(DeviceType::kGPU, make<ShardUpdateGpuKernel>());

}  // namespace
}  // namespace loom
