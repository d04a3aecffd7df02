// Helpers shared by the ROI operators of ops/vision (roi_pooling, roi_align, psroi_pooling).
#pragma once

#include <algorithm>
#include <string>

#include "ops/vision/vision_util.h"

namespace loom::vision {

/// Throws ParamError unless pooled_size is two positive sizes (h, w).
inline void check_pooled(const Shape& s) {
  if (s.ndim() != 2 || s[0] <= 0 || s[1] <= 0)
    throw ParamError("parameter 'pooled_size' must be two positive sizes (h, w), got " + s.str());
}

/// Throws ParamError unless spatial_scale is in [0, 1] (MXNet's range).
inline void check_spatial_scale(float s) {
  if (!(s >= 0.f && s <= 1.f))
    throw ParamError("parameter 'spatial_scale' must be in [0, 1], got " + format_float32(s));
}

/// Shape checks of (data, rois): data (N, C, H, W), rois (R, 5); unknown shapes pass.
inline void check_roi_shapes(const OpAttrs& a, const Shape& d, const Shape& r) {
  if (d.ndim() && d.ndim() != 4)
    throw ShapeError(label(a) + ": data must be 4-D (N, C, H, W), got " + d.str());
  if (r.ndim() && (r.ndim() != 2 || r[1] != 5))
    throw ShapeError(label(a) + ": rois must be 2-D (num_rois, 5), got " + r.str());
}

/// ROIAlign's bilinear sample at (y, x) of an H x W plane: fn(position, weight) for its four
/// taps, with MXNet's border rules (nothing outside [-1, H] x [-1, W]; coordinates below 0
/// read row/column 0; the high neighbour is clamped to the last row/column).
template <class Fn>
void roi_align_taps(float y, float x, int64_t H, int64_t W, Fn fn) {
  if (y < -1.f || y > static_cast<float>(H) || x < -1.f || x > static_cast<float>(W)) return;
  y = std::max(y, 0.f), x = std::max(x, 0.f);
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

}  // namespace loom::vision
