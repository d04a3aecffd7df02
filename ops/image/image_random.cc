// Random image augmentations of MXNet 1.9.1 (src/operator/image/image_random-inl.h) on an
// image (H, W, C) with C of 1 or 3, drawing from the executor's generator each call:
//   _image_random_flip_left_right(data), _image_random_flip_top_bottom(data): flip with
//       probability 1/2.
//   _image_random_brightness(data, min_factor, max_factor): x·a, a ~ U(min, max).
//   _image_random_contrast(data, min_factor, max_factor): x·a + (1 − a)·mean gray, the mean
//       gray over the image (0.299 R + 0.587 G + 0.114 B, or the 1 channel), a ~ U(min, max).
//   _image_random_saturation(data, min_factor, max_factor): x·a + (1 − a)·gray per pixel
//       (1 channel: unchanged), a ~ U(min, max). As MXNet 1.9.1, `gray` is 0.114·B only (its
//       loop overwrites the sum instead of accumulating).
//   _image_random_lighting(data, alpha_std): _image_adjust_lighting with alpha ~ N(0, std)³.
//   _image_random_hue(data, min_factor, max_factor): rotates the hue (OpenCV-style HLS, on
//       0..255 values) by a·360°, a ~ U(min, max) (1 channel: unchanged).
//   _image_random_color_jitter(data, brightness, contrast, saturation, hue): in a random
//       order, each enabled (> 0) stage: brightness/contrast/saturation with a factor
//       1 + U(−v, v), hue with U(−v, v); every stage rounds through the element type.
// Results saturate into uint8 ([0, 255], truncated) as MXNet's. The gradient is a copy of the
// head gradient (MXNet's "_copy"), whatever the draw.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

enum class Rnd {
  kFlipLR, kFlipTB, kBrightness, kContrast, kSaturation, kLighting, kHue, kJitter
};

struct JitterParam {
  double brightness, contrast, saturation, hue;
};
const auto kJitterSchema =
    ParamSchema<JitterParam>()
        .required("brightness", &JitterParam::brightness, "How much to jitter brightness.")
        .required("contrast", &JitterParam::contrast, "How much to jitter contrast.")
        .required("saturation", &JitterParam::saturation, "How much to jitter saturation.")
        .required("hue", &JitterParam::hue, "How much to jitter hue.");

// ---- colour stages on a float copy of an (len, C) image; `rt` rounds through the element
// type as MXNet's stages, which write their output array before the next reads it.
using Round = float (*)(float);
void stage_brightness(std::vector<float>& b, float a, Round rt) {
  for (float& v : b) v = rt(v * a);
}
void stage_contrast(std::vector<float>& b, float a, int64_t C, Round rt) {
  static const float coef[3] = {0.299f, 0.587f, 0.114f};
  const int64_t len = static_cast<int64_t>(b.size()) / C;
  float sum = 0;
  if (C > 1) {
    for (int64_t l = 0; l < len; ++l)
      for (int c = 0; c < 3; ++c) sum += b[static_cast<size_t>(l * 3 + c)] * coef[c];
  } else {
    for (float v : b) sum += v;
  }
  const float beta = (1 - a) * (sum / static_cast<float>(len));
  for (float& v : b) v = rt(v * a + beta);
}
void stage_saturation(std::vector<float>& b, float a, int64_t C, Round rt) {
  if (C == 1) return;
  for (size_t l = 0; l < b.size(); l += 3) {
    const float gray = b[l + 2] * 0.114f * (1.f - a);  // MXNet 1.9.1's gray (see above)
    for (size_t c = 0; c < 3; ++c) b[l + c] = rt(gray + b[l + c] * a);
  }
}
void rgb_to_hls(float r, float g, float b, float* h, float* l, float* s) {
  r /= 255.f;
  g /= 255.f;
  b /= 255.f;
  const float vmax = std::fmax(std::fmax(r, g), b), vmin = std::fmin(std::fmin(r, g), b);
  float diff = vmax - vmin;
  *h = 0;
  *s = 0;
  *l = (vmax + vmin) * 0.5f;
  if (diff > std::numeric_limits<float>::epsilon()) {
    *s = *l < 0.5f ? diff / (vmax + vmin) : diff / (2.0f - vmax - vmin);
    diff = 60.f / diff;
    if (vmax == r) *h = (g - b) * diff;
    else if (vmax == g) *h = (b - r) * diff + 120.f;
    else *h = (r - g) * diff + 240.f;
    if (*h < 0.f) *h += 360.f;
  }
}
void hls_to_rgb(float h, float l, float s, float* r, float* g, float* b) {
  static const int sectors[6][3] = {{1, 3, 0}, {1, 0, 2}, {3, 0, 1},
                                    {0, 2, 1}, {0, 1, 3}, {2, 1, 0}};
  float R = l, G = l, B = l;
  if (s != 0) {
    const float p2 = l <= 0.5f ? l * (1 + s) : l + s - l * s;
    const float p1 = 2 * l - p2;
    h *= 1.f / 60.f;
    while (h < 0) h += 6;
    while (h >= 6) h -= 6;
    const int sec = static_cast<int>(h);
    h -= static_cast<float>(sec);
    const float tab[4] = {p2, p1, p1 + (p2 - p1) * (1 - h), p1 + (p2 - p1) * h};
    B = tab[sectors[sec][0]];
    G = tab[sectors[sec][1]];
    R = tab[sectors[sec][2]];
  }
  *r = R * 255.f;
  *g = G * 255.f;
  *b = B * 255.f;
}
void stage_hue(std::vector<float>& b, float a, int64_t C, Round rt) {
  if (C == 1) return;
  for (size_t i = 0; i < b.size(); i += 3) {
    float h, l, s, r, g, bl;
    rgb_to_hls(b[i], b[i + 1], b[i + 2], &h, &l, &s);
    h += a * 360.f;
    hls_to_rgb(h, l, s, &r, &g, &bl);
    b[i] = rt(r);
    b[i + 1] = rt(g);
    b[i + 2] = rt(bl);
  }
}

