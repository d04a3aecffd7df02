// Dtype support for the CPU element-wise kernels (scalar, binary, broadcast, unary, reduce):
// dispatch from a DType to a C++ element type, MXNet 1.x value semantics per type, and
// typed versions of the write/reduce helpers of tensor_util.h. Internal to ops/tensor/.
//
// Semantics (MXNet 1.9.1): float64 computes in double; float16 computes in float and rounds
// to half (round to nearest even); integer types compute natively for + - * / max min
// (wrapping two's complement, division truncates toward zero, x / 0 gives 0 where MXNet
// would trap) and negative/abs/sign/square/relu, and through float32 for the other
// functions (MXNet's math:: fallbacks: exp(int 1) is 2). Gradients exist for float types.
#pragma once

#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/dtype_policy.h"
#include "ops/elemwise_math.h"
#include "ops/tensor/tensor_util.h"
#include "runtime/dtype_traits.h"

namespace loom::tensor {

inline constexpr unsigned dtype_bit(DType t) {
  return static_cast<int>(t) < 0 ? 0u : 1u << static_cast<int>(t);
}
inline constexpr unsigned kFloatDTypes =
    dtype_bit(DType::kFloat32) | dtype_bit(DType::kFloat64) | dtype_bit(DType::kFloat16);
inline constexpr unsigned kIntDTypes = dtype_bit(DType::kUint8) | dtype_bit(DType::kInt32) |
                                       dtype_bit(DType::kInt8) | dtype_bit(DType::kInt64);
inline constexpr unsigned kNumericDTypes = kFloatDTypes | kIntDTypes;

/// "node 'x' (op elemwise_add)": the prefix of kernel errors.
inline std::string node_label(const KernelArgs& a) {
  return "node '" + a.attrs.name + "' (op " + a.attrs.op->name + ")";
}

/// The one dtype every input and output of the node has; throws Error naming the node, op
/// and dtypes when they differ, DTypePolicyError (listing the allowed ones) when the dtype
/// is not in `allowed` (a set of dtype_bit).
inline DType check_dtypes(const KernelArgs& a, unsigned allowed) {
  DType t = !a.in_types.empty() ? a.in_types[0] : a.out_types[0];
  auto bad = [&](const std::vector<DType>& ts, const char* what) {
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i] != t)
        throw Error(node_label(a) + ": " + what + " " + std::to_string(i) + " has dtype " +
                    dtype_name(ts[i]) + " but input 0 has " + dtype_name(t) +
                    "; operands must have the same dtype");
  };
  bad(a.in_types, "input");
  bad(a.out_types, "output");
  if (!(allowed & dtype_bit(t))) {
    std::string ok;
    for (int b = 0; b < 8; ++b)
      if (allowed & (1u << b))
        ok += (ok.empty() ? "" : ", ") + std::string(dtype_name(static_cast<DType>(b)));
    throw DTypePolicyError(node_label(a) + ": dtype " + dtype_name(t) +
                           " is not supported by the CPU kernel; it takes " + ok);
  }
  return t;
}

/// dispatch_dtype over the numeric dtypes only (no bool): fn(type_tag<T>{}).
template <class Fn>
void dispatch_numeric(DType t, Fn&& fn, const std::string& what) {
  dispatch_dtype(
      t,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, bool>)
          throw Error(what + ": dtype bool is not supported");
        else
          fn(tag);
      },
      what);
}
/// dispatch_dtype over float32/float64/float16 (gradients).
template <class Fn>
void dispatch_float(DType t, Fn&& fn, const std::string& what) {
  dispatch_dtype(
      t,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (!is_float_v<T>)
          throw Error(what + ": no gradient for dtype " + dtype_name(t) +
                      " (gradients need a float dtype)");
        else
          fn(tag);
      },
      what);
}

// ---- wrapping integer arithmetic ----
template <class T>
inline T wrap_add(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
}
template <class T>
inline T wrap_sub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
}
template <class T>
inline T wrap_mul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;  // no int promotion
  return static_cast<T>(static_cast<U>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b))));
}
template <class T>
inline T wrap_neg(T a) {
  return wrap_sub<T>(T(0), a);
}

