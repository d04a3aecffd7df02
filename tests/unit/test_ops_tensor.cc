// Tensor ops (ops/tensor): naive references for the op sweep (plain index loops in double,
// written independently of the kernels) and tests of the semantics the sweep cannot see:
// Reshape codes, broadcasting and its backward, reductions, split/concat, Dropout
// statistics, scalar-op operand order, shape errors and declared gradient dependencies.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "ops/infer.h"
#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom {
// gtest prints shapes as "(2, 3)" (internal linkage: other test files may define their own).
[[maybe_unused]] static void PrintTo(const Shape& s, std::ostream* os) { *os << s.str(); }

namespace {

using Vec = std::vector<double>;
using test::RefCall;

Vec values(const NDArray& a) {
  Vec v(static_cast<size_t>(a.size()));
  for (int64_t i = 0; i < a.size(); ++i) v[i] = a.at(i);
  return v;
}
NDArray array(const Shape& s, const Vec& v) {
  NDArray a(s);
  for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = static_cast<float>(v[i]);
  return a;
}
NDArray random(const Shape& s, unsigned seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  Vec v(static_cast<size_t>(s.numel()));
  for (auto& x : v) x = d(rng);
  return array(s, v);
}
std::string attr(const Attrs& d, const char* k, const char* def) {
  auto it = d.find(k);
  return it == d.end() ? def : it->second;
}
std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(static_cast<size_t>(s.ndim()));
  for (int d = s.ndim() - 1; d >= 0; --d) idx[d] = i % s[d], i /= s[d];
  return idx;
}
int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t o = 0;
  for (int d = 0; d < s.ndim(); ++d) o = o * s[d] + idx[d];
  return o;
}
// Index into `s` (right-aligned, size-1 dims broadcast) of the out multi-index `idx`.
int64_t bcast_index(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t o = 0, off = static_cast<int64_t>(idx.size()) - s.ndim();
  for (int d = 0; d < s.ndim(); ++d) o = o * s[d] + (s[d] == 1 ? 0 : idx[d + off]);
  return o;
}
NDArray map_out(const RefCall& c, const std::function<double(int64_t)>& f, size_t k = 0) {
  NDArray y(c.out_shapes[k]);
  for (int64_t i = 0; i < y.size(); ++i) y.data<float>()[i] = static_cast<float>(f(i));
  return y;
}

