// GPU kernels of Convolution, Convolution_v1 and Deconvolution on cuDNN 9 graph plans
// (runtime/cuda/cudnn_graph.h). The three cuDNN convolution operations (forward, backward
// data, backward filter) are planned once per bind; Deconvolution runs them with the roles
// swapped: its forward is the backward data of the convolution that maps its output to its
// input (same weights (C, F/G, k...)), its data gradient that convolution's forward and its
// weight gradient that convolution's backward filter with data and output gradient swapped.
// req=add runs plans built with beta = 1 (or, where cuDNN has no engine for that, the
// write plan into scratch and an add). Bias and its gradient are small kernels.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ops/nn/block_reduce.cuh"
#include "ops/nn/conv_params.h"
#include "runtime/cuda/cudnn_graph.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

using cuda::dnn::Desc;
using cuda::dnn::Plan;

// y[(o, c, i)] += b[c] over an (outer, C, inner) tensor.
__global__ void add_channel_bias(float* y, const float* b, int64_t n, int64_t channels,
                                 int64_t inner) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] += b[(i / inner) % channels];
}

// db[c] (=|+=) sum of dy over channel c of an (outer, C, inner) tensor; one block per channel.
__global__ void channel_sum(const float* dy, float* db, int64_t outer, int64_t channels,
                            int64_t inner, int add) {
  const int64_t c = blockIdx.x, m = outer * inner;
  double acc = 0;
  for (int64_t k = threadIdx.x; k < m; k += blockDim.x)
    acc += dy[cuda::channel_index(k, c, channels, inner)];
  acc = cuda::block_sum(acc);
  if (threadIdx.x == 0) math::assign_req(db + c, add, static_cast<float>(acc));
}

__global__ void add_into(float* y, const float* t, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] += t[i];
}

// A convolution as cuDNN sees it: input x, filter w, output y (N, C, spatial...) with at
// least two spatial dims (a 1-D one gets a leading spatial dim of 1).
struct ConvGeom {
  std::vector<int64_t> x, w, y, pre, post, stride, dilate;
};

std::vector<int64_t> dims_of(const Shape& s, bool lift) {
  std::vector<int64_t> d(s.begin(), s.end());
  if (lift) d.insert(d.begin() + 2, 1);
  return d;
}

int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

using Pass = cuda::dnn::ConvPass;
constexpr int64_t kUidX = 1, kUidW = 2, kUidY = 3;

// One cuDNN operation planned for req=write and, where cuDNN can, for req=add (beta = 1),
// each for pointers at any float offset and, where cuDNN can, for 16-byte aligned ones.
using PlanPtr = std::shared_ptr<const Plan>;

struct PassPlans {
  PlanPtr write, add, write16, add16;  // null: none
  std::string error;      // why `write` is empty (a backward pass cuDNN has no engine for)
  int64_t out_elems = 0;  // the elements of the output (scratch for add without `add`)
  // The plans' workspace (any of them runs in it), then the scratch output of req=add
  // without `add`.
  size_t plans_bytes() const {
    size_t b = 0;
    for (const PlanPtr* p : {&write, &add, &write16, &add16})
      if (*p) b = std::max(b, (*p)->workspace());
    return align256(b);
  }
  size_t workspace() const {
    return plans_bytes() + (add ? 0 : static_cast<size_t>(out_elems) * sizeof(float));
  }
  static size_t align256(size_t b) { return (b + 255) / 256 * 256; }
};

Plan make_plan(int dev, const ConvGeom& g, Pass pass, float beta, int64_t align,
               const std::string& what) {
  std::vector<Desc> parts;
  parts.push_back(cuda::dnn::tensor(kUidX, g.x, what, align));
  parts.push_back(cuda::dnn::tensor(kUidW, g.w, what, align));
  parts.push_back(cuda::dnn::tensor(kUidY, g.y, what, align));
  parts.push_back(cuda::dnn::convolution(g.pre, g.post, g.stride, g.dilate, what));
  Desc op = cuda::dnn::conv_operation(pass, parts[0], parts[1], parts[2], parts[3], beta, what);
  return Plan(dev, std::move(op), std::move(parts), what);
}

std::string plan_key(int dev, const ConvGeom& g, Pass pass, float beta, int64_t align) {
  std::string k = std::to_string(dev) + "/" + std::to_string(static_cast<int>(pass)) + "/" +
                  std::to_string(beta) + "/" + std::to_string(align);
  for (const auto* v : {&g.x, &g.w, &g.y, &g.pre, &g.post, &g.stride, &g.dilate}) {
    k += "|";
    for (int64_t d : *v) k += std::to_string(d) + ",";
  }
  return k;
}

