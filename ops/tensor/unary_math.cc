// Element-wise unary math (exp, log, relu, ...) and clip. Each op is one functor from
// ops/elemwise_math.h: y = F::f(x), dx = dy * F::d(x, y).
#include "ops/elemwise_math.h"
#include "ops/tensor/clip_math.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {
using tensor::write;

template <class F>
class UnaryKernel final : public Kernel {
 public:
  explicit UnaryKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kNumericDTypes)), what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      tensor::write_t<T>(out[0].data<T>(), req[0], in[0].size(),
                         [x](int64_t i) { return tensor::unary_value<F>(x[i]); });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* dx = ig[0].data<T>();
      const int64_t n = ig[0].size();
      if (og[0].is_none()) {  // zero-gradient ops declare no dependencies at all
        tensor::write_t<T>(dx, req[0], n, [](int64_t) { return T(0.f); });
        return;
      }
      const T* g = og[0].data<T>();
      if constexpr (std::is_same_v<T, float>) {
        tensor::with_readers(tensor::ptr_or_null(in[0]), tensor::ptr_or_null(out[0]),
                             [&](auto x, auto y) {
                               write(dx, req[0], n,
                                     [&](int64_t i) { return g[i] * F::d(x[i], y[i]); });
                             });
      } else {
        const auto x = tensor::reader<T>(in[0]);
        const auto y = tensor::reader<T>(out[0]);
        tensor::write_t<T>(dx, req[0], n, [&](int64_t i) {
          return tensor::from_c<T>(tensor::to_c(g[i]) * F::d(x[i], y[i]));
        });
      }
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
};

/// Which forward values a unary functor's derivative reads.
enum class Uses { kX, kY, kNone, kZeroGrad };

template <class F>
OpDef& unary(const char* name, Uses uses, const char* doc, const char* kind = "normal") {
  OpDef& op = register_op(name);
  op.describe(doc).cpu<UnaryKernel<F>>();
  op.deps(GradDeps{uses != Uses::kZeroGrad, uses == Uses::kX, uses == Uses::kY});
  // In place is safe unless the backward needs the input the output would overwrite.
  if (uses != Uses::kX) op.inplace_pairs({{0, 0}});
  if (uses == Uses::kZeroGrad) op.zero_grad();
  op.sample({.attrs = {},
             .in_shapes = {{2, 3}},
             .in_kinds = {kind},
             .check_grad = uses != Uses::kZeroGrad});
  op.sample({.attrs = {},
             .in_shapes = {{4, 1, 5}},
             .in_kinds = {kind},
             .check_grad = uses != Uses::kZeroGrad});
  return op;
}

