// The per-element dtype conversion of Cast, amp_cast and amp_multicast in a form the GPU
// kernels (ops/tensor/cast.cu) run: MXNet's rules as runtime/dtype_traits.h's convert_value
// applies them on the CPU (floats truncate toward zero; into int32/int64 a float out of range
// saturates and NaN gives 0; into int8/uint8 through int32, wrapping; integers wrap; to bool
// `!= 0`; float16 rounds to nearest even, from double through float), with float16 as its
// binary16 bits. tests/unit/test_cast_math.cc checks every pair of dtypes against
// convert_value on the CPU (every float16 bit pattern, edge and random values), so the CPU
// tests cover what the GPU computes. No OpenMP and no CUDA headers.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ops/elemwise_math.h"  // LOOM_HD

namespace loom::castm {

/// A float16 element as stored: binary16 bits (the layout of loom::half_t).
struct F16 {
  uint16_t bits;
};

LOOM_HD uint32_t f32_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
}
LOOM_HD float f32_from_bits(uint32_t x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/// binary16 bits of f, to nearest even (overflow to inf, NaN kept quiet with its sign).
LOOM_HD uint16_t f16_from_float(float f) {
  const uint32_t x = f32_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u |
                                 (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    if (ax < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = (ax - 0x38000000u) >> 13;
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

/// The float value of binary16 bits h (exact).
LOOM_HD float f16_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return f32_from_bits(e == 31 ? (sign | 0x7f800000u | (m << 13))
                               : (sign | ((e + 112u) << 23) | (m << 13)));
}

/// The saturation bounds of the 32/64-bit integer a float goes through.
template <class W>
struct IntBounds;
template <>
struct IntBounds<int32_t> {
  static constexpr int32_t kLo = -2147483647 - 1, kHi = 2147483647;
};
template <>
struct IntBounds<int64_t> {
  static constexpr int64_t kLo = -9223372036854775807LL - 1, kHi = 9223372036854775807LL;
};

/// v converted to D (float16 as F16) by MXNet's rules.
template <class D, class S>
LOOM_HD D cast_value(S v) {
  if constexpr (std::is_same_v<S, F16>) {
    if constexpr (std::is_same_v<D, F16>) return v;
    else return cast_value<D>(f16_to_float(v.bits));
  } else if constexpr (std::is_same_v<D, F16>) {
    return F16{f16_from_float(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    if (!(v == v)) return D{0};
    using W = std::conditional_t<(sizeof(D) >= 4), D, int32_t>;
    W w;
    if (v <= static_cast<S>(IntBounds<W>::kLo)) w = IntBounds<W>::kLo;
    else if (v >= static_cast<S>(IntBounds<W>::kHi)) w = IntBounds<W>::kHi;
    else w = static_cast<W>(v);
    return static_cast<D>(w);
  } else {
    return static_cast<D>(v);
  }
}

/// d + v in T, as the CPU's req=add: float16 adds in float and rounds, bool is `or`,
/// integers wrap.
template <class T>
LOOM_HD T add_value(T d, T v) {
  if constexpr (std::is_same_v<T, F16>) {
    return F16{f16_from_float(f16_to_float(d.bits) + f16_to_float(v.bits))};
  } else if constexpr (std::is_same_v<T, bool>) {
    return d || v;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(d) + static_cast<U>(v)));
  } else {
    return d + v;
  }
}

}  // namespace loom::castm
