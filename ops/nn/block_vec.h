// One channel block of a blocked layout (nChw8c / nChw16c) as a GCC vector, with unaligned
// loads and stores: the shared vocabulary of Loom's own CPU kernels (Winograd transforms,
// depthwise convolution, FullyConnected's matrix-vector loop). Plain C++ that the compiler
// maps to AVX2 or AVX-512 registers; no intrinsics.
#pragma once

#include <cstring>

namespace loom::nn::block_vec {

// Spelled per size: GCC ignores a dependent vector_size on an alias template. Lanes<B>
// holds int32 lanes beside a block's floats (offsets, masks).
template <int B>
struct VecOf;
template <>
struct VecOf<8> {
  typedef float type __attribute__((vector_size(32)));
  typedef int lanes __attribute__((vector_size(32)));
};
template <>
struct VecOf<16> {
  typedef float type __attribute__((vector_size(64)));
  typedef int lanes __attribute__((vector_size(64)));
};
template <int B>
using Vec = typename VecOf<B>::type;
template <int B>
using Lanes = typename VecOf<B>::lanes;
static_assert(sizeof(Vec<8>) == 32 && sizeof(Vec<16>) == 64 && sizeof(Lanes<16>) == 64);

template <int B>
inline Vec<B> load(const float* p) {
  Vec<B> v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <int B>
inline void store(float* p, Vec<B> v) {
  std::memcpy(p, &v, sizeof(v));
}

}  // namespace loom::nn::block_vec
