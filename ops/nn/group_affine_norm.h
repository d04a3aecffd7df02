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

#include "ops/nn/nn_dtype.h"
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
  /// Every input and output has the data's dtype (the ops' default type inference);
  /// float16 computes in float/double like the other dtypes and rounds on store.
  GroupAffineNormKernel(const KernelArgs& a, GroupNormLayout l)
      : l_(l), dtype_(a.in_types[0]),
        what_("node '" + a.attrs.name + "' (op " + a.attrs.op->name + ")") {}

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    dispatch_floats(dtype_, [&](auto tag) {
      forward_t<typename decltype(tag)::type>(in, req, out);
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    dispatch_floats(dtype_, [&](auto tag) {
      backward_t<typename decltype(tag)::type>(og, in, req, ig);
    }, what_);
  }

 private:
  template <class T>
  static void put(T* dst, Req req, double v) {
    st(dst, 0, static_cast<compute_t<T>>(v), req == Req::kAdd);
  }

  template <class T>
  void forward_t(std::span<const NDArray> in, std::span<const Req> req,
                 std::span<const NDArray> out) {
    const T *x = in[0].cdata<T>(), *gamma = in[1].cdata<T>(), *beta = in[2].cdata<T>();
    T* y = req[0] == Req::kNull ? nullptr : out[0].data<T>();
    T* mean_out = out.size() > 1 && req[1] != Req::kNull ? out[1].data<T>() : nullptr;
    T* std_out = out.size() > 2 && req[2] != Req::kNull ? out[2].data<T>() : nullptr;
    const int64_t groups = l_.outer * l_.inner;
#pragma omp parallel for schedule(static) if (groups * l_.reduce >= tensor::kParallelMin && groups > 1)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t o = gi / l_.inner, i = gi % l_.inner;
      auto [mean, sd] = stats(x, o, i);
      if (mean_out) put(mean_out + gi, req[1], mean);
      if (std_out) put(std_out + gi, req[2], sd);
      if (!y) continue;
      for (int64_t r = 0; r < l_.reduce; ++r) {
        const int64_t k = at(o, r, i), c = gamma_index(o, r);
        const double v = (double(ld(x, k)) - mean) / sd * double(ld(gamma, c)) + double(ld(beta, c));
        put(y + k, req[0], v);
      }
    }
  }

  template <class T>
  void backward_t(std::span<const NDArray> og, std::span<const NDArray> in,
                  std::span<const Req> req, std::span<const NDArray> ig) {
    const T *g = og[0].cdata<T>(), *x = in[0].cdata<T>(), *gamma = in[1].cdata<T>();
    T* dx = req[0] == Req::kNull ? nullptr : ig[0].data<T>();
    // Gradients reaching the mean and std outputs (when they are visible and used): d mean /
    // dx = 1/n, d std / dx = xhat/n. MXNet 1.9.1 drops these; Loom differentiates them.
    const T* gmean = og.size() > 1 && !og[1].is_none() ? og[1].cdata<T>() : nullptr;
    const T* gstd = og.size() > 2 && !og[2].is_none() ? og[2].cdata<T>() : nullptr;
    std::vector<double> dgamma(static_cast<size_t>(ig[1].size()), 0.0), dbeta(dgamma.size(), 0.0);
    const int64_t groups = l_.outer * l_.inner;
    for (int64_t gi = 0; gi < groups; ++gi) {
      const int64_t o = gi / l_.inner, i = gi % l_.inner;
      auto [mean, sd] = stats(x, o, i);
      double sum_gh = 0, sum_ghx = 0;  // sums of g*gamma and g*gamma*xhat over the group
      for (int64_t r = 0; r < l_.reduce; ++r) {
        const int64_t k = at(o, r, i), c = gamma_index(o, r);
        const double xhat = (double(ld(x, k)) - mean) / sd, gh = double(ld(g, k)) * double(ld(gamma, c));
        sum_gh += gh;
        sum_ghx += gh * xhat;
        dgamma[static_cast<size_t>(c)] += double(ld(g, k)) * xhat;
        dbeta[static_cast<size_t>(c)] += double(ld(g, k));
      }
      if (!dx) continue;
      const double n = static_cast<double>(l_.reduce);
      for (int64_t r = 0; r < l_.reduce; ++r) {
        const int64_t k = at(o, r, i), c = gamma_index(o, r);
        const double xhat = (double(ld(x, k)) - mean) / sd, gh = double(ld(g, k)) * double(ld(gamma, c));
        double v = (gh - sum_gh / n - xhat * sum_ghx / n) / sd;
        if (gmean) v += double(ld(gmean, gi)) / n;
        if (gstd) v += double(ld(gstd, gi)) * xhat / n;
        put(dx + k, req[0], v);
      }
    }
    for (int p = 1; p <= 2; ++p) {
      if (req[p] == Req::kNull) continue;
      const auto& src = p == 1 ? dgamma : dbeta;
      T* dst = ig[p].data<T>();
      for (size_t c = 0; c < src.size(); ++c) put(dst + c, req[p], src[c]);
    }
  }

  int64_t at(int64_t o, int64_t r, int64_t i) const { return (o * l_.reduce + r) * l_.inner + i; }
  int64_t gamma_index(int64_t o, int64_t r) const { return l_.gamma_by_reduce ? r : o % l_.gamma_count; }
  // Mean and sqrt(population variance + eps) of group (o, i), in double (two passes).
  template <class T>
  std::pair<double, double> stats(const T* x, int64_t o, int64_t i) const {
    double sum = 0;
    for (int64_t r = 0; r < l_.reduce; ++r) sum += double(ld(x, at(o, r, i)));
    const double mean = sum / static_cast<double>(l_.reduce);
    double ss = 0;
    for (int64_t r = 0; r < l_.reduce; ++r) {
      const double d = double(ld(x, at(o, r, i))) - mean;
      ss += d * d;
    }
    return {mean, std::sqrt(ss / static_cast<double>(l_.reduce) + l_.eps)};
  }
  GroupNormLayout l_;
  DType dtype_;
  std::string what_;
};

}  // namespace loom::nn
