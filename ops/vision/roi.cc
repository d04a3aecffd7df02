// Region-of-interest pooling (MXNet 1.9.1), on data (N, C, H, W) and rois (R, 5) rows
// [batch index, x1, y1, x2, y2] in image coordinates (scaled by spatial_scale):
//   ROIPooling: the ROI's corners are rounded to the feature grid, the ROI (at least 1x1) is
//     cut into pooled_size bins (floor/ceil bounds, clipped to the map) and each output is
//     the bin's maximum (0 for an empty bin or an invalid batch index). A hidden int32
//     output `maxidx` holds the flat data index of each maximum (-1: none); the gradient goes
//     to that element only.
//   _contrib_ROIAlign: no rounding; each bin averages sample_ratio^2 (adaptive: ceil(bin
//     size)) bilinear samples. position_sensitive divides the channels into ph*pw groups
//     (R-FCN); aligned shifts the ROI by half a pixel (Detectron2). Rows with a negative
//     batch index give zeros.
//   _contrib_PSROIPooling: position-sensitive average pooling (R-FCN), see below.
//   _contrib_RROIAlign: ROIAlign over rotated rois (R, 6) [batch, centre x, centre y, w, h,
//     theta degrees]; forward only (MXNet registers no gradient).
// The rois get a zero gradient (as MXNet).
#include <cfloat>
#include <cmath>
#include <numbers>

#include "ops/dtype_policy.h"
#include "ops/vision/vision_util.h"

