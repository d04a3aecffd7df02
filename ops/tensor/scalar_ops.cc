// Tensor-scalar ops (_plus_scalar, _rdiv_scalar, ...). Each reuses a binary functor from
// ops/elemwise_math.h with the scalar as one operand: y = F(x, s), or F(s, x) for the
// reversed ("r") forms.
#include "ops/elemwise_math.h"
#include "ops/tensor/tensor_util.h"

namespace loom {
namespace {
using tensor::write;

struct ScalarParam {
  double scalar;
  bool is_int;
};
const auto kScalarSchema =
    ParamSchema<ScalarParam>()
        .optional("scalar", &ScalarParam::scalar, 1.0, "The scalar operand.")
        .optional("is_int", &ScalarParam::is_int, true,
                  "Whether the scalar is an integer (only relevant for integer tensors).");

template <class F, bool kReversed>
class ScalarKernel final : public Kernel {
 public:
  explicit ScalarKernel(const KernelArgs& a)
      : s_(static_cast<float>(a.attrs.param<ScalarParam>().scalar)) {
    tensor::check_f32(a);
  }
  static float f(float x, float s) { return kReversed ? F::f(s, x) : F::f(x, s); }
  static float d(float x, float s) { return kReversed ? F::db(s, x) : F::da(x, s); }

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const float* x = in[0].data<float>();
    const float s = s_;
    write(out[0].data<float>(), req[0], out[0].size(), [=](int64_t i) { return f(x[i], s); });
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    const float* g = og[0].data<float>();
    const float s = s_;
    tensor::with_readers(tensor::ptr_or_null(in[0]), nullptr, [&](auto x, auto) {
      write(ig[0].data<float>(), req[0], ig[0].size(),
            [&](int64_t i) { return g[i] * d(x[i], s); });
    });
  }

 private:
  float s_;
};

template <class F, bool kReversed>
OpDef& scalar_op(const char* name, const char* alias, bool needs_input, const char* doc,
                 const char* scalar, const char* kind = "normal") {
  OpDef& op = register_op(name);
  op.describe(doc).params(kScalarSchema).cpu<ScalarKernel<F, kReversed>>();
  if (alias) op.alias(alias);
  op.deps(GradDeps{true, needs_input, false});
  if (!needs_input) op.inplace_pairs({{0, 0}});
  op.sample({.attrs = {{"scalar", scalar}}, .in_shapes = {{2, 3}}, .in_kinds = {kind}});
  op.sample({.attrs = {{"scalar", scalar}, {"is_int", "False"}},
             .in_shapes = {{3, 1, 2}},
             .in_kinds = {kind}});
  return op;
}

// Registered at static-initialisation time like LOOM_REGISTER_OP, through one helper.
[[maybe_unused]] const bool kRegistered = [] {
  using namespace math;
  scalar_op<Add, false>("_plus_scalar", "_PlusScalar", false, "x + scalar.", "2.5");
  scalar_op<Sub, false>("_minus_scalar", "_MinusScalar", false, "x - scalar.", "127.5");
  scalar_op<Sub, true>("_rminus_scalar", "_RMinusScalar", false, "scalar - x.", "2");
  scalar_op<Mul, false>("_mul_scalar", "_MulScalar", false, "x * scalar.", "-1.5");
  scalar_op<Div, false>("_div_scalar", "_DivScalar", false, "x / scalar.", "4");
  scalar_op<Div, true>("_rdiv_scalar", "_RDivScalar", true, "scalar / x.", "3", "positive");
  scalar_op<Power, false>("_power_scalar", "_PowerScalar", true, "x ^ scalar.", "2.5", "positive");
  scalar_op<Power, true>("_rpower_scalar", "_RPowerScalar", true, "scalar ^ x.", "1.5");
  scalar_op<Maximum, false>("_maximum_scalar", "_MaximumScalar", true, "max(x, scalar).", "0.2");
  scalar_op<Minimum, false>("_minimum_scalar", "_MinimumScalar", true, "min(x, scalar).", "0.2");
  scalar_op<SmoothL1, false>("smooth_l1", nullptr, true,
                             "Smooth L1 with sigma = scalar: 0.5 (sigma x)^2 where |x| < "
                             "1/sigma^2, else |x| - 0.5/sigma^2.",
                             "1.5");
  return true;
}();

}  // namespace
}  // namespace loom
