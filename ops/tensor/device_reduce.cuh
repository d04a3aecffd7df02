// The reductions over axes on the device, shared by the .cu files of ops/tensor
// (broadcast_reduce.cu: sum, mean, max, min, prod and the broadcast gradients;
// reduce_extra.cu: nansum, nanprod, _square_sum, norm): a tensor::ReducePlan (the CPU
// kernels' own index plan) with its tables copied to the device at bind, one block per output
// element combining through the functors of reduce_math.h after an element map and before a
// finalisation of reduce_extra_math.h; and the gradient pass over the CPU's broadcast plan
// with a gradient functor (G::grad(g, x, y)). Both kernels take a device predicate
// (runtime/cuda/predicate.cuh; null: always run).
#pragma once

#include <algorithm>

#include "ops/tensor/device_plans.cuh"
#include "ops/tensor/reduce_extra_math.h"
#include "ops/tensor/reduce_math.h"
#include "runtime/cuda/elementwise.cuh"
#include "runtime/cuda/predicate.cuh"

namespace loom::cuda {

// One block per output element (grid-stride over outputs): the block's threads combine
// strided mapped elements, then a shared-memory tree combines the threads' partial results;
// y[o] (=|+=) scale * F(result). Nothing while `pred` points to 0 (predicate.cuh).
template <class R, class M, class F>
__global__ void reduce_kernel(const float* x, const int64_t* base, int64_t n_out,
                              const int64_t* off, int64_t n_off, int64_t inner_n,
                              int64_t inner_stride, float* y, float scale, int add,
                              const float* pred) {
  if (skip(pred)) return;
  __shared__ float part[kBlockSize];
  const int64_t total = n_off * inner_n;
  for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
    float acc = R::template init<float>();
    const int64_t b = base[o];
    for (int64_t r = threadIdx.x; r < total; r += blockDim.x)
      acc = R::combine(acc, M::f(x[b + off[r / inner_n] + (r % inner_n) * inner_stride]));
    part[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
      if (threadIdx.x < h) part[threadIdx.x] = R::combine(part[threadIdx.x], part[threadIdx.x + h]);
      __syncthreads();
    }
    if (threadIdx.x == 0) math::assign_req(y + o, add, F::f(part[0]) * scale);
    __syncthreads();
  }
}

/// A tensor::ReducePlan with its offset tables copied to the device once.
class DevReduce {
 public:
  DevReduce() = default;
  DevReduce(const tensor::ReducePlan& p, Device dev)
      : base_(table(p.base, dev)),
        off_(table(p.off, dev)),
        n_out_(std::ssize(p.base)),
        n_off_(std::ssize(p.off)),
        inner_n_(p.inner_n),
        inner_stride_(p.inner_stride) {}

  /// y[o] (=|+=) scale * F(R-combination of M(x) over the elements reduced onto o); a
  /// predicated node's `pred` (OpContext::pred) skips the launch's work on the device.
  template <class R, class M = math::NoMap, class F = math::NoFin>
  void run(cudaStream_t s, const float* x, float* y, float scale, bool add,
           const float* pred = nullptr) const {
    if (n_out_ == 0) return;
    const unsigned grid = static_cast<unsigned>(std::min<int64_t>(n_out_, 65535));
    reduce_kernel<R, M, F><<<grid, kBlockSize, 0, s>>>(x, base_.data<int64_t>(), n_out_,
                                                       off_.data<int64_t>(), n_off_, inner_n_,
                                                       inner_stride_, y, scale, add, pred);
    check_launch("reduce_kernel");
  }

 private:
  static NDArray table(const std::vector<int64_t>& v, Device dev) {
    NDArray t(Shape{std::max<int64_t>(1, std::ssize(v))}, DType::kInt64, dev);
    if (!v.empty()) t.copy_from_host(v.data(), v.size() * sizeof(int64_t));
    return t;
  }
  NDArray base_, off_;
  int64_t n_out_ = 0, n_off_ = 0, inner_n_ = 1, inner_stride_ = 0;
};

/// sum/mean's gradient: the output gradient itself (mean scales it by 1/n).
struct PassGrad {
  static constexpr bool kReadsData = false;
  template <class T>
  LOOM_HD static T grad(T g, T, T) {
    return g;
  }
};
/// A gradient functor of reduce_math.h / reduce_extra_math.h that reads x and y.
template <class G>
struct DataGrad : G {
  static constexpr bool kReadsData = true;
};

// dx[i] (=|+=) scale * G::grad(g[o], x[i], y[o]) with o the output element of input i
// (`p`: the plan of the kept-dims shape broadcast to the input, operand a = the output).
template <class G>
__global__ void reduce_backward_kernel(DevBcast p, const float* g, const float* x, const float* y,
                                       float* dx, int64_t n, float scale, int add,
                                       const float* pred = nullptr) {
  if (skip(pred)) return;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t o, unused;
    bcast_index(p, i, o, unused);
    const float v = G::kReadsData ? G::grad(g[o], x[i], y[o]) : G::grad(g[o], 0.f, 0.f);
    math::assign_req(dx + i, add, v * scale);
  }
}

}  // namespace loom::cuda
