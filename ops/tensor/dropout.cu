// GPU kernel of Dropout (registered by dropout.cc), float32. The keep decision is dropout.h's
// (the CPU kernel's); the uniform draws come from a counter-based generator instead of the
// CPU's sequential one. Seed rule: each training call draws one 64-bit seed from the
// executor's generator (OpContext::rng, seeded like the CPU path by mx.random.seed), and
// mask element m (of the mask shape that `axes` shares) takes the top 24 bits of the
// SplitMix64 finaliser of seed + (m + 1) * 0x9E3779B97F4A7C15. A seeded run is reproducible
// on the GPU, but its masks differ from the CPU's.
#include <limits>

#include "ops/tensor/device_plans.cuh"
#include "ops/tensor/dropout.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

__device__ __forceinline__ uint32_t uniform24(uint64_t seed, uint64_t m) {
  uint64_t z = seed + (m + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 40);
}

enum MaskMode : int { kIdentity = 0, kAllNaN = 1, kRandom = 2 };

// mask[i] = the element's mask value; y[i] (=|+=) x[i] * mask[i] (y may alias x; null: req
// null). With `shared`, element i draws for its index in the shared mask shape (plan
// operand a).
__global__ void dropout_forward(cuda::DevBcast plan, int shared, int mode, uint64_t seed, float p,
                                float scale, const float* x, float* y, float* mask, int64_t n,
                                int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float k = 1.f;
    if (mode == kAllNaN) {
      k = __int_as_float(0x7fc00000);  // quiet NaN: 0 * (1/(1-p) = inf), as MXNet
    } else if (mode == kRandom) {
      int64_t m = i, unused;
      if (shared) cuda::bcast_index(plan, i, m, unused);
      k = tensor::dropout_mask(uniform24(seed, static_cast<uint64_t>(m)), p, scale);
    }
    const float v = x[i] * k;
    mask[i] = k;
    if (y) math::assign_req(y + i, add, v);
  }
}

__global__ void dropout_backward(const float* g, const float* mask, float* dx, int64_t n, int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    math::assign_req(dx + i, add, g[i] * mask[i]);
}

class DropoutGpuKernel final : public Kernel {
 public:
  explicit DropoutGpuKernel(const KernelArgs& a)
      : p_(a.attrs.param<tensor::DropoutParam>()), n_(a.in_shapes[0].numel()) {
    cuda::require_float32(a);
    const Shape& s = a.in_shapes[0];
    Shape m = s;
    for (int64_t ax : p_.axes) m[tensor::norm_axis(ax, s.ndim(), "axes entry")] = 1;
    shared_ = m != s;
    if (shared_) plan_ = cuda::device_plan(tensor::make_bcast_plan(m, s, s), a);
  }
  // The seed is drawn on the host per call: a recorded CUDA Graph would replay one mask.
  bool capturable() const override { return false; }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (n_ == 0) return;
    int mode = kIdentity;
    uint64_t seed = 0;
    if ((ctx.is_train || p_.mode == "always") && p_.p != 0.f) {
      if (!ctx.rng) throw Error("Dropout: no random generator in the op context");
      mode = p_.p >= 1.f ? kAllNaN : kRandom;
      seed = (*ctx.rng)();
    }
    // req null still writes the mask (the backward reads it), as the CPU kernel does.
    float* y = req[0] == Req::kNull ? nullptr : out[0].data<float>();
    const int add = req[0] == Req::kAdd;
    dropout_forward<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        plan_, shared_, mode, seed, p_.p, p_.p < 1.f ? 1.f / (1.f - p_.p) : 0.f,
        in[0].data<float>(), y, out[1].data<float>(), n_, add);
    cuda::check_launch("dropout_forward");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull || n_ == 0) return;
    dropout_backward<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        og[0].data<float>(), out[1].data<float>(), ig[0].data<float>(), n_, req[0] == Req::kAdd);
    cuda::check_launch("dropout_backward");
  }

 private:
  tensor::DropoutParam p_;
  int64_t n_;
  bool shared_ = false;
  cuda::DevBcast plan_;
};

LOOM_REGISTER_OP("Dropout").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<DropoutGpuKernel>(a));
});

}  // namespace
}  // namespace loom
