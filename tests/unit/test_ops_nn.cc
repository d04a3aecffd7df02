// Neural-network ops: naive references (registered for the op sweep) and tests of forward
// against them, central-difference gradients, add-mode backward, shape inference and
// BatchNorm's auxiliary-state updates.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ops/infer.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

// ---------------------------------------------------------------- attribute helpers
std::string attr(const Attrs& d, const std::string& k, const std::string& def) {
  auto it = d.find(k);
  return it == d.end() ? def : it->second;
}
int64_t attr_int(const Attrs& d, const std::string& k, int64_t def) {
  return d.count(k) ? parse_int(d.at(k)) : def;
}
double attr_float(const Attrs& d, const std::string& k, double def) {
  auto it = d.find(k);
  return it == d.end() || it->second == "None" ? def : parse_float(it->second);
}
bool attr_bool(const Attrs& d, const std::string& k, bool def) {
  return d.count(k) ? parse_bool(d.at(k)) : def;
}
// A spatial tuple padded to 3 dims on the left with `lead`; empty -> `fill` everywhere.
std::vector<int64_t> tuple3(const Attrs& d, const std::string& k, int nd, int64_t fill,
                            int64_t lead) {
  Shape t = d.count(k) ? parse_shape(d.at(k)) : Shape();
  std::vector<int64_t> r(3, lead);
  for (int i = 0; i < nd; ++i) r[3 - nd + i] = t.ndim() ? t[i] : fill;
  return r;
}
std::vector<int64_t> dims3(const Shape& s) {  // spatial dims of (N, C, ...) padded to 3
  std::vector<int64_t> r(3, 1);
  int nd = s.ndim() - 2;
  for (int i = 0; i < nd; ++i) r[3 - nd + i] = s[i + 2];
  return r;
}
float* F(const NDArray& a) { return a.data<float>(); }

// ---------------------------------------------------------------- references
std::vector<NDArray> ref_fc(const RefCall& c) {
  const NDArray &x = c.in[0], &w = c.in[1];
  int64_t o = w.shape()[0], k = w.shape()[1], m = x.size() / k;
  bool bias = !attr_bool(c.attrs.dict, "no_bias", false);
  NDArray y(c.out_shapes[0]);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < o; ++j) {
      double s = bias ? c.in[2].at(j) : 0.0;
      for (int64_t t = 0; t < k; ++t) s += x.at(i * k + t) * w.at(j * k + t);
      F(y)[i * o + j] = static_cast<float>(s);
    }
  return {y};
}

std::vector<NDArray> ref_conv(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  int nd = parse_shape(d.at("kernel")).ndim();
  auto K = tuple3(d, "kernel", nd, 1, 1), S = tuple3(d, "stride", nd, 1, 1);
  auto D = tuple3(d, "dilate", nd, 1, 1), P = tuple3(d, "pad", nd, 0, 0);
  int64_t G = attr_int(d, "num_group", 1);
  bool bias = !attr_bool(d, "no_bias", false);
  const NDArray &x = c.in[0], &w = c.in[1];
  const Shape& os = c.out_shapes[0];
  int64_t N = os[0], Fo = os[1], C = x.shape()[1], Cg = C / G, Fg = Fo / G;
  auto I = dims3(x.shape()), O = dims3(os);
  NDArray y(os);
  int64_t oi = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t f = 0; f < Fo; ++f)
      for (int64_t a = 0; a < O[0]; ++a)
        for (int64_t b = 0; b < O[1]; ++b)
          for (int64_t e = 0; e < O[2]; ++e) {
            double s = bias ? c.in[2].at(f) : 0.0;
            for (int64_t cc = 0; cc < Cg; ++cc) {
              int64_t ci = (f / Fg) * Cg + cc;
              for (int64_t ka = 0; ka < K[0]; ++ka)
                for (int64_t kb = 0; kb < K[1]; ++kb)
                  for (int64_t ke = 0; ke < K[2]; ++ke) {
                    int64_t ia = a * S[0] - P[0] + ka * D[0], ib = b * S[1] - P[1] + kb * D[1],
                            ie = e * S[2] - P[2] + ke * D[2];
                    if (ia < 0 || ib < 0 || ie < 0 || ia >= I[0] || ib >= I[1] || ie >= I[2])
                      continue;
                    s += x.at((((n * C + ci) * I[0] + ia) * I[1] + ib) * I[2] + ie) *
                         w.at((((f * Cg + cc) * K[0] + ka) * K[1] + kb) * K[2] + ke);
                  }
            }
            F(y)[oi++] = static_cast<float>(s);
          }
  return {y};
}

