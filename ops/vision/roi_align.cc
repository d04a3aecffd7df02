// ROIAlign (Mask R-CNN) and its rotated variant (MXNet 1.9.1 contrib), on data (N, C, H, W):
//   _contrib_ROIAlign: rois (R, 5) [batch, x1, y1, x2, y2]; no rounding; each bin averages
//     sample_ratio^2 (adaptive: ceil(bin size)) bilinear samples. position_sensitive divides
//     the channels into ph*pw groups (R-FCN); aligned shifts the ROI by half a pixel
//     (Detectron2). Rows with a negative batch index give zeros; the rois get a zero gradient.
//   _contrib_RROIAlign: rois (R, 6) [batch, centre x, centre y, w, h, theta degrees], the
//     sampling grid rotated about the centre; forward only (MXNet registers no gradient).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ops/dtype_policy.h"
#include "ops/vision/roi_util.h"

namespace loom {
namespace {

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
          vision::check_pooled(p.pooled_size);
          vision::check_spatial_scale(p.spatial_scale);
        });

void infer_roialign(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  vision::check_roi_shapes(a, in[0], in[1]);
  if (in[0].ndim() == 0 || in[1].ndim() == 0) return;
  const auto& p = a.param<ROIAlignParam>();
  const int64_t g = p.pooled_size[0] * p.pooled_size[1];
  int64_t c = in[0][1];
  if (p.position_sensitive) {
    if (c % g != 0)
      throw ShapeError(
          vision::label(a) + ": with position_sensitive the input channels (" + std::to_string(c) +
          ") must be a multiple of pooled_size[0]*pooled_size[1] (" + std::to_string(g) + ")");
    c /= g;
  }
  merge_shape(out[0], Shape{in[1][0], c, p.pooled_size[0], p.pooled_size[1]}, "output 0");
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
      const int64_t gh = p_.sample_ratio > 0
                             ? p_.sample_ratio
                             : static_cast<int64_t>(std::ceil(rh / static_cast<float>(PH)));
      const int64_t gw = p_.sample_ratio > 0
                             ? p_.sample_ratio
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
                vision::roi_align_taps(yy, xx, H, W,
                                       [&](int64_t pos, float w) { fn(o, plane, pos, w / count); });
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
             .in_shapes = {{3, 2, 6, 6}, {4, 5}},
             .in_kinds = {"normal", "index:3"}})
    .sample({.attrs = {{"pooled_size", "(2, 3)"}, {"spatial_scale", "0.5"}, {"sample_ratio", "2"}},
             .in_shapes = {{2, 3, 5, 7}, {3, 5}},
             .in_kinds = {"normal", "index:2"}})
    .sample({.attrs = {{"pooled_size", "(2, 2)"},
                       {"spatial_scale", "1"},
                       {"position_sensitive", "True"},
                       {"sample_ratio", "2"}},
             .in_shapes = {{2, 8, 5, 5}, {3, 5}},
             .in_kinds = {"normal", "index:2"}});

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
          vision::check_pooled(p.pooled_size);
          vision::check_spatial_scale(p.spatial_scale);
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
      const float rw = std::max(r[3] * p_.spatial_scale, 1.f),
                  rh = std::max(r[4] * p_.spatial_scale, 1.f);
      const float theta = static_cast<float>(r[5] * std::numbers::pi / 180.0);
      const float ct = std::cos(theta), st = std::sin(theta);
      const float bh = rh / static_cast<float>(PH), bw = rw / static_cast<float>(PW);
      const int64_t gh = p_.sampling_ratio > 0
                             ? p_.sampling_ratio
                             : static_cast<int64_t>(std::ceil(rh / static_cast<float>(PH)));
      const int64_t gw = p_.sampling_ratio > 0
                             ? p_.sampling_ratio
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
                vision::roi_align_taps(yy * ct - xx * st + cy, xx * ct + yy * st + cx, H, W,
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
             .in_shapes = {{2, 2, 6, 6}, {3, 6}},
             .in_kinds = {"normal", "index:2"}})
    .sample(
        {.attrs = {{"pooled_size", "(2, 2)"}, {"spatial_scale", "0.5"}, {"sampling_ratio", "2"}},
         .in_shapes = {{2, 3, 7, 5}, {3, 6}},
         .in_kinds = {"normal", "index:2"}});

// The kernels compute float16/32/64 data through float32 buffers.
LOOM_CPU_DTYPES("_contrib_ROIAlign", kDTypePolicyFloats);
LOOM_CPU_DTYPES("_contrib_RROIAlign", kDTypePolicyFloats);

}  // namespace
}  // namespace loom
