// Legacy operators that old MXNet checkpoints contain (MXNet 1.9.1 batch_norm_v1,
// convolution_v1):
//
//   BatchNorm_v1(data, gamma, beta; aux moving_mean, moving_var): channels on axis 1 (no
//     axis parameter), eps 1e-3, momentum 0.9, fix_gamma true. Training: normalises with
//     the batch mean and the biased batch variance, outputs (hidden unless output_mean_var)
//     are that mean and *variance* (BatchNorm's are the inverse std), and the moving
//     statistics are updated in the backward pass (BatchNorm updates them in forward).
//     Inference or use_global_stats: normalises with the moving statistics, which the mean
//     and var outputs copy. fix_gamma uses gamma = 1 and gives it a zero gradient (MXNet also
//     overwrites the gamma array with ones; Loom leaves the argument untouched).
//   Convolution_v1: the parameters and computation of Convolution for 2-D and 3-D kernels;
//     its parsing, shape inference and CPU kernel are Convolution's, looked up at use.
//   Pooling_v1: 2-D pooling over zero-padded windows (max counts the padding zeros), average
//     over the whole kernel area.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/dtype_policy.h"
#include "ops/infer.h"
#include "ops/nn/legacy_v1_math.h"
#include "ops/nn/nn_util.h"

namespace loom {
namespace {

// ------------------------------------------------------------------------- BatchNorm_v1

using nn::BNv1Param;  // ops/nn/legacy_v1_math.h, shared with the GPU kernels
const auto kBNv1Schema =
    ParamSchema<BNv1Param>()
        .optional("eps", &BNv1Param::eps, 1e-3f, "Epsilon to prevent division by 0.")
        .optional("momentum", &BNv1Param::momentum, 0.9f, "Momentum for the moving average.")
        .optional("fix_gamma", &BNv1Param::fix_gamma, true, "Fix gamma to 1 (gradient 0).")
        .optional("use_global_stats", &BNv1Param::use_global_stats, false,
                  "Normalise with the moving statistics even in training.")
        .optional("output_mean_var", &BNv1Param::output_mean_var, false,
                  "Also output the batch mean and variance.");

void bnv1_infer_shape(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  merge_shape(in[0], out[0], "data");
  if (in[0].ndim() == 0) return;
  if (in[0].ndim() < 2)
    throw ShapeError("data must have 2 or more dimensions (N, C, ...), got " + in[0].str());
  const Shape c{in[0][1]};
  for (size_t i = 1; i < 5; ++i) merge_shape(in[i], c, "input " + std::to_string(i));
  merge_shape(out[0], in[0], "output 0");
  merge_shape(out[1], c, "output 1");
  merge_shape(out[2], c, "output 2");
}

// float32, data viewed as (N, C, inner).
class BNv1Kernel final : public Kernel {
 public:
  explicit BNv1Kernel(const KernelArgs& a) : p_(a.attrs.param<BNv1Param>()) {
    const Shape& s = a.in_shapes[0];
    n_ = s[0];
    c_ = s[1];
    inner_ = c_ * n_ != 0 ? s.numel() / (n_ * c_) : 0;
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const float *x = in[0].cdata<float>(), *gamma = in[1].cdata<float>(),
                *beta = in[2].cdata<float>(), *mm = in[3].cdata<float>(),
                *mv = in[4].cdata<float>();
    float *y = out[0].data<float>(), *mean = out[1].data<float>(), *var = out[2].data<float>();
    const bool batch = ctx.is_train && !p_.use_global_stats;
    const double m = static_cast<double>(n_ * inner_);
#pragma omp parallel for schedule(static) if (c_ > 1 && n_ * c_ * inner_ >= 32768)
    for (int64_t c = 0; c < c_; ++c) {
      double mu, v;
      if (batch) {
        double s = 0, ss = 0;
        each(c, [&](int64_t k) { s += x[k]; });
        mu = m > 0 ? s / m : 0;
        each(c, [&](int64_t k) { ss += (x[k] - mu) * (x[k] - mu); });
        v = m > 0 ? ss / m : 0;
      } else {
        mu = mm[c], v = mv[c];
      }
      if (req[1] != Req::kNull) mean[c] = static_cast<float>(mu);
      if (req[2] != Req::kNull) var[c] = static_cast<float>(v);
      if (req[0] == Req::kNull) continue;
      const double g = p_.fix_gamma ? 1.0 : gamma[c];
      const double inv = nn::bnv1_inv(v, p_.eps), b = beta[c];
      const bool add = req[0] == Req::kAdd;
      each(c, [&](int64_t k) {
        const float r = nn::bnv1_output(x[k], mu, inv, g, b);
        y[k] = add ? y[k] + r : r;
      });
    }
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> od, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    const float *dy = og[0].cdata<float>(), *x = in[0].cdata<float>(),
                *gamma = in[1].cdata<float>();
    float *mm = in[3].data<float>(), *mv = in[4].data<float>();
    const float *mean = od[1].cdata<float>(), *var = od[2].cdata<float>();
    float* dx = req[0] != Req::kNull ? ig[0].data<float>() : nullptr;
    float* dg = req[1] != Req::kNull ? ig[1].data<float>() : nullptr;
    float* db = req[2] != Req::kNull ? ig[2].data<float>() : nullptr;
    const bool batch = ctx.is_train && !p_.use_global_stats;
    const double m = static_cast<double>(n_ * inner_);
    auto put = [](float* p, Req r, double v) {
      *p = r == Req::kAdd ? *p + static_cast<float>(v) : static_cast<float>(v);
    };
#pragma omp parallel for schedule(static) if (c_ > 1 && n_ * c_ * inner_ >= 32768)
    for (int64_t c = 0; c < c_; ++c) {
      const double g = p_.fix_gamma ? 1.0 : gamma[c];
      double mu = batch ? mean[c] : mm[c], v = batch ? var[c] : mv[c];
      const double inv = nn::bnv1_inv(v, p_.eps);
      double sdy = 0, sdyx = 0;  // sum dy, sum dy * (x - mu)
      each(c, [&](int64_t k) {
        sdy += dy[k];
        sdyx += dy[k] * (x[k] - mu);
      });
      if (dg) put(dg + c, req[1], p_.fix_gamma ? 0.0 : sdyx * inv);
      if (db) put(db + c, req[2], sdy);
      if (dx) {
        if (batch) {
          // dx = g * inv * (dy - sum(dy) / m - (x - mu) * sum(dy (x - mu)) * inv^2 / m)
          const double a = g * inv, k1 = m > 0 ? sdy / m : 0, k2 = m > 0 ? sdyx * inv * inv / m : 0;
          each(c, [&](int64_t k) {
            put(dx + k, req[0], nn::bnv1_dx_train(dy[k], x[k], mu, a, k1, k2));
          });
        } else {
          each(c, [&](int64_t k) { put(dx + k, req[0], g * inv * dy[k]); });
        }
      }
      if (batch) {  // MXNet 1.9.1 updates the moving statistics here, in backward
        mm[c] = nn::bnv1_moving(mm[c], mu, p_.momentum);
        mv[c] = nn::bnv1_moving(mv[c], v, p_.momentum);
      }
    }
  }

