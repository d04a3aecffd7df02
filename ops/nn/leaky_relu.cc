// LeakyReLU family: leaky, prelu (learned per-channel slope), rrelu (random slope in
// training), elu, selu, gelu (spec 6.6). The per-element arithmetic is in leaky_relu_math.h
// (shared with the CUDA kernel, leaky_relu.cu).
#include <cmath>
#include <random>
#include <type_traits>

#include "ops/infer.h"
#include "ops/nn/leaky_relu_math.h"
#include "ops/nn/nn_dtype.h"
#include "ops/nn/nn_util.h"
#include "runtime/cpu/thread_cap.h"
#include "runtime/cpu/thread_team.h"
#include <omp.h>

namespace loom {
namespace {

using nn::LeakyParam;

const auto kLeakySchema =
    ParamSchema<LeakyParam>()
        .choice("act_type", &LeakyParam::act_type,
                {"leaky", "prelu", "rrelu", "elu", "selu", "gelu"}, "leaky",
                "Activation function to be applied.")
        .optional("slope", &LeakyParam::slope, 0.25f, "Init slope for the activation (leaky, elu).")
        .optional("lower_bound", &LeakyParam::lower_bound, 0.125f, "Lower bound of rrelu's slope.")
        .optional("upper_bound", &LeakyParam::upper_bound, 0.334f, "Upper bound of rrelu's slope.");

using Act = nn::LeakyAct;
using nn::act_from_name;
using nn::prelu_gamma_dims;

void leaky_infer_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<LeakyParam>();
  merge_shape(in[0], out[0], input_label(a, 0));
  if (in[0].ndim() > 0) {
    out[0] = in[0];
    if (p.act_type == "rrelu") out[1] = in[0];
  }
  if (p.act_type == "prelu" && in[0].ndim() >= 2 && in[1].ndim() == 0) in[1] = Shape{in[0][1]};
  if (p.act_type == "prelu" && in[0].ndim() >= 2 && in[1].known())
    prelu_gamma_dims(in[1], in[0], input_label(a, 1));
}

class LeakyKernel final : public Kernel {
 public:
  explicit LeakyKernel(const KernelArgs& a)
      : p_(a.attrs.param<LeakyParam>()), act_(act_from_name(p_.act_type)), dtype_(a.in_types[0]),
        what_("node '" + a.attrs.name + "' (op LeakyReLU)") {
    const Shape& s = a.in_shapes[0];
    n_ = s.numel();
    // Small maps (batch 1) on one thread: waking the others costs more than the pass.
    par_ = n_ > 65536 && dnnl_util::parallel_worth(8.0 * static_cast<double>(n_));
    // Those run their prelu pass split over Loom's thread team instead (LOOM_TEAM_SPLIT=0:
    // not), whose workers stay awake between back-to-back layers.
    if (!par_ && n_ > 65536 && !env_off("LOOM_TEAM_SPLIT")) team_parts_ = omp_get_max_threads();
    if (p_.act_type == "prelu") {
      if (s.ndim() < 2) throw ShapeError(what_ + ": prelu needs at least 2-d data");
      channels_ = s[1];
      inner_ = n_ / (s[0] * s[1]);
      auto [g0, g1] = prelu_gamma_dims(a.in_shapes[1], s, what_);
      gamma_n_ = g0;
      gamma_c_ = g1;
    }
    // Data, output and their gradients share one layout (plain or channel-blocked).
    block_ = layout_block(a.layout(LayoutSlot::kIn, 0));
  }

  // A producer (Convolution) may apply leaky and prelu (one slope per channel, or one for
  // all) as a post-op, in float32.
  bool fused_activation(std::span<const NDArray> in, FusedActivation* act) override {
    if (dtype_ != DType::kFloat32) return false;
    if (act_ == Act::kLeaky) {
      act->kind = FusedActivation::kLeaky;
      act->alpha = p_.slope;
      return true;
    }
    if (act_ != Act::kPrelu || gamma_n_ != 1 || in.size() < 2 || in[1].is_none()) return false;
    act->kind = FusedActivation::kPrelu;
    const float* g = in[1].cdata<float>();
    if (gamma_c_ == channels_) {
      act->slope = std::span<const float>(g, static_cast<size_t>(channels_));
    } else {  // one slope shared by every channel
      slopes_.assign(static_cast<size_t>(channels_), g[0]);
      act->slope = slopes_;
    }
    return true;
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    nn::dispatch_floats(dtype_, [&](auto tag) {
      forward_t<typename decltype(tag)::type>(ctx, in, req, out);
    }, what_);
  }

  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    nn::dispatch_floats(dtype_, [&](auto tag) {
      backward_t<typename decltype(tag)::type>(og, in, out, req, ig);
    }, what_);
  }

