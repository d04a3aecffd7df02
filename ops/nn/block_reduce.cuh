// Block-wide sums for the nn GPU kernels (bias gradients, BatchNorm statistics), and the
// per-channel view they reduce over: a tensor as (outer, C, inner), channel c's elements at
// (o * C + c) * inner + i.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace loom::cuda {

/// Threads per block of the channel kernels (a power of two, at most 1024).
inline constexpr int kChannelBlock = 256;

/// The sum of `v` over the block's threads, returned to every thread. Every thread of the
/// block must call it (it synchronises); blockDim.x must be kChannelBlock.
__device__ inline double block_sum(double v) {
  __shared__ double part[kChannelBlock];
  const int t = threadIdx.x;
  __syncthreads();  // a previous call's readers are done with `part`
  part[t] = v;
  __syncthreads();
  for (int s = kChannelBlock / 2; s > 0; s >>= 1) {
    if (t < s) part[t] += part[t + s];
    __syncthreads();
  }
  return part[0];
}

/// Flat index of element k (0 <= k < outer * inner) of channel c in an (outer, C, inner)
/// tensor.
__device__ inline int64_t channel_index(int64_t k, int64_t c, int64_t channels, int64_t inner) {
  const int64_t o = k / inner, i = k - o * inner;
  return (o * channels + c) * inner + i;
}

}  // namespace loom::cuda
