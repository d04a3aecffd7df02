// Indexing, sorting and reduction ops (take, argmax/argmin/argmax_channel, topk, sort,
// argsort, norm): naive references for
// the op sweep and values MXNet 1.9.1 gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

std::string attr(const Attrs& d, const std::string& k, const std::string& def) {
  return d.count(k) ? d.at(k) : def;
}
NDArray iota(const Shape& s) {
  NDArray a(s);
  for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = static_cast<float>(i);
  return a;
}
NDArray from(const Shape& s, const std::vector<float>& v) {
  NDArray a(s);
  for (size_t i = 0; i < v.size(); ++i) a.data<float>()[i] = v[i];
  return a;
}
std::vector<float> values(const NDArray& a) {
  std::vector<float> v;
  for (int64_t i = 0; i < a.size(); ++i) v.push_back(static_cast<float>(a.at(i)));
  return v;
}

// (outer, n, inner) around an axis.
struct Around {
  int64_t outer = 1, n = 1, inner = 1;
};
Around around(const Shape& s, int64_t ax) {
  Around r;
  if (ax < 0) ax += s.ndim();
  for (int d = 0; d < ax; ++d) r.outer *= s[d];
  for (int d = static_cast<int>(ax) + 1; d < s.ndim(); ++d) r.inner *= s[d];
  r.n = s[static_cast<int>(ax)];
  return r;
}

LOOM_OP_REFERENCE("take", [](const RefCall& c) {
  const Around a = around(c.in[0].shape(), parse_int(attr(c.attrs.dict, "axis", "0")));
  const bool wrap = attr(c.attrs.dict, "mode", "clip") == "wrap";
  const int64_t count = c.in[1].size();
  NDArray y(c.out_shapes[0]);
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t j = 0; j < count; ++j) {
      int64_t k = static_cast<int64_t>(std::trunc(c.in[1].at(j)));
      k = wrap ? ((k % a.n) + a.n) % a.n : std::clamp<int64_t>(k, 0, a.n - 1);
      for (int64_t i = 0; i < a.inner; ++i)
        y.data<float>()[(o * count + j) * a.inner + i] =
            static_cast<float>(c.in[0].at((o * a.n + k) * a.inner + i));
    }
  return std::vector<NDArray>{y};
});

std::vector<NDArray> ref_arg(const RefCall& c, bool is_max, const std::string& axis) {
  const Shape& s = c.in[0].shape();
  Around a = axis == "None" ? Around{1, s.numel(), 1} : around(s, parse_int(axis));
  NDArray y(c.out_shapes[0]);
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t i = 0; i < a.inner; ++i) {
      // NumPy's rule: the first NaN if there is one, else the first extreme.
      int64_t best = 0, first_nan = -1;
      for (int64_t k = 0; k < a.n; ++k) {
        double v = c.in[0].at((o * a.n + k) * a.inner + i), b = c.in[0].at((o * a.n + best) * a.inner + i);
        if (std::isnan(v) && first_nan < 0) first_nan = k;
        if (is_max ? v > b : v < b) best = k;
      }
      if (first_nan >= 0) best = first_nan;
      y.data<float>()[o * a.inner + i] = static_cast<float>(best);
    }
  return {y};
}
LOOM_OP_REFERENCE("argmax", [](const RefCall& c) { return ref_arg(c, true, attr(c.attrs.dict, "axis", "None")); });
LOOM_OP_REFERENCE("argmin", [](const RefCall& c) { return ref_arg(c, false, attr(c.attrs.dict, "axis", "None")); });
LOOM_OP_REFERENCE("argmax_channel", [](const RefCall& c) { return ref_arg(c, true, "-1"); });

LOOM_OP_REFERENCE("norm", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const bool l1 = attr(c.attrs.dict, "ord", "2") == "1";
  std::vector<bool> red(static_cast<size_t>(s.ndim()), true);
  if (attr(c.attrs.dict, "axis", "None") != "None") {
    red.assign(red.size(), false);
    for (auto ax : parse_shape(c.attrs.dict.at("axis"))) red[static_cast<size_t>(ax < 0 ? ax + s.ndim() : ax)] = true;
  }
  // Output element of input element i: its index with the reduced axes dropped.
  std::map<int64_t, double> acc;
  for (int64_t i = 0; i < s.numel(); ++i) {
    int64_t rem = i, key = 0, mul = 1;
    for (int d = s.ndim() - 1; d >= 0; --d) {
      int64_t idx = rem % s[d];
      rem /= s[d];
      if (!red[static_cast<size_t>(d)]) key += idx * mul, mul *= s[d];
    }
    double v = c.in[0].at(i);
    acc[key] += l1 ? std::abs(v) : v * v;
  }
  NDArray y(c.out_shapes[0]);
  for (auto [k, v] : acc) y.data<float>()[k] = static_cast<float>(l1 ? v : std::sqrt(v));
  return std::vector<NDArray>{y};
});

