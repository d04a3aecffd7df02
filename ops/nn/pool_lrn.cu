// GPU kernels of Pooling and LRN as plain CUDA over the CPU kernels' own window arithmetic
// (ops/nn/pool_window.h, ops/nn/lrn_math.h), so the CPU tests check the rules the GPU runs.
// Pooling is not a cuDNN call: MXNet's rules (an avg divisor that counts padding only up to
// the padded border for 'full' windows, a max over padding-only windows that stays at the
// lowest float, the max gradient routed to the first maximal cell) are not all expressible
// in cuDNN's resample operation, and one kernel keeps every case exact.
#include <cfloat>

#include "ops/nn/lrn_math.h"
#include "ops/nn/pool_window.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

using nn::PoolGeometry;
using nn::PoolKind;

// The output index `idx` (plane-major, then od, oh, ow) as its plane and window position.
__device__ inline int64_t split_output(const PoolGeometry& g, int64_t idx, int64_t* o) {
  const int64_t osz = g.out_size();
  const int64_t plane = idx / osz;
  int64_t r = idx - plane * osz;
  o[2] = r % g.out[2];
  r /= g.out[2];
  o[1] = r % g.out[1];
  o[0] = r / g.out[1];
  return plane;
}

// One thread per output: the max or sum over its clipped window, as the CPU loop.
__global__ void pool_forward(PoolGeometry g, PoolKind kind, bool include_pad, const float* x,
                             float* y, int64_t n, int add) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int64_t o[3], lo[3], hi[3];
    const int64_t plane = split_output(g, idx, o);
    const float div = g.clipped(o, kind, include_pad, lo, hi);
    const float* xp = x + plane * g.in_size();
    float acc = kind == PoolKind::kMax ? -FLT_MAX : 0.f;
    bool any = false;
    for (int64_t d = lo[0]; d < hi[0]; ++d)
      for (int64_t h = lo[1]; h < hi[1]; ++h)
        for (int64_t w = lo[2]; w < hi[2]; ++w) {
          const float v = xp[(d * g.in[1] + h) * g.in[2] + w];
          acc = kind == PoolKind::kMax ? fmaxf(acc, v) : acc + v;
          any = true;
        }
    math::assign_req(y + idx, add, nn::pool_result(kind, acc, any, div));
  }
}

// One thread per output, adding its gradient into dx (zeroed first for req=write): to the
// first maximal cell of the window (max), or 1/divisor to each real cell (avg; 1 for sum).
// Overlapping windows add atomically, so the order of the sums differs from the CPU's.
__global__ void pool_backward(PoolGeometry g, PoolKind kind, bool include_pad, const float* gy,
                              const float* x, float* dx, int64_t n) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int64_t o[3], lo[3], hi[3];
    const int64_t plane = split_output(g, idx, o);
    const float div = g.clipped(o, kind, include_pad, lo, hi);
    const int64_t base = plane * g.in_size();
    const float gv = gy[idx];
    int64_t best = -1;
    float best_v = -FLT_MAX;
    for (int64_t d = lo[0]; d < hi[0]; ++d)
      for (int64_t h = lo[1]; h < hi[1]; ++h)
        for (int64_t w = lo[2]; w < hi[2]; ++w) {
          const int64_t i = base + (d * g.in[1] + h) * g.in[2] + w;
          if (kind != PoolKind::kMax)
            atomicAdd(dx + i, gv / div);
          else if (best < 0 || x[i] > best_v)
            best = i, best_v = x[i];
        }
    if (best >= 0) atomicAdd(dx + best, gv);
  }
}

class PoolGpuKernel final : public Kernel {
 public:
  explicit PoolGpuKernel(const KernelArgs& a) {
    cuda::require_float32(a);
    const auto& p = a.attrs.param<nn::PoolParam>();
    g_ = nn::make_pool_geometry(p, a.in_shapes[0], a.out_shapes[0]);
    kind_ = p.pool_type == "max"   ? PoolKind::kMax
            : p.pool_type == "avg" ? PoolKind::kAvg
                                   : PoolKind::kSum;
    include_pad_ = p.count_include_pad.value_or(true);
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const int64_t n = out[0].size();
    if (req[0] == Req::kNull || n == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    pool_forward<<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(
        g_, kind_, include_pad_, in[0].data<float>(), out[0].data<float>(), n, req[0] == Req::kAdd);
    cuda::check_launch("pool_forward");
  }

  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    cudaStream_t s = cuda::stream_of(ctx);
    float* dx = ig[0].data<float>();
    // req=add: the windows' contributions go straight onto the old gradient.
    if (req[0] != Req::kAdd)
      cuda::check(cudaMemsetAsync(dx, 0, ig[0].size() * sizeof(float), s), "cudaMemsetAsync");
    const int64_t n = og[0].size();
    if (n == 0) return;
    const float* x = kind_ == PoolKind::kMax ? in[0].data<float>() : nullptr;
    pool_backward<<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(g_, kind_, include_pad_,
                                                                  og[0].data<float>(), x, dx, n);
    cuda::check_launch("pool_backward");
  }

 private:
  PoolGeometry g_{};
  PoolKind kind_ = PoolKind::kMax;
  bool include_pad_ = true;
};

// ---------------------------------------------------------------------------------- LRN

// One thread per element (b, c, j): its norm and output (forward) or its gradient.
__global__ void lrn_forward(nn::LRNMath m, const float* x, float* y, float* norm, int64_t n,
                            int write_y, int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / m.inner) % m.channels;
    const float v = m.norm(x, i - c * m.inner, c);  // base: channel 0 at the same (b, j)
    norm[i] = v;
    if (write_y) math::assign_req(y + i, add, m.output(x[i], v));
  }
}

__global__ void lrn_backward(nn::LRNMath m, const float* g, const float* x, const float* norm,
                             float* dx, int64_t n, int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / m.inner) % m.channels;
    math::assign_req(dx + i, add, m.grad(g, x, norm, i - c * m.inner, c));
  }
}

class LRNGpuKernel final : public Kernel {
 public:
  explicit LRNGpuKernel(const KernelArgs& a) {
    cuda::require_float32(a);
    const auto& p = a.attrs.param<nn::LRNParam>();
    const Shape& s = a.in_shapes[0];
    const int64_t c = s[1], inner = s[0] * c != 0 ? s.numel() / (s[0] * c) : 0;
    m_ = nn::LRNMath::make(c, inner, p.nsize, p.alpha, p.beta, p.knorm);
  }

  // The hidden norm output is always written: backward reads it.
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const int64_t n = in[0].size();
    if (n == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    lrn_forward<<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(
        m_, in[0].data<float>(), out[0].data<float>(), out[1].data<float>(), n,
        req[0] != Req::kNull, req[0] == Req::kAdd);
    cuda::check_launch("lrn_forward");
  }

  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    const int64_t n = in[0].size();
    if (req[0] == Req::kNull || n == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    lrn_backward<<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(
        m_, og[0].data<float>(), in[0].data<float>(), out[1].data<float>(), ig[0].data<float>(), n,
        req[0] == Req::kAdd);
    cuda::check_launch("lrn_backward");
  }

 private:
  nn::LRNMath m_{};
};

LOOM_REGISTER_OP("Pooling").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<PoolGpuKernel>(a));
});
LOOM_REGISTER_OP("LRN").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<LRNGpuKernel>(a));
});

}  // namespace
}  // namespace loom
