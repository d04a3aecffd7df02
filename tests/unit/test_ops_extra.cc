// cumsum, gradientmultiplier, round_ste, sign_ste, index_copy, interleaved attention matmuls:
// naive references for the op sweep, written from MXNet 1.9.1's documented semantics, and a
// few values MXNet gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

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

// Image ops on (H, W, C) / (N, H, W, C).
LOOM_OP_REFERENCE("_image_crop", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const int nd = s.ndim();
  const int64_t x = std::stoll(c.attrs.dict.at("x")), y = std::stoll(c.attrs.dict.at("y"));
  NDArray out(c.out_shapes[0]);
  const Shape& o = out.shape();
  const int64_t N = nd == 4 ? s[0] : 1, H = s[nd - 3], W = s[nd - 2], C = s[nd - 1];
  const int64_t h = o[nd - 3], w = o[nd - 2];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j)
        for (int64_t k = 0; k < C; ++k)
          f(out, ((n * h + i) * w + j) * C + k) = f(c.in[0], ((n * H + i + y) * W + j + x) * C + k);
  return std::vector<NDArray>{out};
});
NDArray flip(const NDArray& a, bool lr) {
  const Shape& s = a.shape();
  NDArray y(s);
  for (int64_t i = 0; i < s[0]; ++i)
    for (int64_t j = 0; j < s[1]; ++j)
      for (int64_t k = 0; k < s[2]; ++k) {
        const int64_t si = lr ? i : s[0] - 1 - i, sj = lr ? s[1] - 1 - j : j;
        f(y, (i * s[1] + j) * s[2] + k) = f(a, (si * s[1] + sj) * s[2] + k);
      }
  return y;
}
LOOM_OP_REFERENCE("_image_flip_left_right",
                  [](const RefCall& c) { return std::vector<NDArray>{flip(c.in[0], true)}; });
LOOM_OP_REFERENCE("_image_flip_top_bottom",
                  [](const RefCall& c) { return std::vector<NDArray>{flip(c.in[0], false)}; });
LOOM_OP_REFERENCE("_image_adjust_lighting", [](const RefCall& c) {
  std::string t = c.attrs.dict.at("alpha");
  for (char& ch : t)
    if (ch == '(' || ch == ')' || ch == ',') ch = ' ';
  std::istringstream is(t);
  double a[3];
  is >> a[0] >> a[1] >> a[2];
  const double eig[3][3] = {{55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009},
                            {55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140},
                            {55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203}};
  NDArray y = c.in[0].copy();
  const int64_t C = c.in[0].shape()[2];
  if (C == 3)
    for (int64_t i = 0; i < y.size(); ++i) {
      const int64_t k = i % 3;
      f(y, i) += static_cast<float>(eig[k][0] * a[0] + eig[k][1] * a[1] + eig[k][2] * a[2]);
    }
  return std::vector<NDArray>{y};
});
// OpenCV's cv::resize, INTER_LINEAR (half-pixel centres, clamped) or INTER_NEAREST (floor).
LOOM_OP_REFERENCE("_image_resize", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const int nd = s.ndim();
  const bool nearest = attr(c.attrs.dict, "interp", "1") == "0";
  NDArray out(c.out_shapes[0]);
  const Shape& o = out.shape();
  const int64_t N = nd == 4 ? s[0] : 1, H = s[nd - 3], W = s[nd - 2], C = s[nd - 1];
  const int64_t h = o[nd - 3], w = o[nd - 2];
  auto coord = [&](int64_t d, int64_t src, int64_t dst, int64_t* i0, int64_t* i1, double* fr) {
    const double sc = double(src) / double(dst);
    if (nearest) {
      *i0 = *i1 = std::min<int64_t>(static_cast<int64_t>(std::floor(d * sc)), src - 1);
      *fr = 0;
      return;
    }
    double x = (d + 0.5) * sc - 0.5;
    int64_t k = static_cast<int64_t>(std::floor(x));
    x -= double(k);
    if (k < 0) { k = 0; x = 0; }
    if (k >= src - 1) { k = src - 1; x = 0; }
    *i0 = k;
    *i1 = std::min(k + 1, src - 1);
    *fr = x;
  };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < h; ++i)
      for (int64_t j = 0; j < w; ++j) {
        int64_t y0, y1, x0, x1;
        double fy, fx;
        coord(i, H, h, &y0, &y1, &fy);
        coord(j, W, w, &x0, &x1, &fx);
        for (int64_t k = 0; k < C; ++k) {
          auto at = [&](int64_t yy, int64_t xx) {
            return double(f(c.in[0], ((n * H + yy) * W + xx) * C + k));
          };
          f(out, ((n * h + i) * w + j) * C + k) = static_cast<float>(
              (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x1)) +
              fy * ((1 - fx) * at(y1, x0) + fx * at(y1, x1)));
        }
      }
  return std::vector<NDArray>{out};
});