struct EnhanceParam {
  double min_factor, max_factor;
};
const auto kEnhanceSchema =
    ParamSchema<EnhanceParam>()
        .required("min_factor", &EnhanceParam::min_factor, "Minimum factor.")
        .required("max_factor", &EnhanceParam::max_factor, "Maximum factor.")
        .check([](EnhanceParam& p) {
          if (p.min_factor < 0 || p.max_factor < 0)
            throw ParamError("min_factor and max_factor must be >= 0");
          if (p.min_factor > p.max_factor)
            throw ParamError("min_factor must not exceed max_factor");
        });
struct RandomLightingParam {
  double alpha_std;
};
const auto kRandomLightingSchema = ParamSchema<RandomLightingParam>().optional(
    "alpha_std", &RandomLightingParam::alpha_std, 0.05, "Level of the lighting noise.");

struct RandomNoParam {};
const auto kNoSchema = ParamSchema<RandomNoParam>();

std::string random_label(const OpAttrs& a) {
  return "node '" + a.name + "' (op " + a.op->name + ")";
}

void infer_image(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  if (in[0].ndim() != 3 || (in[0][2] != 1 && in[0][2] != 3))
    throw ShapeError(random_label(a) +
                     ": expects an image of shape (height, width, channels) with 1 "
                     "or 3 channels, got " +
                     in[0].str());
  merge_shape(out[0], in[0], "output 0");
}

template <class T>
T saturate(float v) {
  if constexpr (std::is_same_v<T, uint8_t>) return static_cast<uint8_t>(std::min(std::max(v, 0.f), 255.f));
  else return convert_value<T>(v);
}

