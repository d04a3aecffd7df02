// A small float32 matrix product for the tensor ops (dot, batch_dot): C (+)= op(A) op(B),
// with op a transpose when asked. Row-major operands with leading dimensions; accumulates in
// float with the inner loop over contiguous C columns.
#pragma once

#include <cstdint>
#include <vector>

namespace loom::tensor {

/// C[M, N] = (add ? C : 0) + op(A)[M, K] * op(B)[K, N]. A is (M, K) (or (K, M) when ta),
/// B is (K, N) (or (N, K) when tb), all row-major and dense.
inline void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, const float* B,
                 float* C, bool add) {
  // Rows of op(B) as contiguous arrays: transposed B is copied once per call.
  std::vector<float> bt;
  const float* b = B;
  if (tb) {
    bt.resize(static_cast<size_t>(K * N));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) bt[static_cast<size_t>(k * N + n)] = B[n * K + k];
    b = bt.data();
  }
#pragma omp parallel for schedule(static) if (M * N * K >= (1 << 18) && M > 1)
  for (int64_t m = 0; m < M; ++m) {
    float* c = C + m * N;
    if (!add)
      for (int64_t n = 0; n < N; ++n) c[n] = 0.f;
    for (int64_t k = 0; k < K; ++k) {
      const float a = ta ? A[k * M + m] : A[m * K + k];
      const float* brow = b + k * N;
#pragma omp simd
      for (int64_t n = 0; n < N; ++n) c[n] += a * brow[n];
    }
  }
}

}  // namespace loom::tensor