 private:
  template <class Fn>
  void each(int64_t c, Fn fn) const {
    for (int64_t n = 0; n < n_; ++n) {
      const int64_t base = (n * c_ + c) * inner_;
      for (int64_t i = 0; i < inner_; ++i) fn(base + i);
    }
  }
  BNv1Param p_;
  int64_t n_ = 0, c_ = 0, inner_ = 0;
};

LOOM_CPU_DTYPES("BatchNorm_v1", kDTypePolicyF32);

LOOM_REGISTER_OP("BatchNorm_v1")
    .describe(
        "Legacy batch normalisation (MXNet's BatchNorm_v1): channels on axis 1, batch "
        "variance output, moving statistics updated in backward.")
    .params(kBNv1Schema)
    .inputs({"data", "gamma", "beta", "moving_mean", "moving_var"})
    .aux({3, 4})
    .init_input(3, "[\"zero\", {}]")
    .init_input(4, "[\"one\", {}]")
    .outputs({"output", "mean", "var"})
    .visible_outputs([](const OpAttrs& a) { return a.param<BNv1Param>().output_mean_var ? 3 : 1; })
    .shape_fn(bnv1_infer_shape)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = true, .out_data_mask = 0b110})
    .cpu<BNv1Kernel>()
    .sample({.attrs = {{"fix_gamma", "False"}},
             .in_shapes = {{2, 3, 4, 4}, {3}, {3}, {3}, {3}},
             .in_kinds = {"normal", "positive", "normal", "normal", "positive"},
             .is_train = true})
    .sample({.attrs = {},
             .in_shapes = {{4, 3}, {3}, {3}, {3}, {3}},
             .in_kinds = {"normal", "positive", "normal", "normal", "positive"},
             .is_train = true})
    .sample({.attrs = {{"use_global_stats", "True"}, {"fix_gamma", "False"}, {"eps", "0.01"}},
             .in_shapes = {{2, 3, 5}, {3}, {3}, {3}, {3}},
             .in_kinds = {"normal", "positive", "normal", "normal", "positive"}});

