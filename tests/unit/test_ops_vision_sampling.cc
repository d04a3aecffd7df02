// Sampling and window operators (GridGenerator, BilinearSampler, SpatialTransformer,
// Correlation, AdaptiveAvgPooling2D, BilinearResize2D, im2col, col2im, the deformable
// convolutions): naive references for the op sweep (written from the definitions, one output
// element at a time) and hand-checked values, including MXNet 1.9.1's outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"
#include "tests/unit/vision_test_util.h"

namespace loom::test {
namespace {

using namespace vision_test;

// ---------------------------------------------------------------- grids and sampling
// Normalised source grid (N, 2, H, W) of an affine matrix (N, 6).
NDArray affine_grid(const NDArray& theta, int64_t H, int64_t W) {
  const int64_t N = theta.shape()[0];
  NDArray g({N, 2, H, W});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) {
        const double xt = -1 + w * 2.0 / (W - 1), yt = -1 + h * 2.0 / (H - 1);
        for (int k = 0; k < 2; ++k)
          g.data<float>()[((n * 2 + k) * H + h) * W + w] =
              static_cast<float>(theta.at(n * 6 + k * 3) * xt + theta.at(n * 6 + k * 3 + 1) * yt +
                                 theta.at(n * 6 + k * 3 + 2));
      }
  return g;
}
// Bilinear sampling of x (N, C, H, W) at grid (N, 2, OH, OW), zero outside.
NDArray sample(const NDArray& x, const NDArray& g) {
  const Shape &s = x.shape(), &gs = g.shape();
  NDArray y({s[0], s[1], gs[2], gs[3]});
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t h = 0; h < gs[2]; ++h)
        for (int64_t w = 0; w < gs[3]; ++w) {
          const double xs = (at4(g, n, 0, h, w) + 1) * (s[3] - 1) / 2;
          const double ys = (at4(g, n, 1, h, w) + 1) * (s[2] - 1) / 2;
          const double x0 = std::floor(xs), y0 = std::floor(ys);
          double v = 0;
          for (int dy = 0; dy < 2; ++dy)
            for (int dx = 0; dx < 2; ++dx) {
              const int64_t yy = static_cast<int64_t>(y0) + dy, xx = static_cast<int64_t>(x0) + dx;
              if (yy < 0 || yy >= s[2] || xx < 0 || xx >= s[3]) continue;
              v += (1 - std::fabs(ys - yy)) * (1 - std::fabs(xs - xx)) * at4(x, n, c, yy, xx);
            }
          y.data<float>()[((n * s[1] + c) * gs[2] + h) * gs[3] + w] = static_cast<float>(v);
        }
  return y;
}

std::vector<NDArray> ref_gridgen(const RefCall& c) {
  const NDArray& x = c.in[0];
  if (c.attrs.dict.at("transform_type") == "affine") {
    const Shape t = parse_shape(c.attrs.dict.at("target_shape"));
    return {affine_grid(x, t[0], t[1])};
  }
  const Shape& s = x.shape();
  NDArray y(s);
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t k = 0; k < 2; ++k)
      for (int64_t h = 0; h < s[2]; ++h)
        for (int64_t w = 0; w < s[3]; ++w) {
          const int64_t i = ((n * 2 + k) * s[2] + h) * s[3] + w;
          const double base = k == 0 ? w : h, half = ((k == 0 ? s[3] : s[2]) - 1) / 2.0;
          y.data<float>()[i] = static_cast<float>((x.at(i) + base) / half - 1);
        }
  return {y};
}
LOOM_OP_REFERENCE("GridGenerator", ref_gridgen);
LOOM_OP_REFERENCE("BilinearSampler",
                  [](const RefCall& c) { return std::vector<NDArray>{sample(c.in[0], c.in[1])}; });
LOOM_OP_REFERENCE("SpatialTransformer", [](const RefCall& c) {
  const Shape t = parse_shape(c.attrs.dict.at("target_shape"));
  return std::vector<NDArray>{sample(c.in[0], affine_grid(c.in[1], t[0], t[1]))};
});

