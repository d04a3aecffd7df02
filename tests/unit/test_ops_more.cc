// shape_array, size_array, logical_not, reverse, softmin, hard_sigmoid, hypot, batch_take,
// diag, depth_to_space, space_to_depth, moments, gamma, gammaln: naive references for the op
// sweep, written from MXNet 1.9.1's documented semantics, and a few values MXNet gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ops/param.h"
#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

std::string attr(const Attrs& d, const std::string& k, const std::string& def) {
  return d.count(k) ? d.at(k) : def;
}
float& f(const NDArray& a, int64_t i) { return a.data<float>()[i]; }

// Row-major multi-index of flat position i in shape s.
std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(static_cast<size_t>(s.ndim()));
  for (int d = s.ndim() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = i % s[d];
    i /= s[d];
  }
  return idx;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t o = 0;
  for (int d = 0; d < s.ndim(); ++d) o = o * s[d] + idx[static_cast<size_t>(d)];
  return o;
}
int ax_norm(int64_t a, int nd) { return static_cast<int>(a < 0 ? a + nd : a); }

LOOM_OP_REFERENCE("shape_array", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  NDArray y(Shape{s.ndim()});
  for (int d = 0; d < s.ndim(); ++d) f(y, d) = static_cast<float>(s[d]);
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("size_array", [](const RefCall& c) {
  NDArray y(Shape{1});
  f(y, 0) = static_cast<float>(c.in[0].size());
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("logical_not", [](const RefCall& c) {
  NDArray y(c.in[0].shape());
  for (int64_t i = 0; i < y.size(); ++i) f(y, i) = f(c.in[0], i) == 0.f ? 1.f : 0.f;
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("reverse", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  std::vector<bool> rev(static_cast<size_t>(s.ndim()), false);
  const Shape axes = parse_shape(c.attrs.dict.at("axis"));
  for (int64_t a : axes.dims()) rev[static_cast<size_t>(ax_norm(a, s.ndim()))] = true;
  NDArray y(s);
  for (int64_t i = 0; i < y.size(); ++i) {
    auto idx = unravel(i, s);
    for (int d = 0; d < s.ndim(); ++d)
      if (rev[static_cast<size_t>(d)])
        idx[static_cast<size_t>(d)] = s[d] - 1 - idx[static_cast<size_t>(d)];
    f(y, i) = f(c.in[0], ravel(idx, s));
  }
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("hard_sigmoid", [](const RefCall& c) {
  const double a = std::stod(attr(c.attrs.dict, "alpha", "0.2"));
  const double b = std::stod(attr(c.attrs.dict, "beta", "0.5"));
  NDArray y(c.in[0].shape());
  for (int64_t i = 0; i < y.size(); ++i)
    f(y, i) = static_cast<float>(std::clamp(a * f(c.in[0], i) + b, 0.0, 1.0));
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("softmin", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const int ax = ax_norm(std::stoll(attr(c.attrs.dict, "axis", "-1")), s.ndim());
  const double t = std::stod(attr(c.attrs.dict, "temperature", "1"));
  NDArray y(s);
  for (int64_t i = 0; i < y.size(); ++i) {
    auto idx = unravel(i, s);
    double sum = 0;
    for (int64_t k = 0; k < s[ax]; ++k) {
      auto j = idx;
      j[static_cast<size_t>(ax)] = k;
      sum += std::exp(-f(c.in[0], ravel(j, s)) / t);
    }
    f(y, i) = static_cast<float>(std::exp(-f(c.in[0], i) / t) / sum);
  }
  return std::vector<NDArray>{y};
});

TEST(OpsMore, ShapeArrayIsInt64) {
  ImperativeOp op("shape_array", {}, {Shape{2, 3, 4}});
  NDArray x(Shape{2, 3, 4});
  auto out = op.forward({x}, false);
  ASSERT_EQ(out[0].dtype(), DType::kInt64);
  EXPECT_EQ(out[0].data<int64_t>()[2], 4);
}

TEST(OpsMore, FlipIsReverse) {
  ImperativeOp op("flip", {{"axis", "1"}}, {Shape{2, 3}});
  NDArray x(Shape{2, 3});
  for (int i = 0; i < 6; ++i) f(x, i) = static_cast<float>(i);
  auto out = op.forward({x}, false);
  EXPECT_EQ(f(out[0], 0), 2.f);
  EXPECT_EQ(f(out[0], 5), 3.f);
}

TEST(OpsMore, ReverseRejectsBadAxis) {
  EXPECT_THROW(ImperativeOp("reverse", {{"axis", "(2,)"}}, {Shape{2, 3}}), Error);
}

}  // namespace
}  // namespace loom::test

namespace loom::test {
namespace {

float& g(const NDArray& a, int64_t i) { return a.data<float>()[i]; }

// Broadcast reference shared by the three hypot ops (the scalar as a one-element operand).
std::vector<NDArray> hypot_ref(const NDArray& a, const NDArray* b, double s, const Shape& out) {
  NDArray y(out);
  const int nd = out.ndim();
  auto at = [&](const NDArray& x, const std::vector<int64_t>& idx) {
    const Shape& xs = x.shape();
    int64_t o = 0;
    for (int d = 0; d < xs.ndim(); ++d) {
      const int64_t i = idx[static_cast<size_t>(nd - xs.ndim() + d)];
      o = o * xs[d] + (xs[d] == 1 ? 0 : i);
    }
    return static_cast<double>(x.data<float>()[o]);
  };
  for (int64_t i = 0; i < y.size(); ++i) {
    std::vector<int64_t> idx(static_cast<size_t>(nd));
    int64_t r = i;
    for (int d = nd - 1; d >= 0; --d) {
      idx[static_cast<size_t>(d)] = r % out[d];
      r /= out[d];
    }
    const double av = at(a, idx), bv = b ? at(*b, idx) : s;
    g(y, i) = static_cast<float>(std::sqrt(av * av + bv * bv));
  }
  return {y};
}
LOOM_OP_REFERENCE("_hypot", [](const RefCall& c) {
  return hypot_ref(c.in[0], &c.in[1], 0, c.out_shapes[0]);
});
LOOM_OP_REFERENCE("broadcast_hypot", [](const RefCall& c) {
  return hypot_ref(c.in[0], &c.in[1], 0, c.out_shapes[0]);
});
LOOM_OP_REFERENCE("_hypot_scalar", [](const RefCall& c) {
  return hypot_ref(c.in[0], nullptr, std::stod(c.attrs.dict.at("scalar")), c.out_shapes[0]);
});
LOOM_OP_REFERENCE("batch_take", [](const RefCall& c) {
  const int64_t n = c.in[0].shape()[0], m = c.in[0].shape()[1];
  NDArray y(c.in[1].shape());
  for (int64_t i = 0; i < n; ++i) {
    int64_t j = static_cast<int64_t>(g(c.in[1], i));
    j = j < 0 ? 0 : j >= m ? m - 1 : j;
    g(y, i) = g(c.in[0], i * m + j);
  }
  return std::vector<NDArray>{y};
});

TEST(OpsMore, BatchTakeRejectsWrongIndexCount) {
  EXPECT_THROW(ImperativeOp("batch_take", {}, {Shape{4, 3}, Shape{3}}), ShapeError);
}

}  // namespace
}  // namespace loom::test

namespace loom::test {
namespace {

float& v(const NDArray& a, int64_t i) { return a.data<float>()[i]; }
int64_t iattr(const Attrs& d, const char* k, int64_t def) {
  return d.count(k) ? parse_int(d.at(k)) : def;
}

// diag: walks the output's multi-index and reads the input by numpy.diagonal's rule.
LOOM_OP_REFERENCE("diag", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const Shape& os = c.out_shapes[0];
  const int64_t k = iattr(c.attrs.dict, "k", 0);
  NDArray y = NDArray::zeros(os);
  if (s.ndim() == 1) {
    for (int64_t t = 0; t < s[0]; ++t)
      v(y, (t + (k < 0 ? -k : 0)) * os[1] + t + (k > 0 ? k : 0)) = v(c.in[0], t);
    return std::vector<NDArray>{y};
  }
  const int nd = s.ndim();
  const int x1 = ax_norm(iattr(c.attrs.dict, "axis1", 0), nd);
  const int x2 = ax_norm(iattr(c.attrs.dict, "axis2", 1), nd);
  for (int64_t o = 0; o < y.size(); ++o) {
    auto oi = unravel(o, os);
    std::vector<int64_t> ii(static_cast<size_t>(nd));
    size_t r = 0;
    for (int d = 0; d < nd; ++d)
      if (d != x1 && d != x2) ii[static_cast<size_t>(d)] = oi[r++];
    const int64_t t = oi.back();
    ii[static_cast<size_t>(x1)] = t + (k < 0 ? -k : 0);
    ii[static_cast<size_t>(x2)] = t + (k > 0 ? k : 0);
    v(y, o) = v(c.in[0], ravel(ii, s));
  }
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("depth_to_space", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const Shape& os = c.out_shapes[0];
  const int64_t b = iattr(c.attrs.dict, "block_size", 1);
  NDArray y(os);
  for (int64_t o = 0; o < y.size(); ++o) {
    auto q = unravel(o, os);  // n, c, H, W
    const int64_t i = q[2] % b, j = q[3] % b;
    v(y, o) = v(c.in[0], ravel({q[0], (i * b + j) * os[1] + q[1], q[2] / b, q[3] / b}, s));
  }
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("space_to_depth", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const Shape& os = c.out_shapes[0];
  const int64_t b = iattr(c.attrs.dict, "block_size", 1);
  NDArray y(os);
  for (int64_t o = 0; o < y.size(); ++o) {
    auto q = unravel(o, os);  // n, C, h, w
    const int64_t blk = q[1] / s[1], ch = q[1] % s[1];
    v(y, o) = v(c.in[0], ravel({q[0], ch, q[2] * b + blk / b, q[3] * b + blk % b}, s));
  }
  return std::vector<NDArray>{y};
});

TEST(OpsMore, DiagAndBlockErrors) {
  EXPECT_THROW(ImperativeOp("diag", {{"k", "5"}}, {Shape{3, 4}}), Error);
  EXPECT_THROW(ImperativeOp("diag", {{"axis1", "1"}, {"axis2", "1"}}, {Shape{3, 4}}), Error);
  EXPECT_THROW(ImperativeOp("depth_to_space", {{"block_size", "2"}}, {Shape{1, 6, 2, 2}}),
               ShapeError);
  EXPECT_THROW(ImperativeOp("space_to_depth", {{"block_size", "2"}}, {Shape{1, 1, 3, 4}}),
               ShapeError);
}

}  // namespace
}  // namespace loom::test

namespace loom::test {
namespace {

float& e(const NDArray& a, int64_t i) { return a.data<float>()[i]; }

LOOM_OP_REFERENCE("moments", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const Shape axes = parse_shape(c.attrs.dict.at("axes"));
  std::vector<bool> red(static_cast<size_t>(s.ndim()), false);
  for (int64_t a : axes.dims()) red[static_cast<size_t>(a < 0 ? a + s.ndim() : a)] = true;
  NDArray m = NDArray::zeros(c.out_shapes[0]), var = NDArray::zeros(c.out_shapes[1]);
  std::vector<double> sum(static_cast<size_t>(m.size()), 0), sq(sum.size(), 0), cnt(sum.size(), 0);
  auto slot = [&](int64_t i) {
    int64_t q = 0, r = i;
    std::vector<int64_t> idx(static_cast<size_t>(s.ndim()));
    for (int d = s.ndim() - 1; d >= 0; --d) {
      idx[static_cast<size_t>(d)] = r % s[d];
      r /= s[d];
    }
    for (int d = 0; d < s.ndim(); ++d)
      if (!red[static_cast<size_t>(d)]) q = q * s[d] + idx[static_cast<size_t>(d)];
    return static_cast<size_t>(q);
  };
  for (int64_t i = 0; i < c.in[0].size(); ++i) {
    sum[slot(i)] += e(c.in[0], i);
    cnt[slot(i)] += 1;
  }
  for (int64_t i = 0; i < c.in[0].size(); ++i) {
    const double d = e(c.in[0], i) - sum[slot(i)] / cnt[slot(i)];
    sq[slot(i)] += d * d;
  }
  for (size_t o = 0; o < sum.size(); ++o) {
    e(m, static_cast<int64_t>(o)) = static_cast<float>(sum[o] / cnt[o]);
    e(var, static_cast<int64_t>(o)) = static_cast<float>(sq[o] / cnt[o]);
  }
  return std::vector<NDArray>{m, var};
});
LOOM_OP_REFERENCE("gamma", [](const RefCall& c) {
  NDArray y(c.in[0].shape());
  for (int64_t i = 0; i < y.size(); ++i) e(y, i) = static_cast<float>(std::tgamma(e(c.in[0], i)));
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("gammaln", [](const RefCall& c) {
  NDArray y(c.in[0].shape());
  for (int64_t i = 0; i < y.size(); ++i) e(y, i) = static_cast<float>(std::lgamma(e(c.in[0], i)));
  return std::vector<NDArray>{y};
});

TEST(OpsMore, MomentsNeedsAxes) { EXPECT_THROW(ImperativeOp("moments", {}, {Shape{2, 3}}), Error); }

}  // namespace
}  // namespace loom::test