template <Rnd R>
class RandomAugKernel final : public Kernel {
 public:
  explicit RandomAugKernel(const KernelArgs& a) : what_(tensor::node_label(a)) {
    t_ = tensor::check_dtypes(a, tensor::kNumericDTypes);
    const Shape& s = a.in_shapes[0];
    H_ = s[0];
    W_ = s[1];
    C_ = s[2];
    if constexpr (R == Rnd::kBrightness || R == Rnd::kContrast || R == Rnd::kSaturation ||
                  R == Rnd::kHue) {
      lo_ = a.attrs.param<EnhanceParam>().min_factor;
      hi_ = a.attrs.param<EnhanceParam>().max_factor;
    }
    if constexpr (R == Rnd::kJitter) jit_ = a.attrs.param<JitterParam>();
    if constexpr (R == Rnd::kLighting) {
      lo_ = a.attrs.param<RandomLightingParam>().alpha_std;
      if (lo_ < 0) throw ParamError(what_ + ": alpha_std must be >= 0");
    }
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    if (!ctx.rng) throw Error(what_ + ": no random generator in the op context");
    auto& rng = *ctx.rng;
    // One draw per call.
    bool flip = false;
    float f = 1.f, pca[3] = {0, 0, 0};
    if constexpr (R == Rnd::kFlipLR || R == Rnd::kFlipTB) {
      flip = std::bernoulli_distribution(0.5)(rng);
    } else if constexpr (R == Rnd::kLighting) {
      float al[3] = {0, 0, 0};
      if (lo_ > 0) {
        std::normal_distribution<float> nd(0.f, static_cast<float>(lo_));
        for (float& v : al) v = nd(rng);
      }
      static const float eig[3][3] = {{55.46f * -0.5675f, 4.794f * 0.7192f, 1.148f * 0.4009f},
                                      {55.46f * -0.5808f, 4.794f * -0.0045f, 1.148f * -0.8140f},
                                      {55.46f * -0.5836f, 4.794f * -0.6948f, 1.148f * 0.4203f}};
      for (int c = 0; c < 3; ++c)
        pca[c] = eig[c][0] * al[0] + eig[c][1] * al[1] + eig[c][2] * al[2];
    } else if constexpr (R != Rnd::kJitter) {
      f = lo_ == hi_ ? static_cast<float>(lo_)
                     : std::uniform_real_distribution<float>(static_cast<float>(lo_),
                                                             static_cast<float>(hi_))(rng);
    }
    if constexpr (R == Rnd::kHue || R == Rnd::kJitter) {
      staged(rng, f, in[0], req[0], out[0]);
      return;
    }
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      const int64_t n = in[0].size(), len = H_ * W_;
      std::vector<T> tmp(static_cast<size_t>(n));
      auto xf = [&](int64_t i) { return static_cast<float>(x[i]); };
      float beta = 0;
      if constexpr (R == Rnd::kContrast) {
        static const float coef[3] = {0.299f, 0.587f, 0.114f};
        float sum = 0;
        if (C_ > 1) {
          for (int64_t l = 0; l < len; ++l)
            for (int c = 0; c < 3; ++c) sum += xf(l * 3 + c) * coef[c];
        } else {
          for (int64_t l = 0; l < len; ++l) sum += xf(l);
        }
        beta = (1 - f) * (sum / static_cast<float>(len));
      }
      for (int64_t o = 0; o < n; ++o) {
        const int64_t c = o % C_, q = o / C_, j = q % W_, i = q / W_;
        T v;
        if constexpr (R == Rnd::kFlipLR) v = flip ? x[(i * W_ + W_ - 1 - j) * C_ + c] : x[o];
        else if constexpr (R == Rnd::kFlipTB) v = flip ? x[((H_ - 1 - i) * W_ + j) * C_ + c] : x[o];
        else if constexpr (R == Rnd::kBrightness) v = saturate<T>(xf(o) * f);
        else if constexpr (R == Rnd::kContrast) v = saturate<T>(xf(o) * f + beta);
        else if constexpr (R == Rnd::kSaturation) {
          if (C_ == 1) {
            v = x[o];
          } else {
            const float gray = xf(q * 3 + 2) * 0.114f * (1.f - f);
            v = saturate<T>(gray + xf(o) * f);
          }
        } else {
          v = C_ == 1 ? x[o] : saturate<T>(xf(o) + pca[c]);
        }
        tmp[static_cast<size_t>(o)] = v;
      }
      tensor::write_t<T>(out[0].data<T>(), req[0], n,
                         [&](int64_t o) { return tmp[static_cast<size_t>(o)]; });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g = og[0].data<T>();
      tensor::write_t<T>(ig[0].data<T>(), req[0], og[0].size(), [&](int64_t i) { return g[i]; });
    }, what_);
  }

 private:
  // Hue and colour jitter: stages on a float copy, rounding through T after each.
  void staged(std::mt19937_64& rng, float f, const NDArray& src, Req req, const NDArray& dst) {
    int order[4] = {0, 1, 2, 3};
    float amount[4] = {0, 0, 0, 0};
    if constexpr (R == Rnd::kJitter) {
      std::shuffle(order, order + 4, rng);
      const double v[4] = {jit_.brightness, jit_.contrast, jit_.saturation, jit_.hue};
      for (int k = 0; k < 4; ++k) {
        const int st = order[k];
        if (v[st] <= 0) continue;
        const auto u = std::uniform_real_distribution<float>(static_cast<float>(-v[st]),
                                                             static_cast<float>(v[st]))(rng);
        amount[st] = st == 3 ? u : 1.f + u;
      }
    }
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = src.data<T>();
      const int64_t n = src.size();
      std::vector<float> b(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) b[static_cast<size_t>(i)] = static_cast<float>(x[i]);
      const Round rt = [](float v) { return static_cast<float>(saturate<T>(v)); };
      if constexpr (R == Rnd::kHue) {
        stage_hue(b, f, C_, rt);
      } else {
        for (int st : order) {
          const double on[4] = {jit_.brightness, jit_.contrast, jit_.saturation, jit_.hue};
          if (on[st] <= 0) continue;
          if (st == 0) stage_brightness(b, amount[0], rt);
          else if (st == 1) stage_contrast(b, amount[1], C_, rt);
          else if (st == 2) stage_saturation(b, amount[2], C_, rt);
          else stage_hue(b, amount[3], C_, rt);
        }
      }
      tensor::write_t<T>(dst.data<T>(), req, n, [&](int64_t i) {
        return saturate<T>(b[static_cast<size_t>(i)]);
      });
    }, what_);
  }
  DType t_;
  std::string what_;
  int64_t H_ = 1, W_ = 1, C_ = 1;
  double lo_ = 0, hi_ = 0;
  JitterParam jit_{};
};

