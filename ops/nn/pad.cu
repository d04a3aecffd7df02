// GPU kernel of Pad (registered by pad.cc): PadView::source of pad_math.h, whose per-axis rule
// the CPU kernel's tables come from, one thread per output element. The gradient adds each
// output's gradient into the element it copies with atomics (edge and reflect copy an
// element several times: summed in another order than the CPU's). float32 only.
#include "ops/nn/pad_math.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

__global__ void pad_fwd(nn::PadView v, const float* x, float* y, float fill, int64_t n, int add) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = v.source(o);
    math::assign_req(y + o, add, k < 0 ? fill : x[k]);
  }
}

__global__ void pad_bwd(nn::PadView v, const float* g, float* dx, int64_t n) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = v.source(o);
    if (k >= 0) atomicAdd(dx + k, g[o]);
  }
}

class PadGpuKernel final : public Kernel {
 public:
  explicit PadGpuKernel(const KernelArgs& a)
      : v_(nn::pad_view(a.attrs.param<nn::PadParam>(), a.in_shapes[0], a.out_shapes[0])),
        fill_(static_cast<float>(a.attrs.param<nn::PadParam>().constant_value)),
        n_(a.out_shapes[0].numel()) {
    cuda::require_float32(a);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull || n_ == 0) return;
    pad_fwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        v_, in[0].data<float>(), out[0].data<float>(), fill_, n_, req[0] == Req::kAdd);
    cuda::check_launch("pad_fwd");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    cudaStream_t s = cuda::stream_of(ctx);
    if (req[0] != Req::kAdd)
      cuda::check(cudaMemsetAsync(ig[0].raw(), 0, ig[0].nbytes(), s), "cudaMemsetAsync");
    if (n_ == 0) return;
    pad_bwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, s>>>(v_, og[0].data<float>(),
                                                             ig[0].data<float>(), n_);
    cuda::check_launch("pad_bwd");
  }

 private:
  nn::PadView v_;
  float fill_;
  int64_t n_;
};

LOOM_REGISTER_OP("Pad").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<PadGpuKernel>(a));
});

}  // namespace
}  // namespace loom