std::vector<NDArray> ref_pool(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const NDArray& x = c.in[0];
  int nd = x.shape().ndim() - 2;
  bool global = attr_bool(d, "global_pool", false);
  std::string type = attr(d, "pool_type", "max");
  bool include_pad =
      attr(d, "count_include_pad", "None") == "None" || attr_bool(d, "count_include_pad", true);
  auto I = dims3(x.shape()), O = dims3(c.out_shapes[0]);
  auto K = global ? I : tuple3(d, "kernel", nd, 1, 1);
  auto S = global ? std::vector<int64_t>{1, 1, 1} : tuple3(d, "stride", nd, 1, 1);
  auto P = global ? std::vector<int64_t>{0, 0, 0} : tuple3(d, "pad", nd, 0, 0);
  NDArray y(c.out_shapes[0]);
  int64_t planes = x.shape()[0] * x.shape()[1], oi = 0;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t a = 0; a < O[0]; ++a)
      for (int64_t b = 0; b < O[1]; ++b)
        for (int64_t e = 0; e < O[2]; ++e) {
          int64_t o[3] = {a, b, e}, st[3], en[3];
          double padded = 1, real = 0, sum = 0, mx = -INFINITY;
          for (int i = 0; i < 3; ++i) {
            st[i] = o[i] * S[i] - P[i];
            en[i] = std::min(st[i] + K[i], I[i] + P[i]);
            padded *= static_cast<double>(en[i] - st[i]);
          }
          for (int64_t ia = st[0]; ia < en[0]; ++ia)
            for (int64_t ib = st[1]; ib < en[1]; ++ib)
              for (int64_t ie = st[2]; ie < en[2]; ++ie) {
                if (ia < 0 || ib < 0 || ie < 0 || ia >= I[0] || ib >= I[1] || ie >= I[2]) continue;
                double v = x.at(((pl * I[0] + ia) * I[1] + ib) * I[2] + ie);
                sum += v;
                mx = std::max(mx, v);
                real += 1;
              }
          double r = type == "max" ? mx : type == "sum" ? sum : sum / (include_pad ? padded : real);
          F(y)[oi++] = static_cast<float>(r);
        }
  return {y};
}

std::vector<NDArray> ref_activation(const RefCall& c) {
  std::string t = c.attrs.dict.at("act_type");
  NDArray y(c.out_shapes[0]);
  for (int64_t i = 0; i < y.size(); ++i) {
    double v = c.in[0].at(i), r;
    if (t == "relu")
      r = v > 0 ? v : 0;
    else if (t == "sigmoid")
      r = 1 / (1 + std::exp(-v));
    else if (t == "tanh")
      r = std::tanh(v);
    else if (t == "softrelu")
      r = std::log(1 + std::exp(v));
    else
      r = v / (1 + std::abs(v));
    F(y)[i] = static_cast<float>(r);
  }
  return {y};
}

std::vector<NDArray> ref_leaky(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  std::string t = attr(d, "act_type", "leaky");
  double s = attr_float(d, "slope", 0.25);
  double lo = attr_float(d, "lower_bound", 0.125), hi = attr_float(d, "upper_bound", 0.334);
  if (t == "rrelu" && c.is_train) return {};  // random slopes
  const Shape& sh = c.in[0].shape();
  NDArray y(c.out_shapes[0]);
  int64_t inner = sh.ndim() >= 2 ? y.size() / (sh[0] * sh[1]) : 1;
  for (int64_t i = 0; i < y.size(); ++i) {
    double v = c.in[0].at(i), r;
    if (t == "leaky")
      r = v > 0 ? v : s * v;
    else if (t == "prelu") {
      double g = c.in[1].size() == 1 ? c.in[1].at(0) : c.in[1].at((i / inner) % sh[1]);
      r = v > 0 ? v : g * v;
    } else if (t == "rrelu")
      r = v > 0 ? v : v * (lo + hi) / 2;
    else if (t == "elu")
      r = v > 0 ? v : s * (std::exp(v) - 1);
    else if (t == "selu")
      r = 1.0507009873554805 * (v > 0 ? v : 1.6732632423543772 * (std::exp(v) - 1));
    else
      r = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    F(y)[i] = static_cast<float>(r);
  }
  return {y};
}

// Softmax of x/t along `axis` of shape s (log-softmax when `log`).
NDArray softmax_along(const NDArray& x, const Shape& s, int axis, double t, bool log) {
  int64_t outer = 1, n = s[axis], inner = 1;
  for (int i = 0; i < axis; ++i) outer *= s[i];
  for (int i = axis + 1; i < s.ndim(); ++i) inner *= s[i];
  NDArray y(x.shape());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t i) { return (o * n + i) * inner + j; };
      double z = 0;
      for (int64_t i = 0; i < n; ++i) z += std::exp(x.at(at(i)) / t);
      for (int64_t i = 0; i < n; ++i) F(y)
      [at(i)] =
          static_cast<float>(log ? x.at(at(i)) / t - std::log(z) : std::exp(x.at(at(i)) / t) / z);
    }
  return y;
}

