// Per-device CUDA state shared by the CUDA backend and GPU kernels: the device's stream,
// a lazily created cuBLAS handle, and error checking that throws loom::Error.
// Plain C++ (no device code), so host-only *_cuda.cc files may include it too.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/base.h"

namespace loom::cuda {

/// Number of CUDA devices; 0 when there is none or the driver reports any error. The
/// first call initialises the CUDA runtime; the answer is cached.
int device_count();

/// Makes `id` the calling thread's current device. Throws Error when there is no CUDA
/// device or `id` is out of range.
void set_device(int id);

/// The stream every kernel and copy for device `id` is queued on (created on first use;
/// it orders with the legacy default stream).
cudaStream_t stream(int id);

/// The cuBLAS handle for device `id`, bound to `stream(id)`; created on first use. Use it
/// only from the thread that queues work for the device (cuBLAS handles are not
/// thread-safe).
cublasHandle_t cublas(int id);

/// Row-major float32 matrix products on device `id`'s stream, `batch` times:
///   C_i = alpha · op(A_i) · op(B_i) + beta · C_i,  op(X) = Xᵀ when trans_x,
/// C_i m x n, op(A_i) m x k, op(B_i) k x n; ld* are row strides (elements between rows as
/// stored), stride_* the distances between consecutive batch entries. beta = 0 never reads
/// C (it may hold NaN). Plain FP32 (cuBLAS's default math mode: no TF32).
void gemm_batched(int id, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const float* a, int64_t lda, int64_t stride_a, const float* b,
                  int64_t ldb, int64_t stride_b, float beta, float* c, int64_t ldc,
                  int64_t stride_c, int64_t batch);
/// One product of gemm_batched.
inline void gemm(int id, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                 float beta, float* c, int64_t ldc) {
  gemm_batched(id, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

/// Throws Error("CUDA error in <what>: <message>") when `e` is not cudaSuccess.
void check(cudaError_t e, const char* what);
/// Throws Error("cuBLAS error in <what>: <status>") when `s` is not success.
void check(cublasStatus_t s, const char* what);

/// Checks for an error raised by the preceding kernel launch(es) on this thread.
inline void check_launch(const char* what) { check(cudaGetLastError(), what); }

/// Threads per block used by Loom's element-wise kernels.
inline constexpr int kBlockSize = 256;
/// Blocks for a grid-stride loop over n elements (at least 1, capped: the loop covers the
/// rest).
inline unsigned grid_size(int64_t n) {
  constexpr int64_t kMaxBlocks = 65535;
  int64_t b = (n + kBlockSize - 1) / kBlockSize;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

}  // namespace loom::cuda
