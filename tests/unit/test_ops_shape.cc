// Shape-changing ops (broadcast_to/axis/like, squeeze, reshape_like, tile, repeat, SwapAxis,
// slice, slice_like, stack, dot, batch_dot, Pad, softmax_cross_entropy): naive references for the op sweep and values checked against MXNet 1.9.1.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

// Broadcast by definition: output index (i_0..i_n) reads the input at i_d, or 0 where the
// (left-padded) input dimension is 1.
std::vector<NDArray> ref_broadcast(const RefCall& c) {
  const Shape& o = c.out_shapes[0];
  Shape s = c.in[0].shape();
  std::vector<int64_t> pad(static_cast<size_t>(o.ndim() - s.ndim()), 1);
  pad.insert(pad.end(), s.begin(), s.end());
  NDArray y(o);
  for (int64_t i = 0; i < o.numel(); ++i) {
    int64_t rem = i, src = 0, stride = 1;
    for (int d = o.ndim() - 1; d >= 0; --d) {
      int64_t idx = rem % o[d];
      rem /= o[d];
      src += (pad[static_cast<size_t>(d)] == 1 ? 0 : idx) * stride;
      stride *= pad[static_cast<size_t>(d)];
    }
    y.data<float>()[i] = static_cast<float>(c.in[0].at(src));
  }
  return {y};
}
LOOM_OP_REFERENCE("broadcast_to", ref_broadcast);
LOOM_OP_REFERENCE("broadcast_axis", ref_broadcast);
LOOM_OP_REFERENCE("broadcast_like", ref_broadcast);

// Views: the same elements in the same order.
std::vector<NDArray> ref_view(const RefCall& c) {
  NDArray y(c.out_shapes[0]);
  for (int64_t i = 0; i < y.size(); ++i) y.data<float>()[i] = static_cast<float>(c.in[0].at(i));
  return {y};
}
LOOM_OP_REFERENCE("squeeze", ref_view);
LOOM_OP_REFERENCE("reshape_like", ref_view);
LOOM_OP_REFERENCE("_identity_with_attr_like_rhs", ref_view);

// Multi-index helpers for the references below.
std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(static_cast<size_t>(s.ndim()));
  for (int d = s.ndim() - 1; d >= 0; --d) idx[static_cast<size_t>(d)] = i % s[d], i /= s[d];
  return idx;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t i = 0;
  for (int d = 0; d < s.ndim(); ++d) i = i * s[d] + idx[static_cast<size_t>(d)];
  return i;
}
// out[idx] = in[src(idx)] for a reference written as an index function.
template <class Src>
std::vector<NDArray> gather(const RefCall& c, const Shape& in_shape, Src src) {
  NDArray y(c.out_shapes[0]);
  for (int64_t i = 0; i < y.size(); ++i)
    y.data<float>()[i] = static_cast<float>(c.in[0].at(ravel(src(unravel(i, y.shape())), in_shape)));
  return {y};
}

