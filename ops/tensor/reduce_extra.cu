// GPU kernels of the reductions beyond sum/mean/max/min/prod: nansum, nanprod (nan_reduce.cc),
// norm (norm.cc), _square_sum and _histogram (misc_ops.cc), argmax, argmin, argmax_channel
// (argmax.cc), all_finite, multi_all_finite (amp.cc), _contrib_allclose
// (contrib/small_contrib.cc), and IdentityAttachKLSparseReg (nn/kl_sparse_reg.cc, whose
// backward is a per-column reduction). The index plans are the CPU kernels' own (ReducePlan,
// BcastPlan through device_reduce.cuh); the arithmetic is the functions of
// reduce_extra_math.h and kl_sparse_reg_math.h that the CPU kernels call. float32 only
// (all_finite also takes float16); integer outputs (_histogram's counts, allclose's uint8
// flag) as the CPU's.
#include "ops/nn/kl_sparse_reg_math.h"
#include "ops/tensor/cast_math.h"
#include "ops/tensor/device_reduce.cuh"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/reduce_axes.h"
#include "ops/tensor/reduce_extra_params.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

using cuda::DataGrad;
using cuda::DevReduce;

template <class K>
KernelFactory make() {
  return [](const KernelArgs& a) -> std::unique_ptr<Kernel> { return std::make_unique<K>(a); };
}

void memset_async(const NDArray& a, cudaStream_t s) {
  cuda::check(cudaMemsetAsync(a.raw(), 0, a.nbytes(), s), "cudaMemsetAsync");
}

// ---- nansum, nanprod, _square_sum, norm: map, combine, finalise over the reduce plan ----

/// y = F(R-combination of M(x)) over the axes the op reduces; dx = G::grad(g, x, y). Reads a
/// predicated node's predicate on the device (LAMB's per-tensor norms in a step graph).
template <class R, class M, class F, class G>
class MapReduceGpuKernel final : public Kernel {
 public:
  MapReduceGpuKernel(const KernelArgs& a, const Shape& keep)
      : red_(tensor::make_reduce_plan(a.in_shapes[0], keep)), device_(a.device) {
    cuda::require_float32(a);
    const Shape& in = a.in_shapes[0];
    back_ = cuda::device_plan(tensor::make_bcast_plan(keep, in, in), a);
    n_in_ = in.numel();
  }
  bool device_predicate() const override { return true; }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    plan().template run<R, M, F>(cuda::stream_of(ctx), in[0].data<float>(), out[0].data<float>(),
                                 1.f, req[0] == Req::kAdd, cuda::pred_of(ctx));
  }
  // The output is read only by the gradients that use it (nanprod, norm); otherwise g
  // stands in for it (same shape, never read).
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull || n_in_ == 0) return;
    const float* g = og[0].data<float>();
    const float* y = out.empty() || out[0].is_none() ? g : out[0].data<float>();
    cuda::reduce_backward_kernel<DataGrad<G>>
        <<<cuda::grid_size(n_in_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
            back_, g, in[0].data<float>(), y, ig[0].data<float>(), n_in_, 1.f, req[0] == Req::kAdd,
            cuda::pred_of(ctx));
    cuda::check_launch("reduce_backward_kernel");
  }

 private:
  // The plan's tables reach the device on the first call, which runs eagerly before any CUDA
  // Graph recording, so constructing the kernel needs no device (the capture checks build
  // a step's kernels on a machine without one).
  const DevReduce& plan() {
    if (!uploaded_) {
      plan_ = DevReduce(red_, device_);
      uploaded_ = true;
    }
    return plan_;
  }

  tensor::ReducePlan red_;
  Device device_;
  DevReduce plan_;
  bool uploaded_ = false;
  cuda::DevBcast back_;
  int64_t n_in_ = 0;
};

// nansum, nanprod, _square_sum: the axis/keepdims/exclude parameters of reduce_axes.h.
template <class R, class M, class G>
KernelFactory axes_reduce() {
  return [](const KernelArgs& a) -> std::unique_ptr<Kernel> {
    const Shape keep = tensor::axes_keep_shape(a.attrs.param<tensor::AxesParam>(), a.in_shapes[0]);
    return std::make_unique<MapReduceGpuKernel<R, M, math::NoFin, G>>(a, keep);
  };
}

