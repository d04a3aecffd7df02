// Element-wise ops on every MXNet dtype (float32, float64, float16, uint8, int8, int32,
// int64): Cast, fill, tensor-scalar, elemwise and broadcast binary, unary math, copy and the
// reductions. Each kernel result is compared with a naive reference computed in double (or
// exactly, for integers) from the same typed inputs and rounded to the dtype as MXNet 1.9.1
// does; float64 gradients are checked by central differences and req=add backward twice.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ops/infer.h"
#include "runtime/dtype_traits.h"
#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom {
namespace {

using Vec = std::vector<double>;

const std::vector<DType> kFloats = {DType::kFloat32, DType::kFloat64, DType::kFloat16};
const std::vector<DType> kInts = {DType::kUint8, DType::kInt8, DType::kInt32, DType::kInt64};
std::vector<DType> all_numeric() {
  std::vector<DType> v = kFloats;
  v.insert(v.end(), kInts.begin(), kInts.end());
  return v;
}

/// `v` stored in dtype t and read back (Cast's conversion).
double to_dtype(DType t, double v) {
  return dispatch_dtype(t, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return static_cast<double>(convert_value<double>(convert_value<T>(v)));
  });
}

NDArray typed(const Shape& s, DType t, const Vec& v) {
  NDArray a(s, t);
  dispatch_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < a.size(); ++i) a.data<T>()[i] = convert_value<T>(v[static_cast<size_t>(i)]);
  });
  return a;
}
Vec values(const NDArray& a) {
  Vec v(static_cast<size_t>(a.size()));
  for (int64_t i = 0; i < a.size(); ++i) v[static_cast<size_t>(i)] = a.at(i);
  return v;
}
/// Values suitable for `kind` in dtype t: small integers for integer dtypes.
Vec sample_values(int64_t n, DType t, const std::string& kind, unsigned seed) {
  std::mt19937 rng(seed);
  Vec v(static_cast<size_t>(n));
  const bool is_int = dtype_is_int(t);
  for (auto& x : v) {
    if (is_int) {
      int lo = kind == "positive" ? 1 : (t == DType::kUint8 ? 0 : -9);
      x = std::uniform_int_distribution<int>(lo, 9)(rng);
    } else if (kind == "positive") {
      x = std::uniform_real_distribution<double>(0.5, 2.0)(rng);
    } else if (kind == "unit") {
      x = std::uniform_real_distribution<double>(-0.9, 0.9)(rng);
    } else {
      x = std::uniform_real_distribution<double>(-2.0, 2.0)(rng);
    }
    x = to_dtype(t, x);
  }
  return v;
}
double tol(DType t, double e) {
  const double rel = t == DType::kFloat64 ? 1e-12 : t == DType::kFloat32 ? 2e-6 : t == DType::kFloat16 ? 2e-3 : 0;
  return rel * (1 + std::fabs(e));
}
std::string label(const std::string& op, DType t) { return op + " on " + dtype_name(t); }

std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(static_cast<size_t>(s.ndim()));
  for (int d = s.ndim() - 1; d >= 0; --d) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}
int64_t bcast_index(const std::vector<int64_t>& idx, const Shape& s) {
  const int off = static_cast<int>(idx.size()) - s.ndim();
  int64_t r = 0;
  for (int d = 0; d < s.ndim(); ++d) r = r * s[d] + (s[d] == 1 ? 0 : idx[static_cast<size_t>(d + off)]);
  return r;
}

// ---- references: double for floats, exact integer arithmetic for integers ----
using F2 = std::function<double(double, double)>;
using F1 = std::function<double(double)>;
double idiv(double a, double b) { return b == 0 ? 0 : std::trunc(a / b); }
struct BinRef {
  const char* elem;
  const char* bcast;
  const char* scalar;
  const char* rscalar;
  F2 f;
  F2 fi;  ///< integer semantics
  const char* rhs_kind;
};
const std::vector<BinRef> kBin = {
    {"elemwise_add", "broadcast_add", "_plus_scalar", nullptr, std::plus<double>(), std::plus<double>(), "normal"},
    {"elemwise_sub", "broadcast_sub", "_minus_scalar", "_rminus_scalar", std::minus<double>(), std::minus<double>(), "normal"},
    {"elemwise_mul", "broadcast_mul", "_mul_scalar", nullptr, std::multiplies<double>(), std::multiplies<double>(), "normal"},
    {"elemwise_div", "broadcast_div", "_div_scalar", "_rdiv_scalar", std::divides<double>(), idiv, "positive"},
    {"_maximum", "broadcast_maximum", "_maximum_scalar", nullptr, [](double a, double b) { return std::max(a, b); },
     [](double a, double b) { return std::max(a, b); }, "normal"},
    {"_minimum", "broadcast_minimum", "_minimum_scalar", nullptr, [](double a, double b) { return std::min(a, b); },
     [](double a, double b) { return std::min(a, b); }, "normal"},
    {"_power", "broadcast_power", "_power_scalar", "_rpower_scalar", [](double a, double b) { return std::pow(a, b); },
     [](double a, double b) { return std::trunc(std::pow(a, b)); }, "positive"},
};

/// Runs forward with inputs of dtype t and compares with ref(i) for output element i.
void expect_forward(const std::string& op, const Attrs& attrs, const std::vector<Shape>& shapes,
                    DType t, const std::vector<Vec>& in, DType out_t,
                    const std::function<double(int64_t)>& ref) {
  SCOPED_TRACE(label(op, t));
  std::vector<DType> types(shapes.size(), t);
  ImperativeOp inst(op, attrs, shapes, types);
  ASSERT_EQ(inst.out_types()[0], out_t);
  std::vector<NDArray> arrays;
  for (size_t k = 0; k < shapes.size(); ++k) arrays.push_back(typed(shapes[k], t, in[k]));
  NDArray y = inst.forward(arrays)[0];
  ASSERT_EQ(y.dtype(), out_t);
  for (int64_t i = 0; i < y.size(); ++i) {
    const double e = to_dtype(out_t, ref(i)), g = y.at(i);
    if (std::isnan(e)) continue;
    ASSERT_NEAR(g, e, tol(out_t, e)) << "element " << i;
  }
}