// ------------------------------------------------------------------------- Convolution_v1

struct ConvV1Param {
  Shape kernel, stride, dilate, pad;
  int num_filter, num_group;
  int64_t workspace;
  bool no_bias;
  std::optional<std::string> cudnn_tune;
  bool cudnn_off;
  std::optional<std::string> layout;
};
// The documented parameters; the values are parsed by Convolution's schema.
const auto kConvV1Schema =
    ParamSchema<ConvV1Param>()
        .required("kernel", &ConvV1Param::kernel, "Convolution kernel size: (h, w) or (d, h, w).")
        .optional("stride", &ConvV1Param::stride, Shape(), "Stride; default 1 per dimension.")
        .optional("dilate", &ConvV1Param::dilate, Shape(), "Dilation; default 1 per dimension.")
        .optional("pad", &ConvV1Param::pad, Shape(), "Zero pad on both sides; default 0.")
        .required("num_filter", &ConvV1Param::num_filter, "Number of output channels.")
        .optional("num_group", &ConvV1Param::num_group, 1, "Number of channel groups.")
        .optional("workspace", &ConvV1Param::workspace, 1024, "Workspace limit in MB (ignored).")
        .optional("no_bias", &ConvV1Param::no_bias, false, "Whether to disable bias parameter.")
        .optional("cudnn_tune", &ConvV1Param::cudnn_tune, std::optional<std::string>(),
                  "cuDNN algorithm choice (ignored on CPU).")
        .optional("cudnn_off", &ConvV1Param::cudnn_off, false, "Turn off cuDNN (ignored).")
        .optional("layout", &ConvV1Param::layout, std::optional<std::string>(),
                  "Data layout; only NCHW and NCDHW are supported.")
        .check([](ConvV1Param& p) {
          if (p.kernel.ndim() != 2 && p.kernel.ndim() != 3)
            throw ParamError("kernel must have 2 or 3 dimensions (Convolution_v1), got " +
                             p.kernel.str());
        });

const OpDef& conv() { return get_op("Convolution", "Convolution_v1"); }

LOOM_CPU_DTYPES("Convolution_v1", kDTypePolicyF32);

LOOM_REGISTER_OP("Convolution_v1")
    .describe("Legacy convolution (MXNet's Convolution_v1): Convolution for 2-D and 3-D kernels.")
    .params_custom(
        [](const Attrs& a) {
          kConvV1Schema.parse(a);  // the v1 restrictions
          return conv().parse(a);
        },
        kConvV1Schema.info())
    .inputs([](const OpAttrs& a) { return conv().list_inputs(a); })
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      conv().infer_shape(a, in, out);
    })
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .kernel(DeviceType::kCPU,
            [](const KernelArgs& a) { return conv().kernels.at(DeviceType::kCPU)(a); })
    .sample({.attrs = {{"kernel", "(3, 3)"}, {"num_filter", "4"}, {"pad", "(1, 1)"}},
             .in_shapes = {{2, 3, 5, 5}, {4, 3, 3, 3}, {4}}})
    .sample({.attrs = {{"kernel", "(2, 3)"},
                       {"num_filter", "4"},
                       {"stride", "(2, 1)"},
                       {"num_group", "2"},
                       {"no_bias", "True"}},
             .in_shapes = {{2, 4, 5, 6}, {4, 2, 2, 3}}});