std::vector<NDArray> ref_softmax(const RefCall& c, bool log) {
  const Shape& s = c.in[0].shape();
  int axis = static_cast<int>(attr_int(c.attrs.dict, "axis", -1));
  if (axis < 0) axis += s.ndim();
  const double t = attr_float(c.attrs.dict, "temperature", 1.0);
  if (!attr_bool(c.attrs.dict, "use_length", false)) return {softmax_along(c.in[0], s, axis, t, log)};
  // Masked: row (o, j) uses its first length[o, j] entries (clipped to n), the rest is 0.
  int64_t outer = 1, n = s[axis], inner = 1;
  for (int i = 0; i < axis; ++i) outer *= s[i];
  for (int i = axis + 1; i < s.ndim(); ++i) inner *= s[i];
  NDArray y(s);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t i) { return (o * n + i) * inner + j; };
      const int64_t len = std::clamp<int64_t>(static_cast<int64_t>(c.in[1].at(o * inner + j)), 0, n);
      double z = 0;
      for (int64_t i = 0; i < len; ++i) z += std::exp(c.in[0].at(at(i)) / t);
      for (int64_t i = 0; i < n; ++i) {
        double v = c.in[0].at(at(i)) / t;
        F(y)[at(i)] = i >= len ? 0.f : static_cast<float>(log ? v - std::log(z) : std::exp(v) / z);
      }
    }
  return {y};
}

std::vector<NDArray> ref_softmax_act(const RefCall& c) {
  const Shape& s = c.in[0].shape();
  if (attr(c.attrs.dict, "mode", "instance") == "channel")
    return {softmax_along(c.in[0], s, 1, 1.0, false)};
  // MXNet's instance mode: FlatTo2D, i.e. softmax over the last axis.
  return {softmax_along(c.in[0], s, s.ndim() - 1, 1.0, false)};
}

std::vector<NDArray> ref_bn(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  double eps = attr_float(d, "eps", 1e-3);
  bool fix_gamma = attr_bool(d, "fix_gamma", true);
  bool train = c.is_train && !attr_bool(d, "use_global_stats", false);
  const Shape& s = c.in[0].shape();
  int axis = static_cast<int>(attr_int(d, "axis", 1));
  if (axis < 0) axis += s.ndim();
  int64_t outer = 1, C = s[axis], inner = 1;
  for (int i = 0; i < axis; ++i) outer *= s[i];
  for (int i = axis + 1; i < s.ndim(); ++i) inner *= s[i];
  NDArray y(s), mean(Shape{C}), invstd(Shape{C});
  for (int64_t ch = 0; ch < C; ++ch) {
    std::vector<int64_t> idx;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) idx.push_back((o * C + ch) * inner + j);
    double mu = c.in[3].at(ch), var = c.in[4].at(ch);
    if (train) {
      mu = var = 0;
      for (auto k : idx) mu += c.in[0].at(k) / idx.size();
      for (auto k : idx) var += (c.in[0].at(k) - mu) * (c.in[0].at(k) - mu) / idx.size();
    }
    double is = 1 / std::sqrt(var + eps), g = fix_gamma ? 1.0 : c.in[1].at(ch);
    for (auto k : idx) F(y)[k] = static_cast<float>((c.in[0].at(k) - mu) * is * g + c.in[2].at(ch));
    F(mean)[ch] = static_cast<float>(mu);
    F(invstd)[ch] = static_cast<float>(is);
  }
  return {y, mean, invstd};
}

std::vector<NDArray> ref_lrn(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  int64_t nsize = attr_int(d, "nsize", 1);
  double alpha = attr_float(d, "alpha", 1e-4), beta = attr_float(d, "beta", 0.75),
         k = attr_float(d, "knorm", 2.0);
  const Shape& s = c.in[0].shape();
  int64_t C = s[1], inner = s.numel() / (s[0] * C);
  NDArray y(s);
  for (int64_t i = 0; i < y.size(); ++i) {
    int64_t ch = (i / inner) % C, base = i - ch * inner;
    double sq = 0;
    for (int64_t j = ch - nsize / 2; j <= ch + nsize / 2; ++j)
      if (j >= 0 && j < C) sq += c.in[0].at(base + j * inner) * c.in[0].at(base + j * inner);
    F(y)[i] = static_cast<float>(c.in[0].at(i) * std::pow(k + alpha / nsize * sq, -beta));
  }
  return {y};
}

