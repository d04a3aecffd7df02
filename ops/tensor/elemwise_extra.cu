// GPU kernels of clip (registered by unary_math.cc), hard_sigmoid (hard_sigmoid.cc),
// logical_not, the STE ops, gradientmultiplier, _contrib_quadratic, _contrib_div_sqrt_dim,
// _hypot, _hypot_scalar (hypot_math.h), gamma, gammaln (gamma_math.h) and erfinv
// (erfinv_math.h; these in double), _mod, _mod_scalar and _rmod_scalar (mod_math.h):
// (stateful) functors over the functions of clip_math.h and unary_extra_math.h, which the CPU
// kernels run, through the element-wise kernels of runtime/cuda/elementwise.cuh. float32 only.
#include "ops/tensor/clip_math.h"
#include "ops/tensor/erfinv_math.h"
#include "ops/tensor/gamma_math.h"
#include "ops/tensor/hypot_math.h"
#include "ops/tensor/mod_math.h"
#include "ops/tensor/unary_extra_math.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

struct ClipF {
  double lo, hi;
  float tlo, thi;
  LOOM_HD float f(float x) const { return tensor::clip_value(x, lo, hi, tlo, thi); }
  LOOM_HD float d(float x, float) const { return tensor::clip_passes(x, lo, hi) ? 1.f : 0.f; }
};

struct HardSigmoidF {
  float a, b;
  LOOM_HD float f(float x) const { return tensor::hard_sigmoid_value(x, a, b); }
  LOOM_HD float d(float x, float) const { return tensor::hard_sigmoid_grad(x, 1.f, a, b); }
};

LOOM_REGISTER_OP("clip").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  cuda::require_float32(a);
  const auto& p = a.attrs.param<tensor::ClipParam>();
  return std::unique_ptr<Kernel>(
      std::make_unique<cuda::UnaryGpuKernel<ClipF>>(ClipF{p.a_min, p.a_max, p.a_min, p.a_max}));
});

LOOM_REGISTER_OP("hard_sigmoid").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  cuda::require_float32(a);
  const auto& p = a.attrs.param<tensor::HardSigmoidParam>();
  return std::unique_ptr<Kernel>(
      std::make_unique<cuda::UnaryGpuKernel<HardSigmoidF>>(HardSigmoidF{p.alpha, p.beta}));
});

// logical_not, the straight-through estimators, gradientmultiplier, _contrib_quadratic and
// _contrib_div_sqrt_dim: the functors of unary_extra_math.h.
template <class F>
KernelFactory with(F (*make)(const KernelArgs&)) {
  return [make](const KernelArgs& a) -> std::unique_ptr<Kernel> {
    cuda::require_float32(a);
    return std::make_unique<cuda::UnaryGpuKernel<F>>(make(a));
  };
}

LOOM_REGISTER_OP("logical_not").kernel(DeviceType::kGPU, cuda::unary_gpu<math::LogicalNot>());
LOOM_REGISTER_OP("_contrib_round_ste").kernel(DeviceType::kGPU, cuda::unary_gpu<math::RoundSte>());
LOOM_REGISTER_OP("_contrib_sign_ste").kernel(DeviceType::kGPU, cuda::unary_gpu<math::SignSte>());
LOOM_REGISTER_OP("_contrib_gradientmultiplier")
    .kernel(DeviceType::kGPU, with(+[](const KernelArgs& a) {
              return math::GradMultiplier{a.attrs.param<tensor::GradMultParam>().scalar};
            }));
LOOM_REGISTER_OP("_contrib_quadratic").kernel(DeviceType::kGPU, with(+[](const KernelArgs& a) {
                                                const auto& p =
                                                    a.attrs.param<tensor::QuadraticParam>();
                                                return math::Quadratic{p.a, p.b, p.c};
                                              }));
LOOM_REGISTER_OP("_contrib_div_sqrt_dim").kernel(DeviceType::kGPU, with(+[](const KernelArgs& a) {
                                                   const Shape& s = a.in_shapes[0];
                                                   return math::Scale{1.0 /
                                                                      std::sqrt(static_cast<double>(
                                                                          s[s.ndim() - 1]))};
                                                 }));