// ------------------------------------------------------------------------------ Pooling_v1
// 2-D only (MXNet's v1 kernel refuses 3-D). The data is zero-padded by `pad` on both sides;
// window (i, j) covers padded rows [i * stride, i * stride + kernel) clipped to the padded
// extent (pooling_convention=full windows may run past it). max takes the padding zeros into
// account (MXNet's v1: a window over the padding never goes below 0) and its gradient goes to
// every cell equal to the maximum; sum adds the cells; avg divides the sum by the whole
// kernel area. global_pool pools each whole channel.
using nn::PoolV1Param;  // ops/nn/legacy_v1_math.h, shared with the GPU kernels
const auto kPoolV1Schema =
    ParamSchema<PoolV1Param>()
        .optional("kernel", &PoolV1Param::kernel, Shape(), "Pooling kernel size: (y, x).")
        .choice("pool_type", &PoolV1Param::pool_type, {"max", "avg", "sum"}, "max", "Pooling type.")
        .optional("global_pool", &PoolV1Param::global_pool, false,
                  "Pool over the whole spatial extent (kernel ignored).")
        .choice("pooling_convention", &PoolV1Param::pooling_convention, {"full", "valid"}, "valid",
                "Output size rounding: valid (floor) or full (ceil).")
        .optional("stride", &PoolV1Param::stride, Shape(), "Stride; default 1 per dimension.")
        .optional("pad", &PoolV1Param::pad, Shape(), "Zero pad on both sides; default 0.")
        .check([](PoolV1Param& p) {
          if (p.global_pool) return;
          if (p.kernel.ndim() != 2)
            throw ParamError("kernel must have 2 dimensions (Pooling_v1 is 2-D only), got " +
                             p.kernel.str());
          p.stride = nn::expand_tuple(p.stride, 2, 1, "stride");
          p.pad = nn::expand_tuple(p.pad, 2, 0, "pad");
          for (int i = 0; i < 2; ++i)
            if (p.kernel[i] < 1 || p.stride[i] < 1 || p.pad[i] < 0)
              throw ParamError("kernel and stride must be >= 1 and pad >= 0");
        });

void pool_v1_infer_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const Shape& x = in[0];
  if (x.ndim() == 0) return;
  if (x.ndim() != 4)
    throw ShapeError("data must be 4-D (batch, channel, y, x) for Pooling_v1, got " + x.str());
  const auto& p = a.param<PoolV1Param>();
  const nn::PoolV1Window g = nn::make_pool_v1_window(p, x);
  Shape y = x;
  if (p.global_pool) {
    y[2] = y[3] = 1;
  } else {
    const int64_t in_sz[2] = {x[2], x[3]}, k[2] = {g.kh, g.kw}, st[2] = {g.sh, g.sw},
                  pd[2] = {g.ph, g.pw};
    for (int i = 0; i < 2; ++i) {
      const int64_t span = in_sz[i] + 2 * pd[i] - k[i];
      if (span < 0)
        throw ShapeError("kernel " + p.kernel.str() + " exceeds the padded input " + x.str());
      y[2 + i] = 1 + (p.pooling_convention == "valid" ? span / st[i] : (span + st[i] - 1) / st[i]);
    }
  }
  merge_shape(out[0], y, "output 0");
}