LOOM_OP_REFERENCE("FullyConnected", ref_fc);
LOOM_OP_REFERENCE("Convolution", ref_conv);
LOOM_OP_REFERENCE("Pooling", ref_pool);
LOOM_OP_REFERENCE("Activation", ref_activation);
LOOM_OP_REFERENCE("LeakyReLU", ref_leaky);
LOOM_OP_REFERENCE("softmax", [](const RefCall& c) { return ref_softmax(c, false); });
LOOM_OP_REFERENCE("log_softmax", [](const RefCall& c) { return ref_softmax(c, true); });
LOOM_OP_REFERENCE("SoftmaxActivation", ref_softmax_act);
LOOM_OP_REFERENCE("BatchNorm", ref_bn);
LOOM_OP_REFERENCE("LRN", ref_lrn);

// ---------------------------------------------------------------- the checker
struct Case {
  std::string op;
  Attrs attrs;
  std::vector<Shape> shapes;  // unknown entries are inferred
  std::vector<std::string> kinds;
  bool is_train = false;
  bool grad = true;
};

NDArray random_array(const Shape& s, const std::string& kind, std::mt19937_64& rng) {
  NDArray a(s);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> pos(0.5f, 2.f);
  for (int64_t i = 0; i < a.size(); ++i) F(a)[i] = kind == "positive" ? pos(rng) : normal(rng);
  return a;
}

std::vector<NDArray> copies(const std::vector<NDArray>& v) {
  std::vector<NDArray> r;
  for (const auto& a : v) r.push_back(a.copy());
  return r;
}

void expect_close(const NDArray& got, const NDArray& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got.at(i), want.at(i), tol * (1 + std::abs(want.at(i)))) << what << " at " << i;
}

// Σ over visible outputs of out·head, in double.
double weighted_sum(const std::vector<NDArray>& out, const std::vector<NDArray>& head, int vis) {
  double s = 0;
  for (int k = 0; k < vis; ++k)
    for (int64_t i = 0; i < out[k].size(); ++i) s += out[k].at(i) * head[k].at(i);
  return s;
}

// Forward against the reference, central-difference gradients of every non-aux input
// (elements whose one-sided slopes disagree sit on a kink and are skipped), and backward
// with req=add adding exactly the write-mode gradient.
void check_case(const Case& cs) {
  SCOPED_TRACE(cs.op + " " + [&] {
    std::string s;
    for (auto& [k, v] : cs.attrs) s += k + "=" + v + " ";
    return s + cs.shapes[0].str();
  }());
  ImperativeOp op(cs.op, cs.attrs, cs.shapes);
  std::mt19937_64 rng(7);
  std::vector<NDArray> in;
  for (size_t i = 0; i < op.in_shapes().size(); ++i)
    in.push_back(random_array(op.in_shapes()[i], i < cs.kinds.size() ? cs.kinds[i] : "", rng));
  auto out = op.forward(copies(in), cs.is_train);
  const RefFn* ref = find_reference(op.attrs().op->name);
  ASSERT_NE(ref, nullptr);
  auto ref_in = copies(in);
  auto want = (*ref)(RefCall{op.attrs(), ref_in, op.out_shapes(), cs.is_train});
  for (size_t k = 0; k < want.size(); ++k) expect_close(out[k], want[k], 1e-4, "output");
  if (!cs.grad) return;

  int vis = op_num_visible(op.attrs());
  auto aux = op_aux(op.attrs());
  auto is_aux = [&](size_t i) { return std::count(aux.begin(), aux.end(), int(i)) > 0; };
  std::vector<NDArray> head;
  for (size_t k = 0; k < out.size(); ++k)
    head.push_back(int(k) < vis ? random_array(out[k].shape(), "", rng)
                                : NDArray::zeros(out[k].shape()));
  std::vector<Req> write, add;
  std::vector<NDArray> grad, grad2;
  for (size_t i = 0; i < in.size(); ++i) {
    bool g = !is_aux(i);
    write.push_back(g ? Req::kWrite : Req::kNull);
    add.push_back(g ? Req::kAdd : Req::kNull);
    grad.push_back(g ? NDArray::full(in[i].shape(), 7.0) : NDArray());
  }
  auto run_in = copies(in);
  auto run_out = op.forward(run_in, cs.is_train);
  op.backward(head, run_in, run_out, write, grad, cs.is_train);
  for (auto& g : grad) grad2.push_back(g.is_none() ? g : g.copy());
  op.backward(head, run_in, run_out, add, grad2, cs.is_train);
  for (size_t i = 0; i < in.size(); ++i)
    for (int64_t j = 0; !is_aux(i) && j < in[i].size(); ++j)
      ASSERT_EQ(grad2[i].at(j), 2 * grad[i].at(j)) << "add-mode grad of input " << i << " at " << j;

  const double eps = 1e-3;
  const double f0 = weighted_sum(op.forward(copies(in), cs.is_train), head, vis);
  int64_t checked = 0, total = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (is_aux(i)) continue;
    for (int64_t j = 0; j < in[i].size(); ++j) {
      auto f = [&](double delta) {
        auto x = copies(in);
        F(x[i])[j] += static_cast<float>(delta);
        double actual = x[i].at(j) - in[i].at(j);  // the step float32 really took
        return std::pair{weighted_sum(op.forward(x, cs.is_train), head, vis), actual};
      };
      auto [fp, dp] = f(eps);
      auto [fm, dm] = f(-eps);
      double right = (fp - f0) / dp, left = (f0 - fm) / -dm;
      ++total;
      if (std::abs(right - left) > 0.1 * (1 + std::abs(right))) continue;  // kink
      ++checked;
      double num = (fp - fm) / (dp - dm), ana = grad[i].at(j);
      ASSERT_NEAR(ana, num, 1e-2 + 2e-2 * std::abs(num))
          << "gradient of input " << i << " at " << j;
    }
  }
  EXPECT_GE(checked, total * 3 / 4) << "too many elements on kinks";
}

