// Crop (legacy MXNet operator, src/operator/crop-inl.h): cuts an (h, w) window out of NCHW
// data, h and w taken from `h_w` (num_args=1) or from the second input's shape (num_args=2,
// "crop_like", whose values are never read and whose gradient is zero).
#include <tuple>

#include "ops/infer.h"
#include "ops/tensor/index_map.h"
#include "ops/tensor/tensor_util.h"

namespace loom {
namespace {

struct CropParam {
  int num_args;
  Shape offset, h_w;
  bool center_crop;
};
const auto kCropSchema =
    ParamSchema<CropParam>()
        .required("num_args", &CropParam::num_args,
                  "1: crop to h_w; 2: crop to the height and width of the second input.")
        .optional("offset", &CropParam::offset, Shape{0, 0}, "Crop offset (y, x).")
        .optional("h_w", &CropParam::h_w, Shape{0, 0}, "Crop height and width (h, w).")
        .optional("center_crop", &CropParam::center_crop, false,
                  "Centre the window instead of using `offset`.")
        .check([](CropParam& p) {
          if (p.num_args < 1 || p.num_args > 2)
            throw ParamError("num_args must be 1 or 2, got " + std::to_string(p.num_args));
          if (p.offset.ndim() != 2 || p.h_w.ndim() != 2)
            throw ParamError("offset and h_w must have two entries (y, x) and (h, w)");
        });

/// The window's top-left corner for data (N, C, H, W) cropped to out (N, C, h, w).
std::pair<int64_t, int64_t> crop_offset(const CropParam& p, const Shape& data, const Shape& out) {
  if (p.center_crop) return {(data[2] - out[2]) / 2, (data[3] - out[3]) / 2};
  return {p.offset[0], p.offset[1]};
}

void infer_crop(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<CropParam>();
  const Shape& d = in[0];
  if (d.ndim() == 0) return;
  if (d.ndim() != 4)
    throw ShapeError(input_label(a, 0) + ": expected 4-d (N, C, H, W), got " + d.str());
  int64_t h = 0, w = 0;
  if (p.num_args == 1) {
    h = p.h_w[0], w = p.h_w[1];
  } else {
    const Shape& like = in[1];
    if (like.ndim() == 0) return;
    if (like.ndim() < 4)
      throw ShapeError(input_label(a, 1) + ": expected (N, C, H, W), got " + like.str());
    h = like[2], w = like[3];
  }
  if (h == 0 || w == 0 || d[2] == 0 || d[3] == 0) return;
  if (h < 1 || w < 1 || h > d[2] || w > d[3])
    throw ShapeError("cannot crop " + input_label(a, 0) + " of shape " + d.str() + " to (" +
                     std::to_string(h) + ", " + std::to_string(w) + ")");
  Shape o{d[0], d[1], h, w};
  auto [oy, ox] = crop_offset(p, d, o);
  if (oy < 0 || ox < 0 || oy > d[2] - h || ox > d[3] - w)
    throw ShapeError("offset " + p.offset.str() + " puts the (" + std::to_string(h) + ", " +
                     std::to_string(w) + ") window outside " + input_label(a, 0) + " of shape " +
                     d.str());
  merge_shape(out[0], o, "output 0");
}

std::vector<std::string> crop_inputs(const OpAttrs& a) {
  if (a.param<CropParam>().num_args == 1) return {"arg0"};
  return {"arg0", "arg1"};
}

class CropKernel final : public Kernel {
 public:
  explicit CropKernel(const KernelArgs& a) : data_(a.in_shapes[0]), out_(a.out_shapes[0]) {
    tensor::check_f32(a);
    std::tie(oy_, ox_) = crop_offset(a.attrs.param<CropParam>(), data_, out_);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const float* x = in[0].data<float>();
    float* y = out[0].data<float>();
    const bool add = req[0] == Req::kAdd;
    for_rows([&](int64_t plane, int64_t r) {
      const float* src = x + (plane * data_[2] + oy_ + r) * data_[3] + ox_;
      float* dst = y + (plane * out_[2] + r) * out_[3];
      for (int64_t c = 0; c < out_[3]; ++c) dst[c] = add ? dst[c] + src[c] : src[c];
    });
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (ig.size() > 1 && req[1] != Req::kNull && req[1] != Req::kAdd)
      tensor::fill_req(ig[1], req[1], 0.f);  // crop_like only lends its shape
    if (req[0] == Req::kNull) return;
    const bool add = req[0] == Req::kAdd;
    if (!add) tensor::fill_req(ig[0], req[0], 0.f);
    const float* g = og[0].data<float>();
    float* dx = ig[0].data<float>();
    for_rows([&](int64_t plane, int64_t r) {
      const float* src = g + (plane * out_[2] + r) * out_[3];
      float* dst = dx + (plane * data_[2] + oy_ + r) * data_[3] + ox_;
      for (int64_t c = 0; c < out_[3]; ++c) dst[c] = add ? dst[c] + src[c] : src[c];
    });
  }

 private:
  // Calls fn(plane, row) for every output row of every (n, c) plane.
  template <class Fn>
  void for_rows(Fn fn) const {
    const int64_t rows = out_[0] * out_[1] * out_[2];
    const bool par = rows * out_[3] >= tensor::kParallelMin;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t i = 0; i < rows; ++i) fn(i / out_[2], i % out_[2]);
  }
  Shape data_, out_;
  int64_t oy_ = 0, ox_ = 0;
};

LOOM_REGISTER_OP("Crop")
    .describe("Crops NCHW data to h_w or to the spatial size of a second input.")
    .params(kCropSchema)
    .inputs(crop_inputs)
    .shape_fn(infer_crop)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .cpu<CropKernel>()
    .sample({.attrs = {{"num_args", "2"}}, .in_shapes = {{2, 3, 5, 6}, {2, 1, 3, 4}}})
    .sample({.attrs = {{"num_args", "2"}, {"center_crop", "True"}},
             .in_shapes = {{1, 2, 6, 7}, {1, 5, 3, 4}}})
    .sample({.attrs = {{"num_args", "1"}, {"h_w", "(2, 3)"}, {"offset", "(1, 2)"}},
             .in_shapes = {{2, 2, 4, 5}}});

}  // namespace

tensor::IndexMap tensor::crop_index_map(const KernelArgs& a) {
  const Shape &d = a.in_shapes[0], &o = a.out_shapes[0];
  const auto [oy, ox] = crop_offset(a.attrs.param<CropParam>(), d, o);
  IndexMap m(d, o);
  m.dims = {{.src = 0}, {.src = 1}, {.src = 2, .begin = oy}, {.src = 3, .begin = ox}};
  return m;
}

}  // namespace loom
