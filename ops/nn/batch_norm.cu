// GPU kernel of BatchNorm: one block per channel over the data viewed as (outer, C, inner),
// with the per-channel arithmetic of the CPU kernel (ops/nn/batch_norm_math.h): batch
// statistics summed in double (mean, then the biased variance around it, as the CPU's two
// passes), y = x·scale + shift, the moving statistics updated in backward with MXNet's
// momentum convention, fix_gamma writing ones into gamma in training forward.
// Plain CUDA rather than cuDNN's norm nodes: cuDNN's batch-norm keeps the unbiased variance
// in its running statistics and updates them in forward, which MXNet's CPU semantics (the
// oracle) do not; one block per channel is a first version (few channels and large maps
// leave most of the GPU idle).
#include "ops/nn/batch_norm_math.h"
#include "ops/nn/block_reduce.cuh"
#include "ops/nn/nn_util.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

struct BNDims {
  int64_t outer, channels, inner;
};

// Which outputs a forward call writes (0 = skip, 1 = write, 2 = add).
struct BNReq {
  int y, mean, invstd;
};

__device__ inline void put(float* p, int code, float v) {
  if (code) math::assign_req(p, code == 2, v);
}

__global__ void bn_forward(BNDims d, double eps, bool train, bool fix_gamma, BNReq req,
                           const float* x, float* gamma, const float* beta, const float* mm,
                           const float* mv, float* y, float* mean, float* invstd) {
  const int64_t c = blockIdx.x, m = d.outer * d.inner;
  double mu, is;
  if (train) {
    double s = 0;
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x)
      s += x[cuda::channel_index(k, c, d.channels, d.inner)];
    mu = cuda::block_sum(s) / static_cast<double>(m);
    double s2 = 0;
    for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
      const double v = x[cuda::channel_index(k, c, d.channels, d.inner)] - mu;
      s2 += v * v;
    }
    is = nn::bn_invstd(cuda::block_sum(s2) / static_cast<double>(m), eps);
  } else {
    mu = mm[c];
    is = nn::bn_invstd(mv[c], eps);
  }
  float scale, shift;
  nn::bn_scale_shift(static_cast<float>(is), static_cast<float>(mu), fix_gamma ? 1.f : gamma[c],
                     beta[c], fix_gamma, &scale, &shift);
  if (threadIdx.x == 0) {
    put(mean + c, req.mean, static_cast<float>(mu));
    put(invstd + c, req.invstd, static_cast<float>(is));
    if (train && fix_gamma) gamma[c] = 1.f;  // MXNet overwrites gamma in training forward
  }
  if (!req.y) return;
  // In place (y = x) is safe: every read of x for the statistics precedes block_sum's
  // barrier, and each element is read before its own write below.
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    const int64_t i = cuda::channel_index(k, c, d.channels, d.inner);
    put(y + i, req.y, x[i] * scale + shift);
  }
}

__global__ void bn_backward(BNDims d, double eps, float momentum, bool train, bool fix_gamma,
                            BNReq req, const float* g, const float* x, const float* gamma,
                            float* mm, float* mv, const float* mean, const float* invstd, float* dx,
                            float* dgamma, float* dbeta) {
  const int64_t c = blockIdx.x, m = d.outer * d.inner;
  double mu, is;
  if (train) {  // the batch statistics saved by forward
    mu = mean[c];
    is = invstd[c];
  } else {
    mu = mm[c];
    is = nn::bn_invstd(mv[c], eps);
  }
  double sg = 0, sgx = 0;  // Σ g and Σ g·x̂
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    const int64_t i = cuda::channel_index(k, c, d.channels, d.inner);
    sg += g[i];
    sgx += g[i] * (x[i] - mu) * is;
  }
  sg = cuda::block_sum(sg);
  sgx = cuda::block_sum(sgx);
  if (threadIdx.x == 0) {
    if (train) {  // MXNet 1.9.1 updates the moving statistics in backward
      mm[c] = nn::bn_moving(mm[c], mu, momentum);
      mv[c] = nn::bn_moving(mv[c], nn::bn_var_from_invstd(is, eps), momentum);
    }
    put(dgamma + c, req.mean, fix_gamma ? 0.f : static_cast<float>(sgx));
    put(dbeta + c, req.invstd, static_cast<float>(sg));
  }
  if (!req.y) return;
  const float k1 = static_cast<float>((fix_gamma ? 1.f : gamma[c]) * is);
  const float mg = static_cast<float>(sg / static_cast<double>(m));
  const float mgx = static_cast<float>(sgx / static_cast<double>(m));
  const float fmu = static_cast<float>(mu), fis = static_cast<float>(is);
  // dx may alias g (backward in place): g is read before dx is written, per element.
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x) {
    const int64_t i = cuda::channel_index(k, c, d.channels, d.inner);
    put(dx + i, req.y, train ? nn::bn_dx_train(g[i], x[i], fmu, fis, mg, mgx, k1) : g[i] * k1);
  }
}

int code(Req r) { return r == Req::kNull ? 0 : r == Req::kAdd ? 2 : 1; }

class BatchNormGpuKernel final : public Kernel {
 public:
  explicit BatchNormGpuKernel(const KernelArgs& a) : p_(a.attrs.param<nn::BNParam>()) {
    cuda::require_float32(a);
    const Shape& s = a.in_shapes[0];
    const int ax = nn::normalize_axis(p_.axis, s.ndim(), "BatchNorm");
    d_ = {1, s[ax], 1};
    for (int i = 0; i < s.ndim(); ++i) {
      if (i < ax) d_.outer *= s[i];
      if (i > ax) d_.inner *= s[i];
    }
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (d_.channels == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    const bool train = ctx.is_train && !p_.use_global_stats;
    bn_forward<<<static_cast<unsigned>(d_.channels), cuda::kChannelBlock, 0, s>>>(
        d_, p_.eps, train, p_.fix_gamma, BNReq{code(req[0]), code(req[1]), code(req[2])},
        in[0].data<float>(), in[1].data<float>(), in[2].data<float>(), in[3].data<float>(),
        in[4].data<float>(), out[0].data<float>(), out[1].data<float>(), out[2].data<float>());
    cuda::check_launch("bn_forward");
  }

  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (d_.channels == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    const bool train = ctx.is_train && !p_.use_global_stats;
    auto ptr = [&](size_t i) { return req[i] == Req::kNull ? nullptr : ig[i].data<float>(); };
    // BNReq's fields here: data, gamma and beta gradients.
    bn_backward<<<static_cast<unsigned>(d_.channels), cuda::kChannelBlock, 0, s>>>(
        d_, p_.eps, p_.momentum, train, p_.fix_gamma,
        BNReq{code(req[0]), code(req[1]), code(req[2])}, og[0].data<float>(), in[0].data<float>(),
        in[1].data<float>(), in[3].data<float>(), in[4].data<float>(),
        train ? out[1].data<float>() : nullptr, train ? out[2].data<float>() : nullptr, ptr(0),
        ptr(1), ptr(2));
    cuda::check_launch("bn_backward");
  }

 private:
  nn::BNParam p_;
  BNDims d_{};
};

LOOM_REGISTER_OP("BatchNorm").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<BatchNormGpuKernel>(a));
});

}  // namespace
}  // namespace loom