// ---------------------------------------------------------------- references
using F1 = double (*)(double);
const std::vector<std::pair<const char*, F1>> kUnary = {
    {"_copy", [](double x) { return x; }},
    {"BlockGrad", [](double x) { return x; }},
    {"exp", [](double x) { return std::exp(x); }},
    {"log", [](double x) { return std::log(x); }},
    {"sqrt", [](double x) { return std::sqrt(x); }},
    {"rsqrt", [](double x) { return 1 / std::sqrt(x); }},
    {"square", [](double x) { return x * x; }},
    {"abs", [](double x) { return std::fabs(x); }},
    {"negative", [](double x) { return -x; }},
    {"relu", [](double x) { return x > 0 ? x : 0.0; }},
    {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
    {"tanh", [](double x) { return std::tanh(x); }},
    {"softsign", [](double x) { return x / (1 + std::fabs(x)); }},
    {"reciprocal", [](double x) { return 1 / x; }},
    {"log1p", [](double x) { return std::log(1 + x); }},
    {"expm1", [](double x) { return std::exp(x) - 1; }},
    {"sign", [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }},
    {"floor", [](double x) { return std::floor(x); }},
    {"ceil", [](double x) { return std::ceil(x); }},
    {"round", [](double x) { return x < 0 ? -std::floor(-x + 0.5) : std::floor(x + 0.5); }},
    {"rint", [](double x) { return std::nearbyint(x); }},  // ties to even
    {"trunc", [](double x) { return x < 0 ? -std::floor(-x) : std::floor(x); }},
    {"fix", [](double x) { return x < 0 ? std::ceil(x) : std::floor(x); }},
    {"sin", [](double x) { return std::sin(x); }},
    {"cos", [](double x) { return std::cos(x); }},
    {"tan", [](double x) { return std::sin(x) / std::cos(x); }},
    {"arcsin", [](double x) { return std::asin(x); }},
    {"arccos", [](double x) { return std::acos(x); }},
    {"arctan", [](double x) { return std::atan(x); }},
    {"sinh", [](double x) { return (std::exp(x) - std::exp(-x)) / 2; }},
    {"cosh", [](double x) { return (std::exp(x) + std::exp(-x)) / 2; }},
    {"arcsinh", [](double x) { return std::log(x + std::sqrt(x * x + 1)); }},
    {"arccosh", [](double x) { return std::log(x + std::sqrt(x * x - 1)); }},
    {"arctanh", [](double x) { return 0.5 * std::log((1 + x) / (1 - x)); }},
    {"degrees", [](double x) { return x * 180 / M_PI; }},
    {"radians", [](double x) { return x * M_PI / 180; }},
    {"log2", [](double x) { return std::log(x) / std::log(2.0); }},
    {"log10", [](double x) { return std::log(x) / std::log(10.0); }},
    {"cbrt", [](double x) { return std::pow(x, 1.0 / 3); }},
    {"rcbrt", [](double x) { return std::pow(x, -1.0 / 3); }},
    {"erf", [](double x) { return std::erf(x); }},
    {"zeros_like", [](double) { return 0.0; }},
    {"ones_like", [](double) { return 1.0; }},
};
using F2 = double (*)(double, double);
const std::vector<std::pair<std::string, F2>> kBinary = {
    {"add", [](double a, double b) { return a + b; }},
    {"sub", [](double a, double b) { return a - b; }},
    {"mul", [](double a, double b) { return a * b; }},
    {"div", [](double a, double b) { return a / b; }},
    {"maximum", [](double a, double b) { return a > b ? a : b; }},
    {"minimum", [](double a, double b) { return a < b ? a : b; }},
    {"power", [](double a, double b) { return std::pow(a, b); }},
};

std::vector<NDArray> ref_binary(const RefCall& c, F2 f) {
  Shape o = c.out_shapes[0], a = c.in[0].shape(), b = c.in[1].shape();
  return {map_out(c, [&](int64_t i) {
    auto idx = unravel(i, o);
    return f(c.in[0].at(bcast_index(idx, a)), c.in[1].at(bcast_index(idx, b)));
  })};
}

// Reductions: each input element goes to the output element with reduced axes dropped.
std::vector<NDArray> ref_reduce(const RefCall& c, const std::string& kind) {
  const Shape& s = c.in[0].shape();
  Shape ax = parse_shape(attr(c.attrs.dict, "axis", "None"));
  bool exclude = parse_bool(attr(c.attrs.dict, "exclude", "False"));
  std::vector<bool> red(static_cast<size_t>(s.ndim()), ax.ndim() == 0);
  if (ax.ndim() > 0) {
    for (int64_t a : ax) red[a < 0 ? a + s.ndim() : a] = true;
    if (exclude) red.flip();
  }
  Shape keep = s;
  for (int d = 0; d < s.ndim(); ++d)
    if (red[d]) keep[d] = 1;
  Vec acc(static_cast<size_t>(keep.numel()), kind == "max" ? -1e300 : kind == "min" ? 1e300 : 0);
  for (int64_t i = 0; i < s.numel(); ++i) {
    auto idx = unravel(i, s);
    double& a = acc[bcast_index(idx, keep)];
    double x = c.in[0].at(i);
    a = kind == "max" ? std::max(a, x) : kind == "min" ? std::min(a, x) : a + x;
  }
  double n = static_cast<double>(s.numel() / keep.numel());
  return {map_out(c, [&](int64_t i) { return kind == "mean" ? acc[i] / n : acc[i]; })};
}

[[maybe_unused]] const bool kRefs = [] {
  for (auto [name, f] : kUnary)
    test::register_reference(name, [f](const RefCall& c) {
      return std::vector<NDArray>{map_out(c, [&](int64_t i) { return f(c.in[0].at(i)); })};
    });
  for (auto& [n, f] : kBinary) {
    F2 fn = f;
    auto r = [fn](const RefCall& c) { return ref_binary(c, fn); };
    bool plain = n == "add" || n == "sub" || n == "mul" || n == "div";
    test::register_reference((plain ? "elemwise_" : "_") + n, r);
    test::register_reference("broadcast_" + n, r);
    // scalar forms: x op s, and the reversed s op x
    auto sc = [fn](bool rev) {
      return [fn, rev](const RefCall& c) {
        double s = parse_float(attr(c.attrs.dict, "scalar", "1"));
        return std::vector<NDArray>{map_out(c, [&](int64_t i) {
          double x = c.in[0].at(i);
          return rev ? fn(s, x) : fn(x, s);
        })};
      };
    };
    std::string sn = n == "add" ? "plus" : n == "sub" ? "minus" : n;
    test::register_reference("_" + sn + "_scalar", sc(false));
    if (n == "sub" || n == "div" || n == "power")
      test::register_reference("_r" + sn + "_scalar", sc(true));
  }
  test::register_reference("smooth_l1", [](const RefCall& c) {
    double s2 = std::pow(parse_float(attr(c.attrs.dict, "scalar", "1")), 2);
    return std::vector<NDArray>{map_out(c, [&](int64_t i) {
      double x = c.in[0].at(i);
      return std::abs(x) < 1 / s2 ? 0.5 * s2 * x * x : std::abs(x) - 0.5 / s2;
    })};
  });
  for (const char* k : {"sum", "mean", "max", "min"})
    test::register_reference(k, [k](const RefCall& c) { return ref_reduce(c, k); });
  test::register_reference("clip", [](const RefCall& c) {
    double lo = parse_float(c.attrs.dict.at("a_min")), hi = parse_float(c.attrs.dict.at("a_max"));
    return std::vector<NDArray>{
        map_out(c, [&](int64_t i) { return std::min(hi, std::max(lo, c.in[0].at(i))); })};
  });
  test::register_reference("add_n", [](const RefCall& c) {
    return std::vector<NDArray>{map_out(c, [&](int64_t i) {
      double s = 0;
      for (const auto& a : c.in) s += a.at(i);
      return s;
    })};
  });
  // Views keep the data in order; their shapes are checked against hand tables below.
  for (const char* n : {"Reshape", "Flatten", "expand_dims"})
    test::register_reference(n, [](const RefCall& c) {
      return std::vector<NDArray>{map_out(c, [&](int64_t i) { return c.in[0].at(i); })};
    });
  test::register_reference("Concat", [](const RefCall& c) {
    const Shape& o = c.out_shapes[0];
    int64_t dim = parse_int(attr(c.attrs.dict, "dim", "1"));
    int ax = static_cast<int>(dim < 0 ? dim + o.ndim() : dim);
    return std::vector<NDArray>{map_out(c, [&](int64_t i) {
      auto idx = unravel(i, o);
      size_t k = 0;
      while (idx[ax] >= c.in[k].shape()[ax]) idx[ax] -= c.in[k++].shape()[ax];
      return c.in[k].at(ravel(idx, c.in[k].shape()));
    })};
  });
  test::register_reference("SliceChannel", [](const RefCall& c) {
    const Shape& s = c.in[0].shape();
    int64_t a = parse_int(attr(c.attrs.dict, "axis", "1"));
    int ax = static_cast<int>(a < 0 ? a + s.ndim() : a);
    Shape piece = s;
    piece[ax] = s[ax] / static_cast<int64_t>(c.out_shapes.size());
    std::vector<NDArray> outs;
    for (size_t k = 0; k < c.out_shapes.size(); ++k)
      outs.push_back(map_out(
          c,
          [&](int64_t i) {
            auto idx = unravel(i, piece);  // squeezed outputs have the same element order
            idx[ax] += static_cast<int64_t>(k) * piece[ax];
            return c.in[0].at(ravel(idx, s));
          },
          k));
    return outs;
  });
  test::register_reference("slice_axis", [](const RefCall& c) {
    const Shape& s = c.in[0].shape();
    int64_t a = parse_int(c.attrs.dict.at("axis")), b = parse_int(c.attrs.dict.at("begin"));
    int ax = static_cast<int>(a < 0 ? a + s.ndim() : a);
    if (b < 0) b += s[ax];
    return std::vector<NDArray>{map_out(c, [&](int64_t i) {
      auto idx = unravel(i, c.out_shapes[0]);
      idx[ax] += b;
      return c.in[0].at(ravel(idx, s));
    })};
  });
  test::register_reference("Dropout", [](const RefCall& c) {
    if (c.is_train) return std::vector<NDArray>{};  // random: see DropoutStatistics
    return std::vector<NDArray>{map_out(c, [&](int64_t i) { return c.in[0].at(i); })};
  });
  test::register_reference("Cast", [](const RefCall& c) {
    NDArray y(c.out_shapes[0], dtype_from_string(c.attrs.dict.at("dtype")));
    for (int64_t i = 0; i < y.size(); ++i) {
      double v = c.in[0].at(i);
      if (y.dtype() == DType::kFloat64)
        y.data<double>()[i] = v;
      else if (y.dtype() == DType::kFloat32)
        y.data<float>()[i] = static_cast<float>(v);
      else if (y.dtype() == DType::kInt32)
        y.data<int32_t>()[i] = static_cast<int32_t>(v);
      else
        y.data<int64_t>()[i] = static_cast<int64_t>(v);
    }
    return std::vector<NDArray>{y};
  });
  test::register_reference("_zeros", [](const RefCall& c) {
    return std::vector<NDArray>{map_out(c, [](int64_t) { return 0.0; })};
  });
  test::register_reference("_ones", [](const RefCall& c) {
    return std::vector<NDArray>{map_out(c, [](int64_t) { return 1.0; })};
  });
  test::register_reference("where", [](const RefCall& c) {
    int64_t per = c.in[1].size() / c.in[0].size();  // 1, or a row for the 1-D condition
    return std::vector<NDArray>{map_out(
        c, [&](int64_t i) { return c.in[0].at(i / per) != 0 ? c.in[1].at(i) : c.in[2].at(i); })};
  });
  test::register_reference("transpose", [](const RefCall& c) {
    const Shape& s = c.in[0].shape();
    Shape axes = parse_shape(attr(c.attrs.dict, "axes", "()"));
    return std::vector<NDArray>{map_out(c, [&](int64_t i) {
      auto oi = unravel(i, c.out_shapes[0]);
      std::vector<int64_t> ii(oi.size());
      for (int d = 0; d < s.ndim(); ++d) {
        int64_t p = axes.ndim() ? axes[d] : s.ndim() - 1 - d;
        ii[p < 0 ? p + s.ndim() : p] = oi[d];
      }
      return c.in[0].at(ravel(ii, s));
    })};
  });
  return true;
}();

// ---------------------------------------------------------------- helpers for tests
Shape out_shape(const std::string& op, Attrs a, std::vector<Shape> in) {
  return ImperativeOp(op, std::move(a), std::move(in)).out_shapes()[0];
}
std::string shape_error(const std::string& op, Attrs a, std::vector<Shape> in) {
  try {
    ImperativeOp(op, std::move(a), std::move(in));
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "(no error)";
}
void expect_values(const NDArray& got, const Vec& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.at(static_cast<int64_t>(i)), want[i], tol * (1 + std::fabs(want[i])))
        << "element " << i;
}

TEST(TensorReshape, CodesTable) {
  struct Case {
    Shape in;
    Attrs attrs;
    Shape want;
  };
  // Hand-derived from spec 6.10 (cursor rules: 0, -1 and n each consume one input dim).
  const std::vector<Case> cases = {
      {{2, 3, 4}, {{"shape", "(4, 0, 2)"}}, {4, 3, 2}},
      {{2, 3, 4}, {{"shape", "(2, 0, 0)"}}, {2, 3, 4}},
      {{2, 3, 4}, {{"shape", "(6, 1, -1)"}}, {6, 1, 4}},
      {{2, 3, 4}, {{"shape", "(3, -1, 8)"}}, {3, 1, 8}},
      {{2, 3, 4}, {{"shape", "(-1,)"}}, {24}},
      {{2, 3, 4}, {{"shape", "(-2,)"}}, {2, 3, 4}},
      {{2, 3, 4}, {{"shape", "(2, -2)"}}, {2, 3, 4}},
      {{2, 3, 4}, {{"shape", "(-2, 1, 1)"}}, {2, 3, 4, 1, 1}},
      {{2, 3, 4}, {{"shape", "(-3, 4)"}}, {6, 4}},
      {{2, 3, 4, 5}, {{"shape", "(-3, -3)"}}, {6, 20}},
      {{2, 3, 4}, {{"shape", "(0, -3)"}}, {2, 12}},
      {{2, 3, 4}, {{"shape", "(-3, -2)"}}, {6, 4}},
      {{2, 3, 4}, {{"shape", "(-4, 1, 2, -2)"}}, {1, 2, 3, 4}},
      {{2, 3, 4}, {{"shape", "(2, -4, -1, 3, -2)"}}, {2, 1, 3, 4}},
      {{2, 12}, {{"shape", "(0, -4, 3, -1)"}}, {2, 3, 4}},
      {{10, 5, 4}, {{"shape", "(-1, 0)"}}, {40, 5}},
      {{10, 5, 4}, {{"shape", "(-1, 0)"}, {"reverse", "True"}}, {50, 4}},
      {{3, 4}, {{"shape", "(-1, -4, 2, 2)"}, {"reverse", "True"}}, {3, 2, 2}},
      {{2, 3, 4}, {{"target_shape", "(0, 4)"}}, {6, 4}},
      {{2, 3, 4}, {{"target_shape", "(5, 0)"}, {"keep_highest", "True"}}, {2, 12}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(attr(c.attrs, "shape", "") + attr(c.attrs, "target_shape", "") + " on " +
                 c.in.str());
    EXPECT_EQ(out_shape("Reshape", c.attrs, {c.in}), c.want);
  }
  EXPECT_EQ(out_shape("reshape", {{"shape", "(-1,)"}}, {{2, 2}}), (Shape{4}));  // alias
  EXPECT_EQ(out_shape("Flatten", {}, {{2, 3, 4}}), (Shape{2, 12}));
  EXPECT_EQ(out_shape("flatten", {}, {{5}}), (Shape{5, 1}));
  EXPECT_EQ(out_shape("expand_dims", {{"axis", "-1"}}, {{2, 3}}), (Shape{2, 3, 1}));
  EXPECT_EQ(out_shape("expand_dims", {{"axis", "0"}}, {{2, 3}}), (Shape{1, 2, 3}));
  EXPECT_NE(shape_error("Reshape", {{"shape", "(5, -1)"}}, {{2, 3, 4}}), "(no error)");
  EXPECT_NE(shape_error("Reshape", {{"shape", "(-1, -1)"}}, {{2, 3}}), "(no error)");
  EXPECT_NE(shape_error("Reshape", {{"shape", "(-4, 4, -1)"}}, {{6}}), "(no error)");
  EXPECT_NE(shape_error("expand_dims", {{"axis", "3"}}, {{2, 3}}), "(no error)");
}

TEST(TensorBroadcast, ShapesValuesAndBackwardReduction) {
  EXPECT_EQ(out_shape("broadcast_add", {}, {{2, 1, 4}, {3, 1}}), (Shape{2, 3, 4}));
  EXPECT_EQ(out_shape("broadcast_plus", {}, {{1}, {2, 3}}), (Shape{2, 3}));
  EXPECT_EQ(out_shape("broadcast_minus", {}, {{5, 1}, {1, 6}}), (Shape{5, 6}));
  std::string err = shape_error("broadcast_mul", {}, {{2, 3}, {4, 3}});
  EXPECT_NE(err.find("input 0 (lhs)"), std::string::npos) << err;
  EXPECT_NE(err.find("input 1 (rhs)"), std::string::npos) << err;

  // (2,1) - (3,): out[i][j] = a[i] - b[j]; with dy = 1, da = 3 each and db = -2 each.
  ImperativeOp op("broadcast_sub", {}, {{2, 1}, {3}});
  NDArray a = array({2, 1}, {10, 20}), b = array({3}, {1, 2, 3});
  expect_values(op.forward({a, b})[0], {9, 8, 7, 19, 18, 17});
  NDArray da = NDArray::full({2, 1}, 5), db = NDArray::full({3}, 5);
  op.backward({NDArray::full({2, 3}, 1)}, {NDArray(), NDArray()}, {NDArray()},
              {Req::kWrite, Req::kAdd}, {da, db});
  expect_values(da, {3, 3});
  expect_values(db, {3, 3, 3});  // 5 + (-2)

  // broadcast_mul: d lhs[i] = sum_j g[i][j] * b[j].
  ImperativeOp mul("broadcast_mul", {}, {{2, 1}, {1, 3}});
  NDArray g = array({2, 3}, {1, 2, 3, 4, 5, 6});
  NDArray dl({2, 1}), dr({1, 3});
  mul.backward({g}, {a, array({1, 3}, {1, 10, 100})}, {NDArray()}, {Req::kWrite, Req::kWrite},
               {dl, dr});
  expect_values(dl, {321, 654});
  expect_values(dr, {10 + 80, 20 + 100, 30 + 120});
}

TEST(TensorReduce, AxesKeepdimsExclude) {
  const Shape s{2, 3, 4};
  EXPECT_EQ(out_shape("sum", {}, {s}), (Shape{1}));  // everything: legacy (1,), not 0-d
  EXPECT_EQ(out_shape("sum", {{"keepdims", "True"}}, {s}), (Shape{1, 1, 1}));
  EXPECT_EQ(out_shape("sum", {{"axis", "1"}}, {s}), (Shape{2, 4}));
  EXPECT_EQ(out_shape("sum_axis", {{"axis", "(0, -1)"}}, {s}), (Shape{3}));
  EXPECT_EQ(out_shape("mean", {{"axis", "-2"}, {"keepdims", "1"}}, {s}), (Shape{2, 1, 4}));
  EXPECT_EQ(out_shape("sum", {{"axis", "1"}, {"exclude", "True"}}, {s}), (Shape{3}));
  EXPECT_EQ(out_shape("max", {{"axis", "(0,2)"}, {"exclude", "True"}, {"keepdims", "True"}}, {s}),
            (Shape{2, 1, 4}));
  EXPECT_NE(shape_error("sum", {{"axis", "3"}}, {s}), "(no error)");

  NDArray x = array({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_values(ImperativeOp("sum", {{"axis", "0"}}, {{2, 3}}).forward({x})[0], {5, 7, 9});
  expect_values(ImperativeOp("sum", {}, {{2, 3}}).forward({x})[0], {21});
  expect_values(ImperativeOp("mean", {{"axis", "1"}}, {{2, 3}}).forward({x})[0], {2, 5});
  expect_values(ImperativeOp("sum", {{"axis", "1"}, {"exclude", "1"}}, {{2, 3}}).forward({x})[0],
                {5, 7, 9});
  ImperativeOp mx("max", {{"axis", "1"}}, {{2, 3}});
  NDArray y = mx.forward({x})[0];
  expect_values(y, {3, 6});
  NDArray dx({2, 3});
  mx.backward({array({2}, {10, 20})}, {x}, {y}, {Req::kWrite}, {dx});
  expect_values(dx, {0, 0, 10, 0, 0, 20});
  ImperativeOp mean("mean", {{"axis", "0"}}, {{2, 3}});
  NDArray dm = NDArray::full({2, 3}, 1);
  mean.backward({array({3}, {2, 4, 6})}, {NDArray()}, {NDArray()}, {Req::kAdd}, {dm});
  expect_values(dm, {2, 3, 4, 2, 3, 4});
}

TEST(TensorConcatSplit, RoundTrip) {
  NDArray a = random({2, 1, 3}, 1), b = random({2, 4, 3}, 2), c = random({2, 2, 3}, 3);
  ImperativeOp cat("Concat", {{"num_args", "3"}}, {{2, 1, 3}, {2, 4, 3}, {2, 2, 3}});
  EXPECT_EQ(cat.out_shapes()[0], (Shape{2, 7, 3}));
  NDArray y = cat.forward({a, b, c})[0];
  ImperativeOp split("SliceChannel", {{"num_outputs", "7"}, {"axis", "1"}}, {{2, 7, 3}});
  auto pieces = split.forward({y});
  ASSERT_EQ(pieces.size(), 7u);
  EXPECT_EQ(pieces[0].shape(), (Shape{2, 1, 3}));
  expect_values(pieces[0], values(a));
  // Rows 1..4 of the concatenation are b: piece 2 is b[:, 1, :].
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(pieces[2].at(n * 3 + k), b.at(n * 12 + 3 + k));
  // Backward of split is concatenation; of Concat, splitting.
  NDArray dy({2, 7, 3});
  std::vector<NDArray> og(pieces.begin(), pieces.end());
  split.backward(og, {NDArray()}, std::vector<NDArray>(7), {Req::kWrite}, {dy});
  expect_values(dy, values(y));
  NDArray da({2, 1, 3}), db({2, 4, 3}), dc({2, 2, 3});
  cat.backward({y}, std::vector<NDArray>(3), {NDArray()}, {Req::kWrite, Req::kNull, Req::kWrite},
               {da, NDArray(), dc});
  expect_values(da, values(a));
  expect_values(dc, values(c));

  ImperativeOp sq("split", {{"num_outputs", "3"}, {"axis", "-1"}, {"squeeze_axis", "1"}}, {{2, 3}});
  EXPECT_EQ(sq.out_shapes()[2], (Shape{2}));
  expect_values(sq.forward({array({2, 3}, {1, 2, 3, 4, 5, 6})})[2], {3, 6});
  EXPECT_NE(shape_error("SliceChannel", {{"num_outputs", "2"}}, {{2, 3}}), "(no error)");
  EXPECT_EQ(out_shape("concat", {{"num_args", "2"}, {"dim", "0"}}, {{1, 3}, {2, 3}}),
            (Shape{3, 3}));
  ImperativeOp sl("slice_axis", {{"axis", "1"}, {"begin", "-2"}, {"end", "None"}}, {{2, 3}});
  EXPECT_EQ(sl.out_shapes()[0], (Shape{2, 2}));
  expect_values(sl.forward({array({2, 3}, {1, 2, 3, 4, 5, 6})})[0], {2, 3, 5, 6});
}

TEST(TensorShapeErrors, NameTheInput) {
  std::string e = shape_error("elemwise_add", {}, {{2, 3}, {3, 2}});
  EXPECT_NE(e.find("input 1 (rhs)"), std::string::npos) << e;
  e = shape_error("Concat", {{"num_args", "2"}}, {{2, 3, 4}, {3, 3, 4}});
  EXPECT_NE(e.find("input 1 (arg1)"), std::string::npos) << e;
  e = shape_error("where", {}, {{4}, {2, 3}, {2, 3}});
  EXPECT_NE(e.find("input 0 (condition)"), std::string::npos) << e;
  e = shape_error("SliceChannel", {{"num_outputs", "4"}}, {{2, 6}});
  EXPECT_NE(e.find("input 0 (data)"), std::string::npos) << e;
  e = shape_error("Reshape", {{"shape", "(7,)"}}, {{2, 3}});
  EXPECT_NE(e.find("input 0 (data)"), std::string::npos) << e;
  EXPECT_THROW(ImperativeOp("clip", {{"a_min", "1"}}, {{2}}), ParamError);
}

TEST(TensorDropout, Statistics) {
  const float p = 0.3f;
  const Shape s{200, 500};
  ImperativeOp op("Dropout", {{"p", "0.3"}}, {s});
  ASSERT_EQ(op.out_shapes().size(), 2u);  // output and the hidden mask
  NDArray x = NDArray::full(s, 2.0);
  auto out = op.forward({x}, /*is_train=*/true);
  int64_t kept = 0;
  double sum = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    double m = out[1].at(i);
    ASSERT_TRUE(m == 0 || std::fabs(m - 1 / (1 - p)) < 1e-6) << "mask value " << m;
    ASSERT_FLOAT_EQ(out[0].at(i), 2 * m);
    kept += m != 0;
    sum += out[0].at(i);
  }
  double n = static_cast<double>(x.size());
  EXPECT_NEAR(kept / n, 1 - p, 0.01);
  EXPECT_NEAR(sum / n, 2.0, 0.03);  // inverted dropout preserves the mean
  NDArray dx(s);
  op.backward({NDArray::full(s, 1), NDArray()}, {NDArray()}, out, {Req::kWrite}, {dx});
  expect_values(dx, values(out[1]));

  // Not training: identity. mode=always drops in inference too.
  expect_values(op.forward({x}, false)[0], values(x));
  ImperativeOp always("Dropout", {{"p", "0.5"}, {"mode", "always"}}, {{1000}});
  auto a = always.forward({NDArray::full({1000}, 1)}, false);
  int zeros = 0;
  for (int64_t i = 0; i < 1000; ++i) zeros += a[0].at(i) == 0;
  EXPECT_GT(zeros, 400);
  EXPECT_LT(zeros, 600);
  // axes=(1,): one mask value per (n, :, k) column.
  ImperativeOp ax("Dropout", {{"p", "0.5"}, {"axes", "(1,)"}}, {{4, 6, 5}});
  auto m = ax.forward({NDArray::full({4, 6, 5}, 1)}, true)[1];
  for (int64_t n = 0; n < 4; ++n)
    for (int64_t c = 1; c < 6; ++c)
      for (int64_t k = 0; k < 5; ++k) ASSERT_EQ(m.at((n * 6 + c) * 5 + k), m.at(n * 30 + k));
}

TEST(TensorScalar, OperandOrderAndAliases) {
  NDArray x = array({3}, {1, 2, 4});
  auto run = [&](const char* op, const char* s) {
    return ImperativeOp(op, {{"scalar", s}}, {{3}}).forward({x})[0];
  };
  expect_values(run("_rminus_scalar", "10"), {9, 8, 6});
  expect_values(run("_RMinusScalar", "10"), {9, 8, 6});
  expect_values(run("_minus_scalar", "10"), {-9, -8, -6});
  expect_values(run("_rdiv_scalar", "8"), {8, 4, 2});
  expect_values(run("_div_scalar", "8"), {0.125, 0.25, 0.5});
  expect_values(run("_rpower_scalar", "2"), {2, 4, 16});
  expect_values(run("_PowerScalar", "2"), {1, 4, 16});
  expect_values(run("_MaximumScalar", "2"), {2, 2, 4});
  expect_values(run("_mul_scalar", "-1.0"), {-1, -2, -4});
  expect_values(ImperativeOp("_plus_scalar", {}, {{3}}).forward({x})[0], {2, 3, 5});  // default 1
  // d(s/x)/dx = -s/x^2
  ImperativeOp rdiv("_rdiv_scalar", {{"scalar", "8"}}, {{3}});
  NDArray dx({3});
  rdiv.backward({NDArray::full({3}, 1)}, {x}, {NDArray()}, {Req::kWrite}, {dx});
  expect_values(dx, {-8, -2, -0.5});
  for (const char* al : {"_plus", "_Plus", "_add", "_minus", "_Minus", "_sub", "_mul", "_Mul",
                         "_div", "_Div", "ElementWiseSum", "identity", "stop_gradient", "cast",
                         "_Maximum", "_Minimum", "_Power", "_MulScalar", "_RDivScalar"})
    EXPECT_NE(find_op(al), nullptr) << al;
  EXPECT_EQ(find_op("_Plus")->name, "elemwise_add");
}

TEST(TensorCast, TypesAndGradient) {
  ImperativeOp op("Cast", {{"dtype", "int32"}}, {{3}});
  EXPECT_EQ(op.out_types()[0], DType::kInt32);
  NDArray y = op.forward({array({3}, {1.7, -2.2, 3})})[0];
  expect_values(y, {1, -2, 3});
  ImperativeOp back("cast", {{"dtype", "float32"}}, {{3}}, {DType::kInt64});
  NDArray xi = NDArray::full({3}, 5, DType::kInt64);
  expect_values(back.forward({xi})[0], {5, 5, 5});
  ImperativeOp f64("Cast", {{"dtype", "float64"}}, {{2}});
  NDArray dx({2});
  f64.backward({NDArray::full({2}, 0.5, DType::kFloat64)}, {NDArray()}, {NDArray()}, {Req::kWrite},
               {dx});
  expect_values(dx, {0.5, 0.5});
  ImperativeOp ones("_ones", {{"shape", "(2, 2)"}, {"dtype", "int64"}}, {});
  EXPECT_EQ(ones.out_types()[0], DType::kInt64);
  expect_values(ones.forward({})[0], {1, 1, 1, 1});
}

// Inputs above the threading threshold take the OpenMP paths; compare them with the
// references too, and check a large backward (broadcast reduction, reduce, transpose).
TEST(TensorLarge, ParallelPathsMatchReference) {
  struct Case {
    const char* op;
    Attrs attrs;
    std::vector<Shape> in;
  };
  const std::vector<Case> cases = {
      {"sigmoid", {}, {{300, 257}}},
      {"elemwise_mul", {}, {{300, 257}, {300, 257}}},
      {"broadcast_add", {}, {{300, 1, 40}, {7, 1}}},
      {"broadcast_sub", {}, {{70000}, {1}}},
      {"_rminus_scalar", {{"scalar", "3"}}, {{70000}}},
      {"sum", {}, {{300, 257}}},
      {"sum", {{"axis", "0"}}, {{300, 257}}},
      {"mean", {{"axis", "(0, 2)"}}, {{40, 30, 60}}},
      {"max", {{"axis", "1"}}, {{300, 257}}},
      {"Concat", {{"num_args", "2"}, {"dim", "1"}}, {{200, 100}, {200, 300}}},
      {"SliceChannel", {{"num_outputs", "4"}, {"axis", "0"}}, {{400, 100}}},
      {"slice_axis", {{"axis", "1"}, {"begin", "3"}, {"end", "250"}}, {{300, 257}}},
      {"transpose", {{"axes", "(2, 0, 1)"}}, {{40, 30, 60}}},
      {"clip", {{"a_min", "-1"}, {"a_max", "1"}}, {{70000}}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.op);
    ImperativeOp op(c.op, c.attrs, c.in);
    std::vector<NDArray> in;
    for (size_t i = 0; i < c.in.size(); ++i) in.push_back(random(c.in[i], 50 + i));
    auto out = op.forward(in);
    auto want = (*test::find_reference(op.attrs().op->name))(
        RefCall{op.attrs(), in, op.out_shapes(), false});
    for (size_t k = 0; k < want.size(); ++k)
      for (int64_t i = 0; i < out[k].size(); ++i)
        ASSERT_NEAR(out[k].at(i), want[k].at(i), 1e-4 * (1 + std::fabs(want[k].at(i))))
            << "output " << k << " element " << i;
  }
  // d/d rhs of broadcast_add over (300, 1, 40) + (7, 1) with dy = 1: each rhs entry 300*40.
  ImperativeOp add("broadcast_add", {}, {{300, 1, 40}, {7, 1}});
  NDArray dl({300, 1, 40}), dr = NDArray::full({7, 1}, 1);
  add.backward({NDArray::full({300, 7, 40}, 1)}, {NDArray(), NDArray()}, {NDArray()},
               {Req::kWrite, Req::kAdd}, {dl, dr});
  expect_values(dr, Vec(7, 1 + 300 * 40));
  expect_values(dl, Vec(12000, 7));
  // Transpose backward is the inverse permutation: back to the input layout.
  ImperativeOp tr("transpose", {{"axes", "(2, 0, 1)"}}, {{40, 30, 60}});
  NDArray x = random({40, 30, 60}, 7), dx({40, 30, 60});
  tr.backward({tr.forward({x})[0]}, {NDArray()}, {NDArray()}, {Req::kWrite}, {dx});
  expect_values(dx, values(x));
}

// Every sample of every tensor op, with backward given only the arrays its GradDeps declare
// (so an undeclared dependency crashes or mis-computes here): central differences, then
// req=add must double the write-mode gradient.
TEST(TensorGrad, DeclaredDepsSufficeAndReqAdd) {
  const std::vector<std::string> ops = {"exp",
                                        "log",
                                        "sqrt",
                                        "rsqrt",
                                        "square",
                                        "abs",
                                        "negative",
                                        "relu",
                                        "sigmoid",
                                        "tanh",
                                        "softsign",
                                        "reciprocal",
                                        "log1p",
                                        "expm1",
                                        "sin",
                                        "cos",
                                        "tan",
                                        "arcsin",
                                        "arccos",
                                        "arctan",
                                        "sinh",
                                        "cosh",
                                        "arcsinh",
                                        "arccosh",
                                        "arctanh",
                                        "degrees",
                                        "radians",
                                        "log2",
                                        "log10",
                                        "cbrt",
                                        "rcbrt",
                                        "erf",
                                        "clip",
                                        "elemwise_add",
                                        "elemwise_sub",
                                        "elemwise_mul",
                                        "elemwise_div",
                                        "_maximum",
                                        "_minimum",
                                        "_power",
                                        "add_n",
                                        "broadcast_add",
                                        "broadcast_sub",
                                        "broadcast_mul",
                                        "broadcast_div",
                                        "broadcast_maximum",
                                        "broadcast_minimum",
                                        "broadcast_power",
                                        "_plus_scalar",
                                        "_minus_scalar",
                                        "_rminus_scalar",
                                        "_mul_scalar",
                                        "_div_scalar",
                                        "_rdiv_scalar",
                                        "_power_scalar",
                                        "_rpower_scalar",
                                        "_maximum_scalar",
                                        "_minimum_scalar",
                                        "smooth_l1",
                                        "sum",
                                        "mean",
                                        "max",
                                        "min",
                                        "Reshape",
                                        "Flatten",
                                        "expand_dims",
                                        "Concat",
                                        "SliceChannel",
                                        "slice_axis",
                                        "Dropout",
                                        "Cast",
                                        "where",
                                        "transpose",
                                        "_copy"};
  int checked = 0;
  for (const auto& name : ops) {
    const OpDef& def = get_op(name);
    for (size_t si = 0; si < def.samples.size(); ++si) {
      const OpSample& s = def.samples[si];
      if (!s.check_grad) continue;
      SCOPED_TRACE(name + " sample " + std::to_string(si));
      ImperativeOp op(name, s.attrs, s.in_shapes);
      GradDeps deps = op_grad_deps(op.attrs());
      std::vector<NDArray> in;
      for (size_t i = 0; i < s.in_shapes.size(); ++i) {
        std::string k = i < s.in_kinds.size() ? s.in_kinds[i] : "normal";
        in.push_back(k == "positive"  ? random(s.in_shapes[i], 10 + i, 0.5, 2)
                     : k == "unit"    ? random(s.in_shapes[i], 10 + i, -0.9, 0.9)
                     : k == "above1"  ? random(s.in_shapes[i], 10 + i, 1.2, 2.7)
                     : k == "label:2" ? random(s.in_shapes[i], 10 + i, 0, 1.999)
                                      : random(s.in_shapes[i], 10 + i));
        if (k == "label:2")
          for (int64_t j = 0; j < in[i].size(); ++j)
            in[i].data<float>()[j] = std::floor(in[i].data<float>()[j]);
      }
      auto out = op.forward(in);
      size_t nvis = static_cast<size_t>(op_num_visible(op.attrs()));
      std::vector<NDArray> r, og;
      for (size_t k = 0; k < out.size(); ++k) {
        r.push_back(k < nvis ? random(out[k].shape(), 99 + k) : NDArray::zeros(out[k].shape()));
        og.push_back(deps.out_grad ? r[k] : NDArray());
      }
      auto f = [&]() {
        auto o = op.forward(in);
        double acc = 0;
        for (size_t k = 0; k < nvis; ++k)
          for (int64_t j = 0; j < o[k].size(); ++j) acc += o[k].at(j) * r[k].at(j);
        return acc;
      };
      std::vector<Req> req;
      std::vector<NDArray> grad, none_in(in.size()), none_out(out.size());
      for (size_t i = 0; i < in.size(); ++i) {
        bool skip = name == "where" && i == 0;
        req.push_back(skip ? Req::kNull : Req::kWrite);
        grad.push_back(skip ? NDArray() : NDArray::full(in[i].shape(), 7));
      }
      op.backward(og, deps.in_data ? in : none_in, deps.out_data ? out : none_out, req, grad);
      for (size_t i = 0; i < in.size(); ++i) {
        if (req[i] == Req::kNull) continue;
        for (int64_t j = 0; j < in[i].size(); ++j) {
          float* p = in[i].data<float>();
          const float x0 = p[j];
          const double h = 1e-3;
          p[j] = x0 + static_cast<float>(h);
          double fp = f();
          p[j] = x0 - static_cast<float>(h);
          double fm = f();
          p[j] = x0;
          double f0 = f(), right = (fp - f0) / h, left = (f0 - fm) / h;
          if (std::fabs(right - left) > 0.05 * (1 + std::fabs(right))) continue;  // kink
          double num = (fp - fm) / (2 * h);
          ++checked;
          EXPECT_NEAR(grad[i].at(j), num, 2e-2 + 2e-2 * std::fabs(num))
              << "input " << i << " element " << j;
        }
        NDArray twice = grad[i].copy();
        std::vector<Req> add(in.size(), Req::kNull);
        add[i] = Req::kAdd;
        std::vector<NDArray> g2(in.size());
        g2[i] = twice;
        op.backward(og, deps.in_data ? in : none_in, deps.out_data ? out : none_out, add, g2);
        for (int64_t j = 0; j < in[i].size(); ++j)
          ASSERT_NEAR(twice.at(j), 2 * grad[i].at(j), 1e-5 + 1e-5 * std::fabs(grad[i].at(j)));
      }
    }
  }
  EXPECT_GT(checked, 1500);  // every element of every differentiable sample input
}

}  // namespace
}  // namespace loom
