// GPU kernel of LeakyReLU (the op and its CPU kernel are registered by leaky_relu.cc): the
// per-element functions of leaky_relu_math.h, which the CPU loops run too. Plain layouts
// only; rrelu runs in inference (slope (lower + upper) / 2, as the CPU); its random training
// slopes are refused on the GPU. prelu's gamma gradient: one block per gamma element.
#include "ops/nn/leaky_relu_math.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

using nn::LeakyAct;

// Where element i's slope `a` comes from.
struct LeakySlope {
  LeakyAct act;
  float slope;  ///< leaky, elu; rrelu in inference
  int64_t inner, channels, gamma_n, gamma_c;
  LOOM_HD float at(const float* gamma, int64_t i) const {
    return act == LeakyAct::kPrelu
               ? gamma[nn::prelu_gamma_index(i, inner, channels, gamma_n, gamma_c)]
               : slope;
  }
};

__global__ void leaky_fwd(LeakySlope s, const float* x, const float* gamma, float* y, float* mask,
                          int64_t n, int write_y, int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float a = s.at(gamma, i);
    const float v = nn::leaky_value(s.act, x[i], a);  // read before a write in place
    if (mask) mask[i] = a;
    if (write_y) math::assign_req(y + i, add, v);
  }
}

__global__ void leaky_bwd(LeakySlope s, const float* g, const float* x, const float* gamma,
                          const float* mask, float* dx, int64_t n, int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float a = mask ? mask[i] : s.at(gamma, i);
    math::assign_req(dx + i, add, g[i] * nn::leaky_deriv(s.act, x[i], a));
  }
}

// dγ[e] (=|+=) Σ g·x over x ≤ 0 of the data elements gamma element e covers; block e, sums in
// double (the CPU's accumulator type, in another order).
constexpr int kGammaThreads = 256;
__global__ void prelu_gamma_grad(LeakySlope s, const float* g, const float* x, float* dgamma,
                                 int64_t n, int add) {
  __shared__ double part[kGammaThreads];
  const int64_t e = blockIdx.x;
  const int64_t gn = e / s.gamma_c, gc = e % s.gamma_c;
  const int64_t outer = n / (s.inner * s.channels);
  // The covered elements: sample (gn, or every sample), channel (gc, or every channel),
  // every inner position.
  const int64_t cn = s.gamma_n == 1 ? outer : 1, cc = s.gamma_c == 1 ? s.channels : 1;
  const int64_t count = cn * cc * s.inner;
  double mine = 0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const int64_t p = k % s.inner, c = (k / s.inner) % cc, m = k / (s.inner * cc);
    const int64_t nn_ = s.gamma_n == 1 ? m : gn, ch = s.gamma_c == 1 ? c : gc;
    const int64_t i = (nn_ * s.channels + ch) * s.inner + p;
    if (x[i] <= 0.f) mine += static_cast<double>(g[i]) * static_cast<double>(x[i]);
  }
  part[threadIdx.x] = mine;
  __syncthreads();
  for (int w = kGammaThreads / 2; w > 0; w /= 2) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) math::assign_req(dgamma + e, add, static_cast<float>(part[0]));
}

class LeakyGpuKernel final : public Kernel {
 public:
  explicit LeakyGpuKernel(const KernelArgs& a) : what_("op LeakyReLU (node " + a.attrs.name + ")") {
    cuda::require_float32(a);
    const auto& p = a.attrs.param<nn::LeakyParam>();
    const Shape& sh = a.in_shapes[0];
    n_ = sh.numel();
    s_ = LeakySlope{nn::act_from_name(p.act_type), p.slope, 1, 1, 1, 1};
    if (s_.act == LeakyAct::kRrelu) s_.slope = (p.lower_bound + p.upper_bound) / 2;
    if (a.layout(LayoutSlot::kIn, 0) != Layout::kPlain)
      throw Error(what_ + ": the GPU kernel takes plain layouts only");
    if (s_.act == LeakyAct::kPrelu) {
      if (sh.ndim() < 2) throw ShapeError(what_ + ": prelu needs at least 2-d data");
      s_.channels = sh[1];
      s_.inner = n_ / (sh[0] * sh[1]);
      auto [g0, g1] = nn::prelu_gamma_dims(a.in_shapes[1], sh, what_);
      s_.gamma_n = g0;
      s_.gamma_c = g1;
    }
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const bool rrelu = s_.act == LeakyAct::kRrelu;
    if (rrelu && ctx.is_train)
      throw Error(what_ +
                  ": rrelu in training (random slopes) has no GPU kernel yet; it runs "
                  "in inference on the GPU, or on the CPU");
    if (n_ == 0 || (req[0] == Req::kNull && !rrelu)) return;
    leaky_fwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        s_, in[0].data<float>(), gamma(in), out[0].data<float>(),
        rrelu ? out[1].data<float>() : nullptr, n_, req[0] != Req::kNull, req[0] == Req::kAdd);
    cuda::check_launch("leaky_fwd");
  }

  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (n_ == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    const float* g = og[0].data<float>();
    const float* x = in[0].data<float>();
    if (s_.act == LeakyAct::kPrelu && req.size() > 1 && req[1] != Req::kNull) {
      prelu_gamma_grad<<<static_cast<unsigned>(s_.gamma_n * s_.gamma_c), kGammaThreads, 0, s>>>(
          s_, g, x, ig[1].data<float>(), n_, req[1] == Req::kAdd);
      cuda::check_launch("prelu_gamma_grad");
    }
    if (req[0] == Req::kNull) return;
    const float* mask = s_.act == LeakyAct::kRrelu ? out[1].data<float>() : nullptr;
    leaky_bwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, s>>>(
        s_, g, x, gamma(in), mask, ig[0].data<float>(), n_, req[0] == Req::kAdd);
    cuda::check_launch("leaky_bwd");
  }

 private:
  const float* gamma(std::span<const NDArray> in) const {
    return s_.act == LeakyAct::kPrelu ? in[1].data<float>() : nullptr;
  }

  std::string what_;
  LeakySlope s_;
  int64_t n_ = 0;
};

LOOM_REGISTER_OP("LeakyReLU").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<LeakyGpuKernel>(a));
});

}  // namespace
}  // namespace loom