// Every registered sample of this file's ops.
TEST(NnOps, RegisteredSamples) {
  for (const char* name : {"FullyConnected", "Convolution", "Pooling", "Activation", "LeakyReLU",
                           "softmax", "log_softmax", "SoftmaxActivation", "BatchNorm", "LRN"}) {
    const OpDef& def = get_op(name);
    ASSERT_FALSE(def.samples.empty()) << name;
    for (const auto& s : def.samples)
      check_case({name, s.attrs, s.in_shapes, s.in_kinds, s.is_train, s.check_grad});
  }
}

TEST(NnConvolution, StridePadDilateGroups) {
  const std::vector<Shape> none = {Shape(), Shape(), Shape()};
  auto conv = [&](Attrs a, Shape data) {
    std::vector<Shape> s{data, Shape()};
    if (!a.count("no_bias")) s.push_back(Shape());
    check_case({"Convolution", a, s});
  };
  conv({{"kernel", "(3, 3)"}, {"num_filter", "2"}, {"stride", "(2, 2)"}, {"pad", "(1, 0)"}},
       {2, 3, 7, 6});
  conv({{"kernel", "(2, 3)"}, {"num_filter", "3"}, {"dilate", "(2, 2)"}, {"pad", "(2, 1)"}},
       {1, 2, 6, 6});
  conv({{"kernel", "(3, 3)"}, {"num_filter", "6"}, {"num_group", "3"}, {"pad", "(1, 1)"}},
       {2, 3, 5, 5});  // depthwise with multiplier 2
  conv({{"kernel", "(1, 1)"}, {"num_filter", "4"}, {"num_group", "2"}, {"no_bias", "True"}},
       {2, 6, 3, 3});
  conv({{"kernel", "(3,)"}, {"num_filter", "2"}, {"stride", "(2,)"}, {"dilate", "(2,)"}},
       {2, 3, 9});
  conv({{"kernel", "(2, 2, 2)"}, {"num_filter", "2"}, {"pad", "(1, 0, 1)"}}, {1, 2, 3, 3, 3});
}

TEST(NnFullyConnected, ShapesAndForwardAdd) {
  check_case({"FullyConnected", {{"num_hidden", "5"}}, {{3, 2, 2, 2}, Shape(), Shape()}});
  check_case({"FullyConnected",
              {{"num_hidden", "2"}, {"flatten", "False"}},
              {{2, 2, 3, 4}, Shape(), Shape()}});
  // Forward with req=add goes through scratch and accumulates.
  ImperativeOp fc("FullyConnected", {{"num_hidden", "3"}}, {{2, 4}, Shape(), Shape()});
  EXPECT_EQ(fc.in_shapes()[1], (Shape{3, 4}));
  EXPECT_EQ(fc.in_shapes()[2], (Shape{3}));
  std::mt19937_64 rng(1);
  std::vector<NDArray> in;
  for (const auto& s : fc.in_shapes()) in.push_back(random_array(s, "", rng));
  auto y = fc.forward(in);
  NDArray acc = y[0].copy();
  fc.forward(in, {acc}, {Req::kAdd});
  for (int64_t i = 0; i < acc.size(); ++i) EXPECT_EQ(acc.at(i), 2 * y[0].at(i));
}

