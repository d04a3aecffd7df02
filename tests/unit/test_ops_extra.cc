// cumsum, gradientmultiplier, round_ste, sign_ste, index_copy, interleaved attention matmuls:
// naive references for the op sweep, written from MXNet 1.9.1's documented semantics, and a
// few values MXNet gives.
#include <gtest/gtest.h>

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

LOOM_OP_REFERENCE("_np_cumsum", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  NDArray y(c.out_shapes[0]);
  const std::string ax = attr(c.attrs.dict, "axis", "None");
  int64_t outer = 1, len = s.numel(), inner = 1;
  if (ax != "None") {
    int a = std::stoi(ax);
    if (a < 0) a += s.ndim();
    outer = 1;
    inner = 1;
    for (int d = 0; d < a; ++d) outer *= s[d];
    len = s[a];
    for (int d = a + 1; d < s.ndim(); ++d) inner *= s[d];
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < inner; ++r) {
      double acc = 0;
      for (int64_t k = 0; k < len; ++k) {
        const int64_t i = (o * len + k) * inner + r;
        acc += f(c.in[0], i);
        f(y, i) = static_cast<float>(acc);
      }
    }
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("_contrib_gradientmultiplier", [](const RefCall& c) {
  return std::vector<NDArray>{c.in[0].copy()};
});
LOOM_OP_REFERENCE("_contrib_round_ste", [](const RefCall& c) {
  NDArray y(c.in[0].shape());
  for (int64_t i = 0; i < y.size(); ++i) f(y, i) = std::round(f(c.in[0], i));
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("_contrib_sign_ste", [](const RefCall& c) {
  NDArray y(c.in[0].shape());
  for (int64_t i = 0; i < y.size(); ++i) {
    const float v = f(c.in[0], i);
    f(y, i) = v > 0 ? 1.f : (v < 0 ? -1.f : 0.f);
  }
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("_contrib_index_copy", [](const RefCall& c) {
  NDArray y = c.in[0].copy();
  const int64_t n = c.in[1].size();
  const int64_t row = c.in[2].size() / n;
  for (int64_t i = 0; i < n; ++i) {
    const auto r = static_cast<int64_t>(f(c.in[1], i));
    for (int64_t j = 0; j < row; ++j) f(y, r * row + j) = f(c.in[2], i * row + j);
  }
  return std::vector<NDArray>{y};
});

// Interleaved attention matmuls, straight from the documented reshape/transpose recipes.
int64_t heads(const RefCall& c) { return std::stoll(c.attrs.dict.at("heads")); }
// Element (l, b, h, slot, d) of a (L, B, H*S*D) tensor.
float at5(const NDArray& a, int64_t H, int64_t S, int64_t l, int64_t b, int64_t h, int64_t s,
          int64_t d) {
  const Shape& sh = a.shape();
  const int64_t D = sh[2] / H / S;
  return a.data<float>()[((l * sh[1] + b) * H + h) * S * D + s * D + d];
}
NDArray qk(const NDArray& q, int64_t qs, int64_t qslot, const NDArray& k, int64_t ks,
           int64_t kslot, int64_t H) {
  const int64_t B = q.shape()[1], Lq = q.shape()[0], Lk = k.shape()[0];
  const int64_t D = q.shape()[2] / H / qs;
  NDArray y(Shape{B * H, Lq, Lk});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t j = 0; j < Lk; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += at5(q, H, qs, i, b, h, qslot, d) * at5(k, H, ks, j, b, h, kslot, d);
          f(y, ((b * H + h) * Lq + i) * Lk + j) = static_cast<float>(s / std::sqrt(double(D)));
        }
  return y;
}
NDArray valatt(const NDArray& v, int64_t vs, int64_t vslot, const NDArray& att, int64_t H) {
  const int64_t B = v.shape()[1], Lk = v.shape()[0], Lq = att.shape()[1];
  const int64_t D = v.shape()[2] / H / vs;
  NDArray y(Shape{Lq, B, H * D});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < Lq; ++i)
        for (int64_t d = 0; d < D; ++d) {
          double s = 0;
          for (int64_t j = 0; j < Lk; ++j)
            s += f(att, ((b * H + h) * Lq + i) * Lk + j) * at5(v, H, vs, j, b, h, vslot, d);
          f(y, ((i * B + b) * H + h) * D + d) = static_cast<float>(s);
        }
  return y;
}
LOOM_OP_REFERENCE("_contrib_interleaved_matmul_selfatt_qk", [](const RefCall& c) {
  return std::vector<NDArray>{qk(c.in[0], 3, 0, c.in[0], 3, 1, heads(c))};
});
LOOM_OP_REFERENCE("_contrib_interleaved_matmul_selfatt_valatt", [](const RefCall& c) {
  return std::vector<NDArray>{valatt(c.in[0], 3, 2, c.in[1], heads(c))};
});
LOOM_OP_REFERENCE("_contrib_interleaved_matmul_encdec_qk", [](const RefCall& c) {
  return std::vector<NDArray>{qk(c.in[0], 1, 0, c.in[1], 2, 0, heads(c))};
});
LOOM_OP_REFERENCE("_contrib_interleaved_matmul_encdec_valatt", [](const RefCall& c) {
  return std::vector<NDArray>{valatt(c.in[0], 2, 1, c.in[1], heads(c))};
});

// Gradient multiplier: the gradient is the head gradient times the scalar; the STEs pass it.
TEST(OpsExtra, GradientMultiplierAndSte) {
  for (const auto& [op, scale] : std::vector<std::pair<std::string, float>>{
           {"_contrib_gradientmultiplier", -3.f}, {"_contrib_round_ste", 1.f},
           {"_contrib_sign_ste", 1.f}}) {
    Attrs at;
    if (op == "_contrib_gradientmultiplier") at["scalar"] = "-3";
    ImperativeOp inst(op, at, {Shape{4}});
    NDArray x(Shape{4});
    const float xs[] = {-1.5f, 0.4f, 2.5f, 0.f};
    for (int i = 0; i < 4; ++i) f(x, i) = xs[i];
    std::vector<NDArray> in{x};
    auto out = inst.forward(in, true);
    NDArray g = NDArray::full(Shape{4}, 2.f);
    std::vector<NDArray> grad{NDArray::zeros(Shape{4})};
    std::vector<Req> req{Req::kWrite};
    inst.backward({g}, in, out, req, grad, true);
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(f(grad[0], i), 2.f * scale) << op;
    if (op == "_contrib_round_ste") {
      // MXNet rounds half away from zero.
      EXPECT_FLOAT_EQ(f(out[0], 0), -2.f);
      EXPECT_FLOAT_EQ(f(out[0], 2), 3.f);
    }
  }
}

// cumsum's gradient is the reverse running sum of the head gradient.
TEST(OpsExtra, CumsumGradient) {
  ImperativeOp inst("cumsum", {{"axis", "0"}}, {Shape{4}});
  NDArray x = NDArray::full(Shape{4}, 1.f);
  std::vector<NDArray> in{x};
  auto out = inst.forward(in, false);
  EXPECT_FLOAT_EQ(f(out[0], 3), 4.f);
  NDArray g(Shape{4});
  for (int i = 0; i < 4; ++i) f(g, i) = static_cast<float>(i + 1);
  std::vector<NDArray> grad{NDArray::zeros(Shape{4})};
  std::vector<Req> req{Req::kWrite};
  inst.backward({g}, in, out, req, grad, false);
  const float e[] = {10, 9, 7, 4};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(f(grad[0], i), e[i]);
}

}  // namespace
}  // namespace loom::test