// _hypot (same shapes) and _hypot_scalar (b null: the scalar s), in double as the CPU.
__global__ void hypot_fwd(const float* a, const float* b, double s, float* y, int64_t n, int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    math::assign_req(y + i, add, static_cast<float>(tensor::hypot_value(a[i], b ? b[i] : s)));
}
__global__ void hypot_bwd(const float* g, const float* a, const float* b, double s, float* da,
                          int add_a, float* db, int add_b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const double av = a[i], bv = b ? static_cast<double>(b[i]) : s;
    const double h = tensor::hypot_value(av, bv);
    if (da) math::assign_req(da + i, add_a, static_cast<float>(tensor::hypot_grad(g[i], av, h)));
    if (db) math::assign_req(db + i, add_b, static_cast<float>(tensor::hypot_grad(g[i], bv, h)));
  }
}

class HypotGpuKernel final : public Kernel {
 public:
  HypotGpuKernel(const KernelArgs& a, bool scalar)
      : scalar_(scalar),
        s_(scalar ? tensor::hypot_scalar(a.attrs) : 0.0),
        n_(a.out_shapes[0].numel()) {
    cuda::require_float32(a);
    if (!scalar && a.in_shapes[0] != a.in_shapes[1])
      throw Error("op _hypot (node " + a.attrs.name + "): operands of one shape expected");
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull || n_ == 0) return;
    hypot_fwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        in[0].data<float>(), scalar_ ? nullptr : in[1].data<float>(), s_, out[0].data<float>(), n_,
        req[0] == Req::kAdd);
    cuda::check_launch("hypot_fwd");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    float* da = req[0] == Req::kNull ? nullptr : ig[0].data<float>();
    float* db = scalar_ || req[1] == Req::kNull ? nullptr : ig[1].data<float>();
    if ((!da && !db) || n_ == 0) return;
    hypot_bwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        og[0].data<float>(), in[0].data<float>(), scalar_ ? nullptr : in[1].data<float>(), s_, da,
        req[0] == Req::kAdd, db, !scalar_ && req[1] == Req::kAdd, n_);
    cuda::check_launch("hypot_bwd");
  }

 private:
  bool scalar_;
  double s_;
  int64_t n_;
};

LOOM_REGISTER_OP("_hypot").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<HypotGpuKernel>(a, false));
});
LOOM_REGISTER_OP("_hypot_scalar").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<HypotGpuKernel>(a, true));
});

// gamma and gammaln (gamma_math.h): values and gradients in double, as the CPU.
__global__ void gamma_fwd(const float* x, float* y, int64_t n, bool log, int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    math::assign_req(y + i, add, static_cast<float>(tensor::gamma_value(x[i], log)));
}
__global__ void gamma_bwd(const float* g, const float* x, float* dx, int64_t n, bool log, int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    math::assign_req(
        dx + i, add,
        static_cast<float>(static_cast<double>(g[i]) * tensor::gamma_deriv(x[i], log)));
}

class GammaGpuKernel final : public Kernel {
 public:
  GammaGpuKernel(const KernelArgs& a, bool log) : log_(log), n_(a.in_shapes[0].numel()) {
    cuda::require_float32(a);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull || n_ == 0) return;
    gamma_fwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        in[0].data<float>(), out[0].data<float>(), n_, log_, req[0] == Req::kAdd);
    cuda::check_launch("gamma_fwd");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull || n_ == 0) return;
    gamma_bwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        og[0].data<float>(), in[0].data<float>(), ig[0].data<float>(), n_, log_,
        req[0] == Req::kAdd);
    cuda::check_launch("gamma_bwd");
  }

 private:
  bool log_;
  int64_t n_;
};

LOOM_REGISTER_OP("gamma").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<GammaGpuKernel>(a, false));
});
LOOM_REGISTER_OP("gammaln").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<GammaGpuKernel>(a, true));
});