/// Gradient check in float64 (central differences, h = 1e-6) and req=add twice.
void expect_grad_f64(const std::string& op, const Attrs& attrs, const std::vector<Shape>& shapes,
                     const std::vector<std::string>& kinds, unsigned seed = 7) {
  SCOPED_TRACE(op + " float64 gradient");
  const DType t = DType::kFloat64;
  std::vector<DType> types(shapes.size(), t);
  ImperativeOp inst(op, attrs, shapes, types);
  std::vector<NDArray> in;
  for (size_t k = 0; k < shapes.size(); ++k)
    in.push_back(typed(shapes[k], t, sample_values(shapes[k].numel(), t, kinds[k], seed + static_cast<unsigned>(k))));
  std::vector<NDArray> out = inst.forward(in);
  NDArray r = typed(out[0].shape(), t, sample_values(out[0].size(), t, "normal", seed + 99));
  auto projected = [&]() {
    NDArray y = inst.forward(in)[0];
    double s = 0;
    for (int64_t i = 0; i < y.size(); ++i) s += y.data<double>()[i] * r.data<double>()[i];
    return s;
  };
  std::vector<NDArray> grad;
  std::vector<Req> req;
  for (auto& a : in) {
    grad.push_back(NDArray::full(a.shape(), 7.0, t));
    req.push_back(Req::kWrite);
  }
  inst.backward({r}, in, out, req, grad);
  for (size_t k = 0; k < in.size(); ++k) {
    ASSERT_EQ(grad[k].dtype(), t);
    for (int64_t j = 0; j < in[k].size(); ++j) {
      double* p = in[k].data<double>();
      const double x0 = p[j], h = 1e-6;
      p[j] = x0 + h;
      const double fp = projected();
      p[j] = x0 - h;
      const double fm = projected();
      p[j] = x0;
      const double num = (fp - fm) / (2 * h);
      EXPECT_NEAR(grad[k].at(j), num, 1e-6 + 1e-6 * std::fabs(num))
          << "input " << k << " element " << j;
    }
  }
  // req=add: a second backward onto the first result doubles it.
  std::vector<NDArray> acc;
  std::vector<Req> add(in.size(), Req::kAdd);
  for (auto& g : grad) acc.push_back(g.copy());
  inst.backward({r}, in, out, add, acc);
  for (size_t k = 0; k < in.size(); ++k)
    for (int64_t j = 0; j < in[k].size(); ++j)
      ASSERT_NEAR(acc[k].at(j), 2 * grad[k].at(j), 1e-12 * (1 + std::fabs(grad[k].at(j))));
}

TEST(DTypeCast, Float16RoundsToNearestEven) {
  // 2049 lies halfway between 2048 and 2050: ties go to the even mantissa (2048); 2051 -> 2052.
  const Vec in = {2049, 2051, 65504, 65519, 65520, 1e-8, 5.960464477539063e-08 * 1.5, -0.0, 1.0 / 3,
                  INFINITY, -70000};
  const Vec want = {2048, 2052, 65504, 65504, INFINITY, 0, 1.1920928955078125e-07, 0, 0.333251953125,
                    INFINITY, -INFINITY};
  for (DType src : {DType::kFloat32, DType::kFloat64}) {
    ImperativeOp cast("Cast", {{"dtype", "float16"}}, {{11}}, {src});
    NDArray y = cast.forward({typed({11}, src, in)})[0];
    ASSERT_EQ(y.dtype(), DType::kFloat16);
    EXPECT_EQ(values(y), want) << dtype_name(src);
  }
  NDArray nan = typed({1}, DType::kFloat16, {NAN});
  EXPECT_TRUE(std::isnan(nan.at(0)));
}

TEST(DTypeCast, EveryPairAsMxnet) {
  const Vec in = {0, 1, -1, 1.7, -1.7, 2.5, 127, 200, 300, -300, 65504, 1e10};
  for (DType s : all_numeric())
    for (DType d : all_numeric()) {
      SCOPED_TRACE(std::string(dtype_name(s)) + " -> " + dtype_name(d));
      Vec src(in.size());
      for (size_t i = 0; i < in.size(); ++i) src[i] = to_dtype(s, in[i]);
      ImperativeOp cast("Cast", {{"dtype", dtype_name(d)}}, {{12}}, {s});
      NDArray y = cast.forward({typed({12}, s, src)})[0];
      ASSERT_EQ(y.dtype(), d);
      for (size_t i = 0; i < in.size(); ++i) {
        double want = to_dtype(d, src[i]);
        if (dtype_is_int(s) && dtype_is_int(d)) {  // integers wrap modulo 2^bits
          const int bits = static_cast<int>(dtype_size(d)) * 8;
          if (bits < 64) {
            const int64_t m = int64_t{1} << bits;
            int64_t w = static_cast<int64_t>(src[i]) % m;
            if (w < 0) w += m;
            if (d != DType::kUint8 && w >= m / 2) w -= m;
            want = static_cast<double>(w);
          }
        }
        EXPECT_EQ(y.at(static_cast<int64_t>(i)), want) << i;
      }
    }
  // MXNet's values (x86): floats truncate; into uint8/int8 they wrap through int32.
  ImperativeOp u8("Cast", {{"dtype", "uint8"}}, {{4}}, {DType::kFloat32});
  EXPECT_EQ(values(u8.forward({typed({4}, DType::kFloat32, {1.7, -1.7, 300, -300})})[0]),
            (Vec{1, 255, 44, 212}));
  ImperativeOp i8("Cast", {{"dtype", "int8"}}, {{4}}, {DType::kFloat32});
  EXPECT_EQ(values(i8.forward({typed({4}, DType::kFloat32, {1.7, -1.7, 300, -300})})[0]),
            (Vec{1, -1, 44, -44}));
}

