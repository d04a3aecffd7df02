// Range creation ops (_arange, _linspace, _eye, _full, _contrib_arange_like): naive sweep
// references written from the definitions and checks against values MXNet 1.9.1 gives.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

std::string attr(const Attrs& d, const std::string& k, const std::string& def) {
  return d.count(k) ? d.at(k) : def;
}
NDArray make(const Shape& s, const std::function<double(int64_t)>& f) {
  NDArray y(s);
  for (int64_t i = 0; i < y.size(); ++i) y.data<float>()[i] = static_cast<float>(f(i));
  return y;
}
std::vector<double> values(const NDArray& a) {
  std::vector<double> v;
  for (int64_t i = 0; i < a.size(); ++i) v.push_back(a.at(i));
  return v;
}

LOOM_OP_REFERENCE("_arange", [](const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  double start = parse_float(d.at("start")), step = parse_float(attr(d, "step", "1"));
  const int64_t repeat = parse_int(attr(d, "repeat", "1"));
  if (!d.count("stop") || d.at("stop") == "None") start = 0;
  const float s0 = static_cast<float>(start), st = static_cast<float>(step);
  return std::vector<NDArray>{
      make(c.out_shapes[0], [&](int64_t i) { return s0 + static_cast<float>(i / repeat) * st; })};
});
LOOM_OP_REFERENCE("_linspace", [](const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const double a = parse_float(d.at("start")), b = parse_float(d.at("stop"));
  const int64_t n = parse_int(d.at("num"));
  const bool ep = parse_bool(attr(d, "endpoint", "True"));
  const int64_t steps = ep ? n - 1 : n;
  const double h = steps > 0 ? (b - a) / steps : 0;
  return std::vector<NDArray>{make(c.out_shapes[0], [&](int64_t i) { return a + h * i; })};
});
LOOM_OP_REFERENCE("_eye", [](const RefCall& c) {
  const int64_t k = parse_int(attr(c.attrs.dict, "k", "0")), cols = c.out_shapes[0][1];
  return std::vector<NDArray>{
      make(c.out_shapes[0], [&](int64_t i) { return i % cols - i / cols == k ? 1.0 : 0.0; })};
});
LOOM_OP_REFERENCE("_full", [](const RefCall& c) {
  const double v = parse_float(c.attrs.dict.at("value"));
  return std::vector<NDArray>{make(c.out_shapes[0], [&](int64_t) { return v; })};
});
LOOM_OP_REFERENCE("_contrib_arange_like", [](const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const double start = parse_float(attr(d, "start", "0")), step = parse_float(attr(d, "step", "1"));
  const int64_t repeat = parse_int(attr(d, "repeat", "1"));
  return std::vector<NDArray>{make(c.out_shapes[0], [&](int64_t i) {
    return static_cast<float>(start) + static_cast<float>(i / repeat) * static_cast<float>(step);
  })};
});

TEST(RangeOps, ArangeShapesAndDtypes) {
  // MXNet 1.9.1: mx.nd.arange(1.3, 456.6, 1.3).shape == (351,)
  ImperativeOp a("_arange", {{"start", "1.3"}, {"stop", "456.6"}, {"step", "1.3"}}, {});
  EXPECT_EQ(a.out_shapes()[0], Shape{351});
  ImperativeOp b("_arange", {{"start", "10"}, {"repeat", "3"}, {"dtype", "int32"}}, {});
  EXPECT_EQ(b.out_types()[0], DType::kInt32);
  std::vector<double> v = values(b.forward({})[0]);
  ASSERT_EQ(v.size(), 30u);
  EXPECT_EQ(v[0], 0);
  EXPECT_EQ(v[3], 1);
  EXPECT_EQ(v[29], 9);
  // uint8 wraps like MXNet: arange(50, -50, -2, dtype=uint8) ends ..., 208, 206.
  ImperativeOp u("_arange", {{"start", "50"}, {"stop", "-50"}, {"step", "-2"}, {"dtype", "uint8"}},
                 {});
  v = values(u.forward({})[0]);
  ASSERT_EQ(v.size(), 50u);
  EXPECT_EQ(v[0], 50);
  EXPECT_EQ(v[25], 0);
  EXPECT_EQ(v[26], 254);
  EXPECT_EQ(v[49], 208);
  EXPECT_THROW(ImperativeOp("_arange", {{"start", "1"}, {"stop", "5"}, {"step", "-1"}}, {}), Error);
  EXPECT_THROW(ImperativeOp("_arange", {{"start", "1"}, {"step", "0"}}, {}), Error);
}

TEST(RangeOps, LinspaceEyeFull) {
  ImperativeOp l("_linspace", {{"start", "0"}, {"stop", "1"}, {"num", "5"}, {"endpoint", "False"}},
                 {});
  std::vector<double> v = values(l.forward({})[0]);
  ASSERT_EQ(v.size(), 5u);
  EXPECT_NEAR(v[4], 0.8, 1e-6);
  ImperativeOp e("_eye", {{"N", "2"}, {"M", "3"}, {"k", "1"}, {"dtype", "int64"}}, {});
  EXPECT_EQ(e.out_shapes()[0], (Shape{2, 3}));
  EXPECT_EQ(values(e.forward({})[0]), (std::vector<double>{0, 1, 0, 0, 0, 1}));
  ImperativeOp f("_full", {{"shape", "(2,)"}, {"value", "3.7"}, {"dtype", "int32"}}, {});
  EXPECT_EQ(values(f.forward({})[0]), (std::vector<double>{3, 3}));
}

TEST(RangeOps, ArangeLikeAxis) {
  ImperativeOp r("_contrib_arange_like", {{"axis", "-1"}}, {{2, 4}}, {DType::kFloat64});
  EXPECT_EQ(r.out_shapes()[0], Shape{4});
  EXPECT_EQ(r.out_types()[0], DType::kFloat64);
  NDArray x(Shape{2, 4}, DType::kFloat64);
  EXPECT_EQ(values(r.forward({x})[0]), (std::vector<double>{0, 1, 2, 3}));
  // MXNet 1.9.1 truncates start and step for float16 as for integers:
  // arange_like(ones((4,), float16), start=1, step=0.5) is [1, 1, 1, 1].
  ImperativeOp h("_contrib_arange_like", {{"start", "1"}, {"step", "0.5"}}, {{4}},
                 {DType::kFloat16});
  EXPECT_EQ(values(h.forward({NDArray(Shape{4}, DType::kFloat16)})[0]),
            (std::vector<double>{1, 1, 1, 1}));
  // float32 computes the product, rounds, then adds (no fused multiply-add), as MXNet:
  // arange(1.3, 8, 1.3)[5] is 7.80000019f.
  ImperativeOp f("_arange", {{"start", "1.3"}, {"stop", "8"}, {"step", "1.3"}}, {});
  EXPECT_EQ(f.forward({})[0].data<float>()[5], 7.80000019f);
}

}  // namespace
}  // namespace loom::test