/// Integer implementations of the functors that are exact on integers (kNative); the others
/// run in float32 and convert back.
template <class F>
struct IntImpl {
  static constexpr bool kNative = false;
};
#define LOOM_INT_IMPL1(F, expr)                  \
  template <>                                     \
  struct IntImpl<math::F> {                       \
    static constexpr bool kNative = true;         \
    template <class T>                            \
    static T f(T x) { return expr; }              \
  };
#define LOOM_INT_IMPL2(F, expr)                  \
  template <>                                     \
  struct IntImpl<math::F> {                       \
    static constexpr bool kNative = true;         \
    template <class T>                            \
    static T f(T a, T b) { return expr; }         \
  };
LOOM_INT_IMPL1(Identity, x)
LOOM_INT_IMPL1(Negative, wrap_neg(x))
LOOM_INT_IMPL1(Relu, x > T(0) ? x : T(0))
LOOM_INT_IMPL1(Abs, x < T(0) ? wrap_neg(x) : x)
LOOM_INT_IMPL1(Sign, static_cast<T>(x > T(0) ? 1 : (x < T(0) ? -1 : 0)))
LOOM_INT_IMPL1(Square, wrap_mul(x, x))
LOOM_INT_IMPL2(Add, wrap_add(a, b))
LOOM_INT_IMPL2(Sub, wrap_sub(a, b))
LOOM_INT_IMPL2(Mul, wrap_mul(a, b))
LOOM_INT_IMPL2(Div, b == T(0) ? T(0) : (std::is_signed_v<T> && b == T(-1) ? wrap_neg(a) : static_cast<T>(a / b)))
LOOM_INT_IMPL2(Maximum, a > b ? a : b)
LOOM_INT_IMPL2(Minimum, a < b ? a : b)
#undef LOOM_INT_IMPL1
#undef LOOM_INT_IMPL2

/// Comparison and logical functors (MXNet's legacy eq/ne/gt/ge/lt/le/logical_*): 1 or 0 in
/// the operands' dtype, zero gradient; defined in ops/elemwise_math.h (shared with the CUDA
/// kernels).
namespace cmp = ::loom::math::cmp;
#define LOOM_INT_IMPL_CMP(F)                                   \
  template <>                                                  \
  struct IntImpl<cmp::F> {                                     \
    static constexpr bool kNative = true;                      \
    template <class T>                                         \
    static T f(T a, T b) { return cmp::F::f<T>(a, b); }        \
  };
LOOM_INT_IMPL_CMP(Equal)
LOOM_INT_IMPL_CMP(NotEqual)
LOOM_INT_IMPL_CMP(Greater)
LOOM_INT_IMPL_CMP(GreaterEqual)
LOOM_INT_IMPL_CMP(Lesser)
LOOM_INT_IMPL_CMP(LesserEqual)
LOOM_INT_IMPL_CMP(LogicalAnd)
LOOM_INT_IMPL_CMP(LogicalOr)
LOOM_INT_IMPL_CMP(LogicalXor)
#undef LOOM_INT_IMPL_CMP

/// The comparison ops: (functor, MXNet suffix, CamelCase alias stem).
template <class Fn>
inline void for_each_comparison(Fn fn) {
  fn(cmp::Equal{}, "equal", "Equal");
  fn(cmp::NotEqual{}, "not_equal", "NotEqual");
  fn(cmp::Greater{}, "greater", "Greater");
  fn(cmp::GreaterEqual{}, "greater_equal", "GreaterEqual");
  fn(cmp::Lesser{}, "lesser", "Lesser");
  fn(cmp::LesserEqual{}, "lesser_equal", "LesserEqual");
  fn(cmp::LogicalAnd{}, "logical_and", "LogicalAnd");
  fn(cmp::LogicalOr{}, "logical_or", "LogicalOr");
  fn(cmp::LogicalXor{}, "logical_xor", "LogicalXor");
}

template <class T>
inline compute_t<T> to_c(T v) {
  return static_cast<compute_t<T>>(v);
}
template <class T>
inline T from_c(compute_t<T> v) {
  if constexpr (std::is_same_v<T, half_t>) return half_t(v);
  else return v;
}

