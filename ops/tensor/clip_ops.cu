// GPU kernels of clip (registered by unary_math.cc), hard_sigmoid (hard_sigmoid.cc),
// logical_not, the STE ops, gradientmultiplier, _contrib_quadratic and _contrib_div_sqrt_dim:
// (stateful) functors over the functions of clip_math.h and unary_extra_math.h, which the CPU
// kernels run, through the element-wise kernels of runtime/cuda/elementwise.cuh. float32 only.
#include "ops/tensor/clip_math.h"
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
  return std::unique_ptr<Kernel>(std::make_unique<cuda::UnaryGpuKernel<ClipF>>(
      ClipF{p.a_min, p.a_max, p.a_min, p.a_max}));
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
  const auto& p = a.attrs.param<tensor::QuadraticParam>();
  return math::Quadratic{p.a, p.b, p.c};
}));
LOOM_REGISTER_OP("_contrib_div_sqrt_dim").kernel(DeviceType::kGPU, with(+[](const KernelArgs& a) {
  const Shape& s = a.in_shapes[0];
  return math::Scale{1.0 / std::sqrt(static_cast<double>(s[s.ndim() - 1]))};
}));

}  // namespace
}  // namespace loom