namespace loom {
namespace {

struct ROIPoolParam {
  Shape pooled_size;
  float spatial_scale;
};
void check_pooled(const Shape& s) {
  if (s.ndim() != 2 || s[0] <= 0 || s[1] <= 0)
    throw ParamError("parameter 'pooled_size' must be two positive sizes (h, w), got " + s.str());
}
const auto kROIPoolSchema =
    ParamSchema<ROIPoolParam>()
        .required("pooled_size", &ROIPoolParam::pooled_size, "Output size (h, w).")
        .required("spatial_scale", &ROIPoolParam::spatial_scale,
                  "Ratio of the feature map size to the image size.")
        .check([](ROIPoolParam& p) {
          check_pooled(p.pooled_size);
          if (!(p.spatial_scale >= 0.f && p.spatial_scale <= 1.f))
            throw ParamError("parameter 'spatial_scale' must be in [0, 1], got " +
                             format_float32(p.spatial_scale));
        });

void check_roi_shapes(const OpAttrs& a, const Shape& d, const Shape& r) {
  if (d.ndim() && d.ndim() != 4)
    throw ShapeError(vision::label(a) + ": data must be 4-D (N, C, H, W), got " + d.str());
  if (r.ndim() && (r.ndim() != 2 || r[1] != 5))
    throw ShapeError(vision::label(a) + ": rois must be 2-D (num_rois, 5), got " + r.str());
}

void infer_roipool(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  check_roi_shapes(a, in[0], in[1]);
  if (in[0].ndim() == 0 || in[1].ndim() == 0) return;
  const Shape& ps = a.param<ROIPoolParam>().pooled_size;
  const Shape o{in[1][0], in[0][1], ps[0], ps[1]};
  merge_shape(out[0], o, "output 0");
  merge_shape(out[1], o, "output 1 (maxidx)");
}

class ROIPoolKernel final : public Kernel {
 public:
  explicit ROIPoolKernel(const KernelArgs& a)
      : p_(a.attrs.param<ROIPoolParam>()), d_(a.in_shapes[0]), nr_(a.in_shapes[1][0]) {
    vision::check_float(a, 2);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const std::vector<float> x = vision::load(in[0]), rois = vision::load(in[1]);
    const int64_t N = d_[0], C = d_[1], H = d_[2], W = d_[3];
    const int64_t PH = p_.pooled_size[0], PW = p_.pooled_size[1];
    std::vector<float> y(static_cast<size_t>(nr_ * C * PH * PW));
    std::vector<int32_t> idx(y.size());
    for (int64_t n = 0; n < nr_; ++n) {
      const float* r = &rois[static_cast<size_t>(n * 5)];
      const int64_t b = static_cast<int64_t>(r[0]);
      const bool bad = b < 0 || b >= N;
      const int64_t x1 = std::lround(r[1] * p_.spatial_scale), y1 = std::lround(r[2] * p_.spatial_scale);
      const int64_t x2 = std::lround(r[3] * p_.spatial_scale), y2 = std::lround(r[4] * p_.spatial_scale);
      const float bh = static_cast<float>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<float>(PH);
      const float bw = static_cast<float>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<float>(PW);
#pragma omp parallel for schedule(static) if (C * PH * PW * 16 >= (1 << 15))
      for (int64_t c = 0; c < C; ++c) {
        for (int64_t ph = 0; ph < PH; ++ph)
          for (int64_t pw = 0; pw < PW; ++pw) {
            int64_t hs = static_cast<int64_t>(std::floor(static_cast<float>(ph) * bh));
            int64_t he = static_cast<int64_t>(std::ceil(static_cast<float>(ph + 1) * bh));
            int64_t ws = static_cast<int64_t>(std::floor(static_cast<float>(pw) * bw));
            int64_t we = static_cast<int64_t>(std::ceil(static_cast<float>(pw + 1) * bw));
            hs = std::clamp<int64_t>(hs + y1, 0, H), he = std::clamp<int64_t>(he + y1, 0, H);
            ws = std::clamp<int64_t>(ws + x1, 0, W), we = std::clamp<int64_t>(we + x1, 0, W);
            const size_t o = static_cast<size_t>(((n * C + c) * PH + ph) * PW + pw);
            if (bad || he <= hs || we <= ws) {
              y[o] = 0.f, idx[o] = -1;
              continue;
            }
            float m = -FLT_MAX;
            int64_t mi = -1;
            const int64_t base = (b * C + c) * H * W;
            for (int64_t h = hs; h < he; ++h)
              for (int64_t w = ws; w < we; ++w) {
                const float v = x[static_cast<size_t>(base + h * W + w)];
                if (v > m) m = v, mi = base + h * W + w;
              }
            y[o] = m, idx[o] = static_cast<int32_t>(mi);
          }
      }
    }
    vision::store(out[0], req[0], y);
    if (out.size() > 1 && req[1] != Req::kNull) {
      int32_t* p = out[1].data<int32_t>();
      std::copy(idx.begin(), idx.end(), p);
    }
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray> od, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (ig.size() > 1) vision::store_zero(ig[1], req[1]);
    if (req[0] == Req::kNull) return;
    const std::vector<float> g = vision::load(og[0]);
    const int32_t* idx = od[1].cdata<int32_t>();
    std::vector<float> dx(static_cast<size_t>(d_.numel()), 0.f);
    for (size_t o = 0; o < g.size(); ++o)
      if (idx[o] >= 0) dx[static_cast<size_t>(idx[o])] += g[o];
    vision::store(ig[0], req[0], dx);
  }

 private:
  ROIPoolParam p_;
  Shape d_;
  int64_t nr_;
};

LOOM_REGISTER_OP("ROIPooling")
    .describe("Max-pools each region of interest into a fixed-size feature map.")
    .params(kROIPoolSchema)
    .inputs({"data", "rois"})
    .outputs({"output", "maxidx"})
    .visible_outputs([](const OpAttrs&) { return 1; })
    .shape_fn(infer_roipool)
    .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
      vision::infer_type_shared(in, out, 2, {{1, DType::kInt32}});
    })
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = true})
    .cpu<ROIPoolKernel>()
    .sample({.attrs = {{"pooled_size", "(2, 2)"}, {"spatial_scale", "1"}},
             .in_shapes = {{3, 2, 6, 6}, {4, 5}}, .in_kinds = {"normal", "index:3"}})
    .sample({.attrs = {{"pooled_size", "(3, 2)"}, {"spatial_scale", "0.5"}},
             .in_shapes = {{2, 3, 5, 7}, {3, 5}}, .in_kinds = {"normal", "index:2"}});

