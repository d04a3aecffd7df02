// _contrib_DeformablePSROIPooling (Deformable R-FCN, MXNet 1.9.1): position-sensitive ROI
// pooling whose bins are shifted by learned offsets. Inputs data (N, C, H, W), rois (R, 5)
// [batch, x1, y1, x2, y2] and, unless no_trans, trans (R, 2 * classes, part, part). Output
// (R, output_dim, P, P) and hidden top_count (samples averaged per bin).
// The ROI spans round(x1) * scale - 0.5 .. (round(x2) + 1) * scale - 0.5 (at least 0.1);
// bin (ph, pw) of class channel ctop starts at its grid corner plus trans * trans_std * ROI
// size (trans of part (floor(ph / P * part), likewise w) and class ctop / (output_dim /
// classes)); it averages sample_per_part^2 bilinear samples of input channel (ctop * G + gh)
// * G + gw, skipping samples outside [-0.5, size - 0.5] and clamping the rest to the map.
// Gradients: data through the bilinear weights; trans through the sample positions (the
// exact derivative: zero where a sample was clamped to the border).
#include "ops/dtype_policy.h"
#include "ops/vision/roi_math.h"
#include "ops/vision/vision_util.h"

namespace loom {
namespace {

using vision::DPSParam;
const auto kDPSSchema =
    ParamSchema<DPSParam>()
        .required("spatial_scale", &DPSParam::spatial_scale,
                  "Ratio of the feature map size to the image size.")
        .required("output_dim", &DPSParam::output_dim, "Output channels.")
        .required("group_size", &DPSParam::group_size, "Position-sensitive groups per side.")
        .required("pooled_size", &DPSParam::pooled_size, "Output height and width.")
        .optional("part_size", &DPSParam::part_size, int64_t{0},
                  "Offset parts per side (0: pooled_size).")
        .optional("sample_per_part", &DPSParam::sample_per_part, int64_t{1},
                  "Samples per bin side.")
        .optional("trans_std", &DPSParam::trans_std, 0.f, "Scale of the offsets.")
        .optional("no_trans", &DPSParam::no_trans, false, "No offsets (no trans input).")
        .check([](DPSParam& p) {
          if (p.part_size == 0) p.part_size = p.pooled_size;
          if (!(p.spatial_scale >= 0.f && p.spatial_scale <= 1.f))
            throw ParamError("parameter 'spatial_scale' must be in [0, 1]");
          if (!(p.trans_std >= 0.f && p.trans_std <= 1.f))
            throw ParamError("parameter 'trans_std' must be in [0, 1]");
          if (p.output_dim < 1 || p.group_size < 1 || p.pooled_size < 1 || p.part_size < 1 ||
              p.sample_per_part < 1)
            throw ParamError(
                "parameters 'output_dim', 'group_size', 'pooled_size', "
                "'part_size' and 'sample_per_part' must be positive");
        });

void infer_dps(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<DPSParam>();
  const std::string what = vision::label(a);
  if (in[0].ndim() && in[0].ndim() != 4)
    throw ShapeError(what + ": data must be 4-D (N, C, H, W), got " + in[0].str());
  if (in[1].ndim() && (in[1].ndim() != 2 || in[1][1] != 5))
    throw ShapeError(what + ": rois must be 2-D (num_rois, 5), got " + in[1].str());
  if (!p.no_trans && in[2].ndim()) {
    const Shape& t = in[2];
    if (t.ndim() != 4 || t[1] % 2 != 0 || t[1] == 0 || p.output_dim % (t[1] / 2) != 0 ||
        t[2] != p.part_size || t[3] != p.part_size)
      throw ShapeError(what +
                       ": trans must be (num_rois, 2 * classes, part_size, part_size) "
                       "with output_dim a multiple of classes, got " +
                       t.str());
  }
  if (in[0].ndim() && in[0][1] < p.output_dim * p.group_size * p.group_size)
    throw ShapeError(what + ": data has " + std::to_string(in[0][1]) +
                     " channels, fewer than output_dim * group_size^2");
  if (in[1].ndim() == 0) return;
  const Shape o{in[1][0], p.output_dim, p.pooled_size, p.pooled_size};
  merge_shape(out[0], o, "output 0");
  merge_shape(out[1], o, "output 1 (top_count)");
}

class DPSKernel final : public Kernel {
 public:
  explicit DPSKernel(const KernelArgs& a)
      : p_(a.attrs.param<DPSParam>()), m_(vision::dps_math(p_, a.in_shapes, a.out_shapes[0])) {
    vision::check_float(a, a.in_shapes.size());
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const std::vector<float> x = vision::load(in[0]), rois = vision::load(in[1]);
    const std::vector<float> tr = p_.no_trans ? std::vector<float>() : vision::load(in[2]);
    std::vector<float> y(static_cast<size_t>(m_.outputs()), 0.f), cnt(y.size(), 0.f);
    run(x, rois, tr, [&](size_t o, int64_t, float v, float, float, float, float, int64_t) {
      y[o] += v;
      cnt[o] += 1.f;
    });
    for (size_t o = 0; o < y.size(); ++o)
      if (cnt[o] > 0) y[o] /= cnt[o];
    vision::store(out[0], req[0], y);
    if (out.size() > 1) vision::store(out[1], req[1], cnt);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (ig.size() > 1) vision::store_zero(ig[1], req[1]);
    const std::vector<float> x = vision::load(in[0]), rois = vision::load(in[1]);
    const std::vector<float> tr = p_.no_trans ? std::vector<float>() : vision::load(in[2]);
    const std::vector<float> g = vision::load(og[0]);
    std::vector<float> cnt(static_cast<size_t>(m_.outputs()), 0.f);
    run(x, rois, tr,
        [&](size_t o, int64_t, float, float, float, float, float, int64_t) { cnt[o] += 1.f; });
    std::vector<float> dx(x.size(), 0.f), dtr(tr.size(), 0.f);
    run(x, rois, tr,
        [&](size_t o, int64_t base, float, float h, float w, float dvh, float dvw, int64_t ti) {
          m_.sample_grad(base, h, w, dvh, dvw, ti, g[o] / cnt[o], [&](int k, int64_t i, float v) {
            (k == 0 ? dx : dtr)[static_cast<size_t>(i)] += v;
          });
        });
    vision::store(ig[0], req[0], dx);
    if (!p_.no_trans) vision::store(ig[2], req[2], dtr);
  }