/// y = F::f(x) on element type T.
template <class F, class T>
inline T unary_value(T x) {
  if constexpr (std::is_floating_point_v<T>) return F::f(x);
  else if constexpr (std::is_same_v<T, half_t>) return half_t(F::f(static_cast<float>(x)));
  else if constexpr (IntImpl<F>::kNative) return IntImpl<F>::f(x);
  // Integers go through double: exact for every int32 (floor(50000001) stays 50000001).
  else return convert_value<T>(F::f(static_cast<double>(x)));
}
/// z = F::f(a, b) on element type T.
template <class F, class T>
inline T binary_value(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return F::f(a, b);
  else if constexpr (std::is_same_v<T, half_t>)
    return half_t(F::f(static_cast<float>(a), static_cast<float>(b)));
  else if constexpr (IntImpl<F>::kNative) return IntImpl<F>::f(a, b);
  else return convert_value<T>(F::f(static_cast<double>(a), static_cast<double>(b)));
}

/// d + v in T (integers wrap; float16 adds in float and rounds).
template <class T>
inline T add_value(T d, T v) {
  if constexpr (std::is_same_v<T, half_t>) return half_t(static_cast<float>(d) + static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) return d || v;
  else if constexpr (std::is_integral_v<T>) return wrap_add(d, v);
  else return d + v;
}

/// dst[i] = v(i) (kWrite/kInplace), dst[i] += v(i) (kAdd), nothing (kNull); v returns T.
template <class T, class Fn>
inline void write_t(T* dst, Req req, int64_t n, Fn v) {
  if (req == Req::kNull) return;
  if (req == Req::kAdd)
    for_each(n, [&](int64_t i) { dst[i] = add_value<T>(dst[i], v(i)); });
  else
    for_each(n, [&](int64_t i) { dst[i] = v(i); });
}
template <class T>
inline void store_t(T* dst, Req req, T v) {
  *dst = req == Req::kAdd ? add_value<T>(*dst, v) : v;
}

/// Reader of an optional typed input (none reads as zero), in the compute type.
template <class T>
struct PtrT {
  const T* p;
  compute_t<T> operator[](int64_t i) const { return p ? to_c(p[i]) : compute_t<T>(0); }
};
template <class T>
inline PtrT<T> reader(const NDArray& a) {
  return {a.is_none() ? nullptr : a.data<T>()};
}

/// Copies src into dst (same dtype, any dtype) honouring req; a no-op copy when they alias.
inline void copy_req_any(const NDArray& dst, const NDArray& src, Req req) {
  if (req == Req::kNull) return;
  if (req == Req::kAdd) {
    dispatch_dtype(src.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* s = src.data<T>();
      write_t<T>(dst.data<T>(), req, src.size(), [=](int64_t i) { return s[i]; });
    });
  } else if (dst.raw() != src.raw()) {
    std::memcpy(dst.raw(), src.raw(), static_cast<size_t>(src.nbytes()));
  }
}

/// dst[i] = convert_value<T>(src[i]) for any source dtype (MXNet's temporary cast).
template <class T>
inline void convert_array(const NDArray& src, T* dst) {
  dispatch_dtype(src.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* s = src.data<S>();
    for_each(src.size(), [&](int64_t i) { dst[i] = convert_value<T>(s[i]); });
  });
}

/// out[o] (with req) = fin(combine over the reduced elements of `in`), from init; as
/// tensor::reduce for any element types. comb(acc, In) -> Acc; fin(Acc) -> Out.
template <class In, class Out, class Acc, class Comb, class Fin>
void reduce_t(const ReducePlan& p, const In* in, Out* out, Req req, Acc init, Comb comb, Fin fin) {
  if (req == Req::kNull) return;
  const int64_t n_out = static_cast<int64_t>(p.base.size());
  const int64_t n_off = static_cast<int64_t>(p.off.size());
  const int64_t* off = p.off.data();
  const int64_t n_in = p.inner_n, st = p.inner_stride;
  auto one = [&](int64_t o) {
    Acc acc = init;
    const In* src = in + p.base[o];
    for (int64_t r = 0; r < n_off; ++r) {
      const In* s = src + off[r];
      for (int64_t j = 0; j < n_in; ++j) acc = comb(acc, s[j * st]);
    }
    store_t<Out>(out + o, req, fin(acc));
  };
  if (n_out * n_off * n_in >= kParallelMin && n_out > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < n_out; ++o) one(o);
  } else {
    for (int64_t o = 0; o < n_out; ++o) one(o);
  }
}

}  // namespace loom::tensor