TEST(NnShapeInference, WeightsFromDataAndPartialShapes) {
  auto infer = [](const std::string& op, Attrs a, std::vector<Shape> in, size_t nout) {
    OpAttrs at = make_op_attrs(get_op(op), "n", std::move(a));
    std::vector<Shape> out(nout);
    run_infer_shape(at, in, out);
    in.insert(in.end(), out.begin(), out.end());
    return in;
  };
  auto s =
      infer("Convolution",
            {{"kernel", "(3, 3)"}, {"num_filter", "8"}, {"num_group", "2"}, {"stride", "(2, 2)"}},
            {{4, 6, 9, 9}, Shape(), Shape()}, 1);
  EXPECT_EQ(s[1], (Shape{8, 3, 3, 3}));
  EXPECT_EQ(s[2], (Shape{8}));
  EXPECT_EQ(s[3], (Shape{4, 8, 4, 4}));
  // Unknown batch and data channels recovered from the weight.
  s = infer("Convolution", {{"kernel", "(3, 3)"}, {"num_filter", "8"}, {"no_bias", "True"}},
            {{0, 0, 5, 5}, {8, 3, 3, 3}}, 1);
  EXPECT_EQ(s[0], (Shape{0, 3, 5, 5}));
  EXPECT_EQ(s[2], (Shape{0, 8, 3, 3}));
  s = infer("FullyConnected", {{"num_hidden", "10"}}, {{0, 3, 4}, Shape(), Shape()}, 1);
  EXPECT_EQ(s[1], (Shape{10, 12}));
  EXPECT_EQ(s[3], (Shape{0, 10}));
  s = infer("FullyConnected", {{"num_hidden", "10"}, {"flatten", "False"}},
            {{2, 5, 0}, {10, 7}, Shape()}, 1);
  EXPECT_EQ(s[0], (Shape{2, 5, 7}));
  EXPECT_EQ(s[3], (Shape{2, 5, 10}));
  s = infer("BatchNorm", {{"axis", "-1"}}, {{2, 3, 4}, Shape(), Shape(), Shape(), Shape()}, 3);
  for (int i = 1; i < 5; ++i) EXPECT_EQ(s[i], (Shape{4}));
  EXPECT_EQ(s[6], (Shape{4}));
  s = infer("LeakyReLU", {{"act_type", "prelu"}}, {{2, 5, 3}, Shape()}, 1);
  EXPECT_EQ(s[1], (Shape{5}));
  s = infer("Pooling", {{"kernel", "(3, 3)"}, {"stride", "(2, 2)"}, {"pooling_convention", "full"}},
            {{1, 2, 6, 7}}, 1);
  EXPECT_EQ(s[1], (Shape{1, 2, 3, 3}));
  s = infer("Pooling", {{"global_pool", "True"}, {"kernel", "(9, 9)"}}, {{1, 2, 6, 7}}, 1);
  EXPECT_EQ(s[1], (Shape{1, 2, 1, 1}));
  EXPECT_THROW(infer("Convolution", {{"kernel", "(3, 3)"}, {"num_filter", "4"}, {"num_group", "2"}},
                     {{1, 3, 5, 5}, Shape(), Shape()}, 1),
               ShapeError);
}

TEST(NnPooling, ConventionsAndDivisors) {
  auto pool = [](Attrs a, Shape s) { check_case({"Pooling", a, {s}}); };
  for (std::string conv : {"valid", "full"})
    for (std::string type : {"max", "avg", "sum"})
      for (std::string cip : {"True", "False"})
        pool({{"kernel", "(3, 3)"},
              {"stride", "(2, 2)"},
              {"pad", "(1, 1)"},
              {"pool_type", type},
              {"pooling_convention", conv},
              {"count_include_pad", cip}},
             {1, 2, 6, 7});
  pool({{"kernel", "(2, 3)"}, {"stride", "(1, 2)"}, {"pool_type", "avg"}}, {2, 2, 5, 6});
  pool({{"kernel", "(3,)"}, {"stride", "(2,)"}, {"pad", "(1,)"}, {"pool_type", "avg"}}, {2, 3, 8});
  pool({{"kernel", "(2, 2, 2)"}, {"pool_type", "max"}, {"pooling_convention", "full"}},
       {1, 2, 3, 3, 3});
  pool({{"global_pool", "True"}, {"pool_type", "max"}}, {2, 3, 4, 5});
  pool({{"global_pool", "True"}, {"pool_type", "sum"}}, {2, 3, 4});

  // The spec's example: a 'full' window running past the padded border is truncated, so the
  // last window of a 6-wide input (k 3, s 2, p 1) covers one real and one pad cell: 1/2 per
  // dimension on an all-ones input.
  ImperativeOp op("Pooling",
                  {{"kernel", "(3, 3)"},
                   {"stride", "(2, 2)"},
                   {"pad", "(1, 1)"},
                   {"pool_type", "avg"},
                   {"pooling_convention", "full"}},
                  {{1, 1, 6, 6}});
  ASSERT_EQ(op.out_shapes()[0], (Shape{1, 1, 4, 4}));
  auto y = op.forward({NDArray::full({1, 1, 6, 6}, 1.0)});
  EXPECT_FLOAT_EQ(y[0].at(0), 4.f / 9);  // corner: 4 real of 9
  EXPECT_FLOAT_EQ(y[0].at(1), 6.f / 9);  // top edge
  EXPECT_FLOAT_EQ(y[0].at(15), 0.25f);   // truncated corner: 1 real of 2x2
  EXPECT_FLOAT_EQ(y[0].at(3), 2.f / 6);  // top edge x truncated: 2 real of 3x2
}