 private:
  // fn(output index, input plane offset, sample value, h, w, d value / d trans_y, d value /
  // d trans_x, index of the bin's trans_x) for every sample taken (ops/vision/roi_math.h's
  // DPSMath, which the GPU kernel runs too).
  template <class Fn>
  void run(const std::vector<float>& x, const std::vector<float>& rois,
           const std::vector<float>& tr, Fn fn) const {
    for (int64_t o = 0; o < m_.outputs(); ++o)
      m_.samples(o, x.data(), rois.data(), tr.data(),
                 [&](int64_t base, float v, float h, float w, float dvy, float dvx, int64_t ti) {
                   fn(static_cast<size_t>(o), base, v, h, w, dvy, dvx, ti);
                 });
  }
  DPSParam p_;
  vision::DPSMath m_;
};

LOOM_REGISTER_OP("_contrib_DeformablePSROIPooling")
    .describe("Position-sensitive ROI pooling with learned bin offsets (Deformable R-FCN).")
    .params(kDPSSchema)
    .inputs([](const OpAttrs& a) {
      if (a.param<DPSParam>().no_trans) return std::vector<std::string>{"data", "rois"};
      return std::vector<std::string>{"data", "rois", "trans"};
    })
    .outputs({"output", "top_count"})
    .visible_outputs([](const OpAttrs&) { return 1; })
    .shape_fn(infer_dps)
    .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
      vision::infer_type_shared(in, out, in.size());
    })
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<DPSKernel>()
    .sample({.attrs = {{"spatial_scale", "1"},
                       {"output_dim", "2"},
                       {"group_size", "2"},
                       {"pooled_size", "2"},
                       {"sample_per_part", "2"},
                       {"trans_std", "0.1"}},
             .in_shapes = {{2, 8, 6, 6}, {3, 5}, {3, 4, 2, 2}},
             .in_kinds = {"normal", "index:3", "unit"}})
    .sample({.attrs = {{"spatial_scale", "0.5"},
                       {"output_dim", "1"},
                       {"group_size", "3"},
                       {"pooled_size", "3"},
                       {"no_trans", "True"}},
             .in_shapes = {{1, 9, 5, 5}, {2, 5}},
             .in_kinds = {"normal", "index:1"}});

LOOM_CPU_DTYPES("_contrib_DeformablePSROIPooling", kDTypePolicyFloats);

}  // namespace
}  // namespace loom
