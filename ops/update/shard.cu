// GPU kernel of the sharded model EMA _loom_ema_shard_update (ema.cc, DESIGN.md "Sharded
// EMA"). The rank's range and its pieces of the weight tensors come from the CPU kernel's
// planning (update::shard_range, shard_plan.h); the decay schedule and the per-element step are
// ema_math.h's, so the device computes the CPU's expression element for element. The step
// itself never communicates (the gathers happen outside the step graph), so the kernel needs
// no communicator stream. Predicated (step_last) on the device, per runtime/cuda/predicate.cuh:
// every launch exits when the predicate is 0, so a step graph holding it can be recorded.
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

LOOM_REGISTER_OP("_loom_ema_shard_update").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<EmaShardGpuKernel>(a));
});

}  // namespace
}  // namespace loom