// ------------------------------------------------------------------------------ ROIAlign
struct ROIAlignParam {
  Shape pooled_size;
  float spatial_scale;
  int64_t sample_ratio;
  bool position_sensitive, aligned;
};
const auto kROIAlignSchema =
    ParamSchema<ROIAlignParam>()
        .required("pooled_size", &ROIAlignParam::pooled_size, "Output size (h, w).")
        .required("spatial_scale", &ROIAlignParam::spatial_scale,
                  "Ratio of the feature map size to the image size.")
        .optional("sample_ratio", &ROIAlignParam::sample_ratio, int64_t{-1},
                  "Samples per bin side (<= 0: ceil of the bin size).")
        .optional("position_sensitive", &ROIAlignParam::position_sensitive, false,
                  "Position-sensitive pooling (R-FCN): channel groups per bin.")
        .optional("aligned", &ROIAlignParam::aligned, false,
                  "Shift the ROI by -0.5 pixel (Detectron2 alignment).")
        .check([](ROIAlignParam& p) {
          check_pooled(p.pooled_size);
          if (!(p.spatial_scale >= 0.f && p.spatial_scale <= 1.f))
            throw ParamError("parameter 'spatial_scale' must be in [0, 1], got " +
                             format_float32(p.spatial_scale));
        });

void infer_roialign(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  check_roi_shapes(a, in[0], in[1]);
  if (in[0].ndim() == 0 || in[1].ndim() == 0) return;
  const auto& p = a.param<ROIAlignParam>();
  const int64_t g = p.pooled_size[0] * p.pooled_size[1];
  int64_t c = in[0][1];
  if (p.position_sensitive) {
    if (c % g != 0)
      throw ShapeError(vision::label(a) + ": with position_sensitive the input channels (" +
                       std::to_string(c) + ") must be a multiple of pooled_size[0]*pooled_size[1] (" +
                       std::to_string(g) + ")");
    c /= g;
  }
  merge_shape(out[0], Shape{in[1][0], c, p.pooled_size[0], p.pooled_size[1]}, "output 0");
}

// The four bilinear taps at (y, x) with MXNet's border rules.
template <class Fn>
void tap(float y, float x, int64_t H, int64_t W, Fn fn) {
  if (y < -1.f || y > static_cast<float>(H) || x < -1.f || x > static_cast<float>(W)) return;
  y = std::max(y, 0.f), x = std::max(x, 0.f);
  int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(x), yh, xh;
  if (yl >= H - 1) yh = yl = H - 1, y = static_cast<float>(yl);
  else yh = yl + 1;
  if (xl >= W - 1) xh = xl = W - 1, x = static_cast<float>(xl);
  else xh = xl + 1;
  const float ly = y - static_cast<float>(yl), lx = x - static_cast<float>(xl);
  const float hy = 1.f - ly, hx = 1.f - lx;
  fn(yl * W + xl, hy * hx);
  fn(yl * W + xh, hy * lx);
  fn(yh * W + xl, ly * hx);
  fn(yh * W + xh, ly * lx);
}

class ROIAlignKernel final : public Kernel {
 public:
  explicit ROIAlignKernel(const KernelArgs& a)
      : p_(a.attrs.param<ROIAlignParam>()), d_(a.in_shapes[0]), o_(a.out_shapes[0]) {
    vision::check_float(a, 2);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const std::vector<float> x = vision::load(in[0]), rois = vision::load(in[1]);
    std::vector<float> y(static_cast<size_t>(o_.numel()), 0.f);
    run(rois, [&](size_t o, int64_t plane, int64_t pos, float w) {
      y[o] += w * x[static_cast<size_t>(plane + pos)];
    });
    vision::store(out[0], req[0], y);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (ig.size() > 1) vision::store_zero(ig[1], req[1]);
    if (req[0] == Req::kNull) return;
    const std::vector<float> g = vision::load(og[0]), rois = vision::load(in[1]);
    std::vector<float> dx(static_cast<size_t>(d_.numel()), 0.f);
    run(rois, [&](size_t o, int64_t plane, int64_t pos, float w) {
      dx[static_cast<size_t>(plane + pos)] += w * g[o];
    });
    vision::store(ig[0], req[0], dx);
  }

