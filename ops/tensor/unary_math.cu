// GPU kernels for the unary math ops; the ops themselves (shapes, CPU kernels, gradient
// dependencies) are registered by unary_math.cc. The arithmetic is the
// shared functor from ops/elemwise_math.h, so the CPU tests cover it too.
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

using cuda::unary_gpu;

LOOM_REGISTER_OP("exp").kernel(DeviceType::kGPU, unary_gpu<math::Exp>());
LOOM_REGISTER_OP("log").kernel(DeviceType::kGPU, unary_gpu<math::Log>());
LOOM_REGISTER_OP("sqrt").kernel(DeviceType::kGPU, unary_gpu<math::Sqrt>());
LOOM_REGISTER_OP("square").kernel(DeviceType::kGPU, unary_gpu<math::Square>());
LOOM_REGISTER_OP("abs").kernel(DeviceType::kGPU, unary_gpu<math::Abs>());
LOOM_REGISTER_OP("negative").kernel(DeviceType::kGPU, unary_gpu<math::Negative>());
LOOM_REGISTER_OP("relu").kernel(DeviceType::kGPU, unary_gpu<math::Relu>());
LOOM_REGISTER_OP("sigmoid").kernel(DeviceType::kGPU, unary_gpu<math::Sigmoid>());
LOOM_REGISTER_OP("tanh").kernel(DeviceType::kGPU, unary_gpu<math::Tanh>());
LOOM_REGISTER_OP("softsign").kernel(DeviceType::kGPU, unary_gpu<math::SoftSign>());
LOOM_REGISTER_OP("rsqrt").kernel(DeviceType::kGPU, unary_gpu<math::Rsqrt>());
LOOM_REGISTER_OP("reciprocal").kernel(DeviceType::kGPU, unary_gpu<math::Reciprocal>());
LOOM_REGISTER_OP("log1p").kernel(DeviceType::kGPU, unary_gpu<math::Log1p>());
LOOM_REGISTER_OP("expm1").kernel(DeviceType::kGPU, unary_gpu<math::Expm1>());
// Zero gradient: backward only clears dx.
LOOM_REGISTER_OP("sign").kernel(DeviceType::kGPU, unary_gpu<math::Sign>());
LOOM_REGISTER_OP("floor").kernel(DeviceType::kGPU, unary_gpu<math::Floor>());
LOOM_REGISTER_OP("ceil").kernel(DeviceType::kGPU, unary_gpu<math::Ceil>());
LOOM_REGISTER_OP("round").kernel(DeviceType::kGPU, unary_gpu<math::Round>());
LOOM_REGISTER_OP("rint").kernel(DeviceType::kGPU, unary_gpu<math::Rint>());
LOOM_REGISTER_OP("trunc").kernel(DeviceType::kGPU, unary_gpu<math::Trunc>());
LOOM_REGISTER_OP("fix").kernel(DeviceType::kGPU, unary_gpu<math::Trunc>());
// Trigonometric, hyperbolic, logarithms and roots.
LOOM_REGISTER_OP("sin").kernel(DeviceType::kGPU, unary_gpu<math::Sin>());
LOOM_REGISTER_OP("cos").kernel(DeviceType::kGPU, unary_gpu<math::Cos>());
LOOM_REGISTER_OP("tan").kernel(DeviceType::kGPU, unary_gpu<math::Tan>());
LOOM_REGISTER_OP("arcsin").kernel(DeviceType::kGPU, unary_gpu<math::Arcsin>());
LOOM_REGISTER_OP("arccos").kernel(DeviceType::kGPU, unary_gpu<math::Arccos>());
LOOM_REGISTER_OP("arctan").kernel(DeviceType::kGPU, unary_gpu<math::Arctan>());
LOOM_REGISTER_OP("sinh").kernel(DeviceType::kGPU, unary_gpu<math::Sinh>());
LOOM_REGISTER_OP("cosh").kernel(DeviceType::kGPU, unary_gpu<math::Cosh>());
LOOM_REGISTER_OP("arcsinh").kernel(DeviceType::kGPU, unary_gpu<math::Arcsinh>());
LOOM_REGISTER_OP("arccosh").kernel(DeviceType::kGPU, unary_gpu<math::Arccosh>());
LOOM_REGISTER_OP("arctanh").kernel(DeviceType::kGPU, unary_gpu<math::Arctanh>());
LOOM_REGISTER_OP("degrees").kernel(DeviceType::kGPU, unary_gpu<math::Degrees>());
LOOM_REGISTER_OP("radians").kernel(DeviceType::kGPU, unary_gpu<math::Radians>());
LOOM_REGISTER_OP("log2").kernel(DeviceType::kGPU, unary_gpu<math::Log2>());
LOOM_REGISTER_OP("log10").kernel(DeviceType::kGPU, unary_gpu<math::Log10>());
LOOM_REGISTER_OP("cbrt").kernel(DeviceType::kGPU, unary_gpu<math::Cbrt>());
LOOM_REGISTER_OP("rcbrt").kernel(DeviceType::kGPU, unary_gpu<math::Rcbrt>());
LOOM_REGISTER_OP("erf").kernel(DeviceType::kGPU, unary_gpu<math::Erf>());

}  // namespace
}  // namespace loom