TEST(NnActivation, AllTypes) {
  for (std::string t : {"relu", "sigmoid", "tanh", "softrelu", "softsign"})
    check_case({"Activation", {{"act_type", t}}, {{3, 4, 2}}});
  EXPECT_THROW(ImperativeOp("Activation", {{"act_type", "swish"}}, {{2}}), ParamError);
}

TEST(NnLeakyReLU, AllTypes) {
  for (std::string t : {"leaky", "elu", "selu", "gelu"})
    check_case({"LeakyReLU", {{"act_type", t}, {"slope", "0.3"}}, {{2, 3, 4}}});
  check_case({"LeakyReLU", {{"act_type", "prelu"}}, {{2, 4, 3}, {1}}, {"normal", "positive"}});
  check_case({"LeakyReLU", {{"act_type", "prelu"}}, {{2, 4, 2, 2}, Shape()}});
  check_case({"LeakyReLU", {{"act_type", "rrelu"}}, {{2, 3, 4}}});  // inference: mean slope
  // Training: each negative element gets its own slope from [lower, upper], kept in `mask`.
  ImperativeOp op("LeakyReLU", {{"act_type", "rrelu"}}, {{4, 50}});
  NDArray x = NDArray::full({4, 50}, -1.0);
  auto y = op.forward({x}, true);
  ASSERT_EQ(y.size(), 2u);
  bool varied = false;
  for (int64_t i = 0; i < x.size(); ++i) {
    EXPECT_GE(y[1].at(i), 0.125 - 1e-6);
    EXPECT_LE(y[1].at(i), 0.334 + 1e-6);
    EXPECT_FLOAT_EQ(y[0].at(i), -y[1].at(i));
    varied = varied || y[1].at(i) != y[1].at(0);
  }
  EXPECT_TRUE(varied);
  NDArray g = NDArray::full({4, 50}, 1.0), dx(Shape{4, 50});
  op.backward({g, NDArray::zeros({4, 50})}, {x}, y, {Req::kWrite}, {dx});
  for (int64_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(dx.at(i), y[1].at(i));
}

TEST(NnSoftmax, AxesAndTemperature) {
  check_case({"softmax", {{"axis", "0"}}, {{3, 2, 2}}});
  check_case({"softmax", {{"axis", "-2"}, {"temperature", "3.0"}}, {{2, 4, 3}}});
  check_case({"log_softmax", {{"axis", "1"}}, {{2, 5, 2}}});
  check_case({"log_softmax", {{"temperature", "2.0"}}, {{3, 6}}});
  check_case({"SoftmaxActivation", {{"mode", "channel"}}, {{2, 4, 3}}});
  check_case({"SoftmaxActivation", {}, {{3, 2, 2, 2}}});
}

TEST(NnLRN, Windows) {
  check_case({"LRN", {{"nsize", "1"}, {"alpha", "0.5"}}, {{2, 3, 2}}});
  check_case({"LRN", {{"nsize", "3"}, {"alpha", "0.2"}, {"beta", "0.9"}}, {{1, 7, 2, 2}}});
}

std::vector<Shape> bn_shapes(Shape data) { return {data, Shape(), Shape(), Shape(), Shape()}; }
const std::vector<std::string> kBNKinds = {"normal", "positive", "normal", "normal", "positive"};

TEST(NnBatchNorm, AxesAndModes) {
  for (std::string axis : {"0", "1", "2", "-1"})
    for (std::string fix : {"True", "False"})
      check_case({"BatchNorm",
                  {{"axis", axis}, {"fix_gamma", fix}},
                  bn_shapes({3, 2, 4}),
                  kBNKinds,
                  true});
  // Evaluation mode and use_global_stats (even in training) normalise with moving stats.
  check_case({"BatchNorm", {{"fix_gamma", "False"}}, bn_shapes({2, 3, 2, 2}), kBNKinds, false});
  check_case({"BatchNorm",
              {{"use_global_stats", "True"}, {"fix_gamma", "False"}},
              bn_shapes({2, 3, 2, 2}),
              kBNKinds,
              true});
  check_case({"BatchNorm",
              {{"output_mean_var", "True"}, {"eps", "0.01"}},
              bn_shapes({4, 2}),
              kBNKinds,
              true,
              false});
}

TEST(NnBatchNorm, MovingStatsUpdatedInBackwardAndFixGamma) {
  ImperativeOp op("BatchNorm", {{"momentum", "0.8"}}, bn_shapes({4, 2, 3}));
  EXPECT_EQ(op_num_visible(op.attrs()), 1);
  EXPECT_EQ(op_aux(op.attrs()), (std::vector<int>{3, 4}));
  std::mt19937_64 rng(3);
  NDArray x = random_array({4, 2, 3}, "", rng), gamma = NDArray::full({2}, 2.0),
          beta = NDArray::zeros({2}), mm = NDArray::full({2}, 0.5), mv = NDArray::full({2}, 3.0);
  std::vector<NDArray> in{x, gamma, beta, mm, mv};
  auto out = op.forward(in, true);
  EXPECT_EQ(gamma.at(0), 1.0);  // fix_gamma overwrites gamma in training forward
  EXPECT_EQ(mm.at(0), 0.5);     // forward alone leaves the moving stats unchanged (CPU)
  EXPECT_EQ(mv.at(1), 3.0);
  for (int c = 0; c < 2; ++c) {
    double mean = 0, var = 0;
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 3; ++j) mean += x.at((n * 2 + c) * 3 + j) / 12;
    for (int n = 0; n < 4; ++n)
      for (int j = 0; j < 3; ++j) var += std::pow(x.at((n * 2 + c) * 3 + j) - mean, 2) / 12;
    EXPECT_NEAR(out[1].at(c), mean, 1e-5);
    EXPECT_NEAR(out[2].at(c), 1 / std::sqrt(var + 1e-3), 1e-4);  // inverse std
  }
  std::vector<NDArray> grads{NDArray(x.shape()), NDArray::full({2}, 5.0), NDArray({2}), NDArray(),
                             NDArray()};
  std::vector<double> want_mm, want_mv;
  for (int c = 0; c < 2; ++c) {
    double is = out[2].at(c);
    want_mm.push_back(0.5 * 0.8 + out[1].at(c) * 0.2);
    want_mv.push_back(3.0 * 0.8 + (1 / (is * is) - 1e-3) * 0.2);
  }
  op.backward({random_array(x.shape(), "", rng), NDArray::zeros({2}), NDArray::zeros({2})}, in, out,
              {Req::kWrite, Req::kWrite, Req::kWrite, Req::kNull, Req::kNull}, grads);
  for (int c = 0; c < 2; ++c) {
    EXPECT_NEAR(mm.at(c), want_mm[c], 1e-5);
    EXPECT_NEAR(mv.at(c), want_mv[c], 1e-4);
    EXPECT_EQ(grads[1].at(c), 0.0);  // fix_gamma: gamma's gradient is zero
  }
  // Evaluation backward does not touch the moving stats.
  op.backward({random_array(x.shape(), "", rng), NDArray::zeros({2}), NDArray::zeros({2})}, in, out,
              {Req::kWrite, Req::kWrite, Req::kWrite, Req::kNull, Req::kNull}, grads, false);
  EXPECT_NEAR(mm.at(0), want_mm[0], 1e-5);
}