TEST(DTypeCast, GradientCastsBack) {
  ImperativeOp cast("Cast", {{"dtype", "float16"}}, {{3}}, {DType::kFloat64});
  NDArray x = typed({3}, DType::kFloat64, {1, 2, 3});
  NDArray g = typed({3}, DType::kFloat16, {0.5, -1, 2049});
  NDArray dx = NDArray::full({3}, 1.0, DType::kFloat64);
  cast.backward({g}, {x}, {}, {Req::kAdd}, {dx});
  EXPECT_EQ(values(dx), (Vec{1.5, 0, 2049}));  // 2049 in float16 is 2048, plus 1
}

TEST(DTypeFill, FullConvertsAsCast) {
  for (DType t : all_numeric())
    for (double v : {0.0, 1.0, -1.0, 7.9, 300.0, -0.5, 2049.0}) {
      NDArray a = NDArray::full({3}, v, t);
      ASSERT_EQ(a.dtype(), t);
      for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(a.at(i), to_dtype(t, v)) << dtype_name(t) << " " << v;
    }
  EXPECT_EQ(NDArray::full({1}, -1, DType::kUint8).at(0), 255);
  EXPECT_EQ(NDArray::full({1}, 300, DType::kInt8).at(0), 44);
  EXPECT_EQ(NDArray::full({1}, 2049, DType::kFloat16).at(0), 2048);
  EXPECT_EQ(NDArray::full({1}, 0.5, DType::kBool).at(0), 1);
}

TEST(DTypeBinary, ElemwiseAndBroadcastForwardEveryDtype) {
  for (const BinRef& b : kBin)
    for (DType t : all_numeric()) {
      const bool is_int = dtype_is_int(t);
      const F2 f = is_int ? b.fi : b.f;
      const std::string lk = b.f(2, 0.5) == std::pow(2, 0.5) ? "positive" : "normal";
      Vec x = sample_values(12, t, lk, 3), y = sample_values(12, t, b.rhs_kind, 4);
      if (is_int && std::string(b.elem) == "_power")  // small exponents, as float pow is exact there
        for (auto& v : y) v = std::fmod(std::fabs(v), 3);
      expect_forward(b.elem, {}, {{3, 4}, {3, 4}}, t, {x, y}, t,
                     [&](int64_t i) { return f(x[i], y[i]); });
      // broadcast (3, 4) with (4,) and (3, 1)
      Vec y4(y.begin(), y.begin() + 4), y3(y.begin(), y.begin() + 3);
      expect_forward(b.bcast, {}, {{3, 4}, {4}}, t, {x, y4}, t,
                     [&](int64_t i) { return f(x[i], y4[i % 4]); });
      expect_forward(b.bcast, {}, {{3, 4}, {3, 1}}, t, {x, y3}, t,
                     [&](int64_t i) { return f(x[i], y3[i / 4]); });
    }
}

TEST(DTypeBinary, IntegerSemantics) {
  // Division truncates toward zero, x / 0 gives 0 (MXNet traps), sums wrap.
  expect_forward("elemwise_div", {}, {{4}, {4}}, DType::kInt32, {{7, -7, 7, 5}, {2, 2, -2, 0}},
                 DType::kInt32, [](int64_t i) { return Vec{3, -3, -3, 0}[i]; });
  expect_forward("elemwise_add", {}, {{2}, {2}}, DType::kInt8, {{100, -100}, {100, -100}},
                 DType::kInt8, [](int64_t i) { return Vec{-56, 56}[i]; });
  expect_forward("elemwise_sub", {}, {{2}, {2}}, DType::kUint8, {{3, 250}, {5, 0}}, DType::kUint8,
                 [](int64_t i) { return Vec{254, 250}[i]; });
  expect_forward("elemwise_div", {}, {{1}, {1}}, DType::kInt64,
                 {{-9223372036854775807.0 - 1}, {-1}}, DType::kInt64,
                 [](int64_t) { return -9223372036854775807.0 - 1; });  // wraps, no trap
}

TEST(DTypeBinary, MixedDtypesRejected) {
  try {
    ImperativeOp op("elemwise_add", {}, {{2}, {2}}, {DType::kInt32, DType::kFloat32});
    FAIL() << "mixed dtypes accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("elemwise_add"), std::string::npos) << m;
    EXPECT_NE(m.find("int32"), std::string::npos) << m;
    EXPECT_NE(m.find("float32"), std::string::npos) << m;
  }
  EXPECT_THROW(ImperativeOp("broadcast_mul", {}, {{2}, {1}}, {DType::kFloat64, DType::kFloat16}),
               Error);
  EXPECT_THROW(ImperativeOp("elemwise_add", {}, {{2}, {2}}, {DType::kBool, DType::kBool}), Error);
}

TEST(DTypeBinary, Float64Gradients) {
  for (const BinRef& b : kBin) {
    const std::string lk = std::string(b.elem) == "_power" ? "positive" : "normal";
    expect_grad_f64(b.elem, {}, {{2, 3}, {2, 3}}, {lk, b.rhs_kind});
    expect_grad_f64(b.bcast, {}, {{2, 1, 3}, {4, 1}}, {lk, b.rhs_kind});
  }
}

TEST(DTypeBinary, Float16Gradient) {
  ImperativeOp op("broadcast_mul", {}, {{2, 3}, {3}}, {DType::kFloat16, DType::kFloat16});
  Vec a = {1, 2, 3, 4, 5, 6}, b = {0.5, 0.25, 2};
  NDArray x = typed({2, 3}, DType::kFloat16, a), y = typed({3}, DType::kFloat16, b);
  NDArray g = NDArray::full({2, 3}, 1.0, DType::kFloat16);
  NDArray dx(Shape{2, 3}, DType::kFloat16), dy(Shape{3}, DType::kFloat16);
  op.backward({g}, {x, y}, {}, {Req::kWrite, Req::kWrite}, {dx, dy});
  EXPECT_EQ(values(dx), (Vec{0.5, 0.25, 2, 0.5, 0.25, 2}));
  EXPECT_EQ(values(dy), (Vec{5, 7, 9}));
}

