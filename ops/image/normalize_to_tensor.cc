// Image ops of MXNet 1.9.1 (src/operator/image/image_random.cc), reached as mx.nd.image.* /
// mx.sym.image.*:
//   _image_to_tensor(data)   (H, W, C) or (N, H, W, C), any dtype -> float32 (C, H, W) or
//       (N, C, H, W) divided by 255. Gradient: the head gradient transposed back / 255 (MXNet
//       registers a plain copy, which only matches when the shapes coincide).
//   _image_normalize(data, mean, std)   (C, H, W) or (N, C, H, W) with C of 1 or 3:
//       (x[c] - mean[c]) / std[c], mean/std of one value or one per channel; gradient
//       dy[c] / std[c].
#include "ops/float_tuple.h"
#include "ops/image/image_math.h"
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

void check_image_rank(const Shape& s, const char* layout) {
  if (s.ndim() != 3 && s.ndim() != 4)
    throw ShapeError(std::string("Input image must have shape ") + layout + ", but got " + s.str());
}

// ---- to_tensor ----
void infer_to_tensor(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  const Shape& s = in[0];
  check_image_rank(s, "(height, width, channels) or (N, height, width, channels)");
  merge_shape(out[0], s.ndim() == 3 ? Shape{s[2], s[0], s[1]} : Shape{s[0], s[3], s[1], s[2]},
              "output 0");
}

class ToTensorKernel final : public Kernel {
 public:
  explicit ToTensorKernel(const KernelArgs& a) : t_(a.in_types[0]), what_(tensor::node_label(a)) {
    const Shape& s = a.in_shapes[0];
    n_ = s.ndim() == 4 ? s[0] : 1;
    hw_ = s[s.ndim() - 3] * s[s.ndim() - 2];
    c_ = s[s.ndim() - 1];
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    float* y = out[0].data<float>();
    const int64_t hw = hw_, c = c_;
    dispatch_dtype(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      // Output (n, ch, p) reads input (n, p, ch).
      tensor::write_t<float>(y, req[0], n_ * hw * c, [=](int64_t o) {
        return convert_value<float>(x[image::to_tensor_src(o, hw, c)]) / 255.f;
      });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    const float* g = og[0].data<float>();
    const int64_t hw = hw_, c = c_;
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      tensor::write_t<T>(ig[0].data<T>(), req[0], n_ * hw * c, [=](int64_t i) {
        return convert_value<T>(g[image::to_tensor_grad_src(i, hw, c)] / 255.f);
      });
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
  int64_t n_ = 1, hw_ = 1, c_ = 1;
};

// ---- normalize ----
struct NormalizeParam {
  std::string mean, std;
};
const auto kNormalizeSchema =
    ParamSchema<NormalizeParam>()
        .optional("mean", &NormalizeParam::mean, std::string("(0, 0, 0, 0)"),
                  "Sequence of means for each channel. Default value is 0.")
        .optional("std", &NormalizeParam::std, std::string("(1, 1, 1, 1)"),
                  "Sequence of standard deviations for each channel. Default value is 1.");

std::vector<double> float_tuple(const std::string& text, const char* what) {
  std::vector<double> v = parse_double_tuple(text, what);
  if (v.empty()) throw ParamError(std::string(what) + " " + text + " is empty");
  return v;
}

int64_t image_channels(const Shape& s) { return s.ndim() == 3 ? s[0] : s[1]; }

void check_normalize(const OpAttrs& a, const Shape& s) {
  check_image_rank(s, "(channels, height, width), or (N, channels, height, width)");
  const int64_t c = image_channels(s);
  if (c != 1 && c != 3)
    throw ShapeError("The channel dimension of input tensor must have 1 or 3 elements, but got "
                     "input with shape " + s.str());
  const auto& p = a.param<NormalizeParam>();
  const auto m = float_tuple(p.mean, "mean"), d = float_tuple(p.std, "std");
  if (m.size() != 1 && static_cast<int64_t>(m.size()) < c)
    throw ShapeError("mean " + p.mean + " must have 1 or " + std::to_string(c) + " elements");
  if (d.size() != 1 && static_cast<int64_t>(d.size()) < c)
    throw ShapeError("std " + p.std + " must have 1 or " + std::to_string(c) + " elements");
}

void infer_normalize(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  check_normalize(a, in[0]);
  merge_shape(out[0], in[0], "output 0");
}

}  // namespace

image::NormalizeMath image::normalize_math(const OpAttrs& a, const Shape& s) {
  const auto& p = a.param<NormalizeParam>();
  const auto m = float_tuple(p.mean, "mean"), d = float_tuple(p.std, "std");
  image::NormalizeMath r{};
  r.c = image_channels(s);
  r.hw = s[s.ndim() - 2] * s[s.ndim() - 1];
  for (int64_t ch = 0; ch < r.c && ch < 3; ++ch) {
    r.mean[ch] = static_cast<float>(m.size() == 1 ? m[0] : m[static_cast<size_t>(ch)]);
    r.std[ch] = static_cast<float>(d.size() == 1 ? d[0] : d[static_cast<size_t>(ch)]);
  }
  return r;
}

namespace {

class NormalizeKernel final : public Kernel {
 public:
  explicit NormalizeKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kFloatDTypes)), what_(tensor::node_label(a)) {
    const Shape& s = a.in_shapes[0];
    c_ = image_channels(s);
    n_ = s.ndim() == 4 ? s[0] : 1;
    hw_ = s[s.ndim() - 2] * s[s.ndim() - 1];
    m_ = image::normalize_math(a.attrs, s);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    run(in[0], out[0], req[0], true);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    run(og[0], ig[0], req[0], false);
  }

