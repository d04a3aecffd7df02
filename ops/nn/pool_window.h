// Pooling's parameters and MXNet's window rules, shared by the CPU kernel (pooling.cc) and
// the GPU kernel (pool_lrn.cu): the geometry padded to three spatial dims, each output's
// window clipped to the input, the avg divisor and the value of a window without cells.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <optional>
#include <string>

#include "ops/elemwise_math.h"
#include "runtime/ndarray.h"

namespace loom::nn {

/// Pooling's parameters after the schema's checks (pooling.cc): stride and pad have one
/// entry per kernel dim unless global_pool.
struct PoolParam {
  Shape kernel, stride, pad;
  std::string pool_type, pooling_convention;
  bool global_pool, cudnn_off;
  std::optional<int> p_value;
  std::optional<bool> count_include_pad;
  std::optional<std::string> layout;
};

enum class PoolKind : int { kMax, kAvg, kSum };

/// Pooling geometry padded to three spatial dims (missing leading dims have size 1).
struct PoolGeometry {
  int64_t in[3], out[3], k[3], s[3], p[3];
  int64_t planes;
  LOOM_HD int64_t in_size() const { return in[0] * in[1] * in[2]; }
  LOOM_HD int64_t out_size() const { return out[0] * out[1] * out[2]; }
  /// Window of output o along dim i: [start, end) before clipping to the input, where the
  /// end stops at the padded border (MXNet's divisor counts padding cells up to there).
  LOOM_HD void window(int i, int64_t o, int64_t& start, int64_t& end) const {
    start = o * s[i] - p[i];
    end = start + k[i] < in[i] + p[i] ? start + k[i] : in[i] + p[i];
  }
  /// Output (od, oh, ow)'s window clipped to the input, [lo, hi) per dim, and MXNet's avg
  /// divisor (1 for sum; the padded window size with count_include_pad, else its real cells).
  LOOM_HD float clipped(const int64_t* o, PoolKind kind, bool include_pad, int64_t* lo,
                        int64_t* hi) const {
    int64_t padded = 1, valid = 1;
    for (int i = 0; i < 3; ++i) {
      int64_t start, end;
      window(i, o[i], start, end);
      padded *= end > start ? end - start : 0;
      lo[i] = start > 0 ? start : 0;
      hi[i] = end < in[i] ? end : in[i];
      valid *= hi[i] > lo[i] ? hi[i] - lo[i] : 0;
    }
    return kind == PoolKind::kSum ? 1.f : static_cast<float>(include_pad ? padded : valid);
  }
};

/// The pooled value from the accumulated max or sum `acc` of a window (`any`: it has a real
/// cell). A window made only of padding: MXNet 1.9.1 leaves max pooling at its initial
/// value, the lowest float; avg and sum give 0.
LOOM_HD float pool_result(PoolKind kind, float acc, bool any, float div) {
  if (!any && kind != PoolKind::kMax) return 0.f;
  return kind == PoolKind::kAvg ? acc / div : acc;
}

/// The geometry of `p` for data `in` and output `out` (N, C, spatial...).
inline PoolGeometry make_pool_geometry(const PoolParam& p, const Shape& in, const Shape& out) {
  PoolGeometry g{};
  int nd = in.ndim() - 2;
  g.planes = in[0] * in[1];
  for (int j = 0; j < 3; ++j) {
    int i = j - (3 - nd);  // index into the op's spatial dims, < 0 for padding dims
    bool real = i >= 0;
    g.in[j] = real ? in[i + 2] : 1;
    g.out[j] = real ? out[i + 2] : 1;
    g.k[j] = !real ? 1 : p.global_pool ? g.in[j] : p.kernel[i];
    g.s[j] = !real || p.global_pool ? 1 : p.stride[i];
    g.p[j] = !real || p.global_pool ? 0 : p.pad[i];
  }
  return g;
}

}  // namespace loom::nn
