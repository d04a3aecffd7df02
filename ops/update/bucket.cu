// GPU kernel of _loom_bucket (registered by bucket.cc). For the inner ops make_step buckets
// (sgd_update, sgd_mom_update, nag_mom_update, adam_update, adamw_update, _adamw_update,
// rmsprop_update, rmspropalex_update, lamb_update_phase1/2, _loom_accumulate,
// _loom_ema_update) the whole bucket is one grid-stride launch over the concatenation of its
// tensors: each element finds its tensor by binary search over the prefix offsets
// (bucket_table.h, checked on the CPU) and runs the per-element step the per-tensor GPU
// kernels and the CPU kernels run (sgd.h, adam.h, more_steps.h, step_math.h, ema_math.h).
// The table (one entry per tensor: its step with its own wd, its scalars and operand
// pointers) is built at bind from the parameters and completed with the arrays' pointers on
// the first call, which runs eagerly (DESIGN.md "GPU executor"); a later call whose arrays
// moved uploads it again. Per-tensor scalars of the call (the EMA's decay, LAMB's bias
// corrections and rate) are prepared by one thread into the workspace first. Any other inner
// op, a call whose outputs have different requests, and LOOM_CUDA_BUCKET_MULTI=0 run the
// inner op's own GPU kernel tensor after tensor.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "ops/update/adam.h"
#include "ops/update/bucket.h"
#include "ops/update/bucket_table.h"
#include "ops/update/ema_math.h"
#include "ops/update/more_steps.h"
#include "ops/update/sgd.h"
#include "ops/update/step_math.h"
#include "runtime/cuda/elementwise.cuh"
#include "runtime/cuda/predicate.cuh"