// Sorting by definition: each lane copied out, ordered with std::stable_sort on (value, index).
struct LaneRef {
  Around a;
  LaneRef(const RefCall& c) {
    std::string axis = attr(c.attrs.dict, "axis", "-1");
    const Shape& s = c.in[0].shape();
    a = axis == "None" ? Around{1, s.numel(), 1} : around(s, parse_int(axis));
  }
  std::vector<std::pair<double, int64_t>> sorted(const NDArray& x, int64_t o, int64_t i, bool ascend) const {
    std::vector<std::pair<double, int64_t>> v;
    for (int64_t k = 0; k < a.n; ++k) v.push_back({x.at((o * a.n + k) * a.inner + i), k});
    std::stable_sort(v.begin(), v.end(), [&](auto p, auto q) { return ascend ? p.first < q.first : p.first > q.first; });
    return v;
  }
};
std::vector<NDArray> ref_sort(const RefCall& c, bool indices) {
  LaneRef l(c);
  const bool asc = parse_bool(attr(c.attrs.dict, "is_ascend", "True"));
  NDArray y(c.out_shapes[0]);
  for (int64_t o = 0; o < l.a.outer; ++o)
    for (int64_t i = 0; i < l.a.inner; ++i) {
      auto v = l.sorted(c.in[0], o, i, asc);
      for (int64_t k = 0; k < l.a.n; ++k)
        y.data<float>()[(o * l.a.n + k) * l.a.inner + i] =
            static_cast<float>(indices ? static_cast<double>(v[static_cast<size_t>(k)].second) : v[static_cast<size_t>(k)].first);
    }
  return {y};
}
LOOM_OP_REFERENCE("sort", [](const RefCall& c) { return ref_sort(c, false); });
LOOM_OP_REFERENCE("argsort", [](const RefCall& c) { return ref_sort(c, true); });
LOOM_OP_REFERENCE("topk", [](const RefCall& c) {
  LaneRef l(c);
  const bool asc = parse_bool(attr(c.attrs.dict, "is_ascend", "False"));
  const std::string ret = attr(c.attrs.dict, "ret_typ", "indices");
  const int64_t k = parse_int(attr(c.attrs.dict, "k", "1"));
  NDArray vals(c.out_shapes[0]), idx(c.out_shapes[0]);
  if (ret == "mask") vals = NDArray::zeros(c.out_shapes[0]);
  for (int64_t o = 0; o < l.a.outer; ++o)
    for (int64_t i = 0; i < l.a.inner; ++i) {
      auto v = l.sorted(c.in[0], o, i, asc);
      for (int64_t j = 0; j < k; ++j) {
        auto [val, pos] = v[static_cast<size_t>(j)];
        if (ret == "mask") {
          vals.data<float>()[(o * l.a.n + pos) * l.a.inner + i] = 1.f;
        } else {
          vals.data<float>()[(o * k + j) * l.a.inner + i] = static_cast<float>(val);
          idx.data<float>()[(o * k + j) * l.a.inner + i] = static_cast<float>(pos);
        }
      }
    }
  if (ret == "indices") return std::vector<NDArray>{idx};
  if (ret == "mask" || ret == "value") return std::vector<NDArray>{vals};
  return std::vector<NDArray>{vals, idx};
});

