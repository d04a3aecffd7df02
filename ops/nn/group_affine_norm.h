// The kernel shared by LayerNorm, InstanceNorm and GroupNorm: the input seen as
// (outer, reduce, inner); each (o, i) pair is one group normalised over its `reduce`
// elements with the population variance, then scaled and shifted by gamma/beta, indexed
// either by the reduced position r (LayerNorm) or by o modulo a count (InstanceNorm: the
// channel, GroupNorm: the group). Optional outputs 1 and 2 receive each group's mean and
// sqrt(var + eps). Backward recomputes the statistics from the input and also carries
// gradients that reach the mean and std outputs (MXNet 1.9.1 ignores those).
#pragma once

#include <cmath>
#include <vector>

#include "ops/tensor/tensor_util.h"

namespace loom::nn {

struct GroupNormLayout {
  int64_t outer = 1, reduce = 1, inner = 1;
  bool gamma_by_reduce = false;  ///< gamma[r] (LayerNorm) rather than gamma[o % gamma_count]
  int64_t gamma_count = 1;
  double eps = 1e-5;
};

class GroupAffineNormKernel final : public Kernel {
 public:
  GroupAffineNormKernel(const KernelArgs& a, GroupNormLayout l) : l_(l) { tensor::check_f32(a); }

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const float *x = in[0].cdata<float>(), *gamma = in[1].cdata<float>(), *beta = in[2].cdata<float>();
    float* y = req[0] == Req::kNull ? nullptr : out[0].data<float>();
    float* mean_out = out.size() > 1 && req[1] != Req::kNull ? out[1].data<float>() : nullptr;
    float* std_out = out.size() > 2 && req[2] != Req::kNull ? out[2].data<float>() : nullptr;
    const int64_t groups = l_.outer * l_.inner;
#pragma omp parallel for schedule(static) if (groups * l_.reduce >= tensor::kParallelMin && groups > 1)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t o = gi / l_.inner, i = gi % l_.inner;
      auto [mean, sd] = stats(x, o, i);
      if (mean_out) tensor::store(mean_out + gi, req[1], static_cast<float>(mean));
      if (std_out) tensor::store(std_out + gi, req[2], static_cast<float>(sd));
      if (!y) continue;
      for (int64_t r = 0; r < l_.reduce; ++r) {
        const int64_t k = at(o, r, i), c = gamma_index(o, r);
        const float v = static_cast<float>((x[k] - mean) / sd) * gamma[c] + beta[c];
        tensor::store(y + k, req[0], v);
      }
    }
  }

  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    const float *g = og[0].cdata<float>(), *x = in[0].cdata<float>(), *gamma = in[1].cdata<float>();
    float* dx = req[0] == Req::kNull ? nullptr : ig[0].data<float>();
    // Gradients reaching the mean and std outputs (when they are visible and used): d mean /
    // dx = 1/n, d std / dx = xhat/n. MXNet 1.9.1 drops these; Loom differentiates them.
    const float* gmean = og.size() > 1 && !og[1].is_none() ? og[1].cdata<float>() : nullptr;
    const float* gstd = og.size() > 2 && !og[2].is_none() ? og[2].cdata<float>() : nullptr;
    std::vector<double> dgamma(static_cast<size_t>(ig[1].size()), 0.0), dbeta(dgamma.size(), 0.0);
    const int64_t groups = l_.outer * l_.inner;
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t o = gi / l_.inner, i = gi % l_.inner;
      auto [mean, sd] = stats(x, o, i);
      double sum_gh = 0, sum_ghx = 0;  // sums of g*gamma and g*gamma*xhat over the group
      for (int64_t r = 0; r < l_.reduce; ++r) {
        const int64_t k = at(o, r, i), c = gamma_index(o, r);
        const double xhat = (x[k] - mean) / sd, gh = double(g[k]) * gamma[c];
        sum_gh += gh;
        sum_ghx += gh * xhat;
        dgamma[static_cast<size_t>(c)] += double(g[k]) * xhat;
        dbeta[static_cast<size_t>(c)] += g[k];
      }
      if (!dx) continue;
      const double n = static_cast<double>(l_.reduce);
      for (int64_t r = 0; r < l_.reduce; ++r) {
        const int64_t k = at(o, r, i), c = gamma_index(o, r);
        const double xhat = (x[k] - mean) / sd, gh = double(g[k]) * gamma[c];
        double v = (gh - sum_gh / n - xhat * sum_ghx / n) / sd;
        if (gmean) v += gmean[gi] / n;
        if (gstd) v += gstd[gi] * xhat / n;
        tensor::store(dx + k, req[0], static_cast<float>(v));
      }
    }
    for (int p = 1; p <= 2; ++p) {
      if (req[p] == Req::kNull) continue;
      const auto& src = p == 1 ? dgamma : dbeta;
      float* dst = ig[p].data<float>();
      for (size_t c = 0; c < src.size(); ++c) tensor::store(dst + c, req[p], static_cast<float>(src[c]));
    }
  }

 private:
  int64_t at(int64_t o, int64_t r, int64_t i) const { return (o * l_.reduce + r) * l_.inner + i; }
  int64_t gamma_index(int64_t o, int64_t r) const { return l_.gamma_by_reduce ? r : o % l_.gamma_count; }
  // Mean and sqrt(population variance + eps) of group (o, i), in double (two passes).
  std::pair<double, double> stats(const float* x, int64_t o, int64_t i) const {
    double sum = 0;
    for (int64_t r = 0; r < l_.reduce; ++r) sum += x[at(o, r, i)];
    const double mean = sum / static_cast<double>(l_.reduce);
    double ss = 0;
    for (int64_t r = 0; r < l_.reduce; ++r) {
      const double d = x[at(o, r, i)] - mean;
      ss += d * d;
    }
    return {mean, std::sqrt(ss / static_cast<double>(l_.reduce) + l_.eps)};
  }
  GroupNormLayout l_;
};

}  // namespace loom::nn
