// ops/tensor/cast_math.h, the conversion the GPU Cast/amp_cast/amp_multicast kernels run,
// against the CPU kernels' convert_value (runtime/dtype_traits.h) and add_value
// (ops/tensor/dtype_kernels.h): every pair of the eight dtypes over edge values (NaN, ±inf,
// ±0, saturation bounds, wrap points) and random values, every float16 bit pattern to float
// and back, every tie between neighbouring float16 values (subnormal ones included) and the
// floats beside it, and float-to-float16 on random float bit patterns.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/tensor/cast_math.h"
#include "ops/tensor/dtype_kernels.h"
#include "runtime/dtype_traits.h"

namespace loom {
namespace {

// The CPU type and the GPU carrier of one dtype.
template <class T>
struct Carrier {
  using type = T;
};
template <>
struct Carrier<half_t> {
  using type = castm::F16;
};

template <class T>
typename Carrier<T>::type to_gpu(T v) {
  if constexpr (std::is_same_v<T, half_t>) return castm::F16{v.bits};
  else return v;
}

// Bitwise equality (NaN payloads included; +0 and -0 differ).
template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

std::vector<double> probe_values() {
  std::vector<double> v = {0.0, -0.0, 0.49, 0.5, 1.5, 2.5, -0.5, -1.5, 1, -1, 127, 128, 255, 256,
                           300, -129, -300, 65504, 65519.9, 65520, 1e5, -1e5, 6e-8, 3e-8, 2.98e-8,
                           6.1e-5, 2147483520.0, 2147483647.0, 2147483648.0, -2147483648.0,
                           -2147483904.0, 9.2233720368547758e18, -9.2233720368547758e18, 1e19,
                           -1e19, 1e300, -1e300, 3.4e38, 1e-310,
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()};
  std::mt19937 rng(14);
  std::uniform_real_distribution<double> u(-70000, 70000), s(-3, 3);
  for (int i = 0; i < 200; ++i) v.push_back(u(rng));
  for (int i = 0; i < 200; ++i) v.push_back(s(rng));
  return v;
}

template <class S, class D>
void check_pair(const std::vector<double>& values) {
  for (double x : values) {
    const S s = convert_value<S>(x);  // a value of the source dtype
    const D cpu = convert_value<D>(s);
    const auto gpu = castm::cast_value<typename Carrier<D>::type>(to_gpu(s));
    ASSERT_TRUE(same_bits(to_gpu(cpu), gpu))
        << "converting " << x << " (as the source dtype) from type of size " << sizeof(S)
        << " to type of size " << sizeof(D);
    // req=add: d + cast(s) in the destination type, as the CPU's add_value.
    const D base = convert_value<D>(0.75);
    const D cpu_add = tensor::add_value<D>(base, cpu);
    const auto gpu_add = castm::add_value(to_gpu(base), gpu);
    ASSERT_TRUE(same_bits(to_gpu(cpu_add), gpu_add)) << "adding " << x;
  }
}

template <class S>
void check_from(const std::vector<double>& values) {
  check_pair<S, float>(values);
  check_pair<S, double>(values);
  check_pair<S, half_t>(values);
  check_pair<S, uint8_t>(values);
  check_pair<S, int32_t>(values);
  check_pair<S, int8_t>(values);
  check_pair<S, int64_t>(values);
  check_pair<S, bool>(values);
}

TEST(CastMath, EveryDtypePairMatchesCpuConversion) {
  const std::vector<double> values = probe_values();
  check_from<float>(values);
  check_from<double>(values);
  check_from<half_t>(values);
  check_from<uint8_t>(values);
  check_from<int32_t>(values);
  check_from<int8_t>(values);
  check_from<int64_t>(values);
  check_from<bool>(values);
}

TEST(CastMath, SaturationAndWrapClosedForms) {
  EXPECT_EQ(castm::cast_value<int32_t>(3e9f), 2147483647);
  EXPECT_EQ(castm::cast_value<int32_t>(-3e9), -2147483647 - 1);
  EXPECT_EQ(castm::cast_value<int32_t>(std::nanf("")), 0);
  EXPECT_EQ(castm::cast_value<uint8_t>(300.f), 44);
  EXPECT_EQ(castm::cast_value<uint8_t>(-1.f), 255);
  EXPECT_EQ(castm::cast_value<int8_t>(-2.9), -2);
  EXPECT_EQ(castm::cast_value<castm::F16>(1.f + 1.f / 2048).bits, 0x3c00);  // tie to even
  EXPECT_EQ(castm::cast_value<castm::F16>(65520.f).bits, 0x7c00);           // to inf
  EXPECT_EQ(castm::cast_value<bool>(-0.0), false);
}

TEST(CastMath, EveryHalfPatternAndRandomFloats) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float cpu = half_bits_to_float(static_cast<uint16_t>(h));
    const float gpu = castm::f16_to_float(static_cast<uint16_t>(h));
    ASSERT_TRUE(same_bits(cpu, gpu)) << "half bits " << h;
    ASSERT_EQ(castm::f16_from_float(gpu), float_to_half_bits(cpu)) << "round trip of " << h;
    // The exact midpoint to the next pattern (a tie: rounds to the even one) and values a
    // float ulp either side of it.
    if ((h & 0x7c00u) != 0x7c00u && (h & 0x7fffu) != 0x7bffu) {
      const float mid = (cpu + half_bits_to_float(static_cast<uint16_t>(h + 1))) / 2;
      for (float f : {mid, std::nextafter(mid, 0.f), std::nextafter(mid, 2 * mid)})
        ASSERT_EQ(castm::f16_from_float(f), float_to_half_bits(f)) << "near the tie above " << h;
      ASSERT_EQ(castm::f16_from_float(mid) & 1u, 0u) << "tie above " << h << " not to even";
    }
  }
  std::mt19937 rng(41);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t x = rng();
    float f;
    std::memcpy(&f, &x, 4);
    ASSERT_EQ(castm::f16_from_float(f), float_to_half_bits(f)) << "float bits " << x;
  }
}

}  // namespace
}  // namespace loom