std::unique_ptr<Kernel> make_norm(const KernelArgs& a) {
  const Shape keep = tensor::norm_shapes(a.attrs, a.in_shapes[0]).first;
  if (a.attrs.param<tensor::NormParam>().ord == 1)
    return std::make_unique<
        MapReduceGpuKernel<math::SumReduce, math::AbsMap, math::NoFin, math::NormL1Grad>>(a, keep);
  return std::make_unique<
      MapReduceGpuKernel<math::SumReduce, math::SquareMap, math::SqrtFin, math::NormL2Grad>>(a,
                                                                                             keep);
}

// ---- argmax, argmin, argmax_channel ----

struct LoadFloat {
  LOOM_HD float operator()(float v) const { return v; }
};

// One thread per output element (outer × inner): the CPU's scan along the axis.
template <bool kMax>
__global__ void arg_kernel(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                           int add) {
  LOOM_GRID_LOOP(t, outer * inner) {
    const int64_t o = t / inner, i = t % inner;
    const int64_t best = math::arg_extreme<kMax>(x + o * n * inner + i, n, inner, LoadFloat{});
    math::assign_req(y + t, add, static_cast<float>(best));
  }
}

// Long scans (n >= kBlockSize): one block per output element (grid-stride over outputs),
// each thread scanning every blockDim-th element in index order, then a shared-memory tree
// of math::arg_merge, whose result is the sequential scan's (first extreme, first NaN).
template <bool kMax>
__global__ void arg_block_kernel(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                                 int add) {
  __shared__ float val[cuda::kBlockSize];
  __shared__ int64_t idx[cuda::kBlockSize];
  for (int64_t t = blockIdx.x; t < outer * inner; t += gridDim.x) {
    const float* p = x + (t / inner) * n * inner + t % inner;
    float bv = 0.f;
    int64_t bi = -1;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x)
      math::arg_merge<kMax>(bv, bi, p[k * inner], k);
    val[threadIdx.x] = bv;
    idx[threadIdx.x] = bi;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
      if (threadIdx.x < h)
        math::arg_merge<kMax>(val[threadIdx.x], idx[threadIdx.x], val[threadIdx.x + h],
                              idx[threadIdx.x + h]);
      __syncthreads();
    }
    if (threadIdx.x == 0) math::assign_req(y + t, add, static_cast<float>(idx[0]));
    __syncthreads();
  }
}

template <bool kMax>
class ArgGpuKernel final : public Kernel {
 public:
  ArgGpuKernel(const KernelArgs& a, tensor::ArgDims d) : d_(std::move(d)) {
    cuda::require_float32(a);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const int64_t n_out = d_.outer * d_.inner;
    if (req[0] == Req::kNull || n_out == 0 || d_.n == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    const float* x = in[0].data<float>();
    float* y = out[0].data<float>();
    const int add = req[0] == Req::kAdd;
    if (d_.n >= cuda::kBlockSize) {
      const auto grid = static_cast<unsigned>(std::min<int64_t>(n_out, 65535));
      arg_block_kernel<kMax><<<grid, cuda::kBlockSize, 0, s>>>(x, y, d_.outer, d_.n, d_.inner, add);
      cuda::check_launch("arg_block_kernel");
    } else {
      arg_kernel<kMax>
          <<<cuda::grid_size(n_out), cuda::kBlockSize, 0, s>>>(x, y, d_.outer, d_.n, d_.inner, add);
      cuda::check_launch("arg_kernel");
    }
  }
  void backward(const OpContext& ctx, std::span<const NDArray>, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] != Req::kNull && req[0] != Req::kAdd) memset_async(ig[0], cuda::stream_of(ctx));
  }

 private:
  tensor::ArgDims d_;
};

template <bool kMax>
std::unique_ptr<Kernel> make_arg(const KernelArgs& a) {
  const auto& p = a.attrs.param<tensor::ArgParam>();
  return std::make_unique<ArgGpuKernel<kMax>>(
      a, tensor::arg_dims(a.attrs, a.in_shapes[0], p.axis, p.keepdims));
}

// ---- all_finite, multi_all_finite, _contrib_allclose: a device flag in the workspace ----