// Registered at static-initialisation time like LOOM_REGISTER_OP, through one helper.
[[maybe_unused]] const bool kUnaryMathRegistered = [] {
  using namespace math;
  unary<Exp>("exp", Uses::kY, "Element-wise e^x.");
  unary<Log>("log", Uses::kX, "Element-wise natural logarithm.", "positive");
  unary<Sqrt>("sqrt", Uses::kY, "Element-wise square root.", "positive");
  unary<Rsqrt>("rsqrt", Uses::kY, "Element-wise 1/sqrt(x).", "positive");
  unary<Square>("square", Uses::kX, "Element-wise x^2.");
  unary<Abs>("abs", Uses::kX, "Element-wise absolute value.");
  unary<Negative>("negative", Uses::kNone, "Element-wise -x.");
  unary<Relu>("relu", Uses::kX, "Element-wise max(x, 0).");
  unary<Sigmoid>("sigmoid", Uses::kY, "Element-wise 1/(1+e^-x).");
  unary<Tanh>("tanh", Uses::kY, "Element-wise hyperbolic tangent.");
  unary<SoftSign>("softsign", Uses::kX, "Element-wise x/(1+|x|).");
  unary<Reciprocal>("reciprocal", Uses::kY, "Element-wise 1/x.", "positive");
  unary<Log1p>("log1p", Uses::kX, "Element-wise log(1+x).", "positive");
  unary<Expm1>("expm1", Uses::kY, "Element-wise e^x - 1.");
  unary<Sign>("sign", Uses::kZeroGrad, "Element-wise sign (-1, 0, 1); zero gradient.");
  unary<Floor>("floor", Uses::kZeroGrad, "Element-wise floor; zero gradient.");
  unary<Ceil>("ceil", Uses::kZeroGrad, "Element-wise ceiling; zero gradient.");
  unary<Round>("round", Uses::kZeroGrad, "Rounds half away from zero; zero gradient.");
  unary<Rint>("rint", Uses::kZeroGrad, "Rounds to the nearest integer, ties to even; zero gradient.");
  unary<Trunc>("trunc", Uses::kZeroGrad, "Rounds toward zero; zero gradient.");
  unary<Trunc>("fix", Uses::kZeroGrad, "Rounds toward zero (as trunc); zero gradient.");
  unary<Sin>("sin", Uses::kX, "Element-wise sine.");
  unary<Cos>("cos", Uses::kX, "Element-wise cosine.");
  unary<Tan>("tan", Uses::kY, "Element-wise tangent.", "unit");
  unary<Arcsin>("arcsin", Uses::kX, "Element-wise inverse sine, input in [-1, 1].", "unit");
  unary<Arccos>("arccos", Uses::kX, "Element-wise inverse cosine, input in [-1, 1].", "unit");
  unary<Arctan>("arctan", Uses::kX, "Element-wise inverse tangent.");
  unary<Sinh>("sinh", Uses::kX, "Element-wise hyperbolic sine.");
  unary<Cosh>("cosh", Uses::kX, "Element-wise hyperbolic cosine.");
  unary<Arcsinh>("arcsinh", Uses::kX, "Element-wise inverse hyperbolic sine.");
  unary<Arccosh>("arccosh", Uses::kX, "Element-wise inverse hyperbolic cosine, input >= 1.",
                 "above1");
  unary<Arctanh>("arctanh", Uses::kX, "Element-wise inverse hyperbolic tangent, input in (-1, 1).",
                 "unit");
  unary<Degrees>("degrees", Uses::kNone, "Converts radians to degrees.");
  unary<Radians>("radians", Uses::kNone, "Converts degrees to radians.");
  unary<Log2>("log2", Uses::kX, "Element-wise base-2 logarithm.", "positive");
  unary<Log10>("log10", Uses::kX, "Element-wise base-10 logarithm.", "positive");
  unary<Cbrt>("cbrt", Uses::kY, "Element-wise cube root.", "positive");
  unary<Rcbrt>("rcbrt", Uses::kY, "Element-wise 1/cbrt(x).", "positive");
  unary<Erf>("erf", Uses::kX, "Element-wise Gauss error function.");
  return true;
}();

// ---- clip ----
using tensor::ClipParam;  // clip_math.h: shared with the CUDA kernel (elemwise_extra.cu)
const auto kClipSchema = ParamSchema<ClipParam>()
                             .required("a_min", &ClipParam::a_min, "Minimum value.")
                             .required("a_max", &ClipParam::a_max, "Maximum value.")
                             .check([](ClipParam& p) {
                               if (p.a_min > p.a_max)
                                 throw ParamError("a_min must not exceed a_max");
                             });

class ClipKernel final : public Kernel {
 public:
  explicit ClipKernel(const KernelArgs& a)
      : p_(a.attrs.param<ClipParam>()),
        t_(tensor::check_dtypes(a, tensor::kNumericDTypes)),
        what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      // As MXNet: the element compares with the float bounds, and a clipped element becomes
      // the bound converted to the dtype (int32 clip(-1.5, 4.5) maps 7 to 4 and -3 to -1).
      const double lo = p_.a_min, hi = p_.a_max;
      const T tlo = convert_value<T>(p_.a_min), thi = convert_value<T>(p_.a_max);
      tensor::write_t<T>(out[0].data<T>(), req[0], in[0].size(), [=](int64_t i) {
        return tensor::clip_value(x[i], lo, hi, tlo, thi);
      });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *g = og[0].data<T>(), *x = in[0].data<T>();
      const double lo = p_.a_min, hi = p_.a_max;
      // The gradient passes where the input was inside [a_min, a_max].
      tensor::write_t<T>(ig[0].data<T>(), req[0], ig[0].size(), [=](int64_t i) {
        return tensor::clip_passes(static_cast<double>(x[i]), lo, hi) ? g[i] : T(0.f);
      });
    }, what_);
  }

 private:
  ClipParam p_;
  DType t_;
  std::string what_;
};

LOOM_REGISTER_OP("clip")
    .describe("Clips values to [a_min, a_max]; the gradient is zero where clipped.")
    .params(kClipSchema)
    .deps(GradDeps{true, true, false})
    .cpu<ClipKernel>()
    .sample({.attrs = {{"a_min", "-0.6"}, {"a_max", "0.7"}}, .in_shapes = {{3, 4}}})
    .sample({.attrs = {{"a_min", "0"}, {"a_max", "1e9"}}, .in_shapes = {{5}}});

}  // namespace
}  // namespace loom