constexpr GradDeps kRandomOutGrad{.out_grad = true, .in_data = false, .out_data = false};

template <Rnd R, class P>
void reg(const char* name, const char* doc, const ParamSchema<P>& schema, OpSample s) {
  register_op(name)
      .describe(doc)
      .params(schema)
      .shape_fn(infer_image)
      .deps(kRandomOutGrad)
      .inplace_pairs({{0, 0}})
      .template cpu<RandomAugKernel<R>>()
      .sample(std::move(s));
  declare_cpu_dtypes(name, {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kUint8,
                            DType::kInt32, DType::kInt8, DType::kInt64});
}

// Deterministic sweep samples: equal factors, alpha_std 0, flips of a constant image ("ones").
[[maybe_unused]] const bool kImageRandomRegistered = [] {
  reg<Rnd::kFlipLR>("_image_random_flip_left_right",
                    "Flips an image (H, W, C) left-right with probability 1/2.", kNoSchema,
                    {.attrs = {}, .in_shapes = {{2, 3, 3}}, .in_kinds = {"ones"},
                     .check_grad = false});
  reg<Rnd::kFlipTB>("_image_random_flip_top_bottom",
                    "Flips an image (H, W, C) top-bottom with probability 1/2.", kNoSchema,
                    {.attrs = {}, .in_shapes = {{2, 3, 1}}, .in_kinds = {"ones"},
                     .check_grad = false});
  reg<Rnd::kBrightness>("_image_random_brightness",
                        "Scales an image by a factor drawn from U(min_factor, max_factor).",
                        kEnhanceSchema,
                        {.attrs = {{"min_factor", "1.5"}, {"max_factor", "1.5"}},
                         .in_shapes = {{2, 3, 3}}, .check_grad = false});
  reg<Rnd::kContrast>("_image_random_contrast",
                      "Blends an image with its mean gray by a factor drawn from U(min, max).",
                      kEnhanceSchema,
                      {.attrs = {{"min_factor", "0.5"}, {"max_factor", "0.5"}},
                       .in_shapes = {{2, 3, 3}}, .check_grad = false});
  reg<Rnd::kSaturation>("_image_random_saturation",
                        "Blends each pixel with its gray value by a factor drawn from U(min, "
                        "max) (MXNet 1.9.1's gray: 0.114·B).",
                        kEnhanceSchema,
                        {.attrs = {{"min_factor", "0.5"}, {"max_factor", "0.5"}},
                         .in_shapes = {{2, 3, 3}}, .check_grad = false});
  reg<Rnd::kLighting>("_image_random_lighting",
                      "Adds the PCA lighting offset for alpha ~ N(0, alpha_std) per channel.",
                      kRandomLightingSchema,
                      {.attrs = {{"alpha_std", "0"}}, .in_shapes = {{2, 3, 3}},
                       .check_grad = false});
  reg<Rnd::kHue>("_image_random_hue",
                 "Rotates the hue of an RGB image by a·360 degrees, a ~ U(min_factor, "
                 "max_factor).",
                 kEnhanceSchema,
                 {.attrs = {{"min_factor", "0.1"}, {"max_factor", "0.1"}},
                  .in_shapes = {{2, 3, 3}}, .in_kinds = {"positive"}, .check_grad = false});
  reg<Rnd::kJitter>("_image_random_color_jitter",
                    "Random brightness, contrast, saturation and hue changes in random order.",
                    kJitterSchema,
                    {.attrs = {{"brightness", "0.3"}, {"contrast", "0.3"}, {"saturation", "0.3"},
                               {"hue", "0.1"}},
                     .in_shapes = {{2, 3, 3}}, .in_kinds = {"zeros"}, .check_grad = false});
  return true;
}();

}  // namespace
}  // namespace loom