namespace loom {
namespace {

using update::bucket_find;

// req: 0 write, 1 add, 2 null (states change all the same, as in the per-tensor kernels).
__device__ __forceinline__ void store_req(float* out, int req, float v) {
  if (req != 2) math::assign_req(out, req == 1, v);
}
int req_code(Req r) { return r == Req::kNull ? 2 : r == Req::kAdd ? 1 : 0; }

// ---- per-op entries: what one tensor needs, and element j of it ----

/// sgd_update (no state), sgd_mom_update, nag_mom_update: inputs w, g, [mom], [lr].
template <class Step, class P, bool kMom>
struct SgdEntry {
  using Param = P;
  Step step;
  float lr;
  const float *lr_in, *w, *g;
  float *mom, *out;
  explicit SgdEntry(const P& p) : step(p), lr(static_cast<float>(p.lr)) {}
  void bind(std::span<const NDArray> in, std::span<const NDArray> o, const P& p) {
    w = in[0].data<float>();
    g = in[1].data<float>();
    mom = kMom ? in[2].data<float>() : nullptr;
    lr_in = p.lr_input ? in[kMom ? 3 : 2].data<float>() : nullptr;
    out = o[0].data<float>();
  }
  __device__ void operator()(int64_t j, int req, const float*) const {
    float m = kMom ? mom[j] : 0.f;
    const float v = step(lr_in ? *lr_in : lr, w[j], g[j], m);
    if (kMom) mom[j] = m;
    store_req(out + j, req, v);
  }
};

/// adam_update: inputs w, g, mean, var, [lr].
struct AdamEntry {
  using Param = update::AdamParam;
  update::AdamStep step;
  float lr;
  const float *lr_in, *w, *g;
  float *mean, *var, *out;
  explicit AdamEntry(const Param& p) : step(p), lr(static_cast<float>(p.lr)) {}
  void bind(std::span<const NDArray> in, std::span<const NDArray> o, const Param& p) {
    w = in[0].data<float>();
    g = in[1].data<float>();
    mean = in[2].data<float>();
    var = in[3].data<float>();
    lr_in = p.lr_input ? in[4].data<float>() : nullptr;
    out = o[0].data<float>();
  }
  __device__ void operator()(int64_t j, int req, const float*) const {
    store_req(out + j, req, step(lr_in ? *lr_in : lr, w[j], g[j], mean[j], var[j]));
  }
};

/// rmsprop_update: inputs w, g, n, [lr]; rmspropalex_update: w, g, n, g_avg, delta, [lr].
template <bool kAlex>
struct RMSPropEntry {
  using Param = update::RMSPropParam;
  std::conditional_t<kAlex, update::RMSPropAlexStep, update::RMSPropStep> step;
  float lr;
  const float *lr_in, *w, *g;
  float *n, *ga, *delta, *out;
  explicit RMSPropEntry(const Param& p) : step(p), lr(static_cast<float>(p.lr)) {}
  void bind(std::span<const NDArray> in, std::span<const NDArray> o, const Param& p) {
    w = in[0].data<float>();
    g = in[1].data<float>();
    n = in[2].data<float>();
    ga = kAlex ? in[3].data<float>() : nullptr;
    delta = kAlex ? in[4].data<float>() : nullptr;
    lr_in = p.lr_input ? in[kAlex ? 5 : 3].data<float>() : nullptr;
    out = o[0].data<float>();
  }
  __device__ void operator()(int64_t j, int req, const float*) const {
    const float rate = lr_in ? *lr_in : lr;
    if constexpr (kAlex) store_req(out + j, req, step(rate, w[j], g[j], n[j], ga[j], delta[j]));
    else store_req(out + j, req, step(rate, w[j], g[j], n[j]));
  }
};

/// adamw_update: inputs w, g, mean, var, [eta]; _adamw_update: w, g, mean, var,
/// rescale_grad, [eta]. A skipped update (adamw_skips) keeps the weight, states untouched.
template <bool kTensorScale>
struct AdamWEntry {
  using Param = update::AdamWParam;
  update::AdamWStep step;
  float eta, rs;
  const float *eta_in, *rs_in, *w, *g;
  float *mean, *var, *out;
  explicit AdamWEntry(const Param& p)
      : step(p), eta(static_cast<float>(p.eta)), rs(static_cast<float>(p.rescale_grad)) {}
  void bind(std::span<const NDArray> in, std::span<const NDArray> o, const Param& p) {
    w = in[0].data<float>();
    g = in[1].data<float>();
    mean = in[2].data<float>();
    var = in[3].data<float>();
    rs_in = kTensorScale ? in[4].data<float>() : nullptr;
    eta_in = p.lr_input ? in[kTensorScale ? 5 : 4].data<float>() : nullptr;
    out = o[0].data<float>();
  }
  __device__ void operator()(int64_t j, int req, const float*) const {
    const float e = eta_in ? *eta_in : eta, s = rs_in ? *rs_in : rs;
    if (update::adamw_skips(s)) store_req(out + j, req, w[j]);
    else store_req(out + j, req, step(e, s, w[j], g[j], mean[j], var[j]));
  }
};

/// _loom_accumulate: inputs acc, g, first.
struct AccumulateEntry {
  using Param = update::AccumulateParam;
  float scale;
  float* acc;
  const float *g, *first;
  float* out;
  explicit AccumulateEntry(const Param& p) : scale(static_cast<float>(p.scale)) {}
  void bind(std::span<const NDArray> in, std::span<const NDArray> o, const Param&) {
    acc = in[0].data<float>();
    g = in[1].data<float>();
    first = in[2].data<float>();
    out = o[0].data<float>();
  }
  __device__ void operator()(int64_t j, int req, const float*) const {
    store_req(out + j, req, update::accumulate_step(acc[j], g[j], scale, *first != 0.f));
  }
};

/// _loom_ema_update: inputs ema, w, t, [norm]; the decay of the call is prepared per tensor
/// (with the norm's update) before the element pass.
struct EmaEntry {
  using Param = update::EmaParam;
  static constexpr int kScalars = 1;
  update::EmaSchedule sch;
  float* ema;
  const float *w, *t;
  float *norm, *out;
  explicit EmaEntry(const Param& p) : sch(update::ema_schedule(p)) {}
  void bind(std::span<const NDArray> in, std::span<const NDArray> o, const Param&) {
    ema = in[0].data<float>();
    w = in[1].data<float>();
    t = in[2].data<float>();
    norm = in.size() > 3 ? in[3].data<float>() : nullptr;
    out = o[0].data<float>();
  }
  __device__ void prepare(float* d) const {
    d[0] = static_cast<float>(sch.decay(static_cast<double>(t[0])));
    if (norm) *norm = update::ema_norm_step(d[0], *norm);
  }
  __device__ void operator()(int64_t j, int req, const float* decay) const {
    const float d = *decay, om = 1.f - d;
    const float v = ema[j] = d == 0.f ? w[j] : update::ema_step(d, om, ema[j], w[j]);
    store_req(out + j, req, v);
  }
};

/// lamb_update_phase1: inputs w, g, mean, var, [t]; the bias corrections c1, c2 of the
/// call are prepared per tensor.
struct Lamb1Entry {
  using Param = update::LambPhase1Param;
  static constexpr int kScalars = 2;
  update::LambPhase1Step step;
  double t;
  const float *t_in, *w, *g;
  float *mean, *var, *out;
  explicit Lamb1Entry(const Param& p) : step(p), t(static_cast<double>(p.t)) {}
  void bind(std::span<const NDArray> in, std::span<const NDArray> o, const Param& p) {
    w = in[0].data<float>();
    g = in[1].data<float>();
    mean = in[2].data<float>();
    var = in[3].data<float>();
    t_in = p.t_input ? in[4].data<float>() : nullptr;
    out = o[0].data<float>();
  }
  __device__ void prepare(float* c) const {
    step.corrections(t_in ? math::fn::round(static_cast<double>(*t_in)) : t, c[0], c[1]);
  }
  __device__ void operator()(int64_t j, int req, const float* c) const {
    store_req(out + j, req, step(c[0], c[1], w[j], g[j], mean[j], var[j]));
  }
};

/// lamb_update_phase2: inputs w, g, r1, r2, [lr]; the rate of the call is prepared per
/// tensor from its norms r1, r2.
struct Lamb2Entry {
  using Param = update::LambPhase2Param;
  static constexpr int kScalars = 1;
  update::LambPhase2Rate rate;
  float lr;
  const float *lr_in, *r1, *r2, *w, *g;
  float* out;
  explicit Lamb2Entry(const Param& p) : rate(p), lr(static_cast<float>(p.lr)) {}
  void bind(std::span<const NDArray> in, std::span<const NDArray> o, const Param& p) {
    w = in[0].data<float>();
    g = in[1].data<float>();
    r1 = in[2].data<float>();
    r2 = in[3].data<float>();
    lr_in = p.lr_input ? in[4].data<float>() : nullptr;
    out = o[0].data<float>();
  }
  __device__ void prepare(float* k) const { k[0] = rate(lr_in ? *lr_in : lr, *r1, *r2); }
  __device__ void operator()(int64_t j, int req, const float* k) const {
    store_req(out + j, req, w[j] - k[0] * g[j]);
  }
};

/// Floats per tensor an entry prepares once per call (0: none).
template <class E>
__host__ __device__ constexpr int scalars_of() {
  if constexpr (requires { E::kScalars; }) return E::kScalars;
  else return 0;
}

// One thread, tensor after tensor (the order of the per-tensor launches and of the CPU
// kernels, should tensors share a state such as the EMA's norm): each tensor's scalars.
template <class Entry>
__global__ void prepare_kernel(const float* pred, const Entry* e, int64_t n, float* s) {
  if (cuda::skip(pred)) return;
  for (int64_t i = 0; i < n; ++i) e[i].prepare(s + i * scalars_of<Entry>());
}

template <class Entry>
__global__ void bucket_kernel(const float* pred, const Entry* e, const int64_t* off, int64_t n,
                              int req, const float* scalars) {
  if (cuda::skip(pred)) return;
  const int64_t total = off[n];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = bucket_find(off, n, i);
    e[t](i - off[t], req, scalars ? scalars + t * scalars_of<Entry>() : nullptr);
  }
}

/// The multi-tensor pass of one inner op: the table and its launch.
class MultiPass {
 public:
  virtual ~MultiPass() = default;
  virtual size_t workspace_bytes() const { return 0; }
  virtual void run(const OpContext& ctx, std::span<const NDArray> in, int req,
                   std::span<const NDArray> out) = 0;
};

template <class Entry>
class MultiPassOf final : public MultiPass {
 public:
  MultiPassOf(const update::BucketParam& p, const KernelArgs& a) : p_(p) {
    std::vector<int64_t> sizes;
    for (size_t i = 0; i < p.n; ++i) {
      entries_.emplace_back(p.attrs[i].param<typename Entry::Param>());
      sizes.push_back(a.in_shapes[i * p.m].numel());
    }
    off_host_ = update::bucket_offsets(sizes);
    total_ = off_host_.back();
    device_ = a.device;
  }
  size_t workspace_bytes() const override {
    return p_.n * scalars_of<Entry>() * sizeof(float);
  }
  void run(const OpContext& ctx, std::span<const NDArray> in, int req,
           std::span<const NDArray> out) override {
    upload_if_moved(in, out);
    cudaStream_t s = cuda::stream_of(ctx);
    const Entry* e = reinterpret_cast<const Entry*>(table_.raw());
    float* scalars = nullptr;
    if constexpr (scalars_of<Entry>() > 0) {
      scalars = static_cast<float*>(ctx.workspace);
      prepare_kernel<<<1, 1, 0, s>>>(cuda::pred_of(ctx), e, static_cast<int64_t>(p_.n), scalars);
      cuda::check_launch("bucket prepare_kernel");
    }
    if (total_ == 0) return;
    bucket_kernel<Entry><<<cuda::grid_size(total_), cuda::kBlockSize, 0, s>>>(
        cuda::pred_of(ctx), e, off_.data<int64_t>(), static_cast<int64_t>(p_.n), req, scalars);
    cuda::check_launch("bucket_kernel");
  }