// The common layer shapes must get a JIT implementation, not oneDNN's reference kernels.
TEST(NnConvolution, OneDnnImplementationsAreNotReference) {
  auto conv = [](Attrs a, Shape d) {
    std::vector<Shape> s{d, Shape(), Shape()};
    ImperativeOp op("Convolution", a, s);
  };
  conv({{"kernel", "(3, 3)"}, {"num_filter", "64"}, {"pad", "(1, 1)"}}, {8, 64, 28, 28});
  conv({{"kernel", "(7, 7)"}, {"num_filter", "64"}, {"pad", "(3, 3)"}, {"stride", "(2, 2)"}},
       {8, 3, 64, 64});
  conv({{"kernel", "(1, 1)"}, {"num_filter", "128"}}, {8, 64, 14, 14});
  conv({{"kernel", "(3, 3)"}, {"num_filter", "32"}, {"num_group", "32"}, {"pad", "(1, 1)"}},
       {8, 32, 28, 28});
  ImperativeOp fc("FullyConnected", {{"num_hidden", "1000"}}, {{32, 2048}, Shape(), Shape()});
  ImperativeOp pool("Pooling", {{"kernel", "(3, 3)"}, {"stride", "(2, 2)"}, {"pad", "(1, 1)"}},
                    {{8, 64, 56, 56}});
  for (const auto& line : dnnl_util::recorded_impls()) {
    if (getenv("LOOM_SHOW_DNNL")) printf("%s\n", line.c_str());
    EXPECT_EQ(line.find("=ref"), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace loom::test