// ---------------------------------------------------------------- Correlation
std::vector<NDArray> ref_corr(const RefCall& c) {
  const NDArray &a = c.in[0], &b = c.in[1];
  const Shape& s = a.shape();
  auto p = [&](const char* k, const char* d) { return parse_int(attr(c.attrs.dict, k, d)); };
  const int64_t K = p("kernel_size", "1"), md = p("max_displacement", "1"), s1 = p("stride1", "1"),
                s2 = p("stride2", "1"), pad = p("pad_size", "0");
  const bool mul = parse_bool(attr(c.attrs.dict, "is_multiply", "True"));
  const Shape& o = c.out_shapes[0];
  const int64_t R = md / s2, D = 2 * R + 1;
  auto padded = [&](const NDArray& x, int64_t n, int64_t ch, int64_t h, int64_t w) {
    h -= pad, w -= pad;
    return h < 0 || h >= s[2] || w < 0 || w >= s[3] ? 0.0 : at4(x, n, ch, h, w);
  };
  NDArray y(o);
  for (int64_t n = 0; n < o[0]; ++n)
    for (int64_t d = 0; d < o[1]; ++d)
      for (int64_t i = 0; i < o[2]; ++i)
        for (int64_t j = 0; j < o[3]; ++j) {
          const int64_t x1 = j * s1 + md, y1 = i * s1 + md;
          const int64_t x2 = x1 + (d % D - R) * s2, y2 = y1 + (d / D - R) * s2;
          double acc = 0;
          for (int64_t h = 0; h < K; ++h)
            for (int64_t w = 0; w < K; ++w)
              for (int64_t ch = 0; ch < s[1]; ++ch) {
                const double u = padded(a, n, ch, y1 + h, x1 + w),
                             v = padded(b, n, ch, y2 + h, x2 + w);
                acc += mul ? u * v : std::fabs(u - v);
              }
          y.data<float>()[((n * o[1] + d) * o[2] + i) * o[3] + j] =
              static_cast<float>(acc / double(K * K * s[1]));
        }
  return {y};
}
LOOM_OP_REFERENCE("Correlation", ref_corr);

// ---------------------------------------------------------------- resizing
std::vector<NDArray> ref_adaptive(const RefCall& c) {
  const NDArray& x = c.in[0];
  const Shape &s = x.shape(), &o = c.out_shapes[0];
  NDArray y(o);
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t ch = 0; ch < s[1]; ++ch)
      for (int64_t i = 0; i < o[2]; ++i)
        for (int64_t j = 0; j < o[3]; ++j) {
          const int64_t hs = i * s[2] / o[2], he = ((i + 1) * s[2] + o[2] - 1) / o[2];
          const int64_t ws = j * s[3] / o[3], we = ((j + 1) * s[3] + o[3] - 1) / o[3];
          double acc = 0;
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) acc += at4(x, n, ch, h, w);
          y.data<float>()[((n * o[1] + ch) * o[2] + i) * o[3] + j] =
              static_cast<float>(acc / double((he - hs) * (we - ws)));
        }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_AdaptiveAvgPooling2D", ref_adaptive);

std::vector<NDArray> ref_resize(const RefCall& c) {
  const NDArray& x = c.in[0];
  const Shape &s = x.shape(), &o = c.out_shapes[0];
  const bool align = parse_bool(attr(c.attrs.dict, "align_corners", "True"));
  if (s[2] == o[2] && s[3] == o[3]) return {x.copy()};
  auto src = [&](int64_t in, int64_t out, int64_t i) {
    if (out <= 1) return 0.0;
    if (align) return double(in - 1) / double(out - 1) * i;
    return std::max(0.0, double(in) / double(out) * (i + 0.5) - 0.5);
  };
  NDArray y(o);
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t ch = 0; ch < s[1]; ++ch)
      for (int64_t i = 0; i < o[2]; ++i)
        for (int64_t j = 0; j < o[3]; ++j) {
          const double hr = src(s[2], o[2], i), wr = src(s[3], o[3], j);
          const int64_t h0 = static_cast<int64_t>(hr), w0 = static_cast<int64_t>(wr);
          const int64_t h1 = std::min(h0 + 1, s[2] - 1), w1 = std::min(w0 + 1, s[3] - 1);
          const double lh = hr - h0, lw = wr - w0;
          y.data<float>()[((n * o[1] + ch) * o[2] + i) * o[3] + j] = static_cast<float>(
              (1 - lh) * ((1 - lw) * at4(x, n, ch, h0, w0) + lw * at4(x, n, ch, h0, w1)) +
              lh * ((1 - lw) * at4(x, n, ch, h1, w0) + lw * at4(x, n, ch, h1, w1)));
        }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_BilinearResize2D", ref_resize);