 private:
  template <class T>
  void forward_t(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
                 std::span<const NDArray> out) {
    using C = compute_t<T>;
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    bool add = nn::is_add(req[0]);
    const Act t = act_;
    if (t == Act::kRrelu) {  // the mask output holds every element's slope
      T* mask = out[1].data<T>();
      if (ctx.is_train) {
        std::mt19937_64 local(0);
        std::uniform_real_distribution<float> u(p_.lower_bound, p_.upper_bound);
        auto& rng = ctx.rng ? *ctx.rng : local;
        for (int64_t i = 0; i < n_; ++i) mask[i] = T(static_cast<C>(u(rng)));
      } else {
        std::fill(mask, mask + n_, T(static_cast<C>((p_.lower_bound + p_.upper_bound) / 2)));
      }
      if (req[0] == Req::kNull) return;
      for (int64_t i = 0; i < n_; ++i)
        nn::st(y, i, nn::leaky_value(t, nn::ld(x, i), nn::ld(mask, i)), add);
      return;
    }
    if (req[0] == Req::kNull) return;
    const T* gamma = t == Act::kPrelu ? in[1].cdata<T>() : nullptr;
    if constexpr (std::is_same_v<T, float>) {
      if (t == Act::kPrelu && !add) return prelu_forward(x, gamma, y);
    }
    const C s = p_.slope;
#pragma omp parallel for if (par_)
    for (int64_t i = 0; i < n_; ++i) {
      const C a = t == Act::kPrelu ? nn::ld(gamma, gamma_index(i)) : s;
      nn::st(y, i, nn::leaky_value(t, nn::ld(x, i), a), add);
    }
  }

  template <class T>
  void backward_t(std::span<const NDArray> og, std::span<const NDArray> in,
                  std::span<const NDArray> out, std::span<const Req> req,
                  std::span<const NDArray> ig) {
    using C = compute_t<T>;
    const T* g = og[0].data<T>();
    const T* x = in[0].data<T>();
    const Act t = act_;
    if (t == Act::kPrelu && req[1] != Req::kNull) prelu_gamma_grad(g, x, ig[1], req[1]);
    if (req[0] == Req::kNull) return;
    T* dx = ig[0].data<T>();
    bool add = nn::is_add(req[0]);
    const T* gamma = t == Act::kPrelu ? in[1].data<T>() : nullptr;
    const T* mask = t == Act::kRrelu ? out[1].data<T>() : nullptr;
    const C s = p_.slope;
#pragma omp parallel for if (n_ > 65536)
    for (int64_t i = 0; i < n_; ++i) {
      const C a = t == Act::kPrelu   ? nn::ld(gamma, gamma_index(i))
                  : t == Act::kRrelu ? nn::ld(mask, i)
                                     : s;
      nn::st(dx, i, nn::ld(g, i) * nn::leaky_deriv(t, nn::ld(x, i), a), add);
    }
  }

  // prelu in float32, written: per (sample, channel block) a run of inner_ positions of
  // block_ channels, each channel's slope loaded once, so the inner loop vectorises.
  void prelu_forward(const float* x, const float* gamma, float* y) const {
    if (n_ == 0) return;
    const int64_t B = block_, nb = channels_ / B, outer = n_ / (inner_ * channels_);
    const int64_t run = inner_ * B;
    if (team_parts_ > 1 && outer * nb >= team_parts_) {
      const int64_t rows = outer * nb;
      const int parts = team_parts_;
      cpu::ThreadTeam::global().run(parts, [&](int part) {
        const int64_t r1 = rows * (part + 1) / parts;
        for (int64_t r = rows * part / parts; r < r1; ++r)
          prelu_block(x, gamma, y, r / nb, r % nb, run);
      });
      return;
    }
#pragma omp parallel for collapse(2) if (par_)
    for (int64_t n = 0; n < outer; ++n)
      for (int64_t cb = 0; cb < nb; ++cb) prelu_block(x, gamma, y, n, cb, run);
  }

  // One (sample, channel block) run of prelu_forward.
  void prelu_block(const float* x, const float* gamma, float* y, int64_t n, int64_t cb,
                   int64_t run) const {
    const int64_t B = block_, nb = channels_ / B;
    float sl[16];
    for (int64_t j = 0; j < B; ++j)
      sl[j] = gamma[(gamma_n_ == 1 ? 0 : n) * gamma_c_ + (gamma_c_ == 1 ? 0 : cb * B + j)];
    const int64_t base = (n * nb + cb) * run;
    const float* xs = x + base;
    float* ys = y + base;
    // omp simd: in place (xs == ys) defeats the compiler's overlap check, which would
    // leave a scalar loop with a branch per element (mispredicted on random signs).
    if (B == 1) {
      const float a = sl[0];
#pragma omp simd
      for (int64_t i = 0; i < run; ++i) ys[i] = xs[i] > 0 ? xs[i] : a * xs[i];
    } else if (B == 16) {
      for (int64_t i = 0; i < run; i += 16)
#pragma omp simd
        for (int j = 0; j < 16; ++j) ys[i + j] = xs[i + j] > 0 ? xs[i + j] : sl[j] * xs[i + j];
    } else {
      for (int64_t i = 0; i < run; i += B)
#pragma omp simd
        for (int64_t j = 0; j < B; ++j) ys[i + j] = xs[i + j] > 0 ? xs[i + j] : sl[j] * xs[i + j];
    }
  }

