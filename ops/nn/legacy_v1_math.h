// The arithmetic of the legacy ops BatchNorm_v1 and Pooling_v1 (MXNet 1.9.1's
// batch_norm_v1 and pooling_v1), shared by the CPU kernels (legacy_v1.cc) and the GPU
// kernels (legacy_v1.cu). The rules themselves are described in legacy_v1.cc.
#pragma once

#include <string>

#include "ops/elemwise_math.h"
#include "runtime/ndarray.h"

namespace loom::nn {

// ------------------------------------------------------------------------- BatchNorm_v1

/// BatchNorm_v1's parameters (the schema is in legacy_v1.cc).
struct BNv1Param {
  float eps, momentum;
  bool fix_gamma, use_global_stats, output_mean_var;
};

/// 1 / sqrt(var + eps), eps being v1's float parameter.
LOOM_HD double bnv1_inv(double var, float eps) { return 1.0 / math::fn::sqrt(var + eps); }

/// The output g·(x − mu)·inv + b, computed in double as MXNet's v1 kernel.
LOOM_HD float bnv1_output(float x, double mu, double inv, double g, double b) {
  return static_cast<float>(g * (x - mu) * inv + b);
}

/// v1's moving average, updated in backward: moving·momentum + batch·(1 − momentum).
LOOM_HD float bnv1_moving(float moving, double batch, float momentum) {
  return static_cast<float>(moving * momentum + batch * (1 - momentum));
}

/// Training-mode data gradient of one element: a·(dy − k1 − (x − mu)·k2) with a = g·inv,
/// k1 = Σdy / m, k2 = Σdy·(x − mu) · inv² / m.
LOOM_HD double bnv1_dx_train(float dy, float x, double mu, double a, double k1, double k2) {
  return a * (dy - k1 - (x - mu) * k2);
}

// ------------------------------------------------------------------------------ Pooling_v1

/// Pooling_v1's parameters after the schema's checks.
struct PoolV1Param {
  Shape kernel;
  std::string pool_type;
  bool global_pool;
  std::string pooling_convention;
  Shape stride, pad;
};

/// The windows of one (N, C, h, w) plane: window (i, j) covers padded rows
/// [i·sh, i·sh + kh) and columns likewise, i.e. data rows from i·sh − ph, clipped.
struct PoolV1Window {
  int64_t kh, kw, sh, sw, ph, pw;  // kernel, stride, pad
  int64_t h, w;                    // data plane
  int type;                        // 0 max, 1 sum, 2 avg
  float scale;                     // avg: 1 / (kh·kw); else 1

  /// Window (i, j)'s cells inside the data: rows [r0, r1), columns [q0, q1).
  LOOM_HD void cells(int64_t i, int64_t j, int64_t* r0, int64_t* r1, int64_t* q0,
                     int64_t* q1) const {
    const int64_t a = i * sh - ph, b = j * sw - pw;
    *r0 = a > 0 ? a : 0;
    *r1 = a + kh < h ? a + kh : h;
    *q0 = b > 0 ? b : 0;
    *q1 = b + kw < w ? b + kw : w;
  }
  /// Whether window (i, j) covers a padding cell (inside the padded extent).
  LOOM_HD bool covers_pad(int64_t i, int64_t j) const {
    const int64_t r0 = i * sh - ph, q0 = j * sw - pw;
    const int64_t r1 = r0 + kh < h + ph ? r0 + kh : h + ph;
    const int64_t q1 = q0 + kw < w + pw ? q0 + kw : w + pw;
    return r0 < 0 || q0 < 0 || r1 > h || q1 > w;
  }
  /// The pooled value of window (i, j) over plane x: the max (the padding's zeros count),
  /// or the sum times `scale`.
  LOOM_HD float pooled(const float* x, int64_t i, int64_t j) const {
    int64_t r0, r1, q0, q1;
    cells(i, j, &r0, &r1, &q0, &q1);
    if (type == 0) {
      float m = covers_pad(i, j) ? 0.f : -INFINITY;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t q = q0; q < q1; ++q) m = x[r * w + q] > m ? x[r * w + q] : m;
      return m;
    }
    float s = 0;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t q = q0; q < q1; ++q) s += x[r * w + q];
    return s * scale;
  }
};

/// The windows of `p` over data x (N, C, h, w).
inline PoolV1Window make_pool_v1_window(const PoolV1Param& p, const Shape& x) {
  PoolV1Window g{};
  if (p.global_pool) {
    g.kh = x[2], g.kw = x[3], g.sh = g.sw = 1, g.ph = g.pw = 0;
  } else {
    g.kh = p.kernel[0], g.kw = p.kernel[1], g.sh = p.stride[0], g.sw = p.stride[1];
    g.ph = p.pad[0], g.pw = p.pad[1];
  }
  g.h = x[2], g.w = x[3];
  g.type = p.pool_type == "max" ? 0 : p.pool_type == "sum" ? 1 : 2;
  g.scale = g.type == 2 ? 1.f / static_cast<float>(g.kh * g.kw) : 1.f;
  return g;
}

}  // namespace loom::nn
