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

#include "ops/nn/group_norm_math.h"
#include "ops/nn/nn_dtype.h"
#include "ops/tensor/tensor_util.h"

namespace loom::nn {

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
      const GroupStats st = group_stats(l_, x, o, i);
      if (mean_out) put(mean_out + gi, req[1], st.mean);
      if (std_out) put(std_out + gi, req[2], st.sd);
      if (!y) continue;
      for (int64_t r = 0; r < l_.reduce; ++r) {
        const int64_t k = at(o, r, i), c = gamma_index(o, r);
        put(y + k, req[0],
            group_norm_value(double(ld(x, k)), st, double(ld(gamma, c)), double(ld(beta, c))));
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
      const GroupStats st = group_stats(l_, x, o, i);
      for (int64_t r = 0; r < l_.reduce; ++r) {  // gamma and beta: in the order of norms.cu
        const int64_t k = at(o, r, i), c = gamma_index(o, r);
        const double xhat = (double(ld(x, k)) - st.mean) / st.sd;
        dgamma[static_cast<size_t>(c)] += double(ld(g, k)) * xhat;
        dbeta[static_cast<size_t>(c)] += double(ld(g, k));
      }
      if (!dx) continue;
      const GroupGradSums sums = group_grad_sums(l_, g, x, gamma, st, o, i);
      for (int64_t r = 0; r < l_.reduce; ++r)
        put(dx + at(o, r, i), req[0],
            group_norm_dx(l_, g, x, gamma, gmean, gstd, st, sums, o, r, i));
    }
    for (int p = 1; p <= 2; ++p) {
      if (req[p] == Req::kNull) continue;
      const auto& src = p == 1 ? dgamma : dbeta;
      T* dst = ig[p].data<T>();
      for (size_t c = 0; c < src.size(); ++c) put(dst + c, req[p], src[c]);
    }
  }

  int64_t at(int64_t o, int64_t r, int64_t i) const { return l_.at(o, r, i); }
  int64_t gamma_index(int64_t o, int64_t r) const { return l_.gamma_index(o, r); }
  GroupNormLayout l_;
  DType dtype_;
  std::string what_;
};

}  // namespace loom::nn
