// A small matrix product for the tensor ops (dot, batch_dot): C (+)= op(A) op(B), with op a
// transpose when asked. Row-major dense operands of float or double; accumulates in T.
#pragma once

#include <cstdint>

namespace loom::tensor {

/// C[M, N] = (add ? C : 0) + op(A)[M, K] * op(B)[K, N]. A is (M, K) (or (K, M) when ta),
/// B is (K, N) (or (N, K) when tb), all row-major and dense. Allocates nothing: with tb each
/// C element is a dot product over contiguous rows of B, otherwise rows of B are scaled into
/// a row of C.
template <class T>
inline void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C,
                 bool add) {
  auto a = [=](int64_t m, int64_t k) { return ta ? A[k * M + m] : A[m * K + k]; };
#pragma omp parallel for schedule(static) if (M * N * K >= (1 << 18) && M > 1)
  for (int64_t m = 0; m < M; ++m) {
    T* c = C + m * N;
    if (tb) {
      for (int64_t n = 0; n < N; ++n) {
        const T* brow = B + n * K;
        T acc = 0;
        for (int64_t k = 0; k < K; ++k) acc += a(m, k) * brow[k];
        c[n] = add ? c[n] + acc : acc;
      }
      continue;
    }
    if (!add)
      for (int64_t n = 0; n < N; ++n) c[n] = 0;
    for (int64_t k = 0; k < K; ++k) {
      const T am = a(m, k);
      const T* brow = B + k * N;
#pragma omp simd
      for (int64_t n = 0; n < N; ++n) c[n] += am * brow[n];
    }
  }
}

}  // namespace loom::tensor