// Plans are immutable once built and depend only on the device, the pass, beta, the
// pointer alignment and the geometry, so kernels with the same ones (a network's repeated blocks,
// the training and inference executors of one model, rebinds) share them: planning (heuristics,
// engine finalisation, runtime-compiled engines) costs far more than a lookup. Failures are not
// kept. LOOM_CUDNN_PLAN_CACHE=0 plans every kernel on its own.
PlanPtr shared_plan(int dev, const ConvGeom& g, Pass pass, float beta, int64_t align,
                    const std::string& what) {
  if (env_off("LOOM_CUDNN_PLAN_CACHE"))
    return std::make_shared<const Plan>(make_plan(dev, g, pass, beta, align, what));
  static std::mutex mu;
  static auto* cache = new std::map<std::string, PlanPtr>;  // never destroyed, as the handles
  const std::string key = plan_key(dev, g, pass, beta, align);
  std::lock_guard<std::mutex> lk(mu);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  PlanPtr p = std::make_shared<const Plan>(make_plan(dev, g, pass, beta, align, what));
  cache->emplace(key, p);
  return p;
}

// Convolution and Deconvolution on one set of three cuDNN passes over `g_`. Deconvolution's
// forward input is the convolution's y and its output the convolution's x.
class CudnnConvKernel final : public Kernel {
 public:
  CudnnConvKernel(const KernelArgs& a, ConvGeom g, bool deconv, bool no_bias)
      : g_(std::move(g)), deconv_(deconv), no_bias_(no_bias), dev_(a.device.id) {
    cuda::require_float32(a);
    what_ = a.attrs.op->name + " node '" + a.attrs.name + "' (cuDNN)";
    const std::string& what = what_;
    const Shape& out = a.out_shapes[0];
    out_c_ = out[1];
    out_outer_ = out[0];
    out_inner_ = out_c_ && out_outer_ ? out.numel() / (out_outer_ * out_c_) : 0;
    empty_ = numel(g_.x) == 0 || numel(g_.y) == 0 || numel(g_.w) == 0;
    if (empty_) return;
    for (Pass p : {Pass::kForward, Pass::kBackwardData, Pass::kBackwardFilter}) {
      PassPlans& pp = plans_[static_cast<int>(p)];
      pp.out_elems = numel(p == Pass::kForward ? g_.y : p == Pass::kBackwardData ? g_.x : g_.w);
      // The forward pass must plan at bind; a backward pass that cuDNN cannot plan fails
      // only when a backward call needs it (inference binds never do).
      const Pass fwd = deconv ? Pass::kBackwardData : Pass::kForward;
      try {
        pp.write = shared_plan(dev_, g_, p, 0.f, 4, what);
      } catch (const Error& e) {
        if (p == fwd) throw;
        pp.error = e.what();
        continue;
      }
      // Optional plans: without `add`, req=add writes to scratch and adds; without the
      // 16-byte ones, aligned pointers take the plans for any offset.
      auto optional = [&](float beta, int64_t align) -> PlanPtr {
        try {
          return shared_plan(dev_, g_, p, beta, align,
                             what + " (beta " + std::to_string(beta) + ", alignment " +
                                 std::to_string(align) + ")");
        } catch (const Error&) {
          return nullptr;
        }
      };
      pp.add = optional(1.f, 4);
      if (!env_off("LOOM_CUDNN_ALIGNED_PLANS")) {
        pp.write16 = optional(0.f, 16);
        if (pp.add) pp.add16 = optional(1.f, 16);
      }
    }
  }

