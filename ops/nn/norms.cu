// GPU kernels of LayerNorm, GroupNorm, InstanceNorm, L2Normalization and moments (registered
// by layer_norm.cc, group_norm.cc, instance_norm.cc, l2_normalization.cc, moments.cc): the
// layouts of those files and the per-group and per-element functions of group_norm_math.h,
// l2_normalization_math.h and moments_math.h, which the CPU kernels run, in double. One
// thread per group computes its statistics (and gradient sums) into the workspace; the
// element passes are then one thread per element. Gamma and beta gradients: one thread per
// gamma element, summing in the CPU's order (same double result).
#include "ops/nn/group_norm_math.h"
#include "ops/nn/l2_normalization_math.h"
#include "ops/nn/moments_math.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

using nn::GroupGradSums;
using nn::GroupNormLayout;
using nn::GroupStats;

#define LOOM_GRID_LOOP(i, n)                                                \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// Per group: its statistics into st, and (=|+=) the mean/std outputs when given.
__global__ void norm_stats(GroupNormLayout l, const float* x, GroupStats* st, float* mean_out,
                           int mean_add, float* std_out, int std_add) {
  LOOM_GRID_LOOP(gi, l.outer * l.inner) {
    const GroupStats s = nn::group_stats(l, x, gi / l.inner, gi % l.inner);
    st[gi] = s;
    if (mean_out) math::assign_req(mean_out + gi, mean_add, static_cast<float>(s.mean));
    if (std_out) math::assign_req(std_out + gi, std_add, static_cast<float>(s.sd));
  }
}

__global__ void norm_forward(GroupNormLayout l, const float* x, const float* gamma,
                             const float* beta, const GroupStats* st, float* y, int add) {
  LOOM_GRID_LOOP(k, l.outer * l.reduce * l.inner) {
    const int64_t i = k % l.inner, r = (k / l.inner) % l.reduce, o = k / (l.inner * l.reduce);
    const int64_t c = l.gamma_index(o, r);
    const double v = nn::group_norm_value(x[k], st[o * l.inner + i], gamma[c], beta[c]);
    math::assign_req(y + k, add, static_cast<float>(v));
  }
}

__global__ void norm_grad_sums(GroupNormLayout l, const float* g, const float* x,
                               const float* gamma, const GroupStats* st, GroupGradSums* sums) {
  LOOM_GRID_LOOP(gi, l.outer * l.inner) {
    sums[gi] = nn::group_grad_sums(l, g, x, gamma, st[gi], gi / l.inner, gi % l.inner);
  }
}

__global__ void norm_dx(GroupNormLayout l, const float* g, const float* x, const float* gamma,
                        const float* gmean, const float* gstd, const GroupStats* st,
                        const GroupGradSums* sums, float* dx, int add) {
  LOOM_GRID_LOOP(k, l.outer * l.reduce * l.inner) {
    const int64_t i = k % l.inner, r = (k / l.inner) % l.reduce, o = k / (l.inner * l.reduce);
    const int64_t gi = o * l.inner + i;
    const double v = nn::group_norm_dx(l, g, x, gamma, gmean, gstd, st[gi], sums[gi], o, r, i);
    math::assign_req(dx + k, add, static_cast<float>(v));
  }
}

// Thread c: Σ g·x̂ and Σ g over the elements of gamma element c, in the CPU loop's order.
__global__ void norm_gamma_beta(GroupNormLayout l, const float* g, const float* x,
                                const GroupStats* st, float* dgamma, int gamma_add, float* dbeta,
                                int beta_add) {
  LOOM_GRID_LOOP(c, l.gamma_size()) {
    double dg = 0, db = 0;
    const int64_t o0 = l.gamma_by_reduce ? 0 : c, ostep = l.gamma_by_reduce ? 1 : l.gamma_count;
    const int64_t r0 = l.gamma_by_reduce ? c : 0, r1 = l.gamma_by_reduce ? c + 1 : l.reduce;
    for (int64_t o = o0; o < l.outer; o += ostep)
      for (int64_t i = 0; i < l.inner; ++i) {
        const GroupStats s = st[o * l.inner + i];
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t k = l.at(o, r, i);
          const double xhat = (double(x[k]) - s.mean) / s.sd;
          dg += double(g[k]) * xhat;
          db += double(g[k]);
        }
      }
    if (dgamma) math::assign_req(dgamma + c, gamma_add, static_cast<float>(dg));
    if (dbeta) math::assign_req(dbeta + c, beta_add, static_cast<float>(db));
  }
}

