// Cast (alias cast): converts element types; the gradient is cast back to the input type.
#include <limits>
#include <type_traits>

#include "ops/infer.h"
#include "ops/tensor/tensor_util.h"

namespace loom {
namespace {

struct CastParam {
  std::string dtype;
};
const auto kCastSchema =
    ParamSchema<CastParam>()
        .required("dtype", &CastParam::dtype, "Output type (float32, float64, int32, ...).")
        .check([](CastParam& p) { dtype_from_string(p.dtype); });

/// Calls fn(T{}) with T the C++ type of `t`; throws for types the CPU cast does not handle.
template <class Fn>
void dispatch(DType t, Fn fn) {
  switch (t) {
    case DType::kFloat32:
      return fn(float{});
    case DType::kFloat64:
      return fn(double{});
    case DType::kInt32:
      return fn(int32_t{});
    case DType::kInt64:
      return fn(int64_t{});
    case DType::kUint8:
      return fn(uint8_t{});
    case DType::kInt8:
      return fn(int8_t{});
    default:
      throw Error(std::string("Cast: unsupported dtype ") + dtype_name(t));
  }
}

/// static_cast<D>(v), except that a floating value an integer type cannot hold (where the
/// cast is undefined) saturates to D's limits and NaN becomes 0.
template <class D, class S>
D cast_value(S v) {
  if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    if (!(v == v)) return D{0};
    if (v <= static_cast<S>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
    // max() of a 64-bit type rounds up to 2^63 (or 2^64) as a float: compare with >=.
    if (v >= static_cast<S>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
  }
  return static_cast<D>(v);
}

/// d + v in D; integer sums wrap (two's complement) instead of overflowing.
template <class D>
D add_value(D d, D v) {
  if constexpr (std::is_integral_v<D> && !std::is_same_v<D, bool>) {
    using U = std::make_unsigned_t<D>;
    return static_cast<D>(static_cast<U>(static_cast<U>(d) + static_cast<U>(v)));
  } else {
    return static_cast<D>(d + v);
  }
}

/// dst = cast_value(src) with req (kAdd accumulates in the destination type).
void convert(const NDArray& src, const NDArray& dst, Req req) {
  if (req == Req::kNull) return;
  const int64_t n = src.size();
  dispatch(src.dtype(), [&](auto s0) {
    dispatch(dst.dtype(), [&](auto d0) {
      using S = decltype(s0);
      using D = decltype(d0);
      const S* s = src.data<S>();
      D* d = dst.data<D>();
      if (req == Req::kAdd)
        tensor::for_each(n, [=](int64_t i) { d[i] = add_value<D>(d[i], cast_value<D>(s[i])); });
      else if (static_cast<const void*>(s) != static_cast<void*>(d))
        tensor::for_each(n, [=](int64_t i) { d[i] = cast_value<D>(s[i]); });
    });
  });
}

class CastKernel final : public Kernel {
 public:
  explicit CastKernel(const KernelArgs& a) {
    dispatch(a.in_types[0], [](auto) {});  // fail at bind time for unsupported types
    dispatch(a.out_types[0], [](auto) {});
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    convert(in[0], out[0], req[0]);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    convert(og[0], ig[0], req[0]);
  }
};

LOOM_REGISTER_OP("Cast")
    .describe("Casts the input to dtype; floats out of an integer type's range saturate, NaN becomes 0.")
    .alias("cast")
    .params(kCastSchema)
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      merge_type(out[0], dtype_from_string(a.param<CastParam>().dtype), "output 0");
    })
    .deps(GradDeps{true, false, false})
    .cpu<CastKernel>()
    .sample({.attrs = {{"dtype", "float32"}}, .in_shapes = {{2, 3}}})
    .sample({.attrs = {{"dtype", "float64"}}, .in_shapes = {{3, 2}}, .check_grad = false});

}  // namespace
}  // namespace loom