TEST(DTypeScalar, EveryDtypeWithScalarConvertedFirst) {
  for (const BinRef& b : kBin)
    for (DType t : all_numeric())
      for (bool rev : {false, true}) {
        const char* op = rev ? b.rscalar : b.scalar;
        if (!op) continue;
        const bool is_int = dtype_is_int(t);
        const F2 f = is_int ? b.fi : b.f;
        const double scalar = std::string(op) == "_rpower_scalar" ? 1.5 : 2.5;
        const std::string kind = rev ? b.rhs_kind : (std::string(op) == "_power_scalar" ? "positive" : "normal");
        Vec x = sample_values(6, t, kind, 5);
        // MXNet converts the scalar to the array's dtype first (int32 * 2.5 multiplies by 2).
        const double s = to_dtype(t, scalar);
        expect_forward(op, {{"scalar", std::to_string(scalar)}}, {{2, 3}}, t, {x}, t,
                       [&](int64_t i) { return rev ? f(s, x[i]) : f(x[i], s); });
      }
}

TEST(DTypeScalar, IsIntFalseOnIntegersGivesFloat64) {
  for (DType t : kInts)
    expect_forward("_mul_scalar", {{"scalar", "2.5"}, {"is_int", "False"}}, {{3}}, t,
                   {{1, 3, 7}}, DType::kFloat64, [](int64_t i) { return Vec{2.5, 7.5, 17.5}[i]; });
  // On floats is_int changes nothing.
  expect_forward("_div_scalar", {{"scalar", "2"}, {"is_int", "False"}}, {{2}}, DType::kFloat16,
                 {{1, 3}}, DType::kFloat16, [](int64_t i) { return Vec{0.5, 1.5}[i]; });
}

TEST(DTypeScalar, Float64Gradients) {
  for (const BinRef& b : kBin)
    for (const char* op : {b.scalar, b.rscalar}) {
      if (!op) continue;
      const std::string o = op;
      const std::string kind = o == "_rdiv_scalar" || o == "_power_scalar" ? "positive" : "normal";
      expect_grad_f64(o, {{"scalar", o == "_rpower_scalar" ? "1.5" : "2.5"}}, {{2, 3}}, {kind});
    }
}

struct UnRef {
  const char* op;
  F1 f;
  const char* kind;
  bool grad;
};
const std::vector<UnRef> kUn = {
    {"abs", [](double x) { return std::fabs(x); }, "normal", true},
    {"negative", [](double x) { return -x; }, "normal", true},
    {"sign", [](double x) { return double((x > 0) - (x < 0)); }, "normal", false},
    {"square", [](double x) { return x * x; }, "normal", true},
    {"sqrt", [](double x) { return std::sqrt(x); }, "positive", true},
    {"rsqrt", [](double x) { return 1 / std::sqrt(x); }, "positive", true},
    {"exp", [](double x) { return std::exp(x); }, "normal", true},
    {"log", [](double x) { return std::log(x); }, "positive", true},
    {"relu", [](double x) { return std::max(x, 0.0); }, "normal", true},
    {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, "normal", true},
    {"tanh", [](double x) { return std::tanh(x); }, "normal", true},
    {"reciprocal", [](double x) { return 1 / x; }, "positive", true},
    {"sin", [](double x) { return std::sin(x); }, "normal", true},
    {"cos", [](double x) { return std::cos(x); }, "normal", true},
    {"arctan", [](double x) { return std::atan(x); }, "normal", true},
    {"arcsin", [](double x) { return std::asin(x); }, "unit", true},
    {"log1p", [](double x) { return std::log1p(x); }, "positive", true},
    {"expm1", [](double x) { return std::expm1(x); }, "normal", true},
    {"erf", [](double x) { return std::erf(x); }, "normal", true},
    {"cbrt", [](double x) { return std::cbrt(x); }, "positive", true},
    {"floor", [](double x) { return std::floor(x); }, "normal", false},
    {"round", [](double x) { return std::round(x); }, "normal", false},
    {"_copy", [](double x) { return x; }, "normal", true},
};

TEST(DTypeUnary, FloatDtypes) {
  for (const UnRef& u : kUn)
    for (DType t : kFloats) {
      Vec x = sample_values(8, t, u.kind, 11);
      expect_forward(u.op, {}, {{2, 4}}, t, {x}, t, [&](int64_t i) { return u.f(x[i]); });
    }
}

TEST(DTypeUnary, IntegerDtypes) {
  // Exact on integers: abs, negative, sign, square, relu, identity; the rest in float32 and
  // truncated (MXNet: exp(int32 1) is 2).
  for (const char* op : {"abs", "negative", "sign", "square", "relu", "_copy", "exp", "sqrt"})
    for (DType t : kInts) {
      const UnRef* u = nullptr;
      for (const UnRef& r : kUn)
        if (std::string(r.op) == op) u = &r;
      Vec x = sample_values(8, t, std::string(op) == "sqrt" ? "positive" : "normal", 13);
      expect_forward(op, {}, {{8}}, t, {x}, t, [&](int64_t i) { return std::trunc(u->f(x[i])); });
    }
  // uint8 negation wraps; int8 square wraps (MXNet: [9, 0, -112]).
  expect_forward("negative", {}, {{2}}, DType::kUint8, {{3, 250}}, DType::kUint8,
                 [](int64_t i) { return Vec{253, 6}[i]; });
  expect_forward("square", {}, {{3}}, DType::kInt8, {{-3, 0, 20}}, DType::kInt8,
                 [](int64_t i) { return Vec{9, 0, -112}[i]; });
}

TEST(DTypeUnary, Float64Gradients) {
  for (const UnRef& u : kUn)
    if (u.grad) expect_grad_f64(u.op, {}, {{2, 3}}, {u.kind});
}