  size_t workspace_bytes() const override {
    size_t w = 0;
    for (const PassPlans& p : plans_) w = std::max(w, p.workspace());
    return w;
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    cudaStream_t s = cuda::stream_of(ctx);
    float* y = out[0].data<float>();
    const int64_t n = out[0].size();
    if (empty_) {  // no input cells: the output is the bias (or 0)
      if (n == 0) return;
      if (req[0] != Req::kAdd) cuda::check(cudaMemsetAsync(y, 0, n * sizeof(float), s), "memset");
    } else if (!deconv_) {
      run(Pass::kForward, req[0], ctx, in[0].data<float>(), in[1].data<float>(), y);
    } else {
      run(Pass::kBackwardData, req[0], ctx, y, in[1].data<float>(), in[0].data<float>());
    }
    if (!no_bias_ && n > 0) {
      add_channel_bias<<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(y, in[2].data<float>(), n,
                                                                       out_c_, out_inner_);
      cuda::check_launch("add_channel_bias");
    }
  }

  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    cudaStream_t s = cuda::stream_of(ctx);
    float* dy = og[0].data<float>();
    const float* w = in[1].data<float>();
    float* x = in[0].data<float>();
    if (empty_) {
      for (size_t i = 0; i < ig.size() && i < req.size(); ++i)
        if (req[i] == Req::kWrite || req[i] == Req::kInplace)
          cuda::check(cudaMemsetAsync(ig[i].data<float>(), 0, ig[i].size() * sizeof(float), s),
                      "memset");
    } else if (!deconv_) {
      if (req[0] != Req::kNull) run(Pass::kBackwardData, req[0], ctx, ig[0].data<float>(), w, dy);
      if (req[1] != Req::kNull) run(Pass::kBackwardFilter, req[1], ctx, x, ig[1].data<float>(), dy);
    } else {
      if (req[0] != Req::kNull) run(Pass::kForward, req[0], ctx, dy, w, ig[0].data<float>());
      if (req[1] != Req::kNull) run(Pass::kBackwardFilter, req[1], ctx, dy, ig[1].data<float>(), x);
    }
    if (!no_bias_ && req[2] != Req::kNull && out_c_ > 0) {
      channel_sum<<<static_cast<unsigned>(out_c_), cuda::kChannelBlock, 0, s>>>(
          dy, ig[2].data<float>(), out_outer_, out_c_, out_inner_, req[2] == Req::kAdd);
      cuda::check_launch("channel_sum");
    }
  }

 private:
  // One pass with the convolution's tensors x, w, y (the pass writes one of them).
  void run(Pass pass, Req req, const OpContext& ctx, float* x, const float* w, float* y) {
    const PassPlans& pp = plans_[static_cast<int>(pass)];
    if (!pp.write) throw Error(pp.error);
    float* out = pass == Pass::kForward        ? y
                 : pass == Pass::kBackwardData ? x
                                               : const_cast<float*>(w);
    const bool add = req == Req::kAdd;
    float* target = out;
    if (add && !pp.add)
      target = reinterpret_cast<float*>(static_cast<char*>(ctx.workspace) + pp.plans_bytes());
    std::vector<void*> ptrs{x, const_cast<float*>(w), y};
    ptrs[pass == Pass::kForward ? 2 : pass == Pass::kBackwardData ? 0 : 1] = target;
    bool aligned = true;
    for (void* q : ptrs) aligned = aligned && reinterpret_cast<uintptr_t>(q) % 16 == 0;
    const bool use_add = add && pp.add;
    const PlanPtr& any = use_add ? pp.add : pp.write;
    const PlanPtr& a16 = use_add ? pp.add16 : pp.write16;
    const Plan& plan = aligned && a16 ? *a16 : *any;
    plan.execute(dev_, {kUidX, kUidW, kUidY}, ptrs, ctx.workspace, what_);
    if (target != out) {
      add_into<<<cuda::grid_size(pp.out_elems), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
          out, target, pp.out_elems);
      cuda::check_launch("add_into");
    }
  }

  ConvGeom g_;
  std::string what_;  // op and node, for errors
  bool deconv_, no_bias_;
  int dev_;
  bool empty_ = false;
  int64_t out_c_ = 0, out_outer_ = 0, out_inner_ = 0;
  PassPlans plans_[3];
};

std::unique_ptr<Kernel> make_conv(const KernelArgs& a) {
  const auto& p = a.attrs.param<nn::ConvParam>();
  const int nd = p.kernel.ndim();
  const bool lift = nd == 1;
  ConvGeom g;
  g.x = dims_of(a.in_shapes[0], lift);
  g.w = dims_of(a.in_shapes[1], lift);
  g.y = dims_of(a.out_shapes[0], lift);
  if (lift) {  // the added spatial dim: size 1, no padding
    g.pre = g.post = {0};
    g.stride = g.dilate = {1};
  }
  for (int i = 0; i < nd; ++i) {
    g.pre.push_back(p.pad[i]);
    g.post.push_back(p.pad[i]);
    g.stride.push_back(p.stride[i]);
    g.dilate.push_back(p.dilate[i]);
  }
  return std::make_unique<CudnnConvKernel>(a, std::move(g), false, p.no_bias);
}

// The convolution from Deconvolution's output (N, F, ...) to its input (N, C, ...): pre-pad
// pad_l; post-pad pad_r, raised to 0 when adj makes it negative (the floor of the
// convolution's output size absorbs up to stride - 1 extra cells, and adj < stride).
std::unique_ptr<Kernel> make_deconv(const KernelArgs& a) {
  const auto& p = a.attrs.param<nn::DeconvParam>();
  const int nd = p.kernel.ndim();
  const bool lift = nd == 1;
  std::vector<int64_t> pad_l, pad_r;
  nn::deconv_pads(p, a.in_shapes[0], pad_l, pad_r);
  ConvGeom g;
  g.x = dims_of(a.out_shapes[0], lift);
  g.w = dims_of(a.in_shapes[1], lift);
  g.y = dims_of(a.in_shapes[0], lift);
  if (lift) {
    g.pre = g.post = {0};
    g.stride = g.dilate = {1};
  }
  for (int i = 0; i < nd; ++i) {
    if (-pad_r[i] >= p.stride[i])
      throw Error("Deconvolution node '" + a.attrs.name + "': adj " + p.adj.str() +
                  " leaves no convolution with this output size for cuDNN");
    g.pre.push_back(pad_l[i]);
    g.post.push_back(std::max<int64_t>(pad_r[i], 0));
    g.stride.push_back(p.stride[i]);
    g.dilate.push_back(p.dilate[i]);
  }
  return std::make_unique<CudnnConvKernel>(a, std::move(g), true, p.no_bias);
}

LOOM_REGISTER_OP("Convolution").kernel(DeviceType::kGPU, make_conv);
LOOM_REGISTER_OP("Convolution_v1").kernel(DeviceType::kGPU, make_conv);
LOOM_REGISTER_OP("Deconvolution").kernel(DeviceType::kGPU, make_deconv);

}  // namespace
}  // namespace loom
