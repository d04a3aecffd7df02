// GPU kernels of clip (registered by unary_math.cc) and hard_sigmoid (hard_sigmoid.cc):
// stateful functors over the functions of clip_math.h, which the CPU kernels run, through
// the element-wise kernels of runtime/cuda/elementwise.cuh. float32 only.
#include "ops/tensor/clip_math.h"
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

}  // namespace
}  // namespace loom