/// Reduction reference over `axes` (all when empty) of a (2, 3, 4) input.
Vec reduce_ref(const Vec& x, const Shape& s, const std::vector<int>& axes, const std::string& kind,
               DType t) {
  std::vector<bool> red(static_cast<size_t>(s.ndim()), axes.empty());
  for (int a : axes) red[static_cast<size_t>(a)] = true;
  Shape keep = s;
  for (int d = 0; d < s.ndim(); ++d)
    if (red[static_cast<size_t>(d)]) keep[d] = 1;
  const double init = kind == "max" ? -INFINITY : kind == "min" ? INFINITY : kind == "prod" ? 1 : 0;
  Vec acc(static_cast<size_t>(keep.numel()), init);
  for (int64_t i = 0; i < s.numel(); ++i) {
    double& a = acc[static_cast<size_t>(bcast_index(unravel(i, s), keep))];
    const double v = x[static_cast<size_t>(i)];
    a = kind == "max" ? std::max(a, v) : kind == "min" ? std::min(a, v) : kind == "prod" ? a * v : a + v;
  }
  const double n = static_cast<double>(s.numel() / keep.numel());
  if (kind == "mean")
    for (auto& a : acc) a = dtype_is_int(t) ? std::trunc(a / n) : a / n;
  return acc;
}

TEST(DTypeReduce, EveryDtype) {
  const Shape s{2, 3, 4};
  for (const char* kind : {"sum", "mean", "max", "min", "prod"})
    for (DType t : all_numeric()) {
      Vec x = sample_values(24, t, std::string(kind) == "prod" ? "positive" : "normal", 17);
      if (std::string(kind) == "prod" && dtype_is_int(t))
        for (auto& v : x) v = 1 + std::fmod(std::fabs(v), 2);  // 1s and 2s: no wrap
      for (const auto& [attrs, axes] :
           std::vector<std::pair<Attrs, std::vector<int>>>{{{}, {}}, {{{"axis", "1"}}, {1}},
                                                           {{{"axis", "(0, 2)"}}, {0, 2}}}) {
        Vec want = reduce_ref(x, s, axes, kind, t);
        expect_forward(kind, attrs, {s}, t, {x}, t, [&](int64_t i) { return want[static_cast<size_t>(i)]; });
      }
    }
  // int8 sums wrap (MXNet: sum of [100, 100] is -56); integer means truncate.
  expect_forward("sum", {}, {{2}}, DType::kInt8, {{100, 100}}, DType::kInt8,
                 [](int64_t) { return -56; });
  expect_forward("mean", {}, {{2}}, DType::kInt32, {{-1, -2}}, DType::kInt32,
                 [](int64_t) { return -1; });
}

TEST(DTypeReduce, Float64Gradients) {
  for (const char* kind : {"sum", "mean", "max", "min", "prod"}) {
    const std::string k = kind;
    expect_grad_f64(k, {{"axis", "1"}}, {{2, 3, 4}}, {k == "prod" ? "positive" : "normal"});
    expect_grad_f64(k, {}, {{3, 2}}, {k == "prod" ? "positive" : "normal"});
  }
}

TEST(DTypeClip, EveryDtypeAndFloat64Gradient) {
  for (DType t : all_numeric()) {
    Vec x = sample_values(10, t, "normal", 31);
    // MXNet compares with the float bounds and writes a clipped element as the bound
    // converted to the dtype.
    expect_forward("clip", {{"a_min", "-1.5"}, {"a_max", "4.5"}}, {{10}}, t, {x}, t, [&](int64_t i) {
      return x[i] > 4.5 ? to_dtype(t, 4.5) : x[i] < -1.5 ? to_dtype(t, -1.5) : x[i];
    });
  }
  expect_grad_f64("clip", {{"a_min", "-0.6"}, {"a_max", "0.7"}}, {{3, 4}}, {"normal"});
}

TEST(DTypeFill, OnesLikeAddsInAnyDtype) {
  for (DType t : all_numeric()) {
    ImperativeOp ones("ones_like", {}, {{3}}, {t});
    NDArray x = typed({3}, t, {1, 2, 3});
    NDArray y = typed({3}, t, {5, 6, 7});
    ones.forward({x}, {y}, {Req::kAdd});
    EXPECT_EQ(values(y), (Vec{6, 7, 8})) << dtype_name(t);
  }
}

