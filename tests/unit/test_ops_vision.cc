// Vision operators (ROIPooling, ROIAlign, GridGenerator, BilinearSampler,
// SpatialTransformer, Correlation, AdaptiveAvgPooling2D, BilinearResize2D, im2col, col2im):
// naive references for the op sweep (written from the definitions, one output element at a
// time) and hand-checked values, including MXNet 1.9.1's outputs.
#include <gtest/gtest.h>

#include <array>
#include <cfloat>
#include <cmath>

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
std::vector<float> values(const NDArray& a) {
  std::vector<float> v;
  for (int64_t i = 0; i < a.size(); ++i) v.push_back(static_cast<float>(a.at(i)));
  return v;
}
void expect_near(const NDArray& a, const std::vector<float>& v, double tol = 1e-4) {
  ASSERT_EQ(a.size(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(a.at(static_cast<int64_t>(i)), v[i], tol) << i;
}
// x[n, c, h, w] of a 4-D array.
double at4(const NDArray& x, int64_t n, int64_t c, int64_t h, int64_t w) {
  const Shape& s = x.shape();
  return x.at(((n * s[1] + c) * s[2] + h) * s[3] + w);
}

// ---------------------------------------------------------------- ROIPooling
std::vector<NDArray> ref_roipool(const RefCall& c) {
  const NDArray &x = c.in[0], &r = c.in[1];
  const Shape& s = x.shape();
  const Shape ps = parse_shape(c.attrs.dict.at("pooled_size"));
  const double sc = parse_float(c.attrs.dict.at("spatial_scale"));
  NDArray y(c.out_shapes[0]);
  int64_t o = 0;
  for (int64_t n = 0; n < r.shape()[0]; ++n)
    for (int64_t ch = 0; ch < s[1]; ++ch)
      for (int64_t ph = 0; ph < ps[0]; ++ph)
        for (int64_t pw = 0; pw < ps[1]; ++pw, ++o) {
          const int64_t b = static_cast<int64_t>(r.at(n * 5));
          auto rd = [&](int k) {
            return std::lround(static_cast<float>(r.at(n * 5 + k)) * static_cast<float>(sc));
          };
          const int64_t x1 = rd(1), y1 = rd(2), x2 = rd(3), y2 = rd(4);
          const double bh = std::max<int64_t>(y2 - y1 + 1, 1) / double(ps[0]);
          const double bw = std::max<int64_t>(x2 - x1 + 1, 1) / double(ps[1]);
          auto cl = [](int64_t v, int64_t hi) { return std::min(std::max<int64_t>(v, 0), hi); };
          const int64_t hs = cl(static_cast<int64_t>(std::floor(ph * bh)) + y1, s[2]);
          const int64_t he = cl(static_cast<int64_t>(std::ceil((ph + 1) * bh)) + y1, s[2]);
          const int64_t ws = cl(static_cast<int64_t>(std::floor(pw * bw)) + x1, s[3]);
          const int64_t we = cl(static_cast<int64_t>(std::ceil((pw + 1) * bw)) + x1, s[3]);
          double m = 0;
          if (b >= 0 && b < s[0] && he > hs && we > ws) {
            m = -DBL_MAX;
            for (int64_t h = hs; h < he; ++h)
              for (int64_t w = ws; w < we; ++w) m = std::max(m, at4(x, b, ch, h, w));
          }
          y.data<float>()[o] = static_cast<float>(m);
        }
  return {y};
}
LOOM_OP_REFERENCE("ROIPooling", ref_roipool);

// ---------------------------------------------------------------- ROIAlign
double bilinear_roialign(const NDArray& x, int64_t n, int64_t c, double y, double xx) {
  const int64_t H = x.shape()[2], W = x.shape()[3];
  if (y < -1.0 || y > H || xx < -1.0 || xx > W) return 0;
  y = std::max(y, 0.0), xx = std::max(xx, 0.0);
  int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(xx);
  int64_t yh = yl + 1, xh = xl + 1;
  if (yl >= H - 1) yl = yh = H - 1, y = static_cast<double>(yl);
  if (xl >= W - 1) xl = xh = W - 1, xx = static_cast<double>(xl);
  const double ly = y - yl, lx = xx - xl;
  return (1 - ly) * (1 - lx) * at4(x, n, c, yl, xl) + (1 - ly) * lx * at4(x, n, c, yl, xh) +
         ly * (1 - lx) * at4(x, n, c, yh, xl) + ly * lx * at4(x, n, c, yh, xh);
}
std::vector<NDArray> ref_roialign(const RefCall& c) {
  const NDArray &x = c.in[0], &r = c.in[1];
  const Shape& o = c.out_shapes[0];
  const double sc = parse_float(c.attrs.dict.at("spatial_scale"));
  const int64_t ratio = parse_int(attr(c.attrs.dict, "sample_ratio", "-1"));
  const bool ps = parse_bool(attr(c.attrs.dict, "position_sensitive", "False"));
  const bool al = parse_bool(attr(c.attrs.dict, "aligned", "False"));
  NDArray y = NDArray::zeros(o);
  for (int64_t n = 0; n < o[0]; ++n) {
    const int64_t b = static_cast<int64_t>(r.at(n * 5));
    if (b < 0 || b >= x.shape()[0]) continue;
    const double off = al ? 0.5 : 0;
    const double sw = r.at(n * 5 + 1) * sc - off, sh = r.at(n * 5 + 2) * sc - off;
    double rw = r.at(n * 5 + 3) * sc - off - sw, rh = r.at(n * 5 + 4) * sc - off - sh;
    if (!al) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / o[2], bw = rw / o[3];
    const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / o[2]));
    const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / o[3]));
    for (int64_t ch = 0; ch < o[1]; ++ch)
      for (int64_t ph = 0; ph < o[2]; ++ph)
        for (int64_t pw = 0; pw < o[3]; ++pw) {
          const int64_t cu = ps ? (ch * o[2] + ph) * o[3] + pw : ch;
          double s = 0;
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix)
              s += bilinear_roialign(x, b, cu, sh + ph * bh + (iy + .5) * bh / gh,
                                     sw + pw * bw + (ix + .5) * bw / gw);
          y.data<float>()[((n * o[1] + ch) * o[2] + ph) * o[3] + pw] =
              static_cast<float>(s / double(gh * gw));
        }
  }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_ROIAlign", ref_roialign);

