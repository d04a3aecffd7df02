// Test helpers shared by the kernel and executor tests: an array's values on the host, and
// an array filled with seeded uniform values (written through copy_from_host, a versioned
// write, so kernels see the values as unchanged until the next write).
#pragma once

#include <random>
#include <vector>

#include "runtime/ndarray.h"

namespace loom::test_util {

inline std::vector<float> host(const NDArray& a) {
  std::vector<float> v(static_cast<size_t>(a.size()));
  a.copy_to_host(v.data(), a.nbytes());
  return v;
}

inline void set(const NDArray& a, float lo, float hi, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(a.size()));
  for (auto& x : v) x = d(rng);
  a.copy_from_host(v.data(), a.nbytes());
}

}  // namespace loom::test_util
