// LRN: local response normalisation across channels (spec 6.16):
// y = x · n^(−β), n = knorm + (α/nsize)·Σ_{window} x², window of nsize channels centred on c.
// The hidden output tmp_norm keeps n for backward.
#include <cmath>

#include "ops/dtype_policy.h"
#include "ops/infer.h"
#include "ops/nn/lrn_math.h"
#include "ops/nn/nn_util.h"

namespace loom {
namespace {

using nn::LRNParam;  // ops/nn/lrn_math.h, shared with the GPU kernel

const auto kLRNSchema =
    ParamSchema<LRNParam>()
        .optional("alpha", &LRNParam::alpha, 1e-4f, "Value of the alpha variance scaling.")
        .optional("beta", &LRNParam::beta, 0.75f, "Power of the normalisation.")
        .optional("knorm", &LRNParam::knorm, 2.0f, "Value of the k parameter.")
        .required("nsize", &LRNParam::nsize, "Normalisation window width in channels.")
        .check([](LRNParam& p) {
          if (p.nsize < 1) throw ParamError("nsize must be >= 1");
        });

void lrn_infer_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  merge_shape(in[0], out[0], input_label(a, 0));
  merge_shape(in[0], out[1], input_label(a, 0));
  if (in[0].ndim() > 0 && in[0].ndim() < 2)
    throw ShapeError(input_label(a, 0) + ": LRN needs at least 2-d input, got " + in[0].str());
  out[0] = out[1] = in[0];
}

class LRNKernel final : public Kernel {
 public:
  explicit LRNKernel(const KernelArgs& a) : p_(a.attrs.param<LRNParam>()) {
    const Shape& s = a.in_shapes[0];
    n_ = s[0];
    c_ = s[1];
    inner_ = s.numel() / (n_ * c_);
  }

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const float* x = in[0].data<float>();
    float* y = out[0].data<float>();
    float* norm = out[1].data<float>();
    const nn::LRNMath m = math();
    bool add = nn::is_add(req[0]);
#pragma omp parallel for collapse(2) if (n_ * inner_ > 256)
    for (int64_t b = 0; b < n_; ++b)
      for (int64_t j = 0; j < inner_; ++j) {
        const int64_t base = b * c_ * inner_ + j;
        for (int64_t c = 0; c < c_; ++c) {
          int64_t i = base + c * inner_;
          norm[i] = m.norm(x, base, c);
          if (req[0] != Req::kNull) nn::store(y, i, m.output(x[i], norm[i]), add);
        }
      }
  }

  // dx_i = g_i·n_i^(−β) − (2αβ/nsize)·x_i·Σ_{j: i in window(j)} g_j·x_j·n_j^(−β−1); the
  // window is symmetric, so j ranges over window(i).
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    const float* g = og[0].data<float>();
    const float* x = in[0].data<float>();
    const float* norm = out[1].data<float>();
    float* dx = ig[0].data<float>();
    const nn::LRNMath m = math();
    bool add = nn::is_add(req[0]);
#pragma omp parallel for collapse(2) if (n_ * inner_ > 256)
    for (int64_t b = 0; b < n_; ++b)
      for (int64_t j = 0; j < inner_; ++j) {
        const int64_t base = b * c_ * inner_ + j;
        for (int64_t c = 0; c < c_; ++c)
          nn::store(dx, base + c * inner_, m.grad(g, x, norm, base, c), add);
      }
  }

 private:
  // The window arithmetic, shared with the GPU kernel (ops/nn/lrn_math.h).
  nn::LRNMath math() const {
    return nn::LRNMath::make(c_, inner_, p_.nsize, p_.alpha, p_.beta, p_.knorm);
  }
  LRNParam p_;
  int64_t n_ = 1, c_ = 1, inner_ = 1;
};

// float32 only: oneDNN/naive float kernels; MXNet's CPU tests of LRN use float32.
LOOM_CPU_DTYPES("LRN", kDTypePolicyF32);

LOOM_REGISTER_OP("LRN")
    .describe("Local response normalisation across channels.")
    .params(kLRNSchema)
    .outputs({"output", "tmp_norm"})
    .visible_outputs([](const OpAttrs&) { return 1; })
    .shape_fn(lrn_infer_shape)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = true})
    .cpu<LRNKernel>()
    .sample({.attrs = {{"nsize", "3"}}, .in_shapes = {{2, 5, 3, 3}}})
    .sample({.attrs = {{"nsize", "5"}, {"alpha", "0.1"}, {"beta", "0.5"}, {"knorm", "1.0"}},
             .in_shapes = {{2, 6, 4}}});

}  // namespace
}  // namespace loom
