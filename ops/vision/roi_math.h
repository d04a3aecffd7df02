// The per-output arithmetic of the ROI operators (roi_align.cc, roi_pooling.cc,
// psroi_pooling.cc), shared by their CPU loops and their GPU kernels (ops/vision/roi.cu).
// ROIAlign, RROIAlign and PSROIPooling are linear maps of the data (resample_math.h's
// convention: taps(o, rois, fn) calls fn(data index, weight) for every data element output o
// reads); ROIPooling is a max with the index of its maximum.
#pragma once

#include <cfloat>
#include <cstdint>
#include <vector>

#include "ops/elemwise_math.h"
#include "runtime/base.h"

namespace loom::vision {

/// ROIAlign's parameters (the schema is in roi_align.cc).
struct ROIAlignParam {
  Shape pooled_size;
  float spatial_scale;
  int64_t sample_ratio;
  bool position_sensitive, aligned;
};
/// RROIAlign's parameters.
struct RROIAlignParam {
  Shape pooled_size;
  float spatial_scale;
  int64_t sampling_ratio;
};
/// ROIPooling's parameters.
struct ROIPoolParam {
  Shape pooled_size;
  float spatial_scale;
};
/// PSROIPooling's parameters (group_size 0 is replaced by pooled_size when parsed).
struct PSROIParam {
  float spatial_scale;
  int64_t output_dim, pooled_size, group_size;
};

LOOM_HD float fmax_hd(float a, float b) { return a < b ? b : a; }  // std::max, NaN included
LOOM_HD int64_t clamp_hd(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/// Samples per bin along one axis of ROIAlign and RROIAlign: `ratio` when positive, else
/// ceil(extent / bins) (the bin's size in pixels, rounded up).
LOOM_HD int64_t roi_align_samples(int64_t ratio, float extent, int64_t bins) {
  return ratio > 0 ? ratio
                   : static_cast<int64_t>(math::fn::ceil(extent / static_cast<float>(bins)));
}

/// ROIAlign's bilinear sample at (y, x) of an H x W plane: fn(position, weight) for its four
/// taps, with MXNet's border rules (nothing outside [-1, H] x [-1, W]; coordinates below 0
/// read row/column 0; the high neighbour is clamped to the last row/column).
template <class Fn>
LOOM_HD void roi_align_taps(float y, float x, int64_t H, int64_t W, Fn&& fn) {
  if (y < -1.f || y > static_cast<float>(H) || x < -1.f || x > static_cast<float>(W)) return;
  y = fmax_hd(y, 0.f), x = fmax_hd(x, 0.f);
  int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(x), yh, xh;
  if (yl >= H - 1)
    yh = yl = H - 1, y = static_cast<float>(yl);
  else
    yh = yl + 1;
  if (xl >= W - 1)
    xh = xl = W - 1, x = static_cast<float>(xl);
  else
    xh = xl + 1;
  const float ly = y - static_cast<float>(yl), lx = x - static_cast<float>(xl);
  const float hy = 1.f - ly, hx = 1.f - lx;
  fn(yl * W + xl, hy * hx);
  fn(yl * W + xh, hy * lx);
  fn(yh * W + xl, ly * hx);
  fn(yh * W + xh, ly * lx);
}

/// _contrib_ROIAlign: data (N, Cin, H, W), rois (R, 5), output (R, C, PH, PW); each bin
/// averages gh x gw bilinear samples (weights include the 1/count average).
struct ROIAlignMap {
  int64_t N, Cin, H, W, R, C, PH, PW;
  float scale;
  int64_t sample_ratio;
  bool position_sensitive, aligned;

  LOOM_HD int64_t outputs() const { return R * C * PH * PW; }
  template <class Fn>
  LOOM_HD void taps(int64_t o, const float* rois, Fn&& fn) const {
    const int64_t pw = o % PW, ph = (o / PW) % PH, c = (o / (PW * PH)) % C, n = o / (PW * PH * C);
    const float* r = rois + n * 5;
    const int64_t b = static_cast<int64_t>(r[0]);
    if (b < 0 || b >= N) return;
    const float off = aligned ? 0.5f : 0.f;
    const float sw = r[1] * scale - off, sh = r[2] * scale - off;
    float rw = r[3] * scale - off - sw, rh = r[4] * scale - off - sh;
    if (!aligned) rw = fmax_hd(rw, 1.f), rh = fmax_hd(rh, 1.f);
    const float bh = rh / static_cast<float>(PH), bw = rw / static_cast<float>(PW);
    const int64_t gh = roi_align_samples(sample_ratio, rh, PH);
    const int64_t gw = roi_align_samples(sample_ratio, rw, PW);
    if (gh <= 0 || gw <= 0) return;
    const float count = static_cast<float>(gh * gw);
    const int64_t cu = position_sensitive ? (c * PH + ph) * PW + pw : c;
    const int64_t plane = (b * Cin + cu) * H * W;
    for (int64_t iy = 0; iy < gh; ++iy) {
      const float yy = sh + static_cast<float>(ph) * bh +
                       (static_cast<float>(iy) + .5f) * bh / static_cast<float>(gh);
      for (int64_t ix = 0; ix < gw; ++ix) {
        const float xx = sw + static_cast<float>(pw) * bw +
                         (static_cast<float>(ix) + .5f) * bw / static_cast<float>(gw);
        roi_align_taps(yy, xx, H, W, [&](int64_t pos, float w) { fn(plane + pos, w / count); });
      }
    }
  }
};

/// _contrib_RROIAlign: rois (R, 6) [batch, centre x, centre y, w, h, theta in degrees]; the
/// sampling grid rotated by theta about the centre.
struct RROIAlignMap {
  int64_t N, C, H, W, R, PH, PW;
  float scale;
  int64_t sampling_ratio;

  LOOM_HD int64_t outputs() const { return R * C * PH * PW; }
  template <class Fn>
  LOOM_HD void taps(int64_t o, const float* rois, Fn&& fn) const {
    const int64_t pw = o % PW, ph = (o / PW) % PH, c = (o / (PW * PH)) % C, n = o / (PW * PH * C);
    const float* r = rois + n * 6;
    const int64_t b = static_cast<int64_t>(r[0]);
    if (b < 0 || b >= N) return;
    const float cx = r[1] * scale, cy = r[2] * scale;
    const float rw = fmax_hd(r[3] * scale, 1.f), rh = fmax_hd(r[4] * scale, 1.f);
    const float theta = static_cast<float>(r[5] * 3.14159265358979323846 / 180.0);
    const float ct = math::fn::cos(theta), st = math::fn::sin(theta);
    const float bh = rh / static_cast<float>(PH), bw = rw / static_cast<float>(PW);
    const int64_t gh = roi_align_samples(sampling_ratio, rh, PH);
    const int64_t gw = roi_align_samples(sampling_ratio, rw, PW);
    if (gh <= 0 || gw <= 0) return;
    const float count = static_cast<float>(gh * gw);
    const int64_t plane = (b * C + c) * H * W;
    for (int64_t iy = 0; iy < gh; ++iy) {
      const float yy = -rh / 2.f + static_cast<float>(ph) * bh +
                       (static_cast<float>(iy) + .5f) * bh / static_cast<float>(gh);
      for (int64_t ix = 0; ix < gw; ++ix) {
        const float xx = -rw / 2.f + static_cast<float>(pw) * bw +
                         (static_cast<float>(ix) + .5f) * bw / static_cast<float>(gw);
        roi_align_taps(yy * ct - xx * st + cy, xx * ct + yy * st + cx, H, W,
                       [&](int64_t pos, float w) { fn(plane + pos, w / count); });
      }
    }
  }
};

/// _contrib_PSROIPooling: output (R, D, P, P); bin (ph, pw) of class channel ct averages
/// data channel (ct·G + gh)·G + gw over the bin (1 / bin area per element).
struct PSROIMap {
  int64_t N, C, H, W, R, D, P, G;
  float scale;

  LOOM_HD int64_t outputs() const { return R * D * P * P; }
  template <class Fn>
  LOOM_HD void taps(int64_t o, const float* rois, Fn&& fn) const {
    const int64_t pw = o % P, ph = (o / P) % P, ct = (o / (P * P)) % D, n = o / (P * P * D);
    const float* r = rois + n * 5;
    const int64_t b = static_cast<int64_t>(r[0]);
    if (b < 0 || b >= N) return;
    const float sw = math::fn::round(r[1]) * scale, sh = math::fn::round(r[2]) * scale;
    const float ew = (math::fn::round(r[3]) + 1.f) * scale;
    const float eh = (math::fn::round(r[4]) + 1.f) * scale;
    const float bw = fmax_hd(ew - sw, 0.1f) / static_cast<float>(P);
    const float bh = fmax_hd(eh - sh, 0.1f) / static_cast<float>(P);
    const int64_t hs =
        clamp_hd(static_cast<int64_t>(math::fn::floor(static_cast<float>(ph) * bh + sh)), 0, H);
    const int64_t he =
        clamp_hd(static_cast<int64_t>(math::fn::ceil(static_cast<float>(ph + 1) * bh + sh)), 0, H);
    const int64_t ws =
        clamp_hd(static_cast<int64_t>(math::fn::floor(static_cast<float>(pw) * bw + sw)), 0, W);
    const int64_t we =
        clamp_hd(static_cast<int64_t>(math::fn::ceil(static_cast<float>(pw + 1) * bw + sw)), 0, W);
    if (he <= hs || we <= ws) return;
    const int64_t gw = clamp_hd(pw * G / P, 0, G - 1), gh = clamp_hd(ph * G / P, 0, G - 1);
    const int64_t c = (ct * G + gh) * G + gw;
    const float w = 1.f / static_cast<float>((he - hs) * (we - ws));
    for (int64_t h = hs; h < he; ++h)
      for (int64_t x = ws; x < we; ++x) fn(((b * C + c) * H + h) * W + x, w);
  }
};

/// _contrib_DeformablePSROIPooling's parameters (part_size 0 becomes pooled_size).
struct DPSParam {
  float spatial_scale, trans_std;
  int64_t output_dim, group_size, pooled_size, part_size, sample_per_part;
  bool no_trans;
};

/// _contrib_DeformablePSROIPooling: output (R, D, P, P) averaging S x S bilinear samples of
/// bins shifted by trans (R, 2·classes, PS, PS) · trans_std · ROI size.
struct DPSMath {
  int64_t N, C, H, W, R, D, P, G, PS, S, classes;
  float scale, trans_std;
  bool no_trans;

  LOOM_HD int64_t outputs() const { return R * D * P * P; }
  LOOM_HD static float clamp_f(float v, float lo, float hi) {
    return v < lo ? lo : hi < v ? hi : v;
  }
  /// fn(data plane offset, sample value, h, w, d value / d trans_y, d value / d trans_x,
  /// index of the bin's trans_x) for every sample output o takes, in order.
  template <class Fn>
  LOOM_HD void samples(int64_t o, const float* x, const float* rois, const float* tr,
                       Fn&& fn) const {
    const int64_t pw = o % P, ph = (o / P) % P, ct = (o / (P * P)) % D, n = o / (P * P * D);
    const float* r = rois + n * 5;
    const int64_t b = static_cast<int64_t>(r[0]);
    if (b < 0 || b >= N) return;
    const float sw = math::fn::round(r[1]) * scale - 0.5f;
    const float sh = math::fn::round(r[2]) * scale - 0.5f;
    const float ew = (math::fn::round(r[3]) + 1.f) * scale - 0.5f;
    const float eh = (math::fn::round(r[4]) + 1.f) * scale - 0.5f;
    const float rw = fmax_hd(ew - sw, 0.1f), rh = fmax_hd(eh - sh, 0.1f);
    const float bw = rw / static_cast<float>(P), bh = rh / static_cast<float>(P);
    const float subw = bw / static_cast<float>(S), subh = bh / static_cast<float>(S);
    const int64_t part_h = static_cast<int64_t>(
        math::fn::floor(static_cast<float>(ph) / static_cast<float>(P) * static_cast<float>(PS)));
    const int64_t part_w = static_cast<int64_t>(
        math::fn::floor(static_cast<float>(pw) / static_cast<float>(P) * static_cast<float>(PS)));
    const int64_t cls = ct / (D / classes);
    const int64_t ti = ((n * classes + cls) * 2 * PS + part_h) * PS + part_w;
    const float tx = no_trans ? 0.f : tr[ti] * trans_std;
    const float ty = no_trans ? 0.f : tr[ti + PS * PS] * trans_std;
    const float ws = static_cast<float>(pw) * bw + sw + tx * rw;
    const float hs = static_cast<float>(ph) * bh + sh + ty * rh;
    const int64_t gw = clamp_hd(pw * G / P, 0, G - 1), gh = clamp_hd(ph * G / P, 0, G - 1);
    const int64_t c = (ct * G + gh) * G + gw;
    const int64_t base = (b * C + c) * H * W;
    const float* plane = x + base;
    for (int64_t ih = 0; ih < S; ++ih)
      for (int64_t iw = 0; iw < S; ++iw) {
        float w = ws + static_cast<float>(iw) * subw, h = hs + static_cast<float>(ih) * subh;
        if (w < -0.5f || w > static_cast<float>(W) - 0.5f || h < -0.5f ||
            h > static_cast<float>(H) - 0.5f)
          continue;
        const bool cw = w < 0.f || w > static_cast<float>(W - 1);
        const bool ch = h < 0.f || h > static_cast<float>(H - 1);
        w = clamp_f(w, 0.f, static_cast<float>(W - 1));
        h = clamp_f(h, 0.f, static_cast<float>(H - 1));
        const int64_t x0 = static_cast<int64_t>(math::fn::floor(w));
        const int64_t x1 = static_cast<int64_t>(math::fn::ceil(w));
        const int64_t y0 = static_cast<int64_t>(math::fn::floor(h));
        const int64_t y1 = static_cast<int64_t>(math::fn::ceil(h));
        const float dxw = w - static_cast<float>(x0), dy = h - static_cast<float>(y0);
        const float u00 = plane[y0 * W + x0], u01 = plane[y1 * W + x0];
        const float u10 = plane[y0 * W + x1], u11 = plane[y1 * W + x1];
        const float v = (1 - dxw) * (1 - dy) * u00 + (1 - dxw) * dy * u01 + dxw * (1 - dy) * u10 +
                        dxw * dy * u11;
        // d v / d trans: through w = ... + trans_x * trans_std * roi_width.
        const float dvx =
            cw ? 0.f : (u11 * dy + u10 * (1 - dy) - u01 * dy - u00 * (1 - dy)) * trans_std * rw;
        const float dvy =
            ch ? 0.f : (u11 * dxw + u01 * (1 - dxw) - u10 * dxw - u00 * (1 - dxw)) * trans_std * rh;
        fn(base, v, h, w, dvy, dvx, ti);
      }
  }
  /// The data and trans gradients of one sample (h, w) at plane offset `base` for the
  /// bin's gradient gv (already divided by its count): add(array 0 = data / 1 = trans,
  /// index, value).
  template <class Add>
  LOOM_HD void sample_grad(int64_t base, float h, float w, float dvy, float dvx, int64_t ti,
                           float gv, Add&& add) const {
    const int64_t y0 = static_cast<int64_t>(math::fn::floor(h));
    const int64_t x0 = static_cast<int64_t>(math::fn::floor(w));
    const int64_t y1 = static_cast<int64_t>(math::fn::ceil(h));
    const int64_t x1 = static_cast<int64_t>(math::fn::ceil(w));
    const float dy = h - static_cast<float>(y0), dxw = w - static_cast<float>(x0);
    add(0, base + y0 * W + x0, (1 - dxw) * (1 - dy) * gv);
    add(0, base + y1 * W + x0, (1 - dxw) * dy * gv);
    add(0, base + y0 * W + x1, dxw * (1 - dy) * gv);
    add(0, base + y1 * W + x1, dxw * dy * gv);
    if (!no_trans) {
      add(1, ti, dvx * gv);
      add(1, ti + PS * PS, dvy * gv);
    }
  }
};

/// DPSMath of a node: inputs data (N, C, H, W), rois and (unless no_trans) trans
/// (R, 2·classes, PS, PS); output (R, D, P, P).
inline DPSMath dps_math(const DPSParam& p, const std::vector<Shape>& in, const Shape& out) {
  const Shape& d = in[0];
  const int64_t classes = p.no_trans ? 1 : in[2][1] / 2;
  return {d[0],        d[1],
          d[2],        d[3],
          out[0],      out[1],
          out[2],      p.group_size,
          p.part_size, p.sample_per_part,
          classes,     p.spatial_scale,
          p.trans_std, p.no_trans};
}

/// ROIPooling: output (R, C, PH, PW), the maximum of each bin of the rounded ROI (0 for an
/// empty bin or an invalid batch index) and the flat data index of that maximum (-1: none).
struct ROIPoolMath {
  int64_t N, C, H, W, R, PH, PW;
  float scale;

  LOOM_HD int64_t outputs() const { return R * C * PH * PW; }
  LOOM_HD float at(const float* x, const float* rois, int64_t o, int32_t* idx) const {
    const int64_t pw = o % PW, ph = (o / PW) % PH, c = (o / (PW * PH)) % C, n = o / (PW * PH * C);
    const float* r = rois + n * 5;
    const int64_t b = static_cast<int64_t>(r[0]);
    const int64_t x1 = static_cast<int64_t>(math::fn::round(r[1] * scale));
    const int64_t y1 = static_cast<int64_t>(math::fn::round(r[2] * scale));
    const int64_t x2 = static_cast<int64_t>(math::fn::round(r[3] * scale));
    const int64_t y2 = static_cast<int64_t>(math::fn::round(r[4] * scale));
    const int64_t rh = y2 - y1 + 1 > 1 ? y2 - y1 + 1 : 1, rw = x2 - x1 + 1 > 1 ? x2 - x1 + 1 : 1;
    const float bh = static_cast<float>(rh) / static_cast<float>(PH);
    const float bw = static_cast<float>(rw) / static_cast<float>(PW);
    int64_t hs = static_cast<int64_t>(math::fn::floor(static_cast<float>(ph) * bh));
    int64_t he = static_cast<int64_t>(math::fn::ceil(static_cast<float>(ph + 1) * bh));
    int64_t ws = static_cast<int64_t>(math::fn::floor(static_cast<float>(pw) * bw));
    int64_t we = static_cast<int64_t>(math::fn::ceil(static_cast<float>(pw + 1) * bw));
    hs = clamp_hd(hs + y1, 0, H), he = clamp_hd(he + y1, 0, H);
    ws = clamp_hd(ws + x1, 0, W), we = clamp_hd(we + x1, 0, W);
    if (b < 0 || b >= N || he <= hs || we <= ws) {
      *idx = -1;
      return 0.f;
    }
    float m = -FLT_MAX;
    int64_t mi = -1;
    const int64_t base = (b * C + c) * H * W;
    for (int64_t h = hs; h < he; ++h)
      for (int64_t w = ws; w < we; ++w) {
        const float v = x[base + h * W + w];
        if (v > m) m = v, mi = base + h * W + w;
      }
    *idx = static_cast<int32_t>(mi);
    return m;
  }
};

}  // namespace loom::vision