 private:
  // fn(output index, input plane offset, position in the plane, weight) for every bilinear
  // tap of every sample; the weights include the 1/count average.
  template <class Fn>
  void run(const std::vector<float>& rois, Fn fn) const {
    const int64_t C = o_[1], H = d_[2], W = d_[3], PH = o_[2], PW = o_[3];
    const int64_t N = d_[0], Cin = d_[1];
    const float off = p_.aligned ? 0.5f : 0.f;
    for (int64_t n = 0; n < o_[0]; ++n) {
      const float* r = &rois[static_cast<size_t>(n * 5)];
      const int64_t b = static_cast<int64_t>(r[0]);
      if (b < 0 || b >= N) continue;
      const float sw = r[1] * p_.spatial_scale - off, sh = r[2] * p_.spatial_scale - off;
      float rw = r[3] * p_.spatial_scale - off - sw, rh = r[4] * p_.spatial_scale - off - sh;
      if (!p_.aligned) rw = std::max(rw, 1.f), rh = std::max(rh, 1.f);
      const float bh = rh / static_cast<float>(PH), bw = rw / static_cast<float>(PW);
      const int64_t gh = p_.sample_ratio > 0 ? p_.sample_ratio
                                             : static_cast<int64_t>(std::ceil(rh / static_cast<float>(PH)));
      const int64_t gw = p_.sample_ratio > 0 ? p_.sample_ratio
                                             : static_cast<int64_t>(std::ceil(rw / static_cast<float>(PW)));
      const float count = static_cast<float>(gh * gw);
      if (gh <= 0 || gw <= 0) continue;
      for (int64_t c = 0; c < C; ++c)
        for (int64_t ph = 0; ph < PH; ++ph)
          for (int64_t pw = 0; pw < PW; ++pw) {
            const int64_t cu = p_.position_sensitive ? (c * PH + ph) * PW + pw : c;
            const int64_t plane = (b * Cin + cu) * H * W;
            const size_t o = static_cast<size_t>(((n * C + c) * PH + ph) * PW + pw);
            for (int64_t iy = 0; iy < gh; ++iy) {
              const float yy = sh + static_cast<float>(ph) * bh +
                               (static_cast<float>(iy) + .5f) * bh / static_cast<float>(gh);
              for (int64_t ix = 0; ix < gw; ++ix) {
                const float xx = sw + static_cast<float>(pw) * bw +
                                 (static_cast<float>(ix) + .5f) * bw / static_cast<float>(gw);
                tap(yy, xx, H, W, [&](int64_t pos, float w) { fn(o, plane, pos, w / count); });
              }
            }
          }
    }
  }
  ROIAlignParam p_;
  Shape d_, o_;
};

LOOM_REGISTER_OP("_contrib_ROIAlign")
    .describe("Averages bilinear samples over the bins of each region of interest.")
    .params(kROIAlignSchema)
    .inputs({"data", "rois"})
    .shape_fn(infer_roialign)
    .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
      vision::infer_type_shared(in, out, 2);
    })
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<ROIAlignKernel>()
    .sample({.attrs = {{"pooled_size", "(2, 2)"}, {"spatial_scale", "1"}},
             .in_shapes = {{3, 2, 6, 6}, {4, 5}}, .in_kinds = {"normal", "index:3"}})
    .sample({.attrs = {{"pooled_size", "(2, 3)"}, {"spatial_scale", "0.5"}, {"sample_ratio", "2"}},
             .in_shapes = {{2, 3, 5, 7}, {3, 5}}, .in_kinds = {"normal", "index:2"}})
    .sample({.attrs = {{"pooled_size", "(2, 2)"}, {"spatial_scale", "1"},
                       {"position_sensitive", "True"}, {"sample_ratio", "2"}},
             .in_shapes = {{2, 8, 5, 5}, {3, 5}}, .in_kinds = {"normal", "index:2"}});