// ---------------------------------------------------------------- im2col / col2im (2-D or 1-D)
struct Win {
  std::vector<int64_t> k, st, dil, pad;
};
Win win_of(const Attrs& d) {
  Win w;
  const Shape k = parse_shape(d.at("kernel"));
  auto get = [&](const char* name, int64_t def) {
    std::vector<int64_t> v;
    const Shape s = parse_shape(attr(d, name, "()"));
    for (int i = 0; i < k.ndim(); ++i) v.push_back(s.ndim() ? s[i] : def);
    return v;
  };
  for (int i = 0; i < k.ndim(); ++i) w.k.push_back(k[i]);
  w.st = get("stride", 1), w.dil = get("dilate", 1), w.pad = get("pad", 0);
  return w;
}
// Calls fn(image flat index or -1, column flat index) for images (N, C, *sp) (1-D or 2-D).
template <class Fn>
void windows(const Win& w, int64_t N, int64_t C, std::vector<int64_t> sp, Fn fn) {
  if (sp.size() == 1) {  // as 2-D with a unit height
    sp.insert(sp.begin(), 1);
  }
  Win v = w;
  if (v.k.size() == 1) {
    v.k.insert(v.k.begin(), 1), v.st.insert(v.st.begin(), 1);
    v.dil.insert(v.dil.begin(), 1), v.pad.insert(v.pad.begin(), 0);
  }
  const int64_t oh = (sp[0] + 2 * v.pad[0] - v.dil[0] * (v.k[0] - 1) - 1) / v.st[0] + 1;
  const int64_t ow = (sp[1] + 2 * v.pad[1] - v.dil[1] * (v.k[1] - 1) - 1) / v.st[1] + 1;
  int64_t col = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t a = 0; a < v.k[0]; ++a)
        for (int64_t b = 0; b < v.k[1]; ++b)
          for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j, ++col) {
              const int64_t h = i * v.st[0] - v.pad[0] + a * v.dil[0];
              const int64_t x = j * v.st[1] - v.pad[1] + b * v.dil[1];
              const bool in = h >= 0 && h < sp[0] && x >= 0 && x < sp[1];
              fn(in ? ((n * C + c) * sp[0] + h) * sp[1] + x : -1, col);
            }
}
std::vector<int64_t> spatial(const Shape& s) {
  std::vector<int64_t> v;
  for (int d = 2; d < s.ndim(); ++d) v.push_back(s[d]);
  return v;
}
LOOM_OP_REFERENCE("im2col", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  NDArray y = NDArray::zeros(c.out_shapes[0]);
  windows(win_of(c.attrs.dict), s[0], s[1], spatial(s), [&](int64_t i, int64_t k) {
    if (i >= 0) y.data<float>()[k] = static_cast<float>(c.in[0].at(i));
  });
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("col2im", [](const RefCall& c) {
  const Shape& o = c.out_shapes[0];
  NDArray y = NDArray::zeros(o);
  windows(win_of(c.attrs.dict), o[0], o[1], spatial(o), [&](int64_t i, int64_t k) {
    if (i >= 0) y.data<float>()[i] += static_cast<float>(c.in[0].at(k));
  });
  return std::vector<NDArray>{y};
});

// ---------------------------------------------------------------- deformable convolutions
// Output (n, f, y, x) = bias + sum over the group's channels and taps of
// weight * mask * bilinear(data at the displaced tap), by the definition.
std::vector<NDArray> ref_deform(const RefCall& c, bool mod) {
  const Attrs& d = c.attrs.dict;
  const NDArray &x = c.in[0], &off = c.in[1];
  const NDArray& w = c.in[mod ? 3 : 2];
  const bool bias = !parse_bool(attr(d, "no_bias", "False"));
  const Shape k = parse_shape(d.at("kernel"));
  auto pair = [&](const char* name, int64_t def, int i) {
    const Shape s = parse_shape(attr(d, name, "()"));
    return s.ndim() ? s[i] : def;
  };
  const int64_t G = parse_int(attr(d, "num_group", "1")),
                DG = parse_int(attr(d, "num_deformable_group", "1"));
  const Shape &xs = x.shape(), &o = c.out_shapes[0];
  const int64_t H = xs[2], W = xs[3], C = xs[1], K = k[0] * k[1];
  auto sample = [&](int64_t n, int64_t ch, double h, double ww) {
    if (!mod) {
      if (!(h >= 0 && ww >= 0 && h < H && ww < W)) return 0.0;
      int64_t hl = static_cast<int64_t>(std::floor(h)), wl = static_cast<int64_t>(std::floor(ww));
      int64_t hh = hl + 1, wh = wl + 1;
      if (hl >= H - 1) hh = H - 1, h = static_cast<double>(hl);
      if (wl >= W - 1) wh = W - 1, ww = static_cast<double>(wl);
      const double lh = h - hl, lw = ww - wl;
      return (1 - lh) * (1 - lw) * at4(x, n, ch, hl, wl) + (1 - lh) * lw * at4(x, n, ch, hl, wh) +
             lh * (1 - lw) * at4(x, n, ch, hh, wl) + lh * lw * at4(x, n, ch, hh, wh);
    }
    if (!(h > -1 && ww > -1 && h < H && ww < W)) return 0.0;
    double v = 0;
    const double h0 = std::floor(h), w0 = std::floor(ww);
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        const int64_t yy = static_cast<int64_t>(h0) + a, xx = static_cast<int64_t>(w0) + b;
        if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
        v += (1 - std::fabs(h - yy)) * (1 - std::fabs(ww - xx)) * at4(x, n, ch, yy, xx);
      }
    return v;
  };
  NDArray y(o);
  const int64_t Fg = o[1] / G, Cg = C / G, Cd = C / DG;
  for (int64_t n = 0; n < o[0]; ++n)
    for (int64_t f = 0; f < o[1]; ++f)
      for (int64_t yy = 0; yy < o[2]; ++yy)
        for (int64_t xx = 0; xx < o[3]; ++xx) {
          double acc = bias ? c.in[mod ? 4 : 3].at(f) : 0.0;
          for (int64_t cg = 0; cg < Cg; ++cg) {
            const int64_t ch = (f / Fg) * Cg + cg, dg = ch / Cd;
            for (int64_t t = 0; t < K; ++t) {
              const int64_t i = t / k[1], j = t % k[1];
              const double dh = at4(off, n, dg * 2 * K + 2 * t, yy, xx);
              const double dw = at4(off, n, dg * 2 * K + 2 * t + 1, yy, xx);
              const double m = mod ? at4(c.in[2], n, dg * K + t, yy, xx) : 1.0;
              const double h =
                  yy * pair("stride", 1, 0) - pair("pad", 0, 0) + i * pair("dilate", 1, 0) + dh;
              const double ww =
                  xx * pair("stride", 1, 1) - pair("pad", 0, 1) + j * pair("dilate", 1, 1) + dw;
              acc += w.at((f * Cg + cg) * K + t) * m * sample(n, ch, h, ww);
            }
          }
          y.data<float>()[((n * o[1] + f) * o[2] + yy) * o[3] + xx] = static_cast<float>(acc);
        }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_DeformableConvolution",
                  [](const RefCall& c) { return ref_deform(c, false); });
