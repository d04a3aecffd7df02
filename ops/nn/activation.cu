// GPU kernel of Activation (registered by activation.cc): the element-wise map of
// runtime/cuda/elementwise.cuh over the functor activation.cc's CPU loops use, so the CPU
// tests cover the arithmetic. Backward reads whichever of input/output the op's GradDeps
// keep (the output for relu/sigmoid/tanh, the input for softrelu/softsign), as on the CPU.
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

std::unique_ptr<Kernel> make_activation(const KernelArgs& a) {
  // act_type is a required choice: the parsed value is the attribute string itself.
  const std::string& t = a.attrs.dict.at("act_type");
  if (t == "relu") return cuda::unary_gpu<math::Relu>()(a);
  if (t == "sigmoid") return cuda::unary_gpu<math::Sigmoid>()(a);
  if (t == "tanh") return cuda::unary_gpu<math::Tanh>()(a);
  if (t == "softrelu") return cuda::unary_gpu<math::SoftRelu>()(a);
  return cuda::unary_gpu<math::SoftSign>()(a);
}

LOOM_REGISTER_OP("Activation").kernel(DeviceType::kGPU, make_activation);

}  // namespace
}  // namespace loom
