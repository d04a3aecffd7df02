// GPU kernels of the optimizer updates sgd_update, sgd_mom_update, nag_mom_update (registered
// by sgd.cc) and adam_update (adam.cc), of the step-state ops _loom_counter,
// _loom_step_predicate and _loom_accumulate (step_state.cc) and of the model EMA
// _loom_ema_update and _loom_ema_debias (ema.cc): grid-stride passes over the per-element
// functions of sgd.h, adam.h, step_math.h and ema_math.h, which the CPU kernels run. Scalars
// that are tensors (lr_input, the counter, the `first` flag, the EMA's step t and norm) are
// read on the device: no host round trip. So is the node's predicate when the node is
// predicated (runtime/cuda/predicate.cuh): every kernel below returns early while it is 0.
#include "ops/update/adam.h"
#include "ops/update/ema_math.h"
#include "ops/update/sgd.h"
#include "ops/update/step_math.h"
#include "runtime/cuda/elementwise.cuh"
#include "runtime/cuda/predicate.cuh"

namespace loom {
namespace {

// out[i] (=|+=|dropped per `req`) step(lr, w[i], g[i], mom[i]); mom may be null (no state).
// req: 0 write, 1 add, 2 null (the state is updated all the same, as MXNet does).
template <class Step>
__global__ void sgd_family_kernel(const float* pred, Step step, float lr, const float* lr_in,
                                  const float* w, const float* g, float* mom, float* out,
                                  int64_t n, int req) {
  if (cuda::skip(pred)) return;
  const float rate = lr_in ? *lr_in : lr;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float m = mom ? mom[i] : 0.f;
    const float v = step(rate, w[i], g[i], m);
    if (mom) mom[i] = m;
    if (req != 2) math::assign_req(out + i, req == 1, v);
  }
}

template <class Step, class P, bool kMom>
class SGDFamilyGpuKernel final : public Kernel {
 public:
  explicit SGDFamilyGpuKernel(const KernelArgs& a)
      : p_(a.attrs.param<P>()), step_(p_), n_(a.in_shapes[0].numel()) {
    cuda::require_float32(a);
  }
  bool device_predicate() const override { return true; }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (n_ == 0) return;
    const int r = req[0] == Req::kNull ? 2 : req[0] == Req::kAdd ? 1 : 0;
    const float* lr_in = p_.lr_input ? in[kMom ? 3 : 2].data<float>() : nullptr;
    sgd_family_kernel<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        cuda::pred_of(ctx), step_, static_cast<float>(p_.lr), lr_in, in[0].data<float>(), in[1].data<float>(),
        kMom ? in[2].data<float>() : nullptr, out[0].data<float>(), n_, r);
    cuda::check_launch("sgd_family_kernel");
  }

 private:
  P p_;
  Step step_;
  int64_t n_;
};

template <class K>
KernelFactory make() {
  return [](const KernelArgs& a) -> std::unique_ptr<Kernel> { return std::make_unique<K>(a); };
}

using update::SGDMomParam;
using update::SGDParam;
LOOM_REGISTER_OP("sgd_update")
    .kernel(DeviceType::kGPU, make<SGDFamilyGpuKernel<update::SGDStep, SGDParam, false>>());
LOOM_REGISTER_OP("sgd_mom_update")
    .kernel(DeviceType::kGPU, make<SGDFamilyGpuKernel<update::SGDMomStep, SGDMomParam, true>>());
LOOM_REGISTER_OP("nag_mom_update")
    .kernel(DeviceType::kGPU, make<SGDFamilyGpuKernel<update::NAGMomStep, SGDMomParam, true>>());

// Adam: two states (mean, var), the learning rate in input 4 with lr_input.
__global__ void adam_kernel(const float* pred, update::AdamStep step, float lr,
                            const float* lr_in, const float* w, const float* g, float* mean,
                            float* var, float* out, int64_t n, int req) {
  if (cuda::skip(pred)) return;
  const float rate = lr_in ? *lr_in : lr;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = step(rate, w[i], g[i], mean[i], var[i]);
    if (req != 2) math::assign_req(out + i, req == 1, v);
  }
}

