// Small helpers shared by the vision operator tests (test_ops_vision_*.cc): attribute
// lookup with a default, float32 arrays from literals, element-wise comparison and NCHW
// element access for the naive references.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ops/op.h"
#include "runtime/ndarray.h"

namespace loom::test::vision_test {

/// d[k], or `def` when the attribute is not set.
inline std::string attr(const Attrs& d, const std::string& k, const std::string& def) {
  return d.count(k) ? d.at(k) : def;
}

/// A float32 array of shape s holding v (row-major).
inline NDArray from(const Shape& s, const std::vector<float>& v) {
  NDArray a(s);
  for (size_t i = 0; i < v.size(); ++i) a.data<float>()[i] = v[i];
  return a;
}

/// Expects a's elements to equal v within tol (and a to have v.size() elements).
inline void expect_near(const NDArray& a, const std::vector<float>& v, double tol = 1e-4) {
  ASSERT_EQ(a.size(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(a.at(static_cast<int64_t>(i)), v[i], tol) << i;
}

/// x[n, c, h, w] of a 4-D array.
inline double at4(const NDArray& x, int64_t n, int64_t c, int64_t h, int64_t w) {
  const Shape& s = x.shape();
  return x.at(((n * s[1] + c) * s[2] + h) * s[3] + w);
}

}  // namespace loom::test::vision_test