TEST(DTypeMove, TransposeAndReshapeEveryDtype) {
  for (DType t : all_numeric()) {
    Vec x = sample_values(24, t, "normal", 41);
    const Shape s{2, 3, 4};
    expect_forward("transpose", {{"axes", "(1, 0, 2)"}}, {s}, t, {x}, t, [&](int64_t i) {
      auto idx = unravel(i, Shape{3, 2, 4});  // out (j, i, k) = in (i, j, k)
      return x[static_cast<size_t>((idx[1] * 3 + idx[0]) * 4 + idx[2])];
    });
    for (const char* op : {"Reshape", "Flatten", "expand_dims"}) {
      Attrs at = std::string(op) == "Reshape" ? Attrs{{"shape", "(4, -1)"}}
                 : std::string(op) == "expand_dims" ? Attrs{{"axis", "0"}} : Attrs{};
      expect_forward(op, at, {s}, t, {x}, t, [&](int64_t i) { return x[static_cast<size_t>(i)]; });
    }
    // req=add accumulates in the dtype.
    ImperativeOp tr("transpose", {}, {{2, 3}}, {t});
    NDArray a = typed({2, 3}, t, {1, 2, 3, 4, 5, 6}), y = typed({3, 2}, t, {1, 1, 1, 1, 1, 1});
    tr.forward({a}, {y}, {Req::kAdd});
    EXPECT_EQ(values(y), (Vec{2, 5, 3, 6, 4, 7})) << dtype_name(t);
  }
  for (DType t : all_numeric()) {
    Vec x = sample_values(12, t, "normal", 43), y = sample_values(6, t, "normal", 44);
    // Concat along dim 1: (3, 4) and (3, 2) -> (3, 6).
    expect_forward("Concat", {{"num_args", "2"}, {"dim", "1"}}, {{3, 4}, {3, 2}}, t, {x, y}, t,
                   [&](int64_t i) {
                     const int64_t r = i / 6, c = i % 6;
                     return c < 4 ? x[static_cast<size_t>(r * 4 + c)] : y[static_cast<size_t>(r * 2 + c - 4)];
                   });
    expect_forward("slice_axis", {{"axis", "1"}, {"begin", "1"}, {"end", "3"}}, {{3, 4}}, t, {x}, t,
                   [&](int64_t i) { return x[static_cast<size_t>(i / 2 * 4 + 1 + i % 2)]; });
    expect_forward("SliceChannel", {{"num_outputs", "2"}, {"axis", "1"}}, {{3, 4}}, t, {x}, t,
                   [&](int64_t i) { return x[static_cast<size_t>(i / 2 * 4 + i % 2)]; });
  }
  for (DType t : all_numeric()) {
    Vec x = sample_values(6, t, "normal", 45), y = sample_values(6, t, "normal", 46);
    expect_forward("stack", {{"num_args", "2"}, {"axis", "1"}}, {{2, 3}, {2, 3}}, t, {x, y}, t,
                   [&](int64_t i) {  // out (2, 2, 3): [r][k][c]
                     const int64_t r = i / 6, k = i / 3 % 2, c = i % 3;
                     return (k == 0 ? x : y)[static_cast<size_t>(r * 3 + c)];
                   });
    expect_forward("broadcast_to", {{"shape", "(4, 3)"}}, {{1, 3}}, t, {x}, t,
                   [&](int64_t i) { return x[static_cast<size_t>(i % 3)]; });
    // where: the condition may have another dtype (here int32), x/y/output share t.
    ImperativeOp w("where", {}, {{6}, {6}, {6}}, {DType::kInt32, t, t});
    ASSERT_EQ(w.out_types()[0], t);
    NDArray c = typed({6}, DType::kInt32, {1, 0, -3, 0, 2, 0});
    NDArray out = w.forward({c, typed({6}, t, x), typed({6}, t, y)})[0];
    for (int64_t i = 0; i < 6; ++i)
      EXPECT_EQ(out.at(i), (i % 2 == 0 ? x : y)[static_cast<size_t>(i)]) << dtype_name(t);
  }
  for (DType t : all_numeric()) {  // the IndexMap ops: tile, repeat, SwapAxis, slice
    Vec x = sample_values(6, t, "normal", 47);  // (2, 3)
    expect_forward("tile", {{"reps", "(2, 1)"}}, {{2, 3}}, t, {x}, t,
                   [&](int64_t i) { return x[static_cast<size_t>(i % 6)]; });
    expect_forward("repeat", {{"repeats", "2"}, {"axis", "1"}}, {{2, 3}}, t, {x}, t,
                   [&](int64_t i) { return x[static_cast<size_t>(i / 6 * 3 + i % 6 / 2)]; });
    expect_forward("SwapAxis", {{"dim1", "0"}, {"dim2", "1"}}, {{2, 3}}, t, {x}, t,
                   [&](int64_t i) { return x[static_cast<size_t>(i % 2 * 3 + i / 2)]; });
    expect_forward("slice", {{"begin", "(0, 1)"}, {"end", "(2, 3)"}}, {{2, 3}}, t, {x}, t,
                   [&](int64_t i) { return x[static_cast<size_t>(i / 2 * 3 + 1 + i % 2)]; });
  }
  for (DType t : all_numeric())
    for (DType it : {DType::kFloat32, DType::kInt32, DType::kInt64}) {  // take: any index dtype
      SCOPED_TRACE(std::string("take indices ") + dtype_name(it));
      Vec x = sample_values(6, t, "normal", 48);  // (3, 2)
      ImperativeOp take("take", {}, {{3, 2}, {4}}, {t, it});
      ASSERT_EQ(take.out_types()[0], t);
      NDArray y = take.forward({typed({3, 2}, t, x), typed({4}, it, {2, 0, 1, 2})})[0];
      const Vec want = {x[4], x[5], x[0], x[1], x[2], x[3], x[4], x[5]};
      EXPECT_EQ(values(y), want) << dtype_name(t);
    }
  for (DType t : all_numeric()) {
    // argmax/argmin: the index in the input's dtype (MXNet); one_hot: any index dtype, output
    // in its dtype parameter.
    Vec x = sample_values(12, t, "normal", 49);  // (3, 4)
    for (bool mx : {true, false}) {
      Vec want(3);
      for (int r = 0; r < 3; ++r) {
        int best = 0;
        for (int c = 1; c < 4; ++c)
          if (mx ? x[r * 4 + c] > x[r * 4 + best] : x[r * 4 + c] < x[r * 4 + best]) best = c;
        want[static_cast<size_t>(r)] = best;
      }
      expect_forward(mx ? "argmax" : "argmin", {{"axis", "1"}}, {{3, 4}}, t, {x}, t,
                     [&](int64_t i) { return want[static_cast<size_t>(i)]; });
    }
    ImperativeOp oh("one_hot", {{"depth", "3"}, {"dtype", dtype_name(t)}, {"on_value", "5"}}, {{3}},
                    {DType::kInt32});
    ASSERT_EQ(oh.out_types()[0], t);
    EXPECT_EQ(values(oh.forward({typed({3}, DType::kInt32, {2, 0, 7})})[0]),
              (Vec{0, 0, 5, 5, 0, 0, 0, 0, 0}));
  }
  expect_grad_f64("tile", {{"reps", "(2, 2)"}}, {{2, 3}}, {"normal"});
  expect_grad_f64("repeat", {{"repeats", "2"}, {"axis", "0"}}, {{2, 3}}, {"normal"});
  expect_grad_f64("slice", {{"begin", "(1, 0)"}, {"end", "(2, 2)"}}, {{2, 3}}, {"normal"});
  expect_grad_f64("stack", {{"num_args", "2"}, {"axis", "0"}}, {{2, 3}, {2, 3}}, {"normal", "normal"});
  expect_grad_f64("broadcast_to", {{"shape", "(2, 4, 3)"}}, {{2, 1, 3}}, {"normal"});
  expect_grad_f64("Concat", {{"num_args", "2"}, {"dim", "0"}}, {{1, 3}, {2, 3}}, {"normal", "normal"});
  expect_grad_f64("slice_axis", {{"axis", "0"}, {"begin", "1"}, {"end", "None"}}, {{3, 2}}, {"normal"});
  expect_grad_f64("transpose", {{"axes", "(2, 0, 1)"}}, {{2, 3, 4}}, {"normal"});
  expect_grad_f64("Reshape", {{"shape", "(4, -1)"}}, {{2, 3, 4}}, {"normal"});
}