// erfinv (erfinv_math.h), in double as the CPU; the gradient reads the output y.
__global__ void erfinv_fwd(const float* x, float* y, int64_t n, int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    math::assign_req(y + i, add, static_cast<float>(tensor::erfinv_d(x[i])));
}
__global__ void erfinv_bwd(const float* g, const float* y, float* dx, int64_t n, int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    math::assign_req(dx + i, add, static_cast<float>(tensor::erfinv_grad(g[i], y[i])));
}

class ErfinvGpuKernel final : public Kernel {
 public:
  explicit ErfinvGpuKernel(const KernelArgs& a) : n_(a.in_shapes[0].numel()) {
    cuda::require_float32(a);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull || n_ == 0) return;
    erfinv_fwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        in[0].data<float>(), out[0].data<float>(), n_, req[0] == Req::kAdd);
    cuda::check_launch("erfinv_fwd");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull || n_ == 0) return;
    erfinv_bwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        og[0].data<float>(), out[0].data<float>(), ig[0].data<float>(), n_,
        req[0] == Req::kAdd);
    cuda::check_launch("erfinv_bwd");
  }

 private:
  int64_t n_;
};

LOOM_REGISTER_OP("erfinv").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<ErfinvGpuKernel>(a));
});

// _mod (same shapes), _mod_scalar (x % s) and _rmod_scalar (s % x) (mod_math.h): b null
// means the scalar s; `rev` swaps the operands of the scalar forms.
__global__ void mod_fwd(const float* a, const float* b, float s, bool rev, float* y, int64_t n,
                        int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float l = b || !rev ? a[i] : s, r = b ? b[i] : rev ? a[i] : s;
    math::assign_req(y + i, add, static_cast<float>(tensor::mod_double(l, r)));
  }
}
// d(l % r)/dl = 1, d(l % r)/dr = −floor(l / r); da: the gradient of input 0, db: of input 1.
__global__ void mod_bwd(const float* g, const float* a, const float* b, float s, bool rev,
                        float* da, int add_a, float* db, int add_b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const double go = g[i];
    const float l = b || !rev ? a[i] : s, r = b ? b[i] : rev ? a[i] : s;
    const double dr = go * tensor::mod_rgrad_c<float>(l, r);
    if (da) math::assign_req(da + i, add_a, static_cast<float>(rev ? dr : go));
    if (db) math::assign_req(db + i, add_b, static_cast<float>(dr));
  }
}

class ModGpuKernel final : public Kernel {
 public:
  ModGpuKernel(const KernelArgs& a, bool scalar, bool rev)
      : scalar_(scalar),
        rev_(rev),
        s_(scalar ? static_cast<float>(a.attrs.param<tensor::ModScalarParam>().scalar) : 0.f),
        n_(a.out_shapes[0].numel()) {
    cuda::require_float32(a);
    if (!scalar && a.in_shapes[0] != a.in_shapes[1])
      throw Error("op _mod (node " + a.attrs.name + "): operands of one shape expected");
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull || n_ == 0) return;
    mod_fwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        in[0].data<float>(), scalar_ ? nullptr : in[1].data<float>(), s_, rev_,
        out[0].data<float>(), n_, req[0] == Req::kAdd);
    cuda::check_launch("mod_fwd");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    float* da = req[0] == Req::kNull ? nullptr : ig[0].data<float>();
    float* db = scalar_ || req[1] == Req::kNull ? nullptr : ig[1].data<float>();
    if ((!da && !db) || n_ == 0) return;
    mod_bwd<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        og[0].data<float>(), in[0].data<float>(), scalar_ ? nullptr : in[1].data<float>(), s_,
        rev_, da, req[0] == Req::kAdd, db, !scalar_ && req[1] == Req::kAdd, n_);
    cuda::check_launch("mod_bwd");
  }

 private:
  bool scalar_, rev_;
  float s_;
  int64_t n_;
};

LOOM_REGISTER_OP("_mod").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<ModGpuKernel>(a, false, false));
});
LOOM_REGISTER_OP("_mod_scalar").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<ModGpuKernel>(a, true, false));
});
LOOM_REGISTER_OP("_rmod_scalar").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<ModGpuKernel>(a, true, true));
});

}  // namespace
}  // namespace loom
