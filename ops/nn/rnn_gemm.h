// Dense row-major matrix products for the fused RNN kernel, blocked so the right operand
// stays in cache while rows of the left one stream past (the recurrent layers multiply
// (T*N, C) inputs by (C, G*H) weights, too large for the unblocked loop of tensor::gemm).
#pragma once

#include <algorithm>
#include <cstdint>

namespace loom::rnn {

/// C[M, N] = (add ? C : 0) + A[M, K] * B[K, N]; all dense row-major, C distinct from A and B.
template <class T>
void matmul(int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C, bool add) {
  constexpr int64_t kBlockN = 256, kBlockK = 128;
  if (!add) std::fill(C, C + M * N, T(0));
  const int64_t n_blocks = (N + kBlockN - 1) / kBlockN;
  // Each thread owns whole column blocks of C, so no two threads write one element.
#pragma omp parallel for schedule(static) collapse(2) if (M * N * K >= (1 << 18))
  for (int64_t nb = 0; nb < n_blocks; ++nb) {
    for (int64_t mb = 0; mb < (M + 63) / 64; ++mb) {
      const int64_t n0 = nb * kBlockN, n1 = std::min(N, n0 + kBlockN), w = n1 - n0;
      const int64_t m0 = mb * 64, m1 = std::min(M, m0 + 64);
      for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
        const int64_t k1 = std::min(K, k0 + kBlockK);
        int64_t m = m0;
        for (; m + 4 <= m1; m += 4) {  // four rows of C share each loaded row of B
          T *c0 = C + m * N + n0, *c1 = c0 + N, *c2 = c1 + N, *c3 = c2 + N;
          for (int64_t k = k0; k < k1; ++k) {
            const T a0 = A[m * K + k], a1 = A[(m + 1) * K + k], a2 = A[(m + 2) * K + k],
                    a3 = A[(m + 3) * K + k];
            const T* b = B + k * N + n0;
#pragma omp simd
            for (int64_t j = 0; j < w; ++j) {
              c0[j] += a0 * b[j];
              c1[j] += a1 * b[j];
              c2[j] += a2 * b[j];
              c3[j] += a3 * b[j];
            }
          }
        }
        for (; m < m1; ++m) {
          T* c = C + m * N + n0;
          for (int64_t k = k0; k < k1; ++k) {
            const T a = A[m * K + k];
            const T* b = B + k * N + n0;
#pragma omp simd
            for (int64_t j = 0; j < w; ++j) c[j] += a * b[j];
          }
        }
      }
    }
  }
}

/// dst[C, R] = src[R, C] transposed.
template <class T>
void transpose(int64_t R, int64_t C, const T* src, T* dst) {
  constexpr int64_t kTile = 32;
#pragma omp parallel for schedule(static) if (R * C >= (1 << 16))
  for (int64_t r0 = 0; r0 < R; r0 += kTile)
    for (int64_t c0 = 0; c0 < C; c0 += kTile)
      for (int64_t r = r0; r < std::min(R, r0 + kTile); ++r)
        for (int64_t c = c0; c < std::min(C, c0 + kTile); ++c) dst[c * R + r] = src[r * C + c];
}

}  // namespace loom::rnn