// Rotated: the sample (xx, yy) relative to the ROI centre is rotated by theta.
std::vector<NDArray> ref_rroialign(const RefCall& c) {
  const NDArray &x = c.in[0], &r = c.in[1];
  const Shape& o = c.out_shapes[0];
  const double sc = parse_float(c.attrs.dict.at("spatial_scale"));
  const int64_t ratio = parse_int(attr(c.attrs.dict, "sampling_ratio", "-1"));
  NDArray y = NDArray::zeros(o);
  for (int64_t n = 0; n < o[0]; ++n) {
    const int64_t b = static_cast<int64_t>(r.at(n * 6));
    if (b < 0 || b >= x.shape()[0]) continue;
    const double cx = r.at(n * 6 + 1) * sc, cy = r.at(n * 6 + 2) * sc;
    const double rw = std::max(r.at(n * 6 + 3) * sc, 1.0), rh = std::max(r.at(n * 6 + 4) * sc, 1.0);
    const double th = r.at(n * 6 + 5) * M_PI / 180.0;
    const double bh = rh / o[2], bw = rw / o[3];
    const int64_t gh = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rh / o[2]));
    const int64_t gw = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(rw / o[3]));
    for (int64_t ch = 0; ch < o[1]; ++ch)
      for (int64_t ph = 0; ph < o[2]; ++ph)
        for (int64_t pw = 0; pw < o[3]; ++pw) {
          double s = 0;
          for (int64_t iy = 0; iy < gh; ++iy)
            for (int64_t ix = 0; ix < gw; ++ix) {
              const double yy = -rh / 2 + ph * bh + (iy + .5) * bh / gh;
              const double xx = -rw / 2 + pw * bw + (ix + .5) * bw / gw;
              s += bilinear_roialign(x, b, ch, yy * std::cos(th) - xx * std::sin(th) + cy,
                                     xx * std::cos(th) + yy * std::sin(th) + cx);
            }
          y.data<float>()[((n * o[1] + ch) * o[2] + ph) * o[3] + pw] =
              static_cast<float>(s / double(gh * gw));
        }
  }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_RROIAlign", ref_rroialign);