// ------------------------------------------------------------------------------ RROIAlign
// Rotated ROIs [batch index, centre x, centre y, w, h, theta in degrees]: each bin averages
// bilinear samples of the ROI's grid rotated by theta about its centre (MXNet 1.9.1 has no
// gradient for it: the data gets zero).
struct RROIAlignParam {
  Shape pooled_size;
  float spatial_scale;
  int64_t sampling_ratio;
};
const auto kRROIAlignSchema =
    ParamSchema<RROIAlignParam>()
        .required("pooled_size", &RROIAlignParam::pooled_size, "Output size (h, w).")
        .required("spatial_scale", &RROIAlignParam::spatial_scale,
                  "Ratio of the feature map size to the image size.")
        .optional("sampling_ratio", &RROIAlignParam::sampling_ratio, int64_t{-1},
                  "Samples per bin side (<= 0: ceil of the bin size).")
        .check([](RROIAlignParam& p) {
          check_pooled(p.pooled_size);
          if (!(p.spatial_scale >= 0.f && p.spatial_scale <= 1.f))
            throw ParamError("parameter 'spatial_scale' must be in [0, 1], got " +
                             format_float32(p.spatial_scale));
        });

void infer_rroialign(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() && in[0].ndim() != 4)
    throw ShapeError(vision::label(a) + ": data must be 4-D (N, C, H, W), got " + in[0].str());
  if (in[1].ndim() && (in[1].ndim() != 2 || in[1][1] != 6))
    throw ShapeError(vision::label(a) + ": rois must be 2-D (num_rois, 6), got " + in[1].str());
  if (in[0].ndim() == 0 || in[1].ndim() == 0) return;
  const Shape& ps = a.param<RROIAlignParam>().pooled_size;
  merge_shape(out[0], Shape{in[1][0], in[0][1], ps[0], ps[1]}, "output 0");
}

class RROIAlignKernel final : public Kernel {
 public:
  explicit RROIAlignKernel(const KernelArgs& a)
      : p_(a.attrs.param<RROIAlignParam>()), d_(a.in_shapes[0]), o_(a.out_shapes[0]) {
    vision::check_float(a, 2);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const std::vector<float> x = vision::load(in[0]), rois = vision::load(in[1]);
    const int64_t N = d_[0], C = d_[1], H = d_[2], W = d_[3], PH = o_[2], PW = o_[3];
    std::vector<float> y(static_cast<size_t>(o_.numel()), 0.f);
    for (int64_t n = 0; n < o_[0]; ++n) {
      const float* r = &rois[static_cast<size_t>(n * 6)];
      const int64_t b = static_cast<int64_t>(r[0]);
      if (b < 0 || b >= N) continue;
      const float cx = r[1] * p_.spatial_scale, cy = r[2] * p_.spatial_scale;
      const float rw = std::max(r[3] * p_.spatial_scale, 1.f), rh = std::max(r[4] * p_.spatial_scale, 1.f);
      const float theta = static_cast<float>(r[5] * std::numbers::pi / 180.0);
      const float ct = std::cos(theta), st = std::sin(theta);
      const float bh = rh / static_cast<float>(PH), bw = rw / static_cast<float>(PW);
      const int64_t gh = p_.sampling_ratio > 0 ? p_.sampling_ratio
                                               : static_cast<int64_t>(std::ceil(rh / static_cast<float>(PH)));
      const int64_t gw = p_.sampling_ratio > 0 ? p_.sampling_ratio
                                               : static_cast<int64_t>(std::ceil(rw / static_cast<float>(PW)));
      const float count = static_cast<float>(gh * gw);
      for (int64_t c = 0; c < C; ++c) {
        const float* plane = &x[static_cast<size_t>((b * C + c) * H * W)];
        for (int64_t ph = 0; ph < PH; ++ph)
          for (int64_t pw = 0; pw < PW; ++pw) {
            float s = 0.f;
            for (int64_t iy = 0; iy < gh; ++iy) {
              const float yy = -rh / 2.f + static_cast<float>(ph) * bh +
                               (static_cast<float>(iy) + .5f) * bh / static_cast<float>(gh);
              for (int64_t ix = 0; ix < gw; ++ix) {
                const float xx = -rw / 2.f + static_cast<float>(pw) * bw +
                                 (static_cast<float>(ix) + .5f) * bw / static_cast<float>(gw);
                tap(yy * ct - xx * st + cy, xx * ct + yy * st + cx, H, W,
                    [&](int64_t pos, float w) { s += w * plane[pos]; });
              }
            }
            y[static_cast<size_t>(((n * C + c) * PH + ph) * PW + pw)] = s / count;
          }
      }
    }
    vision::store(out[0], req[0], y);
  }