// *bad = 1 when some element fails the test (every writer stores the same value).
template <bool kHalf>
__global__ void finite_kernel(const void* x, int64_t n, int* bad) {
  LOOM_GRID_LOOP(i, n) {
    const float v = kHalf ? castm::f16_to_float(static_cast<const uint16_t*>(x)[i])
                          : static_cast<const float*>(x)[i];
    if (!math::finite_f32(v)) *bad = 1;
  }
}

// As the CPU: 0 when some element is not finite, else 1 (init_output) or unchanged.
__global__ void finite_result_kernel(const int* bad, float* y, int init) {
  if (*bad)
    *y = 0.f;
  else if (init)
    *y = 1.f;
}

class AllFiniteGpuKernel final : public Kernel {
 public:
  explicit AllFiniteGpuKernel(const KernelArgs& a)
      : init_(a.attrs.param<tensor::AllFiniteParam>().init_output) {
    for (size_t i = 0; i < a.in_types.size(); ++i)
      if (a.in_types[i] != DType::kFloat32 && a.in_types[i] != DType::kFloat16)
        throw Error(tensor::node_label(a) + ": the GPU kernel supports float32 and float16 " +
                    "only, got " + dtype_name(a.in_types[i]) + " for input " + std::to_string(i));
  }
  size_t workspace_bytes() const override { return sizeof(int); }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    cudaStream_t s = cuda::stream_of(ctx);
    int* bad = static_cast<int*>(ctx.workspace);
    cuda::check(cudaMemsetAsync(bad, 0, sizeof(int), s), "cudaMemsetAsync");
    for (const NDArray& x : in) {
      const int64_t n = x.size();
      if (n == 0) continue;
      if (x.dtype() == DType::kFloat16)
        finite_kernel<true><<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(x.raw(), n, bad);
      else
        finite_kernel<false><<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(x.raw(), n, bad);
      cuda::check_launch("finite_kernel");
    }
    finite_result_kernel<<<1, 1, 0, s>>>(bad, out[0].data<float>(), init_);
    cuda::check_launch("finite_result_kernel");
  }

 private:
  bool init_;
};

__global__ void allclose_kernel(const float* a, const float* b, int64_t n, double rtol, double atol,
                                int equal_nan, int* bad) {
  LOOM_GRID_LOOP(i, n) if (!math::allclose_elem(a[i], b[i], rtol, atol, equal_nan))* bad = 1;
}

// y (uint8) (=|+=) 1 when every element passed, else 0.
__global__ void allclose_result_kernel(const int* bad, uint8_t* y, int add) {
  const uint8_t v = *bad ? 0 : 1;
  *y = add ? static_cast<uint8_t>(*y + v) : v;
}

class AllCloseGpuKernel final : public Kernel {
 public:
  explicit AllCloseGpuKernel(const KernelArgs& a)
      : p_(a.attrs.param<tensor::AllCloseParam>()), n_(a.in_shapes[0].numel()) {
    for (size_t i = 0; i < 2; ++i)
      if (a.in_types[i] != DType::kFloat32)
        throw Error(tensor::node_label(a) + ": the GPU kernel supports float32 only, got " +
                    dtype_name(a.in_types[i]) + " for input " + std::to_string(i));
  }
  size_t workspace_bytes() const override { return sizeof(int); }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    cudaStream_t s = cuda::stream_of(ctx);
    int* bad = static_cast<int*>(ctx.workspace);
    cuda::check(cudaMemsetAsync(bad, 0, sizeof(int), s), "cudaMemsetAsync");
    if (n_ > 0) {
      allclose_kernel<<<cuda::grid_size(n_), cuda::kBlockSize, 0, s>>>(
          in[0].data<float>(), in[1].data<float>(), n_, p_.rtol, p_.atol, p_.equal_nan, bad);
      cuda::check_launch("allclose_kernel");
    }
    allclose_result_kernel<<<1, 1, 0, s>>>(bad, out[0].data<uint8_t>(), req[0] == Req::kAdd);
    cuda::check_launch("allclose_result_kernel");
  }

 private:
  tensor::AllCloseParam p_;
  int64_t n_;
};

// ---- _histogram: edges and counts in the workspace, counted by atomic adds ----