std::vector<NDArray> ref_psroi(const RefCall& c) {
  const NDArray &x = c.in[0], &r = c.in[1];
  const Shape &s = x.shape(), &o = c.out_shapes[0];
  const double sc = static_cast<float>(parse_float(c.attrs.dict.at("spatial_scale")));
  const int64_t P = o[2];
  int64_t G = parse_int(attr(c.attrs.dict, "group_size", "0"));
  if (G == 0) G = P;
  NDArray y = NDArray::zeros(o);
  for (int64_t n = 0; n < o[0]; ++n) {
    const int64_t b = static_cast<int64_t>(r.at(n * 5));
    const double sw = std::round(r.at(n * 5 + 1)) * sc, sh = std::round(r.at(n * 5 + 2)) * sc;
    const double ew = (std::round(r.at(n * 5 + 3)) + 1) * sc,
                 eh = (std::round(r.at(n * 5 + 4)) + 1) * sc;
    const double bw = std::max(ew - sw, 0.1) / P, bh = std::max(eh - sh, 0.1) / P;
    for (int64_t ct = 0; ct < o[1]; ++ct)
      for (int64_t ph = 0; ph < P; ++ph)
        for (int64_t pw = 0; pw < P; ++pw) {
          auto cl = [](double v, int64_t hi) {
            return std::min<int64_t>(std::max<int64_t>(static_cast<int64_t>(v), 0), hi);
          };
          const int64_t hs = cl(std::floor(ph * bh + sh), s[2]),
                        he = cl(std::ceil((ph + 1) * bh + sh), s[2]);
          const int64_t ws = cl(std::floor(pw * bw + sw), s[3]),
                        we = cl(std::ceil((pw + 1) * bw + sw), s[3]);
          if (he <= hs || we <= ws) continue;
          const int64_t ch = (ct * G + ph * G / P) * G + pw * G / P;
          double acc = 0;
          for (int64_t h = hs; h < he; ++h)
            for (int64_t w = ws; w < we; ++w) acc += at4(x, b, ch, h, w);
          y.data<float>()[((n * o[1] + ct) * P + ph) * P + pw] =
              static_cast<float>(acc / double((he - hs) * (we - ws)));
        }
  }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_PSROIPooling", ref_psroi);

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

// ---------------------------------------------------------------- DeformablePSROIPooling
std::vector<NDArray> ref_dpsroi(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const NDArray &x = c.in[0], &r = c.in[1];
  const Shape &s = x.shape(), &o = c.out_shapes[0];
  const bool no_trans = parse_bool(attr(d, "no_trans", "False"));
  const float sc = static_cast<float>(parse_float(d.at("spatial_scale")));
  const double tstd = static_cast<float>(parse_float(attr(d, "trans_std", "0")));
  const int64_t P = o[2], G = parse_int(d.at("group_size")),
                S = parse_int(attr(d, "sample_per_part", "1"));
  int64_t PS = parse_int(attr(d, "part_size", "0"));
  if (PS == 0) PS = P;
  const int64_t classes = no_trans ? 1 : c.in[2].shape()[1] / 2, per = o[1] / classes;
  NDArray y = NDArray::zeros(o);
  for (int64_t n = 0; n < o[0]; ++n) {
    const int64_t b = static_cast<int64_t>(r.at(n * 5));
    if (b < 0 || b >= s[0]) continue;
    const double sw = std::round(r.at(n * 5 + 1)) * sc - 0.5,
                 sh = std::round(r.at(n * 5 + 2)) * sc - 0.5;
    const double rw = std::max((std::round(r.at(n * 5 + 3)) + 1) * sc - 0.5 - sw, 0.1);
    const double rh = std::max((std::round(r.at(n * 5 + 4)) + 1) * sc - 0.5 - sh, 0.1);
    for (int64_t ct = 0; ct < o[1]; ++ct)
      for (int64_t ph = 0; ph < P; ++ph)
        for (int64_t pw = 0; pw < P; ++pw) {
          const int64_t prh = ph * PS / P, prw = pw * PS / P, cls = ct / per;
          double tx = 0, ty = 0;
          if (!no_trans) {
            tx = at4(c.in[2], n, cls * 2, prh, prw) * tstd;
            ty = at4(c.in[2], n, cls * 2 + 1, prh, prw) * tstd;
          }
          const int64_t ch = (ct * G + ph * G / P) * G + pw * G / P;
          double acc = 0;
          int cnt = 0;
          for (int64_t ih = 0; ih < S; ++ih)
            for (int64_t iw = 0; iw < S; ++iw) {
              double w = pw * rw / P + sw + tx * rw + iw * rw / P / S;
              double h = ph * rh / P + sh + ty * rh + ih * rh / P / S;
              if (w < -0.5 || w > s[3] - 0.5 || h < -0.5 || h > s[2] - 0.5) continue;
              w = std::min(std::max(w, 0.0), double(s[3] - 1));
              h = std::min(std::max(h, 0.0), double(s[2] - 1));
              const int64_t x0 = static_cast<int64_t>(std::floor(w)),
                            y0 = static_cast<int64_t>(std::floor(h));
              const int64_t x1 = static_cast<int64_t>(std::ceil(w)),
                            y1 = static_cast<int64_t>(std::ceil(h));
              const double a = w - x0, e = h - y0;
              acc += (1 - a) * (1 - e) * at4(x, b, ch, y0, x0) +
                     (1 - a) * e * at4(x, b, ch, y1, x0) + a * (1 - e) * at4(x, b, ch, y0, x1) +
                     a * e * at4(x, b, ch, y1, x1);
              ++cnt;
            }
          y.data<float>()[((n * o[1] + ct) * P + ph) * P + pw] =
              cnt ? static_cast<float>(acc / cnt) : 0.f;
        }
  }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_DeformablePSROIPooling", ref_dpsroi);

// ---------------------------------------------------------------- Proposal / MultiProposal
// Per image: anchors over the grid, deltas applied, clipped, small / out-of-image boxes
// scored -1, stable sort, top pre_nms, greedy NMS, rows repeated cyclically.
std::vector<float> floats_of(const std::string& s) {
  std::vector<float> v;
  std::string t;
  for (char ch : s + ",") {
    if (ch == ',') {
      if (!t.empty()) v.push_back(static_cast<float>(std::stod(t)));
      t.clear();
    } else if (ch != '(' && ch != ')' && ch != ' ' && ch != '[' && ch != ']') {
      t += ch;
    }
  }
  return v;
}
std::vector<NDArray> ref_proposal(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const Shape& s = c.in[0].shape();
  const std::vector<float> scales = floats_of(attr(d, "scales", "(4, 8, 16, 32)"));
  const std::vector<float> ratios = floats_of(attr(d, "ratios", "(0.5, 1, 2)"));
  const float stride = static_cast<float>(parse_int(attr(d, "feature_stride", "16")));
  const int64_t post = parse_int(attr(d, "rpn_post_nms_top_n", "300"));
  int64_t pre = parse_int(attr(d, "rpn_pre_nms_top_n", "6000"));
  const float thr = static_cast<float>(parse_float(attr(d, "threshold", "0.7")));
  const float min_sz = static_cast<float>(parse_float(attr(d, "rpn_min_size", "16")));
  const int64_t A = s[1] / 2, H = s[2], W = s[3];
  if (pre <= 0 || pre > A * H * W) pre = A * H * W;
  NDArray rois(c.out_shapes[0]), score(c.out_shapes[1]);
  for (int64_t n = 0; n < s[0]; ++n) {
    const float ih = static_cast<float>(c.in[2].at(n * 3)),
                iw = static_cast<float>(c.in[2].at(n * 3 + 1));
    const float sc = static_cast<float>(c.in[2].at(n * 3 + 2));
    struct Box {
      float x1, y1, x2, y2, s;
    };
    std::vector<Box> boxes;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w)
        for (int64_t a = 0; a < A; ++a) {
          const float ratio = ratios[static_cast<size_t>(a) / scales.size()];
          const float scale = scales[static_cast<size_t>(a) % scales.size()];
          const float base = stride * stride, ctr = 0.5f * (stride - 1.f);
          const float nw = std::floor(std::sqrt(std::floor(base / ratio)) + 0.5f) * scale;
          const float nh = std::floor(nw / scale * ratio + 0.5f) * scale;
          const float ax1 = ctr - 0.5f * (nw - 1.f) + w * stride,
                      ay1 = ctr - 0.5f * (nh - 1.f) + h * stride;
          const float bw = nw, bh = nh, cx = ax1 + 0.5f * (bw - 1.f), cy = ay1 + 0.5f * (bh - 1.f);
          auto dl = [&](int k) { return static_cast<float>(at4(c.in[1], n, a * 4 + k, h, w)); };
          const float pcx = dl(0) * bw + cx, pcy = dl(1) * bh + cy;
          const float pw = std::exp(dl(2)) * bw, ph = std::exp(dl(3)) * bh;
          auto clip = [](float v, float hi) { return std::max(std::min(v, hi - 1.f), 0.f); };
          Box b{clip(pcx - 0.5f * (pw - 1.f), iw), clip(pcy - 0.5f * (ph - 1.f), ih),
                clip(pcx + 0.5f * (pw - 1.f), iw), clip(pcy + 0.5f * (ph - 1.f), ih),
                static_cast<float>(at4(c.in[0], n, A + a, h, w))};
          if (h >= static_cast<int64_t>(ih / stride) || w >= static_cast<int64_t>(iw / stride))
            b.s = -1;
          const float m = min_sz * sc;
          if (b.x2 - b.x1 + 1 < m || b.y2 - b.y1 + 1 < m)
            b = Box{b.x1 - m / 2, b.y1 - m / 2, b.x2 + m / 2, b.y2 + m / 2, -1.f};
          boxes.push_back(b);
        }
    std::stable_sort(boxes.begin(), boxes.end(),
                     [](const Box& x, const Box& y) { return x.s > y.s; });
    boxes.resize(static_cast<size_t>(pre));
    std::vector<Box> keep;
    std::vector<bool> sup(boxes.size(), false);
    for (size_t i = 0; i < boxes.size() && static_cast<int64_t>(keep.size()) < std::min(post, pre);
         ++i) {
      if (sup[i]) continue;
      keep.push_back(boxes[i]);
      for (size_t j = i + 1; j < boxes.size(); ++j) {
        const Box &p = boxes[i], &q = boxes[j];
        const float inter = std::max(0.f, std::min(p.x2, q.x2) - std::max(p.x1, q.x1) + 1) *
                            std::max(0.f, std::min(p.y2, q.y2) - std::max(p.y1, q.y1) + 1);
        const float ap = (p.x2 - p.x1 + 1) * (p.y2 - p.y1 + 1),
                    aq = (q.x2 - q.x1 + 1) * (q.y2 - q.y1 + 1);
        if (inter / (ap + aq - inter) > thr) sup[j] = true;
      }
    }
    for (int64_t r = 0; r < post; ++r) {
      const Box& b = keep[static_cast<size_t>(r) % keep.size()];
      float* o = rois.data<float>() + (n * post + r) * 5;
      o[0] = static_cast<float>(n), o[1] = b.x1, o[2] = b.y1, o[3] = b.x2, o[4] = b.y2;
      score.data<float>()[n * post + r] = b.s;
    }
  }
  return {rois, score};
}
LOOM_OP_REFERENCE("_contrib_Proposal", ref_proposal);
LOOM_OP_REFERENCE("_contrib_MultiProposal", ref_proposal);

// ---------------------------------------------------------------- bounding-box utilities
std::vector<NDArray> ref_box_iou(const RefCall& c) {
  const bool center = attr(c.attrs.dict, "format", "corner") == "center";
  const int64_t nl = c.in[0].size() / 4, nr = c.in[1].size() / 4;
  auto corners = [&](const NDArray& a, int64_t i) {
    std::array<double, 4> b{a.at(i * 4), a.at(i * 4 + 1), a.at(i * 4 + 2), a.at(i * 4 + 3)};
    if (center) b = {b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2};
    return b;
  };
  NDArray y(c.out_shapes[0]);
  for (int64_t i = 0; i < nl; ++i)
    for (int64_t j = 0; j < nr; ++j) {
      const auto a = corners(c.in[0], i), b = corners(c.in[1], j);
      const double w = std::max(0.0, std::min(a[2], b[2]) - std::max(a[0], b[0]));
      const double h = std::max(0.0, std::min(a[3], b[3]) - std::max(a[1], b[1]));
      const double area_a = std::max(0.0, a[2] - a[0]) * std::max(0.0, a[3] - a[1]);
      const double area_b = std::max(0.0, b[2] - b[0]) * std::max(0.0, b[3] - b[1]);
      y.data<float>()[i * nr + j] =
          w * h <= 0 ? 0.f : static_cast<float>(w * h / (area_a + area_b - w * h));
    }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_box_iou", ref_box_iou);

// Greedy: repeatedly take the best remaining (row, col) pair with both free.
std::vector<NDArray> ref_match(const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const bool asc = parse_bool(attr(c.attrs.dict, "is_ascend", "False"));
  const double thr = static_cast<float>(parse_float(c.attrs.dict.at("threshold")));
  const int64_t topk = parse_int(attr(c.attrs.dict, "topk", "-1"));
  const int64_t R = s[s.ndim() - 2], C = s[s.ndim() - 1], B = s.numel() / (R * C);
  NDArray rm = NDArray::full(c.out_shapes[0], -1.0), cm = NDArray::full(c.out_shapes[1], -1.0);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<std::pair<double, int64_t>> v;
    for (int64_t k = 0; k < R * C; ++k) v.push_back({c.in[0].at(b * R * C + k), k});
    std::stable_sort(v.begin(), v.end(), [&](const auto& x, const auto& y) {
      return asc ? x.first < y.first : x.first > y.first;
    });
    int64_t count = 0;
    for (const auto& [score, k] : v) {
      const int64_t r = k / C, col = k % C;
      if (rm.at(b * R + r) != -1 || cm.at(b * C + col) != -1) continue;
      if (asc ? !(score < thr) : !(score > thr)) break;
      rm.data<float>()[b * R + r] = static_cast<float>(col);
      cm.data<float>()[b * C + col] = static_cast<float>(r);
      if (topk > 0 && ++count > topk) break;
    }
  }
  return {rm, cm};
}
LOOM_OP_REFERENCE("_contrib_bipartite_matching", ref_match);

std::vector<NDArray> ref_encode(const RefCall& c) {
  const Shape& as = c.in[2].shape();
  const int64_t B = as[0], N = as[1], M = c.in[3].shape()[1];
  NDArray t = NDArray::zeros(c.out_shapes[0]), m = NDArray::zeros(c.out_shapes[1]);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t i = b * N + n;
      if (!(c.in[0].at(i) > 0.5)) continue;
      const int64_t j = static_cast<int64_t>(c.in[1].at(i));
      auto box = [&](const NDArray& a, int64_t k) {
        const double w = a.at(k * 4 + 2) - a.at(k * 4), h = a.at(k * 4 + 3) - a.at(k * 4 + 1);
        return std::array<double, 4>{a.at(k * 4) + w / 2, a.at(k * 4 + 1) + h / 2, w, h};
      };
      const auto r = box(c.in[3], b * M + j), a = box(c.in[2], i);
      const double v[4] = {(r[0] - a[0]) / a[2], (r[1] - a[1]) / a[3], std::log(r[2] / a[2]),
                           std::log(r[3] / a[3])};
      for (int k = 0; k < 4; ++k) {
        t.data<float>()[i * 4 + k] = static_cast<float>((v[k] - c.in[4].at(k)) / c.in[5].at(k));
        m.data<float>()[i * 4 + k] = 1.f;
      }
    }
  return {t, m};
}
LOOM_OP_REFERENCE("_contrib_box_encode", ref_encode);