 private:
  RROIAlignParam p_;
  Shape d_, o_;
};

LOOM_REGISTER_OP("_contrib_RROIAlign")
    .describe("ROIAlign over rotated regions of interest (no gradient, as MXNet).")
    .params(kRROIAlignSchema)
    .inputs({"data", "rois"})
    .shape_fn(infer_rroialign)
    .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
      vision::infer_type_shared(in, out, 2);
    })
    .zero_grad()
    .cpu<RROIAlignKernel>()
    .sample({.attrs = {{"pooled_size", "(2, 3)"}, {"spatial_scale", "1"}},
             .in_shapes = {{2, 2, 6, 6}, {3, 6}}, .in_kinds = {"normal", "index:2"}})
    .sample({.attrs = {{"pooled_size", "(2, 2)"}, {"spatial_scale", "0.5"}, {"sampling_ratio", "2"}},
             .in_shapes = {{2, 3, 7, 5}, {3, 6}}, .in_kinds = {"normal", "index:2"}});

// ------------------------------------------------------------------------------ PSROIPooling
// Position-sensitive ROI pooling (R-FCN): output (R, output_dim, P, P); bin (ph, pw) of class
// channel ctop averages input channel (ctop * G + gh) * G + gw (gh, gw: the bin's group
// cell, G = group_size, default P) over the bin, whose bounds come from the rounded ROI
// corners (end + 1) scaled by spatial_scale (at least 0.1 wide), floor/ceil and clipped.
struct PSROIParam {
  float spatial_scale;
  int64_t output_dim, pooled_size, group_size;
};
const auto kPSROISchema =
    ParamSchema<PSROIParam>()
        .required("spatial_scale", &PSROIParam::spatial_scale,
                  "Ratio of the feature map size to the image size.")
        .required("output_dim", &PSROIParam::output_dim, "Output channels (classes).")
        .required("pooled_size", &PSROIParam::pooled_size, "Output height and width.")
        .optional("group_size", &PSROIParam::group_size, int64_t{0},
                  "Position-sensitive groups per side (0: pooled_size).")
        .check([](PSROIParam& p) {
          if (p.group_size == 0) p.group_size = p.pooled_size;
          if (!(p.spatial_scale >= 0.f && p.spatial_scale <= 1.f))
            throw ParamError("parameter 'spatial_scale' must be in [0, 1], got " +
                             format_float32(p.spatial_scale));
          if (p.output_dim < 1 || p.pooled_size < 1 || p.group_size < 1)
            throw ParamError("parameters 'output_dim', 'pooled_size' and 'group_size' must be "
                             "positive");
        });

void infer_psroi(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  check_roi_shapes(a, in[0], in[1]);
  if (in[0].ndim() == 0 || in[1].ndim() == 0) return;
  const auto& p = a.param<PSROIParam>();
  if (in[0][1] < p.output_dim * p.group_size * p.group_size)
    throw ShapeError(vision::label(a) + ": data has " + std::to_string(in[0][1]) +
                     " channels, fewer than output_dim * group_size^2 = " +
                     std::to_string(p.output_dim * p.group_size * p.group_size));
  merge_shape(out[0], Shape{in[1][0], p.output_dim, p.pooled_size, p.pooled_size}, "output 0");
}

class PSROIKernel final : public Kernel {
 public:
  explicit PSROIKernel(const KernelArgs& a)
      : p_(a.attrs.param<PSROIParam>()), d_(a.in_shapes[0]), o_(a.out_shapes[0]) {
    vision::check_float(a, 2);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const std::vector<float> x = vision::load(in[0]), rois = vision::load(in[1]);
    std::vector<float> y(static_cast<size_t>(o_.numel()), 0.f);
    run(rois, [&](size_t o, size_t i, float w) { y[o] += w * x[i]; });
    vision::store(out[0], req[0], y);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (ig.size() > 1) vision::store_zero(ig[1], req[1]);
    if (req[0] == Req::kNull) return;
    const std::vector<float> g = vision::load(og[0]), rois = vision::load(in[1]);
    std::vector<float> dx(static_cast<size_t>(d_.numel()), 0.f);
    run(rois, [&](size_t o, size_t i, float w) { dx[i] += w * g[o]; });
    vision::store(ig[0], req[0], dx);
  }