class AdamGpuKernel final : public Kernel {
 public:
  explicit AdamGpuKernel(const KernelArgs& a)
      : p_(a.attrs.param<update::AdamParam>()), step_(p_), n_(a.in_shapes[0].numel()) {
    cuda::require_float32(a);
  }
  bool device_predicate() const override { return true; }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (n_ == 0) return;
    const int r = req[0] == Req::kNull ? 2 : req[0] == Req::kAdd ? 1 : 0;
    adam_kernel<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        cuda::pred_of(ctx), step_, static_cast<float>(p_.lr), p_.lr_input ? in[4].data<float>() : nullptr,
        in[0].data<float>(), in[1].data<float>(), in[2].data<float>(), in[3].data<float>(),
        out[0].data<float>(), n_, r);
    cuda::check_launch("adam_kernel");
  }

 private:
  update::AdamParam p_;
  update::AdamStep step_;
  int64_t n_;
};

LOOM_REGISTER_OP("adam_update").kernel(DeviceType::kGPU, make<AdamGpuKernel>());

// ---- step state ----

// req: 0 write, 1 add, 2 null (the state changes all the same).
__device__ __forceinline__ void store_req(float* out, int req, float v) {
  if (req != 2) math::assign_req(out, req == 1, v);
}
int req_code(Req r) { return r == Req::kNull ? 2 : r == Req::kAdd ? 1 : 0; }

__global__ void counter_kernel(const float* pred, float* t, float step, float* out, int req) {
  if (cuda::skip(pred)) return;
  store_req(out, req, update::counter_step(t[0], step));
}

__global__ void predicate_kernel(const float* pred, const float* t, update::PredicateParam p,
                                 float* out, int req) {
  if (cuda::skip(pred)) return;
  store_req(out, req, update::step_predicate(t[0], p.k, p.r, p.offset));
}

__global__ void accumulate_kernel(const float* pred, float* acc, const float* g,
                                  const float* first, float scale, float* out, int64_t n,
                                  int req) {
  if (cuda::skip(pred)) return;
  const bool is_first = *first != 0.f;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store_req(out + i, req, update::accumulate_step(acc[i], g[i], scale, is_first));
}

class CounterGpuKernel final : public Kernel {
 public:
  explicit CounterGpuKernel(const KernelArgs& a)
      : step_(static_cast<float>(a.attrs.param<update::CounterParam>().step)) {
    cuda::require_float32(a);
  }
  bool device_predicate() const override { return true; }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    counter_kernel<<<1, 1, 0, cuda::stream_of(ctx)>>>(cuda::pred_of(ctx), in[0].data<float>(),
                                                      step_, out[0].data<float>(),
                                                      req_code(req[0]));
    cuda::check_launch("counter_kernel");
  }

 private:
  float step_;
};

class PredicateGpuKernel final : public Kernel {
 public:
  explicit PredicateGpuKernel(const KernelArgs& a) : p_(a.attrs.param<update::PredicateParam>()) {
    cuda::require_float32(a);
  }
  bool device_predicate() const override { return true; }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    predicate_kernel<<<1, 1, 0, cuda::stream_of(ctx)>>>(cuda::pred_of(ctx), in[0].data<float>(),
                                                        p_, out[0].data<float>(),
                                                        req_code(req[0]));
    cuda::check_launch("predicate_kernel");
  }

 private:
  update::PredicateParam p_;
};

class AccumulateGpuKernel final : public Kernel {
 public:
  explicit AccumulateGpuKernel(const KernelArgs& a)
      : scale_(static_cast<float>(a.attrs.param<update::AccumulateParam>().scale)),
        n_(a.in_shapes[0].numel()) {
    cuda::require_float32(a);
  }
  bool device_predicate() const override { return true; }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (n_ == 0) return;
    accumulate_kernel<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        cuda::pred_of(ctx), in[0].data<float>(), in[1].data<float>(), in[2].data<float>(), scale_, out[0].data<float>(),
        n_, req_code(req[0]));
    cuda::check_launch("accumulate_kernel");
  }

 private:
  float scale_;
  int64_t n_;
};