  // gamma's element for data element i (gamma is (gamma_n_, gamma_c_), each 1 or full), in
  // the data's layout (channel-blocked: channel cb*B + j of a position is at
  // ((n * C/B + cb) * inner + p) * B + j).
  int64_t gamma_index(int64_t i) const {
    if (block_ == 1) return nn::prelu_gamma_index(i, inner_, channels_, gamma_n_, gamma_c_);
    int64_t c = (i / (inner_ * block_)) % (channels_ / block_) * block_ + i % block_;
    if (gamma_c_ == 1) c = 0;
    const int64_t n = gamma_n_ == 1 ? 0 : i / (inner_ * channels_);
    return n * gamma_c_ + c;
  }
  // dγ = Σ of g·x where x ≤ 0 over the data elements each gamma element covers.
  template <class T>
  void prelu_gamma_grad(const T* g, const T* x, const NDArray& dgamma, Req req) const {
    std::vector<double> acc(static_cast<size_t>(gamma_n_ * gamma_c_), 0.0);
    for (int64_t i = 0; i < n_; ++i)
      if (nn::ld(x, i) <= 0)
        acc[static_cast<size_t>(gamma_index(i))] +=
            static_cast<double>(nn::ld(g, i)) * static_cast<double>(nn::ld(x, i));
    T* dg = dgamma.data<T>();
    bool add = nn::is_add(req);
    for (size_t c = 0; c < acc.size(); ++c)
      nn::st(dg, static_cast<int64_t>(c), static_cast<compute_t<T>>(acc[c]), add);
  }

  LeakyParam p_;
  Act act_;
  DType dtype_;
  std::string what_;
  int64_t n_ = 0, channels_ = 1, inner_ = 1, gamma_n_ = 1, gamma_c_ = 1;
  bool par_ = true;  // forward loops in parallel (not for small maps)
  int team_parts_ = 0;  // >1: the float32 prelu pass runs in this many parts on the team
  int block_ = 1;
  std::vector<float> slopes_;  // fused_activation: a shared slope per channel
};

// Data, output and their gradients in one layout (plain or channel-blocked); prelu's gamma
// stays plain. rrelu's mask stays plain, so rrelu does not take blocked data.
LayoutRule leaky_layout_rule(const OpAttrs& a, const std::vector<Shape>& in) {
  if (a.param<LeakyParam>().act_type == "rrelu" || in.empty() || in[0].ndim() != 4) return {};
  return LayoutRule{{{{LayoutSlot::kIn, 0},
                      {LayoutSlot::kOut, 0},
                      {LayoutSlot::kInGrad, 0},
                      {LayoutSlot::kOutGrad, 0}}},
                    false};
}

LOOM_CPU_DTYPES("LeakyReLU", kDTypePolicyFloats);

LOOM_REGISTER_OP("LeakyReLU")
    .describe("Leaky rectified linear units and relatives (prelu, rrelu, elu, selu, gelu).")
    .params(kLeakySchema)
    .init_input(1, "[\"Constant\", {\"value\": 0.25}]")
    .inputs([](const OpAttrs& a) {
      return a.param<LeakyParam>().act_type == "prelu" ? std::vector<std::string>{"data", "gamma"}
                                                       : std::vector<std::string>{"data"};
    })
    .outputs([](const OpAttrs& a) {
      return a.param<LeakyParam>().act_type == "rrelu" ? std::vector<std::string>{"output", "mask"}
                                                       : std::vector<std::string>{"output"};
    })
    .visible_outputs([](const OpAttrs&) { return 1; })
    .shape_fn(leaky_infer_shape)
    .deps([](const OpAttrs& a) {
      return GradDeps{
          .out_grad = true, .in_data = true, .out_data = a.param<LeakyParam>().act_type == "rrelu"};
    })
    .cpu<LeakyKernel>()
    // Element-wise: each element is read before it is written (the backward reads the input,
    // so the memory plan computes in place only where nothing needs it afterwards).
    .inplace_pairs({{0, 0}})
    .layouts(leaky_layout_rule)
    .sample({.attrs = {}, .in_shapes = {{2, 3, 5}}})
    .sample({.attrs = {{"act_type", "prelu"}},
             .in_shapes = {{2, 3, 4}, {3}},
             .in_kinds = {"normal", "positive"}})
    .sample({.attrs = {{"act_type", "elu"}, {"slope", "0.5"}}, .in_shapes = {{2, 6}}});

}  // namespace
}  // namespace loom