// Random image ops on their deterministic samples (equal factors, alpha_std 0, flips of a
// constant image).
NDArray same_image(const RefCall& c) { return c.in[0].copy(); }
LOOM_OP_REFERENCE("_image_random_flip_left_right",
                  [](const RefCall& c) { return std::vector<NDArray>{same_image(c)}; });
LOOM_OP_REFERENCE("_image_random_flip_top_bottom",
                  [](const RefCall& c) { return std::vector<NDArray>{same_image(c)}; });
LOOM_OP_REFERENCE("_image_random_lighting",
                  [](const RefCall& c) { return std::vector<NDArray>{same_image(c)}; });
LOOM_OP_REFERENCE("_image_random_brightness", [](const RefCall& c) {
  const float a = std::stof(c.attrs.dict.at("min_factor"));
  NDArray y = c.in[0].copy();
  for (int64_t i = 0; i < y.size(); ++i) f(y, i) *= a;
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("_image_random_contrast", [](const RefCall& c) {
  const double a = std::stod(c.attrs.dict.at("min_factor"));
  const int64_t C = c.in[0].shape()[2], len = c.in[0].size() / C;
  const double coef[3] = {0.299, 0.587, 0.114};
  double sum = 0;
  for (int64_t l = 0; l < len; ++l)
    for (int64_t k = 0; k < C; ++k) sum += f(c.in[0], l * C + k) * (C == 1 ? 1.0 : coef[k]);
  NDArray y = c.in[0].copy();
  for (int64_t i = 0; i < y.size(); ++i)
    f(y, i) = static_cast<float>(f(c.in[0], i) * a + (1 - a) * sum / double(len));
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("_image_random_saturation", [](const RefCall& c) {
  const double a = std::stod(c.attrs.dict.at("min_factor"));
  const int64_t C = c.in[0].shape()[2];
  NDArray y = c.in[0].copy();
  if (C == 3)
    for (int64_t i = 0; i < y.size(); ++i) {
      const double gray = f(c.in[0], (i / 3) * 3 + 2) * 0.114;  // MXNet 1.9.1's gray
      f(y, i) = static_cast<float>(gray * (1 - a) + f(c.in[0], i) * a);
    }
  return std::vector<NDArray>{y};
});

LOOM_OP_REFERENCE("_image_random_color_jitter",  // the sample's image is all zeros
                  [](const RefCall& c) { return std::vector<NDArray>{same_image(c)}; });
// Hue rotation through HLS (Python colorsys' formulas, in double).
double hls_v(double m1, double m2, double hue) {
  hue = hue - std::floor(hue);
  if (hue < 1.0 / 6) return m1 + (m2 - m1) * hue * 6.0;
  if (hue < 0.5) return m2;
  if (hue < 2.0 / 3) return m1 + (m2 - m1) * (2.0 / 3 - hue) * 6.0;
  return m1;
}
LOOM_OP_REFERENCE("_image_random_hue", [](const RefCall& c) {
  const double a = std::stod(c.attrs.dict.at("min_factor"));
  NDArray y = c.in[0].copy();
  if (c.in[0].shape()[2] != 3) return std::vector<NDArray>{y};
  for (int64_t i = 0; i < y.size(); i += 3) {
    const double r = f(c.in[0], i) / 255.0, g = f(c.in[0], i + 1) / 255.0,
                 b = f(c.in[0], i + 2) / 255.0;
    const double mx = std::max({r, g, b}), mn = std::min({r, g, b});
    const double l = (mx + mn) / 2;
    if (mx - mn < 1e-7) continue;
    const double s = l <= 0.5 ? (mx - mn) / (mx + mn) : (mx - mn) / (2.0 - mx - mn);
    const double rc = (mx - r) / (mx - mn), gc = (mx - g) / (mx - mn), bc = (mx - b) / (mx - mn);
    double h = r == mx ? bc - gc : (g == mx ? 2.0 + rc - bc : 4.0 + gc - rc);
    h = h / 6.0 + a;
    const double m2 = l <= 0.5 ? l * (1.0 + s) : l + s - l * s, m1 = 2.0 * l - m2;
    f(y, i) = static_cast<float>(255.0 * hls_v(m1, m2, h + 1.0 / 3));
    f(y, i + 1) = static_cast<float>(255.0 * hls_v(m1, m2, h));
    f(y, i + 2) = static_cast<float>(255.0 * hls_v(m1, m2, h - 1.0 / 3));
  }
  return std::vector<NDArray>{y};
});

// Gradient multiplier: the gradient is the head gradient times the scalar; the STEs pass it.
TEST(OpsExtra, RandomFlipStatistics) {
  // Over many calls each of the two outcomes (flipped, unchanged) appears, nothing else.
  ImperativeOp inst("_image_random_flip_left_right", {}, {Shape{1, 2, 1}});
  NDArray x(Shape{1, 2, 1});
  f(x, 0) = 1.f;
  f(x, 1) = 2.f;
  int flipped = 0;
  const int n = 400;
  for (int t = 0; t < n; ++t) {
    auto out = inst.forward({x}, true);
    const bool fl = f(out[0], 0) == 2.f && f(out[0], 1) == 1.f;
    const bool same = f(out[0], 0) == 1.f && f(out[0], 1) == 2.f;
    ASSERT_TRUE(fl || same);
    flipped += fl;
  }
  EXPECT_GT(flipped, n / 2 - 60);
  EXPECT_LT(flipped, n / 2 + 60);
}

TEST(OpsExtra, ColorJitterWithinLimits) {
  // Brightness only: one factor 1 + U(-0.3, 0.3) per call; hue leaves a gray image alone.
  ImperativeOp inst("_image_random_color_jitter",
                    {{"brightness", "0.3"}, {"contrast", "0"}, {"saturation", "0"}, {"hue", "0.4"}},
                    {Shape{2, 2, 3}});
  NDArray x = NDArray::full(Shape{2, 2, 3}, 100.f);
  double lo = 1e9, hi = 0;
  for (int t = 0; t < 200; ++t) {
    auto out = inst.forward({x}, true);
    const float v = f(out[0], 0);
    for (int64_t i = 1; i < 12; ++i) EXPECT_NEAR(f(out[0], i), v, 1e-3);
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
  }
  EXPECT_GE(lo, 70.0 - 1e-3);
  EXPECT_LE(hi, 130.0 + 1e-3);
  EXPECT_LT(lo, 80.0);
  EXPECT_GT(hi, 120.0);
}

TEST(OpsExtra, RandomBrightnessWithinFactors) {
  ImperativeOp inst("_image_random_brightness", {{"min_factor", "0.5"}, {"max_factor", "1.5"}},
                    {Shape{1, 1, 3}});
  NDArray x = NDArray::full(Shape{1, 1, 3}, 2.f);
  double lo = 9, hi = 0;
  for (int t = 0; t < 300; ++t) {
    auto out = inst.forward({x}, true);
    const float v = f(out[0], 0);
    EXPECT_FLOAT_EQ(f(out[0], 1), v);  // one factor per call
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
  }
  EXPECT_GE(lo, 1.0);
  EXPECT_LE(hi, 3.0);
  EXPECT_LT(lo, 1.2);
  EXPECT_GT(hi, 2.8);
}

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

// Errors name the node and op and say what is wrong.
void expect_error(const std::string& op, const Attrs& at, const std::vector<Shape>& in,
                  const std::string& part) {
  try {
    ImperativeOp inst(op, at, in);
    ADD_FAILURE() << op << ": no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(op), std::string::npos) << m;
    EXPECT_NE(m.find(part), std::string::npos) << m;
  }
}
TEST(OpsExtra, Errors) {
  expect_error("_contrib_index_copy", {}, {Shape{5, 3}, Shape{2}, Shape{3, 3}}, "index_vector");
  expect_error("_contrib_index_copy", {}, {Shape{5, 3}, Shape{3}, Shape{3, 4}}, "new_tensor");
  expect_error("_contrib_interleaved_matmul_selfatt_qk", {{"heads", "4"}}, {Shape{3, 2, 18}},
               "divisible");
  expect_error("_contrib_interleaved_matmul_encdec_qk", {{"heads", "2"}},
               {Shape{3, 2, 4}, Shape{5, 2, 6}}, "keys_values");
  expect_error("_image_crop", {{"x", "2"}, {"y", "0"}, {"width", "3"}, {"height", "2"}},
               {Shape{4, 4, 3}}, "x + width");
  expect_error("_image_flip_left_right", {}, {Shape{4, 4, 2}}, "channel");
  expect_error("_image_resize", {{"size", "(4, 4)"}, {"interp", "2"}}, {Shape{4, 4, 3}}, "interp");
  expect_error("_np_cumsum", {{"axis", "2"}}, {Shape{4, 4}}, "axis");
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