LOOM_REGISTER_OP("_loom_counter").kernel(DeviceType::kGPU, make<CounterGpuKernel>());
LOOM_REGISTER_OP("_loom_step_predicate").kernel(DeviceType::kGPU, make<PredicateGpuKernel>());
LOOM_REGISTER_OP("_loom_accumulate").kernel(DeviceType::kGPU, make<AccumulateGpuKernel>());

// ---- model EMA ----

// Once per call: the decay for step t (into *d_out, for ema_kernel) and, with zero_debias,
// the norm's update.
__global__ void ema_decay_kernel(const float* pred, update::EmaSchedule sch, const float* t,
                                 float* norm, float* d_out) {
  if (cuda::skip(pred)) return;
  const float d = static_cast<float>(sch.decay(static_cast<double>(t[0])));
  *d_out = d;
  if (norm) *norm = update::ema_norm_step(d, *norm);
}

// ema = w on a copy step (d = 0: the old ema is not read), else d·ema + (1 − d)·w.
__global__ void ema_kernel(const float* pred, const float* decay, float* ema, const float* w,
                           float* out, int64_t n, int req) {
  if (cuda::skip(pred)) return;
  const float d = *decay, om = 1.f - d;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = ema[i] = d == 0.f ? w[i] : update::ema_step(d, om, ema[i], w[i]);
    store_req(out + i, req, v);
  }
}

__global__ void ema_debias_kernel(const float* pred, const float* ema, const float* norm,
                                  float* out, int64_t n, int req) {
  if (cuda::skip(pred)) return;
  const float q = *norm;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    store_req(out + i, req, update::ema_debias(ema[i], q));
}

class EmaGpuKernel final : public Kernel {
 public:
  explicit EmaGpuKernel(const KernelArgs& a)
      : sch_(update::ema_schedule(a.attrs.param<update::EmaParam>())), n_(a.in_shapes[0].numel()) {
    cuda::require_float32(a);
  }
  bool device_predicate() const override { return true; }
  size_t workspace_bytes() const override { return sizeof(float); }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    float* d = static_cast<float*>(ctx.workspace);
    ema_decay_kernel<<<1, 1, 0, s>>>(cuda::pred_of(ctx), sch_, in[2].data<float>(),
                                     in.size() > 3 ? in[3].data<float>() : nullptr, d);
    cuda::check_launch("ema_decay_kernel");
    if (n_ == 0) return;
    ema_kernel<<<cuda::grid_size(n_), cuda::kBlockSize, 0, s>>>(
        cuda::pred_of(ctx), d, in[0].data<float>(), in[1].data<float>(), out[0].data<float>(), n_, req_code(req[0]));
    cuda::check_launch("ema_kernel");
  }

 private:
  update::EmaSchedule sch_;
  int64_t n_;
};

class EmaDebiasGpuKernel final : public Kernel {
 public:
  explicit EmaDebiasGpuKernel(const KernelArgs& a) : n_(a.in_shapes[0].numel()) {
    cuda::require_float32(a);
  }
  bool device_predicate() const override { return true; }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (n_ == 0 || req[0] == Req::kNull) return;
    ema_debias_kernel<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        cuda::pred_of(ctx), in[0].data<float>(), in[1].data<float>(), out[0].data<float>(), n_, req_code(req[0]));
    cuda::check_launch("ema_debias_kernel");
  }

 private:
  int64_t n_;
};

LOOM_REGISTER_OP("_loom_ema_update").kernel(DeviceType::kGPU, make<EmaGpuKernel>());
LOOM_REGISTER_OP("_loom_ema_debias").kernel(DeviceType::kGPU, make<EmaDebiasGpuKernel>());

}  // namespace
}  // namespace loom