 private:
  // The pointers are fixed per bind; the first call (eager) allocates and uploads the
  // table, so constructing the kernel needs no device.
  void upload_if_moved(std::span<const NDArray> in, std::span<const NDArray> out) {
    if (off_.is_none()) {
      off_ = NDArray(Shape{static_cast<int64_t>(off_host_.size())}, DType::kInt64, device_);
      off_.copy_from_host(off_host_.data(), off_host_.size() * sizeof(int64_t));
      table_ = NDArray(Shape{static_cast<int64_t>(p_.n * sizeof(Entry))}, DType::kUint8, device_);
    }
    std::vector<const void*> ptrs;
    for (const NDArray& x : in) ptrs.push_back(x.raw());
    for (const NDArray& x : out) ptrs.push_back(x.raw());
    if (ptrs == uploaded_) return;
    for (size_t i = 0; i < p_.n; ++i)
      entries_[i].bind(in.subspan(i * p_.m, p_.m), out.subspan(i * p_.o, p_.o),
                       p_.attrs[i].param<typename Entry::Param>());
    table_.copy_from_host(entries_.data(), entries_.size() * sizeof(Entry));
    uploaded_ = std::move(ptrs);
  }

  const update::BucketParam& p_;
  std::vector<Entry> entries_;
  std::vector<int64_t> off_host_;
  Device device_;
  NDArray off_, table_;
  int64_t total_ = 0;
  std::vector<const void*> uploaded_;
};

/// The multi-tensor pass for the bucket's inner op, or null (per-tensor launches).
std::unique_ptr<MultiPass> make_multi(const update::BucketParam& p, const KernelArgs& a) {
  const char* env = std::getenv("LOOM_CUDA_BUCKET_MULTI");
  if (env && std::strcmp(env, "0") == 0) return nullptr;
  const std::string& op = p.inner->name;
  using update::SGDMomParam;
  using update::SGDParam;
  if (op == "sgd_update")
    return std::make_unique<MultiPassOf<SgdEntry<update::SGDStep, SGDParam, false>>>(p, a);
  if (op == "sgd_mom_update")
    return std::make_unique<MultiPassOf<SgdEntry<update::SGDMomStep, SGDMomParam, true>>>(p, a);
  if (op == "nag_mom_update")
    return std::make_unique<MultiPassOf<SgdEntry<update::NAGMomStep, SGDMomParam, true>>>(p, a);
  if (op == "adam_update") return std::make_unique<MultiPassOf<AdamEntry>>(p, a);
  if (op == "rmsprop_update") return std::make_unique<MultiPassOf<RMSPropEntry<false>>>(p, a);
  if (op == "rmspropalex_update") return std::make_unique<MultiPassOf<RMSPropEntry<true>>>(p, a);
  if (op == "adamw_update") return std::make_unique<MultiPassOf<AdamWEntry<false>>>(p, a);
  if (op == "_adamw_update") return std::make_unique<MultiPassOf<AdamWEntry<true>>>(p, a);
  if (op == "lamb_update_phase1") return std::make_unique<MultiPassOf<Lamb1Entry>>(p, a);
  if (op == "lamb_update_phase2") return std::make_unique<MultiPassOf<Lamb2Entry>>(p, a);
  if (op == "_loom_accumulate") return std::make_unique<MultiPassOf<AccumulateEntry>>(p, a);
  if (op == "_loom_ema_update") return std::make_unique<MultiPassOf<EmaEntry>>(p, a);
  return nullptr;
}

class BucketGpuKernel final : public Kernel {
 public:
  explicit BucketGpuKernel(const KernelArgs& a) : p_(a.attrs.param<update::BucketParam>()) {
    auto f = p_.inner->kernels.find(DeviceType::kGPU);
    if (f == p_.inner->kernels.end())
      throw Error("node '" + a.attrs.name + "' (op _loom_bucket): op '" + p_.inner->name +
                  "' has no GPU kernel");
    for (size_t i = 0; i < p_.n; ++i) {
      auto sub = [&](const auto& v, size_t b, size_t k) {
        return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin() + b,
                                                                           v.begin() + b + k);
      };
      std::vector<Shape> is = sub(a.in_shapes, i * p_.m, p_.m);
      std::vector<Shape> os = sub(a.out_shapes, i * p_.o, p_.o);
      std::vector<DType> it = sub(a.in_types, i * p_.m, p_.m);
      std::vector<DType> ot = sub(a.out_types, i * p_.o, p_.o);
      // The inner kernels check the dtypes and serve the per-tensor fallback.
      kernels_.push_back(f->second(KernelArgs{p_.attrs[i], is, os, it, ot, a.device}));
      workspace_ = std::max(workspace_, kernels_.back()->workspace_bytes());
      device_pred_ = device_pred_ && kernels_.back()->device_predicate();
      capturable_ = capturable_ && kernels_.back()->capturable();
    }
    multi_ = make_multi(p_, a);
    if (multi_) workspace_ = std::max(workspace_, multi_->workspace_bytes());
  }
  size_t workspace_bytes() const override { return workspace_; }
  bool device_predicate() const override { return device_pred_; }
  bool capturable() const override { return capturable_; }

  // One stream: each inner kernel's use of the shared workspace ends before the next starts.
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const bool same_req =
        std::all_of(req.begin(), req.end(), [&](Req r) { return r == req[0]; });
    if (multi_ && p_.o == 1 && same_req) {
      multi_->run(ctx, in, req_code(req[0]), out);
      return;
    }
    for (size_t i = 0; i < p_.n; ++i)
      kernels_[i]->forward(ctx, in.subspan(i * p_.m, p_.m), req.subspan(i * p_.o, p_.o),
                           out.subspan(i * p_.o, p_.o));
  }

 private:
  const update::BucketParam& p_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::unique_ptr<MultiPass> multi_;
  size_t workspace_ = 0;
  bool device_pred_ = true, capturable_ = true;
};

LOOM_REGISTER_OP("_loom_bucket").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<BucketGpuKernel>(a));
});

}  // namespace
}  // namespace loom