TEST(DTypeDot, Float64) {
  Vec a = sample_values(6, DType::kFloat64, "normal", 51), b = sample_values(12, DType::kFloat64, "normal", 52);
  expect_forward("dot", {}, {{2, 3}, {3, 4}}, DType::kFloat64, {a, b}, DType::kFloat64, [&](int64_t i) {
    double s = 0;
    for (int k = 0; k < 3; ++k) s += a[static_cast<size_t>(i / 4 * 3 + k)] * b[static_cast<size_t>(k * 4 + i % 4)];
    return s;
  });
  expect_grad_f64("dot", {}, {{2, 3}, {3, 4}}, {"normal", "normal"});
  expect_grad_f64("dot", {{"transpose_a", "True"}, {"transpose_b", "True"}}, {{3, 2}, {4, 3}}, {"normal", "normal"});
  expect_grad_f64("batch_dot", {}, {{2, 2, 3}, {2, 3, 2}}, {"normal", "normal"});
  EXPECT_THROW(ImperativeOp("dot", {}, {{2, 3}, {3, 4}}, {DType::kInt32, DType::kInt32}), Error);
}

TEST(DTypeNormPick, FloatNormsAndPickAnyDtype) {
  for (DType t : kFloats) {
    Vec x = sample_values(12, t, "normal", 53);
    for (const char* ord : {"1", "2"}) {
      Vec want(3, 0);
      for (size_t i = 0; i < 12; ++i) want[i / 4] += ord[0] == '1' ? std::fabs(x[i]) : x[i] * x[i];
      if (ord[0] == '2')
        for (auto& w : want) w = std::sqrt(w);
      expect_forward("norm", {{"ord", ord}, {"axis", "(1,)"}}, {{3, 4}}, t, {x}, t,
                     [&](int64_t i) { return want[static_cast<size_t>(i)]; });
    }
  }
  expect_grad_f64("norm", {{"axis", "(1,)"}}, {{3, 4}}, {"normal"});
  expect_grad_f64("norm", {{"ord", "1"}}, {{3, 4}}, {"normal"});
  for (DType t : all_numeric())
    for (DType it : {DType::kFloat32, DType::kInt64}) {
      Vec x = sample_values(12, t, "normal", 54);  // (3, 4), pick along axis 1
      ImperativeOp pick("pick", {{"axis", "1"}}, {{3, 4}, {3}}, {t, it});
      NDArray y = pick.forward({typed({3, 4}, t, x), typed({3}, it, {3, 0, 9})})[0];
      ASSERT_EQ(y.dtype(), t);
      EXPECT_EQ(values(y), (Vec{x[3], x[4], x[11]})) << dtype_name(t);  // 9 clips to 3
    }
}

TEST(DTypeSort, SortArgsortTopkEveryDtype) {
  for (DType t : all_numeric()) {
    Vec x = sample_values(8, t, "normal", 55);  // integer ties exercise the stable order
    std::vector<int64_t> ord(8);
    std::iota(ord.begin(), ord.end(), 0);
    std::stable_sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) { return x[a] < x[b]; });
    expect_forward("sort", {}, {{8}}, t, {x}, t, [&](int64_t i) { return x[static_cast<size_t>(ord[i])]; });
    ImperativeOp as("argsort", {{"dtype", "int32"}}, {{8}}, {t});
    ASSERT_EQ(as.out_types()[0], DType::kInt32);
    NDArray pos = as.forward({typed({8}, t, x)})[0];
    for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(pos.at(i), ord[static_cast<size_t>(i)]) << dtype_name(t);
    // topk both: values in t, indices in the dtype parameter (default float32).
    std::vector<int64_t> desc(8);
    std::iota(desc.begin(), desc.end(), 0);
    std::stable_sort(desc.begin(), desc.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
    ImperativeOp tk("topk", {{"k", "3"}, {"ret_typ", "both"}}, {{8}}, {t});
    ASSERT_EQ(tk.out_types()[0], t);
    ASSERT_EQ(tk.out_types()[1], DType::kFloat32);
    auto outs = tk.forward({typed({8}, t, x)});
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(outs[0].at(i), x[static_cast<size_t>(desc[i])]) << dtype_name(t);
      EXPECT_EQ(outs[1].at(i), desc[static_cast<size_t>(i)]) << dtype_name(t);
    }
    ImperativeOp mk("topk", {{"k", "2"}, {"ret_typ", "mask"}}, {{8}}, {t});
    ASSERT_EQ(mk.out_types()[0], t);
    NDArray m = mk.forward({typed({8}, t, x)})[0];
    for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(m.at(i), i == desc[0] || i == desc[1] ? 1 : 0);
  }
  expect_grad_f64("sort", {{"axis", "0"}}, {{4, 3}}, {"normal"});
  expect_grad_f64("topk", {{"k", "2"}, {"ret_typ", "value"}}, {{3, 4}}, {"normal"});
}