LOOM_OP_REFERENCE("_contrib_ModulatedDeformableConvolution",
                  [](const RefCall& c) { return ref_deform(c, true); });

// ---------------------------------------------------------------- hand-checked values
// MXNet 1.9.1's check_bilinear_resize_align_corners_op.
TEST(OpsVision, BilinearResizeAlignCornersMatchesMXNet) {
  NDArray x = from({1, 1, 3, 2}, {64, 32, 32, 64, 50, 100});
  ImperativeOp a("_contrib_BilinearResize2D",
                 {{"height", "6"}, {"width", "4"}, {"align_corners", "False"}}, {{1, 1, 3, 2}});
  expect_near(a.forward({x})[0], {64.000, 56.000, 40.000, 32.000, 56.000, 52.000, 44.000, 40.000,
                                  40.000, 44.000, 52.000, 56.000, 36.500, 45.625, 63.875, 73.000,
                                  45.500, 56.875, 79.625, 91.000, 50.000, 62.500, 87.500, 100.000},
              1e-3);
  ImperativeOp b("_contrib_BilinearResize2D",
                 {{"height", "6"}, {"width", "4"}, {"align_corners", "True"}}, {{1, 1, 3, 2}});
  expect_near(b.forward({x})[0], {64.000, 53.333, 42.667, 32.000, 51.200, 49.067, 46.933, 44.800,
                                  38.400, 44.800, 51.200, 57.600, 35.600, 47.467, 59.333, 71.200,
                                  42.800, 57.067, 71.333, 85.600, 50.000, 66.667, 83.333, 100.000},
              1e-3);
}

