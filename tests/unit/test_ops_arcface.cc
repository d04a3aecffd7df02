// The ops of an ArcFace margin head (L2Normalization, one_hot, pick; cos/arccos are unary
// math): naive references for the op sweep (forward, finite-difference gradient, req=add)
// and hand-computed values, including MXNet 1.9.1's outputs for the edge cases.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/executor.h"
#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

std::string attr(const Attrs& d, const std::string& k, const std::string& def) {
  return d.count(k) ? d.at(k) : def;
}
NDArray from(const Shape& s, const std::vector<float>& v) {
  NDArray a(s);
  for (size_t i = 0; i < v.size(); ++i) a.data<float>()[i] = v[i];
  return a;
}
void expect_values(const NDArray& a, const std::vector<float>& v, double tol = 1e-6) {
  ASSERT_EQ(a.size(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(a.at(static_cast<int64_t>(i)), v[i], tol) << i;
}

// ---------------------------------------------------------------- references
// L2Normalization by its definition: the group of element (n, c, s...) is all of sample n
// (instance), (n, s) (channel) or (n, c) (spatial).
std::vector<NDArray> ref_l2norm(const RefCall& c) {
  const NDArray& x = c.in[0];
  const Shape& s = x.shape();
  const std::string mode = attr(c.attrs.dict, "mode", "instance");
  const double eps = parse_float(attr(c.attrs.dict, "eps", "1e-10"));
  const int64_t n = s[0], ch = s.ndim() > 1 ? s[1] : 1, sp = s.numel() / (n * ch);
  auto group = [&](int64_t i) {
    int64_t b = i / (ch * sp), cc = i / sp % ch, p = i % sp;
    return mode == "instance" ? b : mode == "channel" ? b * sp + p : b * ch + cc;
  };
  std::map<int64_t, double> ss;
  for (int64_t i = 0; i < x.size(); ++i) ss[group(i)] += x.at(i) * x.at(i);
  NDArray y(s);
  for (int64_t i = 0; i < x.size(); ++i)
    y.data<float>()[i] = static_cast<float>(x.at(i) / std::sqrt(ss[group(i)] + eps));
  return {y};
}
LOOM_OP_REFERENCE("L2Normalization", ref_l2norm);

std::vector<NDArray> ref_one_hot(const RefCall& c) {
  const int64_t depth = parse_int(c.attrs.dict.at("depth"));
  const double on = parse_float(attr(c.attrs.dict, "on_value", "1")),
               off = parse_float(attr(c.attrs.dict, "off_value", "0"));
  NDArray y(c.out_shapes[0]);
  for (int64_t i = 0; i < c.in[0].size(); ++i)
    for (int64_t j = 0; j < depth; ++j)
      y.data<float>()[i * depth + j] =
          static_cast<float>(std::trunc(c.in[0].at(i)) == static_cast<double>(j) ? on : off);
  return {y};
}
LOOM_OP_REFERENCE("one_hot", ref_one_hot);

// pick on the flattened (outer, n, inner) view, indices truncated then clipped or wrapped.
std::vector<NDArray> ref_pick(const RefCall& c) {
  const Shape& s = c.in[0].shape();
  std::string axis_s = attr(c.attrs.dict, "axis", "-1");
  int64_t outer = 1, n = s.numel(), inner = 1;
  if (axis_s != "None") {
    int64_t ax = parse_int(axis_s);
    if (ax < 0) ax += s.ndim();
    n = s[static_cast<int>(ax)];
    for (int i = 0; i < ax; ++i) outer *= s[i];
    for (int i = static_cast<int>(ax) + 1; i < s.ndim(); ++i) inner *= s[i];
  }
  const bool wrap = attr(c.attrs.dict, "mode", "clip") == "wrap";
  NDArray y(c.out_shapes[0]);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t k = static_cast<int64_t>(std::trunc(c.in[1].at(o * inner + i)));
      k = wrap ? ((k % n) + n) % n : std::min(n - 1, std::max<int64_t>(0, k));
      y.data<float>()[o * inner + i] = static_cast<float>(c.in[0].at((o * n + k) * inner + i));
    }
  return {y};
}
LOOM_OP_REFERENCE("pick", ref_pick);

// ---------------------------------------------------------------- values from MXNet 1.9.1
TEST(OpsArcFace, L2NormalizationMatchesMXNet) {
  // mx.nd.L2Normalization([[1, 2, 3], [0, 0, 0]]): a zero row stays zero (eps in the sqrt).
  ImperativeOp op("L2Normalization", {}, {{2, 3}});
  expect_values(op.forward({from({2, 3}, {1, 2, 3, 0, 0, 0})})[0],
                {0.26726124f, 0.5345225f, 0.8017837f, 0, 0, 0});
  // eps = 1 is added under the square root: 1/sqrt(14 + 1).
  ImperativeOp big("L2Normalization", {{"eps", "1"}}, {{1, 3}});
  expect_values(big.forward({from({1, 3}, {1, 2, 3})})[0], {0.2581989f, 0.5163978f, 0.77459663f});
  EXPECT_THROW(ImperativeOp("L2Normalization", {{"mode", "channel"}}, {{2, 3}}), ShapeError);
}

TEST(OpsArcFace, OneHotMatchesMXNet) {
  // mx.nd.one_hot([0, 2, 5, -1, 1.7], 3, on_value=5, off_value=-1)
  ImperativeOp op("one_hot", {{"depth", "3"}, {"on_value", "5"}, {"off_value", "-1"}}, {{5}});
  auto y = op.forward({from({5}, {0, 2, 5, -1, 1.7f})})[0];
  EXPECT_EQ(y.shape(), (Shape{5, 3}));
  expect_values(y, {5, -1, -1, -1, -1, 5, -1, -1, -1, -1, -1, -1, -1, 5, -1});
}

TEST(OpsArcFace, PickMatchesMXNet) {
  NDArray d(Shape{3, 4});
  for (int i = 0; i < 12; ++i) d.data<float>()[i] = static_cast<float>(i);
  ImperativeOp clip("pick", {{"axis", "1"}}, {{3, 4}, {3}});
  expect_values(clip.forward({d, from({3}, {0, 5, -1})})[0], {0, 7, 8});
  ImperativeOp wrap("pick", {{"axis", "1"}, {"mode", "wrap"}}, {{3, 4}, {3}});
  expect_values(wrap.forward({d, from({3}, {0, 5, -1})})[0], {0, 5, 11});
  ImperativeOp keep("pick", {{"axis", "1"}, {"keepdims", "True"}}, {{3, 4}, {3, 1}});
  auto k = keep.forward({d, from({3, 1}, {1.7f, -0.5f, 2})})[0];
  EXPECT_EQ(k.shape(), (Shape{3, 1}));
  expect_values(k, {1, 4, 10});
  ImperativeOp ax0("pick", {{"axis", "0"}}, {{3, 4}, {4}});
  expect_values(ax0.forward({d, from({4}, {0, 2, 1, 1})})[0], {0, 9, 6, 7});
}

// The ArcFace margin head: cos(arccos(<x/|x|, w/|w|>) + m) at the label, s times the
// cosines, trained through SoftmaxOutput. Its gradient w.r.t. the features matches central
// differences of the softmax cross-entropy computed by hand.
TEST(OpsArcFace, MarginHeadGradientMatchesFiniteDifferences) {
  const int64_t batch = 3, dim = 4, classes = 5;
  const float s = 8.f, m = 0.3f;
  auto x = Symbol::Variable("data"), label = Symbol::Variable("label");
  auto w = Symbol::Variable("fc7_weight");
  auto xn = Symbol::Op("L2Normalization", {x}, {{"mode", "instance"}}, "xn");
  auto wn = Symbol::Op("L2Normalization", {w}, {{"mode", "instance"}}, "wn");
  auto cosine = Symbol::Op("FullyConnected", {xn, wn}, {{"num_hidden", "5"}, {"no_bias", "True"}}, "fc7");
  auto picked = Symbol::Op("pick", {cosine, label}, {{"axis", "1"}}, "picked");
  auto theta = Symbol::Op("arccos", {picked}, {}, "theta");
  auto margin = Symbol::Op("cos", {Symbol::Op("_plus_scalar", {theta}, {{"scalar", "0.3"}}, "tm")}, {}, "ctm");
  auto diff = Symbol::Op("elemwise_sub", {margin, picked}, {}, "diff");
  auto hot = Symbol::Op("one_hot", {label}, {{"depth", "5"}}, "hot");
  auto body = Symbol::Op("broadcast_mul", {hot, Symbol::Op("expand_dims", {diff}, {{"axis", "1"}}, "ed")}, {},
                         "bm");
  auto logits = Symbol::Op("_mul_scalar", {Symbol::Op("elemwise_add", {cosine, body}, {}, "out")},
                           {{"scalar", "8"}}, "scaled");
  auto loss = Symbol::Op("SoftmaxOutput", {logits, label}, {}, "softmax");
  auto ex = Executor::simple_bind(loss, {{"data", Shape{batch, dim}}, {"label", Shape{batch}}},
                                  BindOptions{.grad_req = {{"label", Req::kNull}}});
  std::vector<float> xv{0.3f, -1.2f, 0.5f, 0.8f, -0.4f, 0.9f, 1.1f, -0.2f, 0.7f, 0.1f, -0.6f, 1.3f};
  std::vector<float> wv(classes * dim), lv{1, 4, 0};
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = std::sin(1.7f * static_cast<float>(i) + 0.3f);
  ex->arg_dict().at("data").copy_from_host(xv.data(), xv.size() * 4);
  ex->arg_dict().at("fc7_weight").copy_from_host(wv.data(), wv.size() * 4);
  ex->arg_dict().at("label").copy_from_host(lv.data(), lv.size() * 4);
  ex->forward(true);
  ex->backward();
  std::vector<float> grad(xv.size());
  ex->grad_dict().at("data").copy_to_host(grad.data(), grad.size() * 4);

  // The loss by hand, in double: sum over the batch of -log softmax(s * logits)[label].
  auto loss_of = [&](const std::vector<double>& xd) {
    double total = 0;
    for (int64_t b = 0; b < batch; ++b) {
      double xn2 = 0;
      for (int64_t j = 0; j < dim; ++j) xn2 += xd[b * dim + j] * xd[b * dim + j];
      std::vector<double> z(classes);
      for (int64_t k = 0; k < classes; ++k) {
        double wn2 = 0, dot = 0;
        for (int64_t j = 0; j < dim; ++j) {
          wn2 += double(wv[k * dim + j]) * wv[k * dim + j];
          dot += xd[b * dim + j] * wv[k * dim + j];
        }
        double cs = dot / std::sqrt(xn2 + 1e-10) / std::sqrt(wn2 + 1e-10);
        z[k] = s * (k == static_cast<int64_t>(lv[b]) ? std::cos(std::acos(cs) + m) : cs);
      }
      double mx = *std::max_element(z.begin(), z.end()), se = 0;
      for (double v : z) se += std::exp(v - mx);
      total -= z[static_cast<size_t>(lv[b])] - mx - std::log(se);
    }
    return total;
  };
  std::vector<double> xd(xv.begin(), xv.end());
  for (size_t i = 0; i < xd.size(); ++i) {
    auto hi = xd, lo = xd;
    hi[i] += 1e-5, lo[i] -= 1e-5;
    double want = (loss_of(hi) - loss_of(lo)) / 2e-5;
    EXPECT_NEAR(grad[i], want, 1e-3 * std::max(1.0, std::abs(want))) << "feature " << i;
  }
}

}  // namespace
}  // namespace loom::test