TEST(OpsIndex, SortingMatchesMXNet) {
  // MXNet 1.9.1 on [1, 3, 3, 2]: ties keep their order in both directions.
  NDArray t = from({4}, {1, 3, 3, 2});
  EXPECT_EQ(values(ImperativeOp("topk", {{"k", "2"}}, {{4}}).forward({t})[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(values(ImperativeOp("argsort", {}, {{4}}).forward({t})[0]), (std::vector<float>{0, 3, 1, 2}));
  EXPECT_EQ(values(ImperativeOp("argsort", {{"is_ascend", "False"}}, {{4}}).forward({t})[0]),
            (std::vector<float>{1, 2, 3, 0}));
  NDArray x = from({2, 5}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3});
  EXPECT_EQ(values(ImperativeOp("topk", {{"k", "2"}, {"ret_typ", "mask"}}, {{2, 5}}).forward({x})[0]),
            (std::vector<float>{0, 0, 1, 0, 1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(values(ImperativeOp("topk", {{"k", "3"}, {"axis", "None"}}, {{2, 5}}).forward({x})[0]),
            (std::vector<float>{5, 7, 4}));
  // The values' gradient lands on the chosen elements.
  ImperativeOp tv("topk", {{"k", "2"}, {"ret_typ", "value"}}, {{2, 5}});
  auto out = tv.forward({x});
  std::vector<NDArray> g{NDArray::zeros({2, 5})};
  tv.backward({from({2, 2}, {1, 2, 3, 4}), NDArray()}, {x}, out, {Req::kWrite}, g);
  EXPECT_EQ(values(g[0]), (std::vector<float>{0, 0, 2, 0, 1, 3, 0, 4, 0, 0}));
}

TEST(OpsIndex, TakeMatchesMXNet) {
  ImperativeOp clip("take", {}, {{3, 4}, {4}});
  EXPECT_EQ(values(clip.forward({iota({3, 4}), from({4}, {0, 2, 5, -1})})[0]),
            (std::vector<float>{0, 1, 2, 3, 8, 9, 10, 11, 8, 9, 10, 11, 0, 1, 2, 3}));
  ImperativeOp wrap("take", {{"axis", "1"}, {"mode", "wrap"}}, {{3, 4}, {3}});
  EXPECT_EQ(values(wrap.forward({iota({3, 4}), from({3}, {0, 5, -1})})[0]),
            (std::vector<float>{0, 1, 3, 4, 5, 7, 8, 9, 11}));
  ImperativeOp raise("take", {{"mode", "raise"}}, {{3, 4}, {1}});
  EXPECT_THROW(raise.forward({iota({3, 4}), from({1}, {3})}), Error);
}

TEST(OpsIndex, ArgmaxMatchesMXNet) {
  NDArray b = from({2, 3}, {1, 3, 3, 2, 2, 0});
  EXPECT_EQ(values(ImperativeOp("argmax", {{"axis", "1"}}, {{2, 3}}).forward({b})[0]), (std::vector<float>{1, 0}));
  EXPECT_EQ(values(ImperativeOp("argmin", {{"axis", "1"}}, {{2, 3}}).forward({b})[0]), (std::vector<float>{0, 2}));
  auto flat = ImperativeOp("argmax", {}, {{3, 4}}).forward({iota({3, 4})})[0];
  EXPECT_EQ(flat.shape(), (Shape{1}));
  EXPECT_EQ(flat.at(0), 11);
  EXPECT_EQ(values(ImperativeOp("argmax_channel", {}, {{3, 4}}).forward({iota({3, 4})})[0]),
            (std::vector<float>{3, 3, 3}));
  // A NaN is the extreme, the first one counting (MXNet 1.9.1 and NumPy: [1, 0, 3] for both).
  const float nan = std::nanf(""), inf = INFINITY;
  NDArray n = from({3, 4}, {1, nan, 3, nan, nan, -inf, 5, inf, 2, 1, inf, nan});
  EXPECT_EQ(values(ImperativeOp("argmax", {{"axis", "1"}}, {{3, 4}}).forward({n})[0]),
            (std::vector<float>{1, 0, 3}));
  EXPECT_EQ(values(ImperativeOp("argmin", {{"axis", "1"}}, {{3, 4}}).forward({n})[0]),
            (std::vector<float>{1, 0, 3}));
  EXPECT_EQ(values(ImperativeOp("argmin", {{"axis", "0"}}, {{3, 4}}).forward({n})[0]),
            (std::vector<float>{1, 0, 0, 0}));
}

TEST(OpsIndex, NormMatchesMXNet) {
  auto all = ImperativeOp("norm", {}, {{3, 4}}).forward({iota({3, 4})})[0];
  EXPECT_EQ(all.shape(), (Shape{1}));
  EXPECT_NEAR(all.at(0), 22.494442, 1e-5);
  EXPECT_EQ(values(ImperativeOp("norm", {{"ord", "1"}, {"axis", "1"}}, {{3, 4}}).forward({iota({3, 4})})[0]),
            (std::vector<float>{6, 22, 38}));
  EXPECT_EQ(ImperativeOp("norm", {{"axis", "(0, 1)"}, {"keepdims", "True"}}, {{3, 4}}).out_shapes()[0], (Shape{1, 1}));
}

}  // namespace
}  // namespace loom::test