 private:
  // fn(output index, input index, 1 / bin area) for every input element of every bin.
  template <class Fn>
  void run(const std::vector<float>& rois, Fn fn) const {
    const int64_t N = d_[0], C = d_[1], H = d_[2], W = d_[3];
    const int64_t D = o_[1], P = o_[2], G = p_.group_size;
    const float sc = p_.spatial_scale;
    for (int64_t n = 0; n < o_[0]; ++n) {
      const float* r = &rois[static_cast<size_t>(n * 5)];
      const int64_t b = static_cast<int64_t>(r[0]);
      if (b < 0 || b >= N) continue;
      const float sw = std::round(r[1]) * sc, sh = std::round(r[2]) * sc;
      const float ew = (std::round(r[3]) + 1.f) * sc, eh = (std::round(r[4]) + 1.f) * sc;
      const float bw = std::max(ew - sw, 0.1f) / static_cast<float>(P);
      const float bh = std::max(eh - sh, 0.1f) / static_cast<float>(P);
      for (int64_t ct = 0; ct < D; ++ct)
        for (int64_t ph = 0; ph < P; ++ph)
          for (int64_t pw = 0; pw < P; ++pw) {
            const int64_t hs = std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>(ph) * bh + sh)), 0, H);
            const int64_t he = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<float>(ph + 1) * bh + sh)), 0, H);
            const int64_t ws = std::clamp<int64_t>(static_cast<int64_t>(std::floor(static_cast<float>(pw) * bw + sw)), 0, W);
            const int64_t we = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(static_cast<float>(pw + 1) * bw + sw)), 0, W);
            if (he <= hs || we <= ws) continue;
            const int64_t gw = std::clamp<int64_t>(pw * G / P, 0, G - 1);
            const int64_t gh = std::clamp<int64_t>(ph * G / P, 0, G - 1);
            const int64_t c = (ct * G + gh) * G + gw;
            const float w = 1.f / static_cast<float>((he - hs) * (we - ws));
            const size_t o = static_cast<size_t>(((n * D + ct) * P + ph) * P + pw);
            for (int64_t h = hs; h < he; ++h)
              for (int64_t x = ws; x < we; ++x)
                fn(o, static_cast<size_t>(((b * C + c) * H + h) * W + x), w);
          }
    }
  }
  PSROIParam p_;
  Shape d_, o_;
};

LOOM_REGISTER_OP("_contrib_PSROIPooling")
    .describe("Position-sensitive ROI average pooling (R-FCN).")
    .params(kPSROISchema)
    .inputs({"data", "rois"})
    .shape_fn(infer_psroi)
    .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
      vision::infer_type_shared(in, out, 2);
    })
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<PSROIKernel>()
    .sample({.attrs = {{"spatial_scale", "1"}, {"output_dim", "2"}, {"pooled_size", "2"}},
             .in_shapes = {{2, 8, 5, 5}, {3, 5}}, .in_kinds = {"normal", "index:2"}})
    .sample({.attrs = {{"spatial_scale", "0.5"}, {"output_dim", "1"}, {"pooled_size", "3"},
                       {"group_size", "2"}},
             .in_shapes = {{1, 4, 6, 7}, {2, 5}}, .in_kinds = {"normal", "index:1"}});

// The kernels compute float16/32/64 data through float32 buffers.
LOOM_CPU_DTYPES("ROIPooling", kDTypePolicyFloats, {.any_outputs = {1}});
LOOM_CPU_DTYPES("_contrib_ROIAlign", kDTypePolicyFloats);
LOOM_CPU_DTYPES("_contrib_RROIAlign", kDTypePolicyFloats);
LOOM_CPU_DTYPES("_contrib_PSROIPooling", kDTypePolicyFloats);

}  // namespace
}  // namespace loom