TEST(OpsVision, GridGeneratorIdentityAffineIsThePixelGrid) {
  ImperativeOp op("GridGenerator", {{"transform_type", "affine"}, {"target_shape", "(2, 3)"}},
                  {{1, 6}});
  auto y = op.forward({from({1, 6}, {1, 0, 0, 0, 1, 0})});
  expect_near(y[0], {-1, 0, 1, -1, 0, 1, -1, -1, -1, 1, 1, 1});
  EXPECT_EQ(op.out_shapes()[1], (Shape{3, 6}));
}

TEST(OpsVision, CorrelationKernelSizeErrors) {
  // MXNet's test_invalid_kernel_size / test_valid_kernel_size.
  EXPECT_THROW(
      ImperativeOp("Correlation", {{"kernel_size", "28"}}, {{1, 1, 28, 28}, {1, 1, 28, 28}}),
      Error);
  EXPECT_NO_THROW(
      ImperativeOp("Correlation", {{"kernel_size", "9"}}, {{1, 1, 28, 28}, {1, 1, 28, 28}}));
  EXPECT_THROW(ImperativeOp("Correlation", {{"kernel_size", "2"}}, {{1, 1, 8, 8}, {1, 1, 8, 8}}),
               Error);
}

TEST(OpsVision, Col2imOfOnesCountsCoverage) {
  ImperativeOp op("col2im", {{"output_size", "(3, 3)"}, {"kernel", "(2, 2)"}}, {{1, 4, 4}});
  auto y = op.forward({NDArray::full({1, 4, 4}, 1.f)});
  expect_near(y[0], {1, 2, 1, 2, 4, 2, 1, 2, 1});
}

TEST(OpsVision, Float64Correlation) {
  ImperativeOp op("Correlation", {{"max_displacement", "0"}}, {{1, 1, 2, 2}, {1, 1, 2, 2}},
                  {DType::kFloat64, DType::kFloat64});
  NDArray a({1, 1, 2, 2}, DType::kFloat64), b({1, 1, 2, 2}, DType::kFloat64);
  for (int i = 0; i < 4; ++i) a.data<double>()[i] = i + 1, b.data<double>()[i] = 2;
  auto y = op.forward({a, b});
  ASSERT_EQ(y[0].dtype(), DType::kFloat64);
  expect_near(y[0], {2, 4, 6, 8});
}

}  // namespace
}  // namespace loom::test
