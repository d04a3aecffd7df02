// Tensor-scalar ops (_plus_scalar, _rdiv_scalar, ...). Each reuses a binary functor from
// ops/elemwise_math.h with the scalar as one operand: y = F(x, s), or F(s, x) for the
// reversed ("r") forms.
#include "ops/elemwise_math.h"
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

struct ScalarParam {
  double scalar;
  bool is_int;
};
const auto kScalarSchema =
    ParamSchema<ScalarParam>()
        .optional("scalar", &ScalarParam::scalar, 1.0, "The scalar operand.")
        .optional("is_int", &ScalarParam::is_int, true,
                  "Whether the scalar is an integer (only relevant for integer tensors).");

/// Output dtype as MXNet 1.9.1 (NumpyBinaryScalarType): an integer input with a non-integer
/// scalar (is_int false) gives float64, a bool input int64 or float64; else the input's.
void infer_scalar_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  const bool is_int = a.param<ScalarParam>().is_int;
  if (in[0] == DType::kUnknown) {
    // Only the same-dtype rule can run backwards.
    if (out[0] != DType::kUnknown && !dtype_is_int(out[0]) && out[0] != DType::kFloat64)
      in[0] = out[0];
    return;
  }
  DType want = in[0];
  if (dtype_is_int(in[0]) && !is_int) want = DType::kFloat64;
  else if (in[0] == DType::kBool) want = is_int ? DType::kInt64 : DType::kFloat64;
  merge_type(out[0], want, "output 0");
}

template <class F, bool kReversed>
class ScalarKernel final : public Kernel {
 public:
  explicit ScalarKernel(const KernelArgs& a)
      : scalar_(a.attrs.param<ScalarParam>().scalar),
        in_t_(a.in_types[0]),
        out_t_(a.out_types[0]),
        what_(tensor::node_label(a)) {
    if (!(tensor::kNumericDTypes & tensor::dtype_bit(out_t_)))
      throw Error(what_ + ": output dtype " + dtype_name(out_t_) + " is not supported");
    if (in_t_ != out_t_ && !(tensor::kNumericDTypes & tensor::dtype_bit(in_t_)) &&
        in_t_ != DType::kBool)
      throw Error(what_ + ": input dtype " + dtype_name(in_t_) + " is not supported");
    if (in_t_ != out_t_) ws_ = static_cast<size_t>(a.in_shapes[0].numel()) * dtype_size(out_t_);
  }
  size_t workspace_bytes() const override { return ws_; }
  template <class T>
  static T f(T x, T s) {
    return kReversed ? tensor::binary_value<F>(s, x) : tensor::binary_value<F>(x, s);
  }
  template <class C>
  static C d(C x, C s) {
    return kReversed ? F::db(s, x) : F::da(x, s);
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_numeric(out_t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      // The scalar converts to the element type first, as MXNet's DType(alpha): an int32
      // array times 2.5 is multiplied by 2.
      const T s = convert_value<T>(scalar_);
      const T* x;
      if (in_t_ == out_t_) {
        x = in[0].data<T>();
      } else {  // int (or bool) input computed in float64/int64: MXNet casts it first
        T* tmp = static_cast<T*>(ctx.workspace);
        tensor::convert_array<T>(in[0], tmp);
        x = tmp;
      }
      tensor::write_t<T>(out[0].data<T>(), req[0], out[0].size(),
                         [=](int64_t i) { return f<T>(x[i], s); });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    if (in_t_ != out_t_)
      throw Error(what_ + ": no gradient for input dtype " + std::string(dtype_name(in_t_)));
    tensor::dispatch_float(out_t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* g = og[0].data<T>();
      const C s = tensor::to_c(convert_value<T>(scalar_));
      const auto x = tensor::reader<T>(in[0]);
      tensor::write_t<T>(ig[0].data<T>(), req[0], ig[0].size(), [&](int64_t i) {
        return tensor::from_c<T>(tensor::to_c(g[i]) * d<C>(x[i], s));
      });
    }, what_);
  }

 private:
  double scalar_;
  DType in_t_, out_t_;
  std::string what_;
  size_t ws_ = 0;
};

template <class F, bool kReversed>
OpDef& scalar_op(const char* name, const char* alias, bool needs_input, const char* doc,
                 const char* scalar, const char* kind = "normal") {
  OpDef& op = register_op(name);
  op.describe(doc).params(kScalarSchema).type_fn(infer_scalar_type).cpu<ScalarKernel<F, kReversed>>();
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
[[maybe_unused]] const bool kScalarOpsRegistered = [] {
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
  // Comparisons: 1 or 0 in the input's dtype (the scalar converted to it first, as MXNet:
  // int32 [2, 3] == 2.5 is [1, 0]); zero gradient.
  tensor::for_each_comparison([](auto f, const char* name, const char* camel) {
    using F = decltype(f);
    const std::string op = std::string("_") + name + "_scalar";
    const std::string alias = std::string("_") + camel + "Scalar";
    OpDef& d = scalar_op<F, false>(op.c_str(), alias.c_str(), false,
                                   "1 where x compares true with the scalar, else 0.", "0.5");
    d.deps(GradDeps{false, false, false}).zero_grad();
    for (auto& smp : d.samples) smp.check_grad = false;
  });
  return true;
}();

}  // namespace
}  // namespace loom