struct LoadDouble {
  LOOM_HD double operator()(float v) const { return v; }
};

__global__ void histogram_edges_kernel(float* e, int64_t nb, double lo, double hi) {
  LOOM_GRID_LOOP(i, nb + 1) e[i] = static_cast<float>(math::histogram_edge(i, nb, lo, hi));
}

__global__ void histogram_count_kernel(const float* x, int64_t n, const float* e, int64_t nb,
                                       int uniform, double lo, double hi,
                                       unsigned long long* counts) {
  LOOM_GRID_LOOP(i, n) {
    const double v = x[i];
    const int64_t k = uniform ? math::histogram_uniform_bin(v, lo, hi, nb, e, LoadDouble{})
                              : math::histogram_edges_bin(v, nb, e, LoadDouble{});
    if (k >= 0) atomicAdd(counts + k, 1ull);
  }
}

// counts (int64) and edges (float) from the workspace to the outputs, with their requests
// (2: null).
__global__ void histogram_write_kernel(const unsigned long long* counts, const float* e, int64_t nb,
                                       int64_t* y_counts, float* y_edges, int req_counts,
                                       int req_edges) {
  LOOM_GRID_LOOP(i, nb + 1) {
    if (i < nb && req_counts != 2) {
      const int64_t c = static_cast<int64_t>(counts[i]);
      y_counts[i] = req_counts == 1 ? y_counts[i] + c : c;
    }
    if (req_edges != 2) math::assign_req(y_edges + i, req_edges == 1, e[i]);
  }
}

class HistogramGpuKernel final : public Kernel {
 public:
  explicit HistogramGpuKernel(const KernelArgs& a)
      : p_(a.attrs.param<tensor::HistogramParam>()), nb_(a.out_shapes[0][0]) {
    for (size_t i = 0; i < a.in_types.size(); ++i)
      if (a.in_types[i] != DType::kFloat32)
        throw Error(tensor::node_label(a) + ": the GPU kernel supports float32 only, got " +
                    dtype_name(a.in_types[i]) + " for input " + std::to_string(i));
    if (p_.bin_cnt) std::tie(lo_, hi_) = tensor::histogram_range(p_);
  }
  // The counts (8-byte aligned) first, then the edges.
  size_t workspace_bytes() const override {
    return static_cast<size_t>(nb_) * sizeof(unsigned long long) +
           static_cast<size_t>(nb_ + 1) * sizeof(float);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull && req[1] == Req::kNull) return;
    cudaStream_t s = cuda::stream_of(ctx);
    auto* counts = static_cast<unsigned long long*>(ctx.workspace);
    float* e = reinterpret_cast<float*>(counts + nb_);
    const size_t edge_bytes = static_cast<size_t>(nb_ + 1) * sizeof(float);
    if (p_.bin_cnt) {
      histogram_edges_kernel<<<cuda::grid_size(nb_ + 1), cuda::kBlockSize, 0, s>>>(e, nb_, lo_,
                                                                                   hi_);
      cuda::check_launch("histogram_edges_kernel");
    } else {
      cuda::check(cudaMemcpyAsync(e, in[1].raw(), edge_bytes, cudaMemcpyDeviceToDevice, s),
                  "cudaMemcpyAsync");
    }
    cuda::check(cudaMemsetAsync(counts, 0, static_cast<size_t>(nb_) * sizeof(*counts), s),
                "cudaMemsetAsync");
    const int64_t n = in[0].size();
    if (n > 0) {
      histogram_count_kernel<<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(
          in[0].data<float>(), n, e, nb_, p_.bin_cnt.has_value(), lo_, hi_, counts);
      cuda::check_launch("histogram_count_kernel");
    }
    auto code = [](Req r) { return r == Req::kNull ? 2 : r == Req::kAdd ? 1 : 0; };
    histogram_write_kernel<<<cuda::grid_size(nb_ + 1), cuda::kBlockSize, 0, s>>>(
        counts, e, nb_, out[0].data<int64_t>(), out[1].data<float>(), code(req[0]), code(req[1]));
    cuda::check_launch("histogram_write_kernel");
  }

 private:
  tensor::HistogramParam p_;
  int64_t nb_;
  double lo_ = 0, hi_ = 0;
};