class GroupAffineNormGpuKernel final : public Kernel {
 public:
  GroupAffineNormGpuKernel(const KernelArgs& a, GroupNormLayout l)
      : l_(l), groups_(l.outer * l.inner), n_(l.outer * l.reduce * l.inner) {
    cuda::require_float32(a);
  }
  size_t workspace_bytes() const override {
    return static_cast<size_t>(groups_) * (sizeof(GroupStats) + sizeof(GroupGradSums));
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (groups_ == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    GroupStats* st = static_cast<GroupStats*>(ctx.workspace);
    auto opt = [&](size_t k) -> float* {
      return out.size() > k && req[k] != Req::kNull ? out[k].data<float>() : nullptr;
    };
    norm_stats<<<cuda::grid_size(groups_), cuda::kBlockSize, 0, s>>>(
        l_, in[0].data<float>(), st, opt(1), out.size() > 1 && req[1] == Req::kAdd, opt(2),
        out.size() > 2 && req[2] == Req::kAdd);
    cuda::check_launch("norm_stats");
    if (req[0] == Req::kNull) return;
    norm_forward<<<cuda::grid_size(n_), cuda::kBlockSize, 0, s>>>(
        l_, in[0].data<float>(), in[1].data<float>(), in[2].data<float>(), st, out[0].data<float>(),
        req[0] == Req::kAdd);
    cuda::check_launch("norm_forward");
  }

  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (groups_ == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    GroupStats* st = static_cast<GroupStats*>(ctx.workspace);
    GroupGradSums* sums = reinterpret_cast<GroupGradSums*>(st + groups_);
    const float *g = og[0].data<float>(), *x = in[0].data<float>(), *gamma = in[1].data<float>();
    auto head = [&](size_t k) -> const float* {
      return og.size() > k && !og[k].is_none() ? og[k].data<float>() : nullptr;
    };
    norm_stats<<<cuda::grid_size(groups_), cuda::kBlockSize, 0, s>>>(l_, x, st, nullptr, 0, nullptr,
                                                                     0);
    cuda::check_launch("norm_stats");
    if (req[1] != Req::kNull || req[2] != Req::kNull) {
      norm_gamma_beta<<<cuda::grid_size(l_.gamma_size()), cuda::kBlockSize, 0, s>>>(
          l_, g, x, st, req[1] != Req::kNull ? ig[1].data<float>() : nullptr, req[1] == Req::kAdd,
          req[2] != Req::kNull ? ig[2].data<float>() : nullptr, req[2] == Req::kAdd);
      cuda::check_launch("norm_gamma_beta");
    }
    if (req[0] == Req::kNull) return;
    norm_grad_sums<<<cuda::grid_size(groups_), cuda::kBlockSize, 0, s>>>(l_, g, x, gamma, st, sums);
    cuda::check_launch("norm_grad_sums");
    norm_dx<<<cuda::grid_size(n_), cuda::kBlockSize, 0, s>>>(
        l_, g, x, gamma, head(1), head(2), st, sums, ig[0].data<float>(), req[0] == Req::kAdd);
    cuda::check_launch("norm_dx");
  }

 private:
  GroupNormLayout l_;
  int64_t groups_, n_;
};

template <GroupNormLayout (*kLayout)(const KernelArgs&)>
std::unique_ptr<Kernel> make_norm(const KernelArgs& a) {
  return std::make_unique<GroupAffineNormGpuKernel>(a, kLayout(a));
}

// ---- L2Normalization: one thread per group over the functions of l2_normalization_math.h ----

__global__ void l2norm_fwd(nn::L2Groups g, const float* x, float* y, double eps, int add) {
  LOOM_GRID_LOOP(k, g.outer * g.inner) {
    const int64_t o = k / g.inner, i = k % g.inner;
    nn::l2norm_group_forward(x, y, o * g.reduced * g.inner + i, g.inner, g.reduced, eps, add);
  }
}

__global__ void l2norm_bwd(nn::L2Groups g, const float* x, const float* gr, float* dx, double eps,
                           int add) {
  LOOM_GRID_LOOP(k, g.outer * g.inner) {
    const int64_t o = k / g.inner, i = k % g.inner;
    nn::l2norm_group_backward(x, gr, dx, o * g.reduced * g.inner + i, g.inner, g.reduced, eps, add);
  }
}

class L2NormGpuKernel final : public Kernel {
 public:
  explicit L2NormGpuKernel(const KernelArgs& a)
      : eps_(a.attrs.param<nn::L2NormParam>().eps),
        g_(nn::l2_groups(a.attrs.param<nn::L2NormParam>().mode, a.in_shapes[0])) {
    cuda::require_float32(a);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const int64_t groups = g_.outer * g_.inner;
    if (req[0] == Req::kNull || groups == 0) return;
    l2norm_fwd<<<cuda::grid_size(groups), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        g_, in[0].data<float>(), out[0].data<float>(), eps_, req[0] == Req::kAdd);
    cuda::check_launch("l2norm_fwd");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    const int64_t groups = g_.outer * g_.inner;
    if (req[0] == Req::kNull || groups == 0) return;
    l2norm_bwd<<<cuda::grid_size(groups), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        g_, in[0].data<float>(), og[0].data<float>(), ig[0].data<float>(), eps_,
        req[0] == Req::kAdd);
    cuda::check_launch("l2norm_bwd");
  }

 private:
  double eps_;
  nn::L2Groups g_;
};

