// tensor::BcastPlan (ops/tensor/tensor_util.h, the CPU kernels' broadcast index plan) as a
// CUDA kernel argument, and the operand indices of an output element; shared by the .cu
// files of ops/tensor.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "ops/tensor/tensor_util.h"

namespace loom::cuda {

constexpr int kMaxDims = 8;

/// A tensor::BcastPlan as a kernel argument: collapsed output dims and operand strides.
struct DevBcast {
  int nd = 0;
  int64_t dims[kMaxDims] = {}, sa[kMaxDims] = {}, sb[kMaxDims] = {};
};

inline DevBcast device_plan(const tensor::BcastPlan& p, const KernelArgs& a) {
  if (p.dims.size() > static_cast<size_t>(kMaxDims))
    throw ShapeError("op " + a.attrs.op->name + " (node " + a.attrs.name + "): the GPU kernel " +
                     "handles at most " + std::to_string(kMaxDims) + " broadcast runs, got " +
                     std::to_string(p.dims.size()));
  DevBcast d;
  d.nd = static_cast<int>(p.dims.size());
  for (int k = 0; k < d.nd; ++k) {
    d.dims[k] = p.dims[static_cast<size_t>(k)];
    d.sa[k] = p.sa[static_cast<size_t>(k)];
    d.sb[k] = p.sb[static_cast<size_t>(k)];
  }
  return d;
}

/// The operands' element indices of output element o.
__device__ __forceinline__ void bcast_index(const DevBcast& p, int64_t o, int64_t& ia,
                                            int64_t& ib) {
  ia = 0;
  ib = 0;
  for (int d = p.nd - 1; d >= 0; --d) {
    const int64_t idx = o % p.dims[d];
    o /= p.dims[d];
    ia += idx * p.sa[d];
    ib += idx * p.sb[d];
  }
}

}  // namespace loom::cuda
