// ROIPooling (MXNet 1.9.1, Fast R-CNN): data (N, C, H, W), rois (R, 5) rows [batch index,
// x1, y1, x2, y2] in image coordinates (scaled by spatial_scale). The ROI's corners are
// rounded to the feature grid, the ROI (at least 1x1) is cut into pooled_size bins
// (floor/ceil bounds, clipped to the map) and each output is the bin's maximum (0 for an
// empty bin or an invalid batch index). A hidden int32 output `maxidx` holds the flat data
// index of each maximum (-1: none); the gradient goes to that element only, the rois get
// zero (as MXNet).
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "ops/dtype_policy.h"
#include "ops/vision/roi_util.h"

namespace loom {
namespace {

struct ROIPoolParam {
  Shape pooled_size;
  float spatial_scale;
};
const auto kROIPoolSchema =
    ParamSchema<ROIPoolParam>()
        .required("pooled_size", &ROIPoolParam::pooled_size, "Output size (h, w).")
        .required("spatial_scale", &ROIPoolParam::spatial_scale,
                  "Ratio of the feature map size to the image size.")
        .check([](ROIPoolParam& p) {
          vision::check_pooled(p.pooled_size);
          vision::check_spatial_scale(p.spatial_scale);
        });
void infer_roipool(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  vision::check_roi_shapes(a, in[0], in[1]);
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
      const int64_t x1 = std::lround(r[1] * p_.spatial_scale),
                    y1 = std::lround(r[2] * p_.spatial_scale);
      const int64_t x2 = std::lround(r[3] * p_.spatial_scale),
                    y2 = std::lround(r[4] * p_.spatial_scale);
      const float bh =
          static_cast<float>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<float>(PH);
      const float bw =
          static_cast<float>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<float>(PW);
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
             .in_shapes = {{3, 2, 6, 6}, {4, 5}},
             .in_kinds = {"normal", "index:3"}})
    .sample({.attrs = {{"pooled_size", "(3, 2)"}, {"spatial_scale", "0.5"}},
             .in_shapes = {{2, 3, 5, 7}, {3, 5}},
             .in_kinds = {"normal", "index:2"}});

// The kernel computes float16/32/64 data through float32 buffers.
LOOM_CPU_DTYPES("ROIPooling", kDTypePolicyFloats, {.any_outputs = {1}});

}  // namespace
}  // namespace loom
