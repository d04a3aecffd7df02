// The layout and the per-group / per-element arithmetic of LayerNorm, InstanceNorm and
// GroupNorm (see group_affine_norm.h), shared by the CPU kernel (GroupAffineNormKernel) and
// the CUDA kernels (norms.cu). No OpenMP and no CPU kernel here: .cu files include it.
#pragma once

#include <cstdint>

#include "ops/elemwise_math.h"
#include "ops/op.h"
#include "runtime/dtype_traits.h"

namespace loom::nn {

struct GroupNormLayout {
  int64_t outer = 1, reduce = 1, inner = 1;
  bool gamma_by_reduce = false;  ///< gamma[r] (LayerNorm) rather than gamma[o % gamma_count]
  int64_t gamma_count = 1;
  double eps = 1e-5;

  /// Element (o, r, i)'s offset.
  LOOM_HD int64_t at(int64_t o, int64_t r, int64_t i) const { return (o * reduce + r) * inner + i; }
  /// The gamma/beta element of (o, r).
  LOOM_HD int64_t gamma_index(int64_t o, int64_t r) const {
    return gamma_by_reduce ? r : o % gamma_count;
  }
  /// Number of gamma (and beta) elements.
  LOOM_HD int64_t gamma_size() const { return gamma_by_reduce ? reduce : gamma_count; }
};

/// A node's layout, defined by each op's .cc (used by its CPU kernel and by norms.cu).
GroupNormLayout layer_norm_layout(const KernelArgs& a);
GroupNormLayout group_norm_layout(const KernelArgs& a);
GroupNormLayout instance_norm_layout(const KernelArgs& a);

// The per-group and per-element arithmetic below is __host__ __device__: the CPU kernel
// (GroupAffineNormKernel) and the CUDA kernels (norms.cu) run the same code, in double.

/// A group's mean and sqrt(var + eps) (population variance).
struct GroupStats {
  double mean, sd;
};
template <class T>
LOOM_HD GroupStats group_stats(const GroupNormLayout& l, const T* x, int64_t o, int64_t i) {
  double sum = 0;
  for (int64_t r = 0; r < l.reduce; ++r) sum += double(compute_t<T>(x[l.at(o, r, i)]));
  const double mean = sum / static_cast<double>(l.reduce);
  double ss = 0;
  for (int64_t r = 0; r < l.reduce; ++r) {
    const double d = double(compute_t<T>(x[l.at(o, r, i)])) - mean;
    ss += d * d;
  }
  return {mean, math::fn::sqrt(ss / static_cast<double>(l.reduce) + l.eps)};
}

/// y = (x − mean) / sd · gamma + beta.
LOOM_HD double group_norm_value(double x, GroupStats s, double gamma, double beta) {
  return (x - s.mean) / s.sd * gamma + beta;
}

/// Sums over one group for the gradient: Σ g·gamma and Σ g·gamma·x̂.
struct GroupGradSums {
  double gh = 0, ghx = 0;
};
template <class T>
LOOM_HD GroupGradSums group_grad_sums(const GroupNormLayout& l, const T* g, const T* x,
                                      const T* gamma, GroupStats s, int64_t o, int64_t i) {
  GroupGradSums sums;
  for (int64_t r = 0; r < l.reduce; ++r) {
    const int64_t k = l.at(o, r, i);
    const double xhat = (double(compute_t<T>(x[k])) - s.mean) / s.sd;
    const double gh = double(compute_t<T>(g[k])) * double(compute_t<T>(gamma[l.gamma_index(o, r)]));
    sums.gh += gh;
    sums.ghx += gh * xhat;
  }
  return sums;
}

/// dx of element k = (o, r, i) of group gi; gmean/gstd: gradients reaching the mean and
/// std outputs (null: none).
template <class T>
LOOM_HD double group_norm_dx(const GroupNormLayout& l, const T* g, const T* x, const T* gamma,
                             const T* gmean, const T* gstd, GroupStats s, GroupGradSums sums,
                             int64_t o, int64_t r, int64_t i) {
  const int64_t k = l.at(o, r, i), gi = o * l.inner + i;
  const double n = static_cast<double>(l.reduce);
  const double xhat = (double(compute_t<T>(x[k])) - s.mean) / s.sd;
  const double gh = double(compute_t<T>(g[k])) * double(compute_t<T>(gamma[l.gamma_index(o, r)]));
  double v = (gh - sums.gh / n - xhat * sums.ghx / n) / s.sd;
  if (gmean) v += double(compute_t<T>(gmean[gi])) / n;
  if (gstd) v += double(compute_t<T>(gstd[gi])) * xhat / n;
  return v;
}

}  // namespace loom::nn
