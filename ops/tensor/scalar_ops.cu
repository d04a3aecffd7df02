// GPU kernels for the tensor-scalar arithmetic and comparison ops (_plus_scalar, _rdiv_scalar,
// _equal_scalar, ...). Each
// is a unary map whose functor adapts the shared binary functor with the scalar as one
// operand, so x - s and s - x share math::Sub with the CPU kernels.
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

/// x op s: y = Op::f(x, s), dy/dx = Op::da(x, s).
template <class Op>
struct ScalarRhs {
  float s;
  LOOM_HD float f(float x) const { return Op::f(x, s); }
  LOOM_HD float d(float x, float) const { return Op::da(x, s); }
};
/// s op x: y = Op::f(s, x), dy/dx = Op::db(s, x).
template <class Op>
struct ScalarLhs {
  float s;
  LOOM_HD float f(float x) const { return Op::f(s, x); }
  LOOM_HD float d(float x, float) const { return Op::db(s, x); }
};

// The `scalar` attribute as given, else the default the op declared for it.
float scalar_of(const OpAttrs& a) {
  auto it = a.dict.find("scalar");
  if (it != a.dict.end()) return static_cast<float>(parse_float(it->second));
  for (const ParamInfo& p : a.op->param_info)
    if (p.name == "scalar" && !p.default_str.empty())
      return static_cast<float>(parse_float(p.default_str));
  throw ParamError("node '" + a.name + "' (op " + a.op->name + "): missing attribute 'scalar'");
}

template <class F>
KernelFactory scalar_gpu() {
  return [](const KernelArgs& a) -> std::unique_ptr<Kernel> {
    cuda::require_float32(a);
    return std::make_unique<cuda::UnaryGpuKernel<F>>(F{scalar_of(a.attrs)});
  };
}

LOOM_REGISTER_OP("_plus_scalar").kernel(DeviceType::kGPU, scalar_gpu<ScalarRhs<math::Add>>());
LOOM_REGISTER_OP("_minus_scalar").kernel(DeviceType::kGPU, scalar_gpu<ScalarRhs<math::Sub>>());
LOOM_REGISTER_OP("_rminus_scalar").kernel(DeviceType::kGPU, scalar_gpu<ScalarLhs<math::Sub>>());
LOOM_REGISTER_OP("_mul_scalar").kernel(DeviceType::kGPU, scalar_gpu<ScalarRhs<math::Mul>>());
LOOM_REGISTER_OP("_div_scalar").kernel(DeviceType::kGPU, scalar_gpu<ScalarRhs<math::Div>>());
LOOM_REGISTER_OP("_rdiv_scalar").kernel(DeviceType::kGPU, scalar_gpu<ScalarLhs<math::Div>>());
LOOM_REGISTER_OP("_power_scalar").kernel(DeviceType::kGPU, scalar_gpu<ScalarRhs<math::Power>>());
LOOM_REGISTER_OP("_rpower_scalar").kernel(DeviceType::kGPU, scalar_gpu<ScalarLhs<math::Power>>());
LOOM_REGISTER_OP("_maximum_scalar")
    .kernel(DeviceType::kGPU, scalar_gpu<ScalarRhs<math::Maximum>>());
LOOM_REGISTER_OP("_minimum_scalar")
    .kernel(DeviceType::kGPU, scalar_gpu<ScalarRhs<math::Minimum>>());
LOOM_REGISTER_OP("smooth_l1").kernel(DeviceType::kGPU, scalar_gpu<ScalarRhs<math::SmoothL1>>());

// The scalar comparisons (_equal_scalar, ...; zero gradient): x op scalar over math::cmp.
template <class F>
void reg(const char* name) {
  register_op(std::string("_") + name + "_scalar")
      .kernel(DeviceType::kGPU, scalar_gpu<ScalarRhs<F>>());
}
[[maybe_unused]] const bool kComparisons = [] {
  using namespace math::cmp;
  reg<Equal>("equal");
  reg<NotEqual>("not_equal");
  reg<Greater>("greater");
  reg<GreaterEqual>("greater_equal");
  reg<Lesser>("lesser");
  reg<LesserEqual>("lesser_equal");
  reg<LogicalAnd>("logical_and");
  reg<LogicalOr>("logical_or");
  reg<LogicalXor>("logical_xor");
  return true;
}();

}  // namespace
}  // namespace loom