// ---- IdentityAttachKLSparseReg ----

__global__ void add_kernel(const float* x, float* y, int64_t n) {
  LOOM_GRID_LOOP(i, n) y[i] += x[i];
}

// One thread per column: the moving average's update and the column's penalty term.
__global__ void kl_column_kernel(const float* x, int64_t n, int64_t cols, float* avg,
                                 nn::KLSparseParam p, float* pen) {
  LOOM_GRID_LOOP(c, cols) pen[c] = nn::kl_column_step(x, n, cols, c, avg, p);
}

__global__ void kl_grad_kernel(const float* dy, const float* pen, int64_t n, int64_t cols,
                               float* dx, int add) {
  LOOM_GRID_LOOP(k, n * cols) math::assign_req(dx + k, add, dy[k] + pen[k % cols]);
}

class KLSparseGpuKernel final : public Kernel {
 public:
  explicit KLSparseGpuKernel(const KernelArgs& a)
      : p_(a.attrs.param<nn::KLSparseParam>()), n_(a.in_shapes[0][0]), c_(a.in_shapes[0][1]) {
    cuda::require_float32(a);
  }
  size_t workspace_bytes() const override { return static_cast<size_t>(c_) * sizeof(float); }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const int64_t n = in[0].size();
    if (req[0] == Req::kNull || n == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    if (req[0] == Req::kAdd) {
      add_kernel<<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(in[0].data<float>(),
                                                                 out[0].data<float>(), n);
      cuda::check_launch("add_kernel");
    } else if (out[0].raw() != in[0].raw()) {
      cuda::check(
          cudaMemcpyAsync(out[0].raw(), in[0].raw(), in[0].nbytes(), cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync");
    }
  }
  // As the CPU: the moving average is updated whatever the request.
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (c_ == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    float* pen = static_cast<float*>(ctx.workspace);
    kl_column_kernel<<<cuda::grid_size(c_), cuda::kBlockSize, 0, s>>>(in[0].data<float>(), n_, c_,
                                                                      in[1].data<float>(), p_, pen);
    cuda::check_launch("kl_column_kernel");
    if (req[0] == Req::kNull || n_ == 0) return;
    kl_grad_kernel<<<cuda::grid_size(n_ * c_), cuda::kBlockSize, 0, s>>>(
        og[0].data<float>(), pen, n_, c_, ig[0].data<float>(), req[0] == Req::kAdd);
    cuda::check_launch("kl_grad_kernel");
  }

 private:
  nn::KLSparseParam p_;
  int64_t n_, c_;
};

[[maybe_unused]] const bool kRegistered = [] {
  register_op("nansum").kernel(DeviceType::kGPU,
                               axes_reduce<math::SumReduce, math::NanToZero, math::NanSumGrad>());
  register_op("nanprod").kernel(DeviceType::kGPU,
                                axes_reduce<math::ProdReduce, math::NanToOne, math::NanProdGrad>());
  register_op("_square_sum")
      .kernel(DeviceType::kGPU,
              axes_reduce<math::SumReduce, math::SquareMap, math::SquareSumGrad>());
  register_op("norm").kernel(DeviceType::kGPU, make_norm);
  register_op("argmax").kernel(DeviceType::kGPU, make_arg<true>);
  register_op("argmin").kernel(DeviceType::kGPU, make_arg<false>);
  register_op("argmax_channel").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
    return std::unique_ptr<Kernel>(std::make_unique<ArgGpuKernel<true>>(
        a, tensor::arg_dims(a.attrs, a.in_shapes[0], -1, false)));
  });
  register_op("all_finite").kernel(DeviceType::kGPU, make<AllFiniteGpuKernel>());
  register_op("multi_all_finite").kernel(DeviceType::kGPU, make<AllFiniteGpuKernel>());
  register_op("_contrib_allclose").kernel(DeviceType::kGPU, make<AllCloseGpuKernel>());
  register_op("_histogram").kernel(DeviceType::kGPU, make<HistogramGpuKernel>());
  register_op("IdentityAttachKLSparseReg").kernel(DeviceType::kGPU, make<KLSparseGpuKernel>());
  return true;
}();

}  // namespace
}  // namespace loom
