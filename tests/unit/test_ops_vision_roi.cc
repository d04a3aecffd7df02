// ROI operators (ROIPooling, ROIAlign, RROIAlign, PSROIPooling, DeformablePSROIPooling):
// naive references for the op sweep (written from the definitions, one output element at a
// time) and hand-checked values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"
#include "tests/unit/vision_test_util.h"

namespace loom::test {
namespace {

using namespace vision_test;

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

// ---------------------------------------------------------------- hand-checked values
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

}  // namespace
}  // namespace loom::test