LOOM_REGISTER_OP("L2Normalization").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<L2NormGpuKernel>(a));
});

// ---- moments: one thread per output for the statistics (moments_math.h), in double ----

__global__ void moments_stats(nn::MomentsView v, const float* x, double* mean, double* var,
                              float* mean_out, int mean_req, float* var_out, int var_req) {
  LOOM_GRID_LOOP(o, v.n_out) {
    double m, s;
    v.stats(x, o, m, s);
    mean[o] = m;
    var[o] = s;
    if (mean_req != 2) math::assign_req(mean_out + o, mean_req, static_cast<float>(m));
    if (var_req != 2) math::assign_req(var_out + o, var_req, static_cast<float>(s));
  }
}

__global__ void moments_dx(nn::MomentsView v, const float* x, const double* mean, const float* gm,
                           const float* gv, float* dx, int64_t n, int add) {
  LOOM_GRID_LOOP(i, n) {
    const int64_t o = v.slot(i);
    const double d = v.grad(x[i], mean[o], gm ? gm[o] : 0.0, gv ? gv[o] : 0.0);
    math::assign_req(dx + i, add, static_cast<float>(d));
  }
}

class MomentsGpuKernel final : public Kernel {
 public:
  explicit MomentsGpuKernel(const KernelArgs& a)
      : v_(nn::moments_view_of(a)), n_(a.in_shapes[0].numel()) {
    cuda::require_float32(a);
  }
  size_t workspace_bytes() const override {
    return 2 * static_cast<size_t>(v_.n_out) * sizeof(double);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    auto ptr = [&](size_t k) { return req[k] == Req::kNull ? nullptr : out[k].data<float>(); };
    launch_stats(ctx, in[0].data<float>(), ptr(0), code(req[0]), ptr(1), code(req[1]));
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull || n_ == 0) return;
    const float* x = in[0].data<float>();
    launch_stats(ctx, x, nullptr, 2, nullptr, 2);
    auto head = [&](size_t k) -> const float* {
      return og.size() > k && !og[k].is_none() ? og[k].data<float>() : nullptr;
    };
    moments_dx<<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        v_, x, static_cast<const double*>(ctx.workspace), head(0), head(1), ig[0].data<float>(), n_,
        req[0] == Req::kAdd);
    cuda::check_launch("moments_dx");
  }

 private:
  static int code(Req r) { return r == Req::kNull ? 2 : r == Req::kAdd ? 1 : 0; }
  void launch_stats(const OpContext& ctx, const float* x, float* mean_out, int mean_req,
                    float* var_out, int var_req) {
    if (v_.n_out == 0) return;
    double* mean = static_cast<double*>(ctx.workspace);
    moments_stats<<<cuda::grid_size(v_.n_out), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        v_, x, mean, mean + v_.n_out, mean_out, mean_req, var_out, var_req);
    cuda::check_launch("moments_stats");
  }

  nn::MomentsView v_;
  int64_t n_;
};

LOOM_REGISTER_OP("moments").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<MomentsGpuKernel>(a));
});

LOOM_REGISTER_OP("LayerNorm").kernel(DeviceType::kGPU, make_norm<nn::layer_norm_layout>);
LOOM_REGISTER_OP("GroupNorm").kernel(DeviceType::kGPU, make_norm<nn::group_norm_layout>);
LOOM_REGISTER_OP("InstanceNorm").kernel(DeviceType::kGPU, make_norm<nn::instance_norm_layout>);

}  // namespace
}  // namespace loom