LOOM_OP_REFERENCE("tile", [](const RefCall& c) {
  const Shape& o = c.out_shapes[0];
  Shape s = c.in[0].shape();
  std::vector<int64_t> d(static_cast<size_t>(o.ndim() - s.ndim()), 1);
  d.insert(d.end(), s.begin(), s.end());
  Shape padded(d);
  return gather(c, padded, [&](std::vector<int64_t> idx) {
    for (int k = 0; k < o.ndim(); ++k) idx[static_cast<size_t>(k)] %= padded[k];
    return idx;
  });
});
LOOM_OP_REFERENCE("repeat", [](const RefCall& c) {
  const int64_t r = parse_int(c.attrs.dict.at("repeats"));
  if (!c.attrs.dict.count("axis") || c.attrs.dict.at("axis") == "None")
    return gather(c, Shape{c.in[0].size()}, [&](std::vector<int64_t> idx) { return std::vector<int64_t>{idx[0] / r}; });
  int64_t ax = parse_int(c.attrs.dict.at("axis"));
  if (ax < 0) ax += c.in[0].shape().ndim();
  return gather(c, c.in[0].shape(), [&](std::vector<int64_t> idx) {
    idx[static_cast<size_t>(ax)] /= r;
    return idx;
  });
});
LOOM_OP_REFERENCE("SwapAxis", [](const RefCall& c) {
  const int nd = c.in[0].shape().ndim();
  auto ax = [&](const char* k) {
    int64_t v = c.attrs.dict.count(k) ? parse_int(c.attrs.dict.at(k)) : 0;
    return static_cast<size_t>(v < 0 ? v + nd : v);
  };
  return gather(c, c.in[0].shape(), [&](std::vector<int64_t> idx) {
    std::swap(idx[ax("dim1")], idx[ax("dim2")]);
    return idx;
  });
});
// slice: Python's own slicing rules, written out per axis.
LOOM_OP_REFERENCE("slice", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  auto b = parse_optional_tuple(c.attrs.dict.at("begin"));
  auto st = c.attrs.dict.count("step") ? parse_optional_tuple(c.attrs.dict.at("step"))
                                       : std::vector<std::optional<int64_t>>{};
  std::vector<int64_t> first(static_cast<size_t>(s.ndim()), 0), step(first.size(), 1);
  for (size_t d = 0; d < b.size(); ++d) {
    step[d] = st.empty() || !st[d] ? 1 : *st[d];
    const int64_t n = s[static_cast<int>(d)];
    int64_t v = b[d] ? *b[d] : (step[d] > 0 ? 0 : n - 1);
    if (v < 0) v += n;
    first[d] = step[d] > 0 ? std::clamp<int64_t>(v, 0, n) : std::clamp<int64_t>(v, -1, n - 1);
  }
  return gather(c, s, [&](std::vector<int64_t> idx) {
    for (size_t d = 0; d < idx.size(); ++d) idx[d] = first[d] + idx[d] * step[d];
    return idx;
  });
});
LOOM_OP_REFERENCE("stack", [](const RefCall& c) {
  const Shape& o = c.out_shapes[0];
  int64_t ax = c.attrs.dict.count("axis") ? parse_int(c.attrs.dict.at("axis")) : 0;
  if (ax < 0) ax += o.ndim();
  NDArray y(o);
  for (int64_t i = 0; i < y.size(); ++i) {
    auto idx = unravel(i, o);
    const size_t k = static_cast<size_t>(idx[static_cast<size_t>(ax)]);
    idx.erase(idx.begin() + ax);
    y.data<float>()[i] = static_cast<float>(c.in[k].at(ravel(idx, c.in[k].shape())));
  }
  return std::vector<NDArray>{y};
});

// dot by definition on the flattened views: lhs (M, K) or its transpose stored (K, M), rhs
// (K, N) or stored (N, K).
NDArray naive_matmul(const NDArray& l, const NDArray& r, bool ta, bool tb, int64_t m, int64_t n,
                     int64_t k, int64_t lo = 0, int64_t ro = 0) {
  NDArray y(Shape{m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < k; ++q)
        acc += l.at(lo + (ta ? q * m + i : i * k + q)) * r.at(ro + (tb ? j * k + q : q * n + j));
      y.data<float>()[i * n + j] = static_cast<float>(acc);
    }
  return y;
}
bool flag(const RefCall& c, const char* k) { return c.attrs.dict.count(k) && parse_bool(c.attrs.dict.at(k)); }
LOOM_OP_REFERENCE("dot", [](const RefCall& c) {
  bool ta = flag(c, "transpose_a"), tb = flag(c, "transpose_b");
  const Shape &l = c.in[0].shape(), &r = c.in[1].shape();
  int64_t k = ta ? l[0] : l[l.ndim() - 1];
  NDArray y = naive_matmul(c.in[0], c.in[1], ta, tb, l.numel() / k, r.numel() / k, k);
  return std::vector<NDArray>{y.reshape(c.out_shapes[0])};
});
LOOM_OP_REFERENCE("batch_dot", [](const RefCall& c) {
  bool ta = flag(c, "transpose_a"), tb = flag(c, "transpose_b");
  const Shape &l = c.in[0].shape(), &o = c.out_shapes[0];
  int64_t b = l[0], m = o[1], n = o[2], k = ta ? l[1] : l[2];
  NDArray y(o);
  for (int64_t i = 0; i < b; ++i) {
    NDArray part = naive_matmul(c.in[0], c.in[1], ta, tb, m, n, k, i * m * k, i * k * n);
    for (int64_t j = 0; j < m * n; ++j) y.data<float>()[i * m * n + j] = part.data<float>()[j];
  }
  return std::vector<NDArray>{y};
});

