// Element types as C++ types: a float16 value type (half_t), MXNet-compatible value
// conversion between every pair of dtypes, and dispatch from a DType to a C++ type.
// Host-only (the CUDA kernels stay float32).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include "runtime/base.h"

namespace loom {

/// IEEE 754 binary16 bits of `f`, rounded to nearest, ties to even (overflow to inf, NaN
/// kept quiet with its sign).
inline uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (ax < 0x38800000u) {  // below 2^-14: a subnormal half or zero
    if (ax < 0x33000000u) return static_cast<uint16_t>(sign);  // below 2^-25: zero
    const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = (ax - 0x38000000u) >> 13;  // rebias the exponent (127 -> 15)
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may reach inf: correct
  return static_cast<uint16_t>(sign | h);
}

/// The float value of binary16 bits `h` (exact).
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t x;
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;  // m * 2^-24
    return sign ? -v : v;
  }
  if (e == 31)
    x = sign | 0x7f800000u | (m << 13);
  else
    x = sign | ((e + 112u) << 23) | (m << 13);
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

/// A float16 element (MXNet's mshadow::half_t): stored as binary16, computed in float.
struct half_t {
  uint16_t bits = 0;
  half_t() = default;
  explicit half_t(float f) : bits(float_to_half_bits(f)) {}
  explicit half_t(double d) : bits(float_to_half_bits(static_cast<float>(d))) {}
  explicit operator float() const { return half_bits_to_float(bits); }
  explicit operator double() const { return half_bits_to_float(bits); }
};
static_assert(sizeof(half_t) == 2);

/// The type arithmetic on T happens in: float for half_t, T itself otherwise.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, half_t>, float, T>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, half_t>;

/// `v` converted to D as MXNet does on x86: floats truncate toward zero; into int32/int64 a
/// float out of range saturates (NaN gives 0); into int8/uint8 it goes through int32 and
/// wraps (300.f -> uint8 44, -1.f -> 255), integers wrap (two's complement), anything to
/// bool is `!= 0`, and float16 rounds to nearest even.
template <class D, class S>
inline D convert_value(S v) {
  if constexpr (std::is_same_v<S, half_t>) {
    if constexpr (std::is_same_v<D, half_t>) return v;
    else return convert_value<D>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<D, half_t>) {
    return half_t(static_cast<float>(v));
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    if (!(v == v)) return D{0};
    using W = std::conditional_t<(sizeof(D) >= 4), D, int32_t>;
    W w;
    if (v <= static_cast<S>(std::numeric_limits<W>::lowest()))
      w = std::numeric_limits<W>::lowest();
    // max() of a 32/64-bit type rounds up as a float: compare with >=.
    else if (v >= static_cast<S>(std::numeric_limits<W>::max()))
      w = std::numeric_limits<W>::max();
    else
      w = static_cast<W>(v);
    return static_cast<D>(w);  // modular for the narrow types (C++20)
  } else {
    return static_cast<D>(v);
  }
}

/// Tag carrying an element type through dispatch_dtype.
template <class T>
struct type_tag {
  using type = T;
};

/// Calls fn(type_tag<T>{}) with T the C++ element type of `t` (half_t for float16, bool for
/// kBool). Throws Error naming `what` for kUnknown or a dtype without a C++ type.
template <class Fn>
decltype(auto) dispatch_dtype(DType t, Fn&& fn, const std::string& what = "") {
  switch (t) {
    case DType::kFloat32: return fn(type_tag<float>{});
    case DType::kFloat64: return fn(type_tag<double>{});
    case DType::kFloat16: return fn(type_tag<half_t>{});
    case DType::kUint8: return fn(type_tag<uint8_t>{});
    case DType::kInt32: return fn(type_tag<int32_t>{});
    case DType::kInt8: return fn(type_tag<int8_t>{});
    case DType::kInt64: return fn(type_tag<int64_t>{});
    case DType::kBool: return fn(type_tag<bool>{});
    default: break;
  }
  throw Error((what.empty() ? std::string() : what + ": ") + "unsupported dtype " +
              (t == DType::kUnknown ? std::string("unknown") : std::to_string(static_cast<int>(t))));
}

inline bool dtype_is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16;
}
inline bool dtype_is_int(DType t) {
  return t == DType::kUint8 || t == DType::kInt32 || t == DType::kInt8 || t == DType::kInt64;
}

}  // namespace loom
