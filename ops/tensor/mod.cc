// Modulo: _mod (same shapes), broadcast_mod (NumPy broadcasting), _mod_scalar (x % s) and
// _rmod_scalar (s % x), as MXNet 1.9.1 (mshadow_op::mod / rmod). The result takes the sign of
// the divisor (Python's %), computed through fmod in double; a zero divisor gives 0.
// Gradients (float dtypes; integer dtypes get zeros, as MXNet's mod_grad<int>):
//   d(a % b)/da = 1,  d(a % b)/db = -floor(a / b)  (floor in the operands' compute type).
#include <cmath>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/mod_math.h"

namespace loom {
namespace {

/// a % b with MXNet's sign rules, for any element type.
template <class T>
T mod_value(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return b ? false : false;
  } else {
    const double x = static_cast<double>(tensor::to_c(a)), y = static_cast<double>(tensor::to_c(b));
    if (y == 0) return convert_value<T>(0.0);
    if constexpr (std::is_unsigned_v<T>) {
      return convert_value<T>(std::fmod(x, y));
    } else {
      return convert_value<T>(tensor::mod_double(x, y));  // mod_math.h (shared with the GPU)
    }
  }
}

/// -floor(a / b) in the compute type of T (float for float32/float16, as MXNet's floorf).
template <class T>
double mod_rgrad(T a, T b) {
  return tensor::mod_rgrad_c<compute_t<T>>(tensor::to_c(a), tensor::to_c(b));
}

void infer_bcast_mod(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0 || in[1].ndim() == 0) return;
  merge_shape(out[0], tensor::broadcast_shape(a, in[0], in[1]), "output 0");
}

class ModKernel final : public Kernel {
 public:
  explicit ModKernel(const KernelArgs& a)
      : plan_(tensor::make_bcast_plan(a.in_shapes[0], a.in_shapes[1], a.out_shapes[0])),
        t_(tensor::check_dtypes(a, tensor::kNumericDTypes)),
        what_(tensor::node_label(a)),
        n_out_(a.out_shapes[0].numel()) {
    const Shape& out = a.out_shapes[0];
    for (int k = 0; k < 2; ++k) {
      const Shape s = tensor::pad_shape(a.in_shapes[k], out.ndim());
      reduce_[k] = s != out;
      if (reduce_[k]) red_[k] = tensor::make_reduce_plan(out, s);
    }
  }
  size_t workspace_bytes() const override {
    return reduce_[0] || reduce_[1] ? static_cast<size_t>(n_out_) * sizeof(double) : 0;
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *a = in[0].data<T>(), *b = in[1].data<T>();
      T* y = out[0].data<T>();
      const bool add = req[0] == Req::kAdd;
      tensor::bcast_for(plan_, [=](int64_t o, int64_t ia, int64_t ib) {
        const T v = mod_value<T>(a[ia], b[ib]);
        y[o] = add ? tensor::add_value<T>(y[o], v) : v;
      });
    }, what_);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *g = og[0].data<T>(), *a = in[0].data<T>(), *b = in[1].data<T>();
      double* tmp = static_cast<double*>(ctx.workspace);
      for (int k = 0; k < 2; ++k) {
        if (req[k] == Req::kNull) continue;
        T* dst = ig[k].data<T>();
        auto grad = [=](int64_t o, int64_t ia, int64_t ib) -> double {
          if constexpr (!is_float_v<T>) {
            return 0.0;
          } else {
            const double go = static_cast<double>(tensor::to_c(g[o]));
            return k == 0 ? go : go * mod_rgrad<T>(a[ia], b[ib]);
          }
        };
        if (!reduce_[k]) {
          const bool add = req[k] == Req::kAdd;
          tensor::bcast_for(plan_, [=](int64_t o, int64_t ia, int64_t ib) {
            const T v = convert_value<T>(grad(o, ia, ib));
            dst[o] = add ? tensor::add_value<T>(dst[o], v) : v;
          });
        } else {
          tensor::bcast_for(plan_, [=](int64_t o, int64_t ia, int64_t ib) { tmp[o] = grad(o, ia, ib); });
          tensor::reduce_t(
              red_[k], tmp, dst, req[k], 0.0, [](double acc, double v) { return acc + v; },
              [](double acc) { return convert_value<T>(acc); });
        }
      }
    }, what_);
  }

 private:
  tensor::BcastPlan plan_;
  DType t_;
  std::string what_;
  int64_t n_out_;
  bool reduce_[2] = {false, false};
  tensor::ReducePlan red_[2];
};

using tensor::ModScalarParam;  // mod_math.h (shared with elemwise_extra.cu)
const auto kModScalarSchema =
    ParamSchema<ModScalarParam>()
        .optional("scalar", &ModScalarParam::scalar, 1.0, "The scalar operand.")
        .optional("is_int", &ModScalarParam::is_int, true,
                  "Whether the scalar is an integer (only relevant for integer tensors).");