std::vector<NDArray> ref_decode(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const double st[4] = {parse_float(attr(d, "std0", "1")), parse_float(attr(d, "std1", "1")),
                        parse_float(attr(d, "std2", "1")), parse_float(attr(d, "std3", "1"))};
  const double clip = parse_float(attr(d, "clip", "-1"));
  const bool corner = attr(d, "format", "center") == "corner";
  const int64_t N = c.in[0].shape()[1];
  NDArray y(c.out_shapes[0]);
  for (int64_t i = 0; i < c.in[0].size() / 4; ++i) {
    const int64_t k = i % N;
    double ax = c.in[1].at(k * 4), ay = c.in[1].at(k * 4 + 1), aw = c.in[1].at(k * 4 + 2),
           ah = c.in[1].at(k * 4 + 3);
    if (corner) aw -= ax, ah -= ay, ax += aw / 2, ay += ah / 2;
    double dw = c.in[0].at(i * 4 + 2) * st[2], dh = c.in[0].at(i * 4 + 3) * st[3];
    if (clip > 0) dw = std::min(dw, clip), dh = std::min(dh, clip);
    const double ox = c.in[0].at(i * 4) * st[0] * aw + ax,
                 oy = c.in[0].at(i * 4 + 1) * st[1] * ah + ay;
    const double ow = std::exp(dw) * aw / 2, oh = std::exp(dh) * ah / 2;
    const double v[4] = {ox - ow, oy - oh, ox + ow, oy + oh};
    for (int j = 0; j < 4; ++j) y.data<float>()[i * 4 + j] = static_cast<float>(v[j]);
  }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_box_decode", ref_decode);

std::vector<NDArray> ref_prior(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const std::vector<float> sizes = floats_of(attr(d, "sizes", "(1,)"));
  const std::vector<float> ratios = floats_of(attr(d, "ratios", "(1,)"));
  const std::vector<float> steps = floats_of(attr(d, "steps", "(-1, -1)"));
  const std::vector<float> off = floats_of(attr(d, "offsets", "(0.5, 0.5)"));
  const bool clip = parse_bool(attr(d, "clip", "False"));
  const int64_t H = c.in[0].shape()[2], W = c.in[0].shape()[3];
  const double sy = steps[0] > 0 && steps[1] > 0 ? steps[0] : 1.0 / H;
  const double sx = steps[0] > 0 && steps[1] > 0 ? steps[1] : 1.0 / W;
  NDArray y(c.out_shapes[0]);
  int64_t k = 0;
  auto put = [&](double cx, double cy, double size, double ratio) {
    const double bw = size * H / W * ratio / 2, bh = size / ratio / 2;
    for (double v : {cx - bw, cy - bh, cx + bw, cy + bh})
      y.data<float>()[k++] = static_cast<float>(clip ? std::min(1.0, std::max(0.0, v)) : v);
  };
  for (int64_t r = 0; r < H; ++r)
    for (int64_t col = 0; col < W; ++col) {
      const double cy = (r + off[0]) * sy, cx = (col + off[1]) * sx;
      for (float s : sizes) put(cx, cy, s, std::sqrt(ratios[0]));
      for (size_t j = 1; j < ratios.size(); ++j) put(cx, cy, sizes[0], std::sqrt(ratios[j]));
    }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_MultiBoxPrior", ref_prior);

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

TEST(OpsVision, ROIPoolingMaxAndArgmax) {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i);
  ImperativeOp op("ROIPooling", {{"pooled_size", "(2, 2)"}, {"spatial_scale", "1"}},
                  {{1, 1, 4, 4}, {2, 5}});
  auto y = op.forward({from({1, 1, 4, 4}, x), from({2, 5}, {0, 0, 0, 3, 3, -1, 0, 0, 1, 1})});
  expect_near(y[0], {5, 7, 13, 15, 0, 0, 0, 0});
  ASSERT_EQ(y[1].dtype(), DType::kInt32);
  EXPECT_EQ(y[1].data<int32_t>()[0], 5);
  EXPECT_EQ(y[1].data<int32_t>()[4], -1);
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

// MXNet 1.9.1's test_box_encode_op / test_box_decode_op / test_bipartite_matching_op.
TEST(OpsVision, BoxEncodeDecodeMatchMXNet) {
  const std::vector<float> boxes = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  ImperativeOp enc("_contrib_box_encode", {}, {{1, 2}, {1, 2}, {1, 2, 4}, {1, 2, 4}, {4}, {4}});
  auto e = enc.forward({from({1, 2}, {0, 1}), from({1, 2}, {0, 1}), from({1, 2, 4}, boxes),
                        from({1, 2, 4}, boxes), from({4}, {0, 0, 0, 0}),
                        from({4}, {0.1f, 0.1f, 0.2f, 0.2f})});
  expect_near(e[0], {0, 0, 0, 0, 0, 0, 0, 0}, 1e-5);
  expect_near(e[1], {0, 0, 0, 0, 1, 1, 1, 1});
  ImperativeOp dec("_contrib_box_decode",
                   {{"std0", "0.1"}, {"std1", "0.1"}, {"std2", "0.2"}, {"std3", "0.2"}},
                   {{1, 2, 4}, {1, 2, 4}});
  expect_near(dec.forward({from({1, 2, 4}, boxes), from({1, 2, 4}, boxes)})[0],
              {-0.0562755f, -0.00865743f, 0.26227552f, 0.42465743f, 0.13240421f, 0.17859563f,
               0.93759584f, 1.1174043f},
              1e-5);
  ImperativeOp m("_contrib_bipartite_matching", {{"threshold", "1e-12"}}, {{3, 2}});
  auto y = m.forward({from({3, 2}, {0.5f, 0.6f, 0.1f, 0.2f, 0.3f, 0.4f})});
  expect_near(y[0], {1, -1, 0});
  expect_near(y[1], {2, 0});
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