 private:
  void run(const NDArray& src, const NDArray& dst, Req req, bool forward) {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = src.data<T>();
      const image::NormalizeMath m = m_;
      tensor::write_t<T>(dst.data<T>(), req, src.size(), [=](int64_t i) {
        const float v = convert_value<float>(x[i]);
        return convert_value<T>(forward ? m.forward(v, i) : m.backward(v, i));
      });
    }, what_);
  }
  DType t_;
  std::string what_;
  int64_t c_ = 1, n_ = 1, hw_ = 1;
  image::NormalizeMath m_{};
};

[[maybe_unused]] const bool kNormalizeToTensorRegistered = [] {
  register_op("_image_to_tensor")
      .describe("Converts an image (H, W, C) or batch (N, H, W, C) in [0, 255] to a float32 "
                "tensor (C, H, W) or (N, C, H, W) in [0, 1].")
      .shape_fn(infer_to_tensor)
      .type_fn([](const OpAttrs&, std::vector<DType>&, std::vector<DType>& out) {
        merge_type(out[0], DType::kFloat32, "output 0");
      })
      .deps(GradDeps{true, false, false})
      .cpu<ToTensorKernel>()
      .sample({.attrs = {}, .in_shapes = {{4, 5, 3}}})
      .sample({.attrs = {}, .in_shapes = {{2, 3, 2, 1}}});
  register_op("_image_normalize")
      .describe("Normalizes a tensor (C, H, W) or (N, C, H, W) per channel: (x - mean) / std.")
      .params(kNormalizeSchema)
      .shape_fn(infer_normalize)
      .deps(GradDeps{true, false, false})
      .cpu<NormalizeKernel>()
      .sample({.attrs = {{"mean", "(0, 1, 2)"}, {"std", "(3, 2, 1)"}}, .in_shapes = {{3, 4, 5}}})
      .sample({.attrs = {{"mean", "0.5"}, {"std", "2"}}, .in_shapes = {{2, 1, 3, 3}}})
      .sample({.attrs = {}, .in_shapes = {{2, 3, 2, 2}}});
  return true;
}();

}  // namespace
}  // namespace loom
