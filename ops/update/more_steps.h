// Parameters and per-element steps of rmsprop_update, rmspropalex_update (rmsprop.cc),
// adamw_update / _adamw_update (adam.cc), signsgd_update and signum_update
// (sign_ftml_ftrl.cc), shared by those CPU kernels and the CUDA kernels (optimizers.cu): the
// CPU tests check the arithmetic the GPU runs. No OpenMP here: .cu files include it.
#pragma once

#include <cmath>

#include "ops/update/update_math.h"

namespace loom::update {

struct RMSPropParam {
  double lr, gamma1, gamma2, epsilon, wd, rescale_grad, clip_gradient, clip_weights;
  bool lr_input;
};
struct AdamWParam {
  double lr, beta1, beta2, epsilon, wd, eta, rescale_grad, clip_gradient;
  bool lr_input;
};
struct SignSGDParam {
  double lr, wd, rescale_grad, clip_gradient;
};
struct SignumParam {
  double lr, momentum, wd, rescale_grad, clip_gradient, wd_lh;
};
struct FTMLParam {
  double lr, beta1, beta2, epsilon, wd, rescale_grad, clip_grad;
  int t;
};
struct FtrlParam {
  double lr, lamda1, beta, wd, rescale_grad, clip_gradient;
};
struct LambPhase1Param {
  double beta1, beta2, epsilon;
  int t;
  bool bias_correction;
  double wd, rescale_grad, clip_gradient;
  bool t_input;
};
struct LambPhase2Param {
  double lr, lower_bound, upper_bound;
  bool lr_input;
};

/// −1, 0 or 1.
LOOM_HD float sgn(float v) { return static_cast<float>((v > 0.f) - (v < 0.f)); }

/// rmsprop_update: g = clip(rs·grad + wd·w); n ← (1−γ1)·g² + γ1·n; w ← clip(w − lr·g/√(n + ε)).
struct RMSPropStep {
  float g1, eps, wd, rs, c, cw;
  explicit RMSPropStep(const RMSPropParam& p)
      : g1(static_cast<float>(p.gamma1)),
        eps(static_cast<float>(p.epsilon)),
        wd(static_cast<float>(p.wd)),
        rs(static_cast<float>(p.rescale_grad)),
        c(clip_bound(p.clip_gradient)),
        cw(clip_bound(p.clip_weights)) {}
  LOOM_HD float operator()(float lr, float w, float g, float& n) const {
    const float gr = clip(rs * g + wd * w, c);
    const float nn = (1.f - g1) * (gr * gr) + g1 * n;
    n = nn;
    return clip(w - lr * (gr / math::fn::sqrt(nn + eps)), cw);
  }
};

/// rmspropalex_update (centered): n, g_avg and delta updated in place; w ← clip(w + delta).
struct RMSPropAlexStep {
  float g1, g2, eps, wd, rs, c, cw;
  explicit RMSPropAlexStep(const RMSPropParam& p)
      : g1(static_cast<float>(p.gamma1)),
        g2(static_cast<float>(p.gamma2)),
        eps(static_cast<float>(p.epsilon)),
        wd(static_cast<float>(p.wd)),
        rs(static_cast<float>(p.rescale_grad)),
        c(clip_bound(p.clip_gradient)),
        cw(clip_bound(p.clip_weights)) {}
  LOOM_HD float operator()(float lr, float w, float g, float& n, float& ga, float& delta) const {
    const float gr = clip(rs * g + wd * w, c);
    const float nn = (1.f - g1) * gr * gr + g1 * n;
    const float gg = (1.f - g1) * gr + g1 * ga;
    const float d = g2 * delta - lr * gr / math::fn::sqrt(nn - gg * gg + eps);
    n = nn;
    ga = gg;
    delta = d;
    return clip(w + d, cw);
  }
};

/// AdamW skips the whole update (states untouched, weight kept) when rescale_grad is NaN,
/// ±Inf or 0 (dynamic loss scaling's overflow case).
LOOM_HD bool adamw_skips(float rs) { return !(rs - rs == 0.f) || rs == 0.f; }

/// AdamW: g = clip(rs·grad); Adam's moments; w ← w − eta·(lr·mean/(√var + ε) + wd·w).
struct AdamWStep {
  float b1, b2, eps, lr, wd, c;
  explicit AdamWStep(const AdamWParam& p)
      : b1(static_cast<float>(p.beta1)),
        b2(static_cast<float>(p.beta2)),
        eps(static_cast<float>(p.epsilon)),
        lr(static_cast<float>(p.lr)),
        wd(static_cast<float>(p.wd)),
        c(clip_bound(p.clip_gradient)) {}
  LOOM_HD float operator()(float eta, float rs, float w, float g, float& mean, float& var) const {
    const float gr = clip(rs * g, c);
    const float m = b1 * mean + (1.f - b1) * gr;
    const float v = b2 * var + (1.f - b2) * gr * gr;
    mean = m;
    var = v;
    return w - eta * (lr * m / (math::fn::sqrt(v) + eps) + wd * w);
  }
};

/// signsgd_update: w ← (1 − lr·wd)·w − lr·sign(grad) (rescale and clipping cannot change a
/// sign, so MXNet ignores them).
struct SignSGDStep {
  float lr, decay;
  explicit SignSGDStep(const SignSGDParam& p)
      : lr(static_cast<float>(p.lr)), decay(1.f - lr * static_cast<float>(p.wd)) {}
  LOOM_HD float operator()(float w, float g) const { return decay * w - lr * sgn(g); }
};

/// signum_update: mom ← μ·mom − (1−μ)·wd·w − (1−μ)·clip(rs·grad); w ← (1 − lr·wd_lh)·w +
/// lr·sign(mom).
struct SignumStep {
  float mu, lr, wd, rs, c, decay;
  explicit SignumStep(const SignumParam& p)
      : mu(static_cast<float>(p.momentum)),
        lr(static_cast<float>(p.lr)),
        wd(static_cast<float>(p.wd)),
        rs(static_cast<float>(p.rescale_grad)),
        c(clip_bound(p.clip_gradient)),
        decay(1.f - lr * static_cast<float>(p.wd_lh)) {}
  LOOM_HD float operator()(float w, float g, float& mom) const {
    const float m = mu * mom - (1.f - mu) * wd * w - (1.f - mu) * clip(rs * g, c);
    mom = m;
    return decay * w + lr * sgn(m);
  }
};

/// ftml_update (step t): g = clip(rs·grad + wd·w); v ← β2·v + (1−β2)·g²;
/// d' = (1−β1ᵗ)/lr·(√(v/(1−β2ᵗ)) + ε); z ← β1·z + (1−β1)·g − (d' − β1·d)·w; d ← d';
/// w ← −z/d'. The bias corrections are computed once, on the host.
struct FTMLStep {
  float lr, b1, b2, eps, wd, rs, c, c1, c2;
  explicit FTMLStep(const FTMLParam& p)
      : lr(static_cast<float>(p.lr)),
        b1(static_cast<float>(p.beta1)),
        b2(static_cast<float>(p.beta2)),
        eps(static_cast<float>(p.epsilon)),
        wd(static_cast<float>(p.wd)),
        rs(static_cast<float>(p.rescale_grad)),
        c(clip_bound(p.clip_grad)),
        c1(1.f - std::pow(b1, static_cast<float>(p.t))),
        c2(1.f - std::pow(b2, static_cast<float>(p.t))) {}
  LOOM_HD float operator()(float w, float g, float& d, float& v, float& z) const {
    const float gi = clip(rs * g + wd * w, c);
    v = b2 * v + (1.f - b2) * gi * gi;
    const float dt = c1 / lr * (math::fn::sqrt(v / c2) + eps);
    z = b1 * z + (1.f - b1) * gi - (dt - b1 * d) * w;
    d = dt;
    return -z / dt;
  }
};

/// ftrl_update: g = clip(rs·grad); z ← z + g − (√(n + g²) − √n)·w/lr; n ← n + g²;
/// w ← (sign(z)·λ1 − z)/((β + √n)/lr + wd) where |z| > λ1, else 0.
struct FtrlStep {
  float lr, l1, beta, wd, rs, c;
  explicit FtrlStep(const FtrlParam& p)
      : lr(static_cast<float>(p.lr)),
        l1(static_cast<float>(p.lamda1)),
        beta(static_cast<float>(p.beta)),
        wd(static_cast<float>(p.wd)),
        rs(static_cast<float>(p.rescale_grad)),
        c(clip_bound(p.clip_gradient)) {}
  LOOM_HD float operator()(float w, float g, float& z, float& n) const {
    const float gi = clip(g * rs, c);
    z += gi - (math::fn::sqrt(n + gi * gi) - math::fn::sqrt(n)) * w / lr;
    n += gi * gi;
    const float keep = math::fn::fabs(z) > l1 ? 1.f : 0.f;
    return (sgn(z) * l1 - z) / ((beta + math::fn::sqrt(n)) / lr + wd) * keep;
  }
};

/// lamb_update_phase1: Adam's moments of g = clip(rs·grad), then the direction
/// (mean/c1)/(√(var/c2) + ε) + wd·w, with c1 = 1 − β1ᵗ, c2 = 1 − β2ᵗ (1 without correction).
struct LambPhase1Step {
  float b1, b2, eps, wd, rs, c;
  bool bias;
  explicit LambPhase1Step(const LambPhase1Param& p)
      : b1(static_cast<float>(p.beta1)),
        b2(static_cast<float>(p.beta2)),
        eps(static_cast<float>(p.epsilon)),
        wd(static_cast<float>(p.wd)),
        rs(static_cast<float>(p.rescale_grad)),
        c(clip_bound(p.clip_gradient)),
        bias(p.bias_correction) {}
  /// c1 and c2 for step t as MXNet computes them (βᵗ by pow in double, rounded to float).
  LOOM_HD void corrections(double t, float& c1, float& c2) const {
    c1 = c2 = 1.f;
    if (!bias) return;
    c1 = static_cast<float>(1.0 - static_cast<float>(math::fn::pow(double{b1}, t)));
    c2 = static_cast<float>(1.0 - static_cast<float>(math::fn::pow(double{b2}, t)));
  }
  LOOM_HD float operator()(float c1, float c2, float w, float g, float& mean, float& var) const {
    const float gr = clip(g * rs, c);
    const float m = b1 * mean + (1.f - b1) * gr;
    const float v = b2 * var + (1.f - b2) * gr * gr;
    mean = m;
    var = v;
    return (m / c1) / (math::fn::sqrt(v / c2) + eps) + wd * w;
  }
};

/// lamb_update_phase2's rate: r1 bounded by lower/upper (when >= 0), then base·r1/r2, or
/// base when r1 or r2 is 0; the step is w − rate·g.
struct LambPhase2Rate {
  float lo, hi;
  bool has_lo, has_hi;
  explicit LambPhase2Rate(const LambPhase2Param& p)
      : lo(static_cast<float>(p.lower_bound)),
        hi(static_cast<float>(p.upper_bound)),
        has_lo(p.lower_bound >= 0),
        has_hi(p.upper_bound >= 0) {}
  LOOM_HD float operator()(float base, float r1, float r2) const {
    if (has_lo) r1 = r1 < lo ? lo : r1;  // std::max's rule
    if (has_hi) r1 = hi < r1 ? hi : r1;  // std::min's rule
    return (r1 == 0.f || r2 == 0.f) ? base : base * r1 / r2;
  }
};

}  // namespace loom::update