TEST(DTypeErrors, IntegerGradientIsAClearError) {
  ImperativeOp op("elemwise_mul", {}, {{2}, {2}}, {DType::kInt32, DType::kInt32});
  NDArray a = typed({2}, DType::kInt32, {1, 2});
  NDArray g(Shape{2}, DType::kInt32), da(Shape{2}, DType::kInt32);
  try {
    op.backward({a}, {a, a}, {}, {Req::kWrite, Req::kNull}, {da, g});
    FAIL() << "integer gradient accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
}

struct CmpRef {
  const char* name;
  F2 f;
};
const std::vector<CmpRef> kCmp = {
    {"equal", [](double a, double b) { return double(a == b); }},
    {"not_equal", [](double a, double b) { return double(a != b); }},
    {"greater", [](double a, double b) { return double(a > b); }},
    {"greater_equal", [](double a, double b) { return double(a >= b); }},
    {"lesser", [](double a, double b) { return double(a < b); }},
    {"lesser_equal", [](double a, double b) { return double(a <= b); }},
    {"logical_and", [](double a, double b) { return double(a != 0 && b != 0); }},
    {"logical_or", [](double a, double b) { return double(a != 0 || b != 0); }},
    {"logical_xor", [](double a, double b) { return double((a != 0) != (b != 0)); }},
};

TEST(DTypeCompare, EveryDtypeReturnsInputDtype) {
  for (const CmpRef& c : kCmp)
    for (DType t : all_numeric()) {
      Vec x = sample_values(12, t, "normal", 21), y = sample_values(12, t, "normal", 22);
      for (size_t i = 0; i < 12; i += 3) y[i] = x[i];  // some ties
      for (size_t i = 1; i < 12; i += 5) x[i] = 0;     // some zeros for the logical ops
      const std::string n = c.name;
      expect_forward("_" + n, {}, {{3, 4}, {3, 4}}, t, {x, y}, t,
                     [&](int64_t i) { return c.f(x[i], y[i]); });
      Vec y4(y.begin(), y.begin() + 4);
      expect_forward("broadcast_" + n, {}, {{3, 4}, {4}}, t, {x, y4}, t,
                     [&](int64_t i) { return c.f(x[i], y4[i % 4]); });
      const double s = to_dtype(t, 1.5);  // the scalar converts to the dtype first
      expect_forward("_" + n + "_scalar", {{"scalar", "1.5"}}, {{3, 4}}, t, {x}, t,
                     [&](int64_t i) { return c.f(x[i], s); });
    }
  // MXNet: int32 [2, 3] == 2.5 is [1, 0] (2.5 becomes 2).
  expect_forward("_equal_scalar", {{"scalar", "2.5"}}, {{2}}, DType::kInt32, {{2, 3}},
                 DType::kInt32, [](int64_t i) { return Vec{1, 0}[i]; });
  // int64 values beyond float/double precision compare exactly.
  {
    ImperativeOp eq("_equal", {}, {{1}, {1}}, {DType::kInt64, DType::kInt64});
    NDArray a(Shape{1}, DType::kInt64), b(Shape{1}, DType::kInt64);
    a.data<int64_t>()[0] = (int64_t{1} << 53) + 1;
    b.data<int64_t>()[0] = int64_t{1} << 53;
    EXPECT_EQ(eq.forward({a, b})[0].data<int64_t>()[0], 0);
    EXPECT_EQ(eq.forward({a, a})[0].data<int64_t>()[0], 1);
  }
  EXPECT_EQ(find_op("_equal")->grad_mode, GradMode::kZero);
  EXPECT_EQ(find_op("broadcast_greater")->grad_mode, GradMode::kZero);
  EXPECT_EQ(find_op("_lesser_scalar")->grad_mode, GradMode::kZero);
}

// The op sweep's references for the comparisons (float32 samples).
[[maybe_unused]] const bool kCmpRefs = [] {
  for (const CmpRef& c : kCmp) {
    F2 f = c.f;
    auto bin = [f](const test::RefCall& r) {
      const Shape o = r.out_shapes[0], a = r.in[0].shape(), b = r.in[1].shape();
      NDArray y(o);
      for (int64_t i = 0; i < y.size(); ++i) {
        auto idx = unravel(i, o);
        y.data<float>()[i] = static_cast<float>(f(r.in[0].at(bcast_index(idx, a)), r.in[1].at(bcast_index(idx, b))));
      }
      return std::vector<NDArray>{y};
    };
    test::register_reference(std::string("_") + c.name, bin);
    test::register_reference(std::string("broadcast_") + c.name, bin);
    test::register_reference(std::string("_") + c.name + "_scalar", [f](const test::RefCall& r) {
      const double s = static_cast<float>(parse_float(r.attrs.dict.at("scalar")));
      NDArray y(r.out_shapes[0]);
      for (int64_t i = 0; i < y.size(); ++i) y.data<float>()[i] = static_cast<float>(f(r.in[0].at(i), s));
      return std::vector<NDArray>{y};
    });
  }
  return true;
}();

// The op sweep's reference for prod (float32 samples).
[[maybe_unused]] const bool kProdRef = [] {
  test::register_reference("prod", [](const test::RefCall& c) {
    const Shape& s = c.in[0].shape();
    std::vector<int> axes;
    auto it = c.attrs.dict.find("axis");
    const bool exclude = c.attrs.dict.count("exclude") && c.attrs.dict.at("exclude") == "True";
    if (it != c.attrs.dict.end()) {
      std::vector<bool> listed(static_cast<size_t>(s.ndim()), false);
      for (int64_t a : parse_shape(it->second)) listed[static_cast<size_t>(a < 0 ? a + s.ndim() : a)] = true;
      if (exclude) listed.flip();
      for (int d = 0; d < s.ndim(); ++d)
        if (listed[static_cast<size_t>(d)]) axes.push_back(d);
    }
    Vec want = reduce_ref(values(c.in[0]), s, axes, "prod", DType::kFloat32);
    NDArray y(c.out_shapes[0]);
    for (int64_t i = 0; i < y.size(); ++i) y.data<float>()[i] = static_cast<float>(want[static_cast<size_t>(i)]);
    return std::vector<NDArray>{y};
  });
  return true;
}();

}  // namespace
}  // namespace loom