LOOM_OP_REFERENCE("slice_like", [](const RefCall& c) {
  return gather(c, c.in[0].shape(), [](std::vector<int64_t> idx) { return idx; });
});
// Pad by definition: constant outside, else the clamped (edge) or mirrored (reflect) index.
LOOM_OP_REFERENCE("Pad", [](const RefCall& c) {
  const Shape &s = c.in[0].shape(), &o = c.out_shapes[0];
  const Shape pw = parse_shape(c.attrs.dict.at("pad_width"));
  const std::string mode = c.attrs.dict.count("mode") ? c.attrs.dict.at("mode") : "constant";
  const double value = c.attrs.dict.count("constant_value") ? parse_float(c.attrs.dict.at("constant_value")) : 0;
  NDArray y(o);
  for (int64_t i = 0; i < o.numel(); ++i) {
    auto idx = unravel(i, o);
    bool outside = false;
    for (int d = 0; d < s.ndim(); ++d) {
      int64_t k = idx[static_cast<size_t>(d)] - pw[2 * d], n = s[d];
      if (k < 0 || k >= n) {
        outside = true;
        k = mode == "edge" ? std::clamp<int64_t>(k, 0, n - 1) : k < 0 ? -k : 2 * (n - 1) - k;
      }
      idx[static_cast<size_t>(d)] = k;
    }
    y.data<float>()[i] = outside && mode == "constant" ? static_cast<float>(value)
                                                       : static_cast<float>(c.in[0].at(ravel(idx, s)));
  }
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("softmax_cross_entropy", [](const RefCall& c) {
  const int64_t n = c.in[0].shape()[0], k = c.in[0].shape()[1];
  double loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    double se = 0;
    for (int64_t j = 0; j < k; ++j) se += std::exp(c.in[0].at(i * k + j));
    loss -= std::log(std::exp(c.in[0].at(i * k + static_cast<int64_t>(c.in[1].at(i)))) / se);
  }
  return std::vector<NDArray>{NDArray::full({1}, loss)};
});

TEST(OpsShape, ShapesMatchMXNet) {
  auto shape_of = [](const char* op, const Attrs& attrs, std::vector<Shape> in) {
    ImperativeOp o(op, attrs, in);
    std::vector<NDArray> args;
    for (const auto& s : in) args.push_back(NDArray::zeros(s));
    return o.forward(args).at(0).shape();
  };
  EXPECT_EQ(shape_of("squeeze", {}, {{1, 1}}), (Shape{1}));  // MXNet keeps one dimension
  EXPECT_EQ(shape_of("reshape_like", {{"lhs_begin", "1"}, {"rhs_begin", "0"}, {"rhs_end", "2"}},
                     {{5, 6}, {2, 3, 7}}),
            (Shape{5, 2, 3}));
  EXPECT_EQ(shape_of("broadcast_to", {{"shape", "(0, 3, 5)"}}, {{2, 1, 1}}), (Shape{2, 3, 5}));
  EXPECT_THROW(ImperativeOp("broadcast_to", {{"shape", "(3, 4)"}}, {{2, 4}}), ShapeError);
  // MXNet requires equal ranks (no NumPy-style left padding).
  EXPECT_THROW(ImperativeOp("broadcast_to", {{"shape", "(3, 2, 5)"}}, {{2, 1}}), ShapeError);
  EXPECT_THROW(ImperativeOp("squeeze", {{"axis", "(0,)"}}, {{2, 1}}), ShapeError);
  EXPECT_EQ(shape_of("slice_like", {{"axes", "(0, 1)"}}, {{3, 4, 5}, {2, 3}}), (Shape{2, 3, 5}));
  EXPECT_EQ(shape_of("slice_like", {{"axes", "(-1,)"}}, {{3, 4}, {2, 3}}), (Shape{3, 3}));
  EXPECT_THROW(ImperativeOp("Pad", {{"pad_width", "(0, 0, 1, 1)"}}, {{2, 3}}), ShapeError);  // 2-D
  EXPECT_THROW(ImperativeOp("Pad", {{"mode", "reflect"}, {"pad_width", "(0, 0, 0, 0, 3, 3, 0, 0)"}}, {{1, 1, 3, 3}}),
               ShapeError);
  // MXNet 1.9.1: softmax_cross_entropy([[1, 2, 3], [0, 0, 5]], [2, 0]) = 5.420992.
  NDArray d(Shape{2, 3}), l(Shape{2});
  float dv[] = {1, 2, 3, 0, 0, 5}, lv[] = {2, 0};
  d.copy_from_host(dv, sizeof dv);
  l.copy_from_host(lv, sizeof lv);
  EXPECT_NEAR(ImperativeOp("softmax_cross_entropy", {}, {{2, 3}, {2}}).forward({d, l})[0].at(0), 5.420992, 1e-5);
  // dot shapes as MXNet 1.9.1 gives them.
  EXPECT_EQ(shape_of("dot", {}, {{2, 3, 4}, {4, 5}}), (Shape{2, 3, 5}));
  EXPECT_EQ(shape_of("dot", {{"transpose_a", "True"}}, {{2, 3, 4}, {2, 5}}), (Shape{3, 4, 5}));
  EXPECT_EQ(shape_of("dot", {{"transpose_b", "True"}}, {{3, 4}, {5, 6, 4}}), (Shape{3, 5, 6}));
  EXPECT_EQ(shape_of("dot", {}, {{3}, {3}}), (Shape{1}));
  EXPECT_EQ(shape_of("dot", {}, {{4, 3}, {3}}), (Shape{4}));
  EXPECT_THROW(ImperativeOp("dot", {{"transpose_a", "True"}, {"transpose_b", "True"}}, {{2, 3, 4}, {5, 4, 3}}),
               ShapeError);
  // Values of MXNet 1.9.1's slice on arange(20).reshape(5, 4), column 0.
  auto col0 = [&](const Attrs& attrs) {
    ImperativeOp op("slice", attrs, {{5, 4}});
    NDArray x(Shape{5, 4});
    for (int i = 0; i < 20; ++i) x.data<float>()[i] = static_cast<float>(i);
    auto y = op.forward({x})[0];
    std::vector<float> v;
    for (int64_t r = 0; r < y.shape()[0]; ++r) v.push_back(static_cast<float>(y.at(r * y.shape()[1])));
    return v;
  };
  EXPECT_EQ(col0({{"begin", "(None,)"}, {"end", "(None,)"}, {"step", "(-2,)"}}), (std::vector<float>{16, 8, 0}));
  EXPECT_EQ(col0({{"begin", "(3,)"}, {"end", "(0,)"}, {"step", "(-1,)"}}), (std::vector<float>{12, 8, 4}));
  EXPECT_EQ(col0({{"begin", "(-1,)"}, {"end", "(-10,)"}, {"step", "(-1,)"}}),
            (std::vector<float>{16, 12, 8, 4, 0}));
  EXPECT_EQ(col0({{"begin", "(1,)"}, {"end", "(-1,)"}}), (std::vector<float>{4, 8, 12}));
  EXPECT_THROW(ImperativeOp("slice", {{"begin", "(3,)"}, {"end", "(1,)"}}, {{5, 4}}), ShapeError);
}

// broadcast_like sends lhs the summed gradient and rhs zeros (MXNet 1.9.1: a (1, 3) lhs
// like a (4, 3) rhs gets 4 per element).
TEST(OpsShape, BroadcastLikeGradient) {
  ImperativeOp op("broadcast_like", {}, {{1, 3}, {4, 3}});
  std::vector<NDArray> in{NDArray::full({1, 3}, 1.0), NDArray::full({4, 3}, 1.0)};
  auto out = op.forward(in);
  std::vector<NDArray> grads{NDArray::full({1, 3}, 7.0), NDArray::full({4, 3}, 7.0)};
  op.backward({NDArray::full({4, 3}, 1.0)}, in, out, {Req::kWrite, Req::kWrite}, grads);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(grads[0].at(i), 4.0);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(grads[1].at(i), 0.0);
}

// Empty lhs_axes/rhs_axes are refused, as MXNet's test_broadcast_like_axis requires.
TEST(OpsShape, BroadcastLikeEmptyAxesRejected) {
  EXPECT_THROW(ImperativeOp("broadcast_like", {{"lhs_axes", "()"}, {"rhs_axes", "()"}},
                            {{1, 3}, {4, 3}}),
               ShapeError);
  ImperativeOp ok("broadcast_like", {{"lhs_axes", "(0,)"}, {"rhs_axes", "(0,)"}}, {{1, 3}, {4, 3}});
  EXPECT_EQ(ok.forward({NDArray::full({1, 3}, 2.0), NDArray::full({4, 3}, 0.0)})[0].shape(),
            (Shape{4, 3}));
}

}  // namespace
}  // namespace loom::test