class PoolV1Kernel final : public Kernel {
 public:
  explicit PoolV1Kernel(const KernelArgs& a) {
    const auto& p = a.attrs.param<PoolV1Param>();
    const Shape &x = a.in_shapes[0], &y = a.out_shapes[0];
    g_ = nn::make_pool_v1_window(p, x);
    type_ = g_.type;
    nc_ = x[0] * x[1], h_ = x[2], w_ = x[3], oh_ = y[2], ow_ = y[3];
    scale_ = g_.scale;
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const float* x = in[0].cdata<float>();
    float* y = out[0].data<float>();
    const bool add = req[0] == Req::kAdd;
#pragma omp parallel for schedule(static) if (nc_ > 1 && nc_ * oh_ * ow_ * g_.kh * g_.kw >= 32768)
    for (int64_t c = 0; c < nc_; ++c)
      for (int64_t i = 0; i < oh_; ++i)
        for (int64_t j = 0; j < ow_; ++j) {
          const float v = pooled(x + c * h_ * w_, i, j);
          float& o = y[(c * oh_ + i) * ow_ + j];
          o = add ? o + v : v;
        }
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    if (req[0] != Req::kAdd) ig[0].zero();
    const float* g = og[0].cdata<float>();
    const float* x = type_ == 0 ? in[0].cdata<float>() : nullptr;
    float* dx = ig[0].data<float>();
#pragma omp parallel for schedule(static) if (nc_ > 1 && nc_ * oh_ * ow_ * g_.kh * g_.kw >= 32768)
    for (int64_t c = 0; c < nc_; ++c)
      for (int64_t i = 0; i < oh_; ++i)
        for (int64_t j = 0; j < ow_; ++j) {
          const float gv = g[(c * oh_ + i) * ow_ + j];
          float* d = dx + c * h_ * w_;
          if (type_ == 0) {  // every cell equal to the maximum
            const float m = pooled(x + c * h_ * w_, i, j);
            cells(i, j, [&](int64_t r, int64_t q) {
              if (x[c * h_ * w_ + r * w_ + q] == m) d[r * w_ + q] += gv;
            });
          } else {
            cells(i, j, [&](int64_t r, int64_t q) { d[r * w_ + q] += gv * scale_; });
          }
        }
  }

 private:
  // fn(r, q) for the window's cells inside the data (the padding cells hold zeros).
  template <class Fn>
  void cells(int64_t i, int64_t j, Fn fn) const {
    int64_t r0, r1, q0, q1;
    g_.cells(i, j, &r0, &r1, &q0, &q1);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t q = q0; q < q1; ++q) fn(r, q);
  }
  // The window rules are ops/nn/legacy_v1_math.h's, shared with the GPU kernel.
  float pooled(const float* x, int64_t i, int64_t j) const { return g_.pooled(x, i, j); }
  nn::PoolV1Window g_{};
  int type_ = 0;
  int64_t nc_ = 0, h_ = 0, w_ = 0, oh_ = 0, ow_ = 0;
  float scale_ = 1;
};

LOOM_CPU_DTYPES("Pooling_v1", kDTypePolicyF32);

LOOM_REGISTER_OP("Pooling_v1")
    .describe(
        "Legacy 2-D pooling (MXNet's Pooling_v1): max over zero-padded windows, sum, "
        "or average over the full kernel area.")
    .params(kPoolV1Schema)
    .shape_fn(pool_v1_infer_shape)
    .deps([](const OpAttrs& a) {
      return GradDeps{.out_grad = true,
                      .in_data = a.param<PoolV1Param>().pool_type == "max",
                      .out_data = false};
    })
    .cpu<PoolV1Kernel>()
    .sample({.attrs = {{"kernel", "(3, 3)"}}, .in_shapes = {{2, 3, 6, 7}}})
    .sample({.attrs = {{"kernel", "(3, 3)"}, {"stride", "(2, 2)"}, {"pad", "(1, 1)"}},
             .in_shapes = {{2, 2, 7, 8}}})
    .sample({.attrs = {{"kernel", "(3, 3)"},
                       {"stride", "(2, 2)"},
                       {"pad", "(1, 1)"},
                       {"pool_type", "avg"},
                       {"pooling_convention", "full"}},
             .in_shapes = {{2, 3, 7, 8}}})
    .sample({.attrs = {{"kernel", "(2, 3)"}, {"stride", "(2, 2)"}, {"pool_type", "sum"}},
             .in_shapes = {{1, 2, 6, 7}}})
    .sample({.attrs = {{"global_pool", "True"}, {"pool_type", "avg"}},
             .in_shapes = {{2, 2, 3, 4}}});
}  // namespace
}  // namespace loom