/// As the other scalar ops (MXNet 1.9.1): an integer input with a non-integer scalar gives
/// float64; otherwise the input's dtype.
void infer_mod_scalar_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  if (in[0] == DType::kUnknown) {
    if (out[0] != DType::kUnknown && !dtype_is_int(out[0])) in[0] = out[0];
    return;
  }
  DType want = in[0];
  if ((dtype_is_int(in[0]) || in[0] == DType::kBool) && !a.param<ModScalarParam>().is_int)
    want = DType::kFloat64;
  merge_type(out[0], want, "output 0");
}

/// y = x % s (kReversed: s % x); x's dtype may be an integer one when y is float64.
template <bool kReversed>
class ModScalarKernel final : public Kernel {
 public:
  explicit ModScalarKernel(const KernelArgs& a)
      : s_(a.attrs.param<ModScalarParam>().scalar),
        in_t_(a.in_types[0]),
        out_t_(a.out_types[0]),
        what_(tensor::node_label(a)) {
    if (!(tensor::kNumericDTypes & tensor::dtype_bit(out_t_)))
      throw Error(what_ + ": dtype " + dtype_name(out_t_) + " is not supported");
  }
  template <class T>
  static T f(T x, T s) {
    return kReversed ? mod_value<T>(s, x) : mod_value<T>(x, s);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_numeric(out_t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T s = convert_value<T>(s_);
      T* y = out[0].data<T>();
      dispatch_dtype(in_t_, [&](auto itag) {
        using S = typename decltype(itag)::type;
        const S* x = in[0].data<S>();
        tensor::write_t<T>(y, req[0], in[0].size(),
                           [=](int64_t i) { return f<T>(convert_value<T>(x[i]), s); });
      }, what_);
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    if (in_t_ != out_t_) throw Error(what_ + ": no gradient when the output dtype differs");
    tensor::dispatch_numeric(out_t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *g = og[0].data<T>(), *x = in[0].data<T>();
      const T s = convert_value<T>(s_);
      tensor::write_t<T>(ig[0].data<T>(), req[0], in[0].size(), [=](int64_t i) {
        if constexpr (!is_float_v<T>) {
          return T(0);
        } else {
          // d(x % s)/dx = 1; d(s % x)/dx = -floor(s / x).
          const double d = kReversed ? mod_rgrad<T>(s, x[i]) : 1.0;
          return convert_value<T>(static_cast<double>(tensor::to_c(g[i])) * d);
        }
      });
    }, what_);
  }

 private:
  double s_;
  DType in_t_, out_t_;
  std::string what_;
};

[[maybe_unused]] const bool kModRegistered = [] {
  const std::vector<std::string> kinds{"normal", "positive"};
  register_op("_mod")
      .describe("lhs % rhs elementwise (same shapes); the result has the sign of rhs.")
      .alias("_Mod")
      .inputs({"lhs", "rhs"})
      .deps(GradDeps{true, true, false})
      .cpu<ModKernel>()
      .sample({.attrs = {}, .in_shapes = {{2, 3}, {2, 3}}, .in_kinds = kinds})
      .sample({.attrs = {}, .in_shapes = {{7}, {7}}, .in_kinds = {"normal", "normal"}});
  register_op("broadcast_mod")
      .describe("lhs % rhs with broadcasting; the result has the sign of rhs.")
      .inputs({"lhs", "rhs"})
      .shape_fn(infer_bcast_mod)
      .deps(GradDeps{true, true, false})
      .cpu<ModKernel>()
      .sample({.attrs = {}, .in_shapes = {{2, 3}, {2, 3}}, .in_kinds = kinds})
      .sample({.attrs = {}, .in_shapes = {{2, 1, 4}, {3, 1}}, .in_kinds = kinds})
      .sample({.attrs = {}, .in_shapes = {{1, 3}, {4, 2, 3}}, .in_kinds = kinds});
  register_op("_mod_scalar")
      .describe("x % scalar elementwise; the result has the sign of the scalar.")
      .alias("_ModScalar")
      .params(kModScalarSchema)
      .type_fn(infer_mod_scalar_type)
      .deps(GradDeps{true, true, false})
      .cpu<ModScalarKernel<false>>()
      .sample({.attrs = {{"scalar", "0.7"}}, .in_shapes = {{3, 4}}})
      .sample({.attrs = {{"scalar", "-1.3"}}, .in_shapes = {{5}}});
  register_op("_rmod_scalar")
      .describe("scalar % x elementwise; the result has the sign of x.")
      .alias("_RModScalar")
      .params(kModScalarSchema)
      .type_fn(infer_mod_scalar_type)
      .deps(GradDeps{true, true, false})
      .cpu<ModScalarKernel<true>>()
      .sample({.attrs = {{"scalar", "2.5"}}, .in_shapes = {{3, 4}}, .in_kinds = {"positive"}})
      .sample({.attrs = {{"scalar", "-3"}}, .in_shapes = {{5}}});
  return true;
}();

}  // namespace
}  // namespace loom
