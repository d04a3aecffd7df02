// The host side of FullyConnected's cuBLASLt plans (runtime/cuda/cublaslt.h) without a GPU:
// the entry points resolve from the loaded libcublasLt, and the matmul descriptors and matrix
// layouts that FcPlan builds hold the column-major mappings, read back through cuBLASLt:
// forward y(N,H) = x(N,K)·W(H,K)ᵀ + b as A = W op T on (K,H) ld K, B = x op N on (K,N)
// ld K, D = y (H,N) ld H with the bias epilogue; weight gradient dW(H,K) = dyᵀ·x as
// A = x op N on (K,N) ld K, B = dy op T on (H,N) ld H, D = dW (K,H) ld K with the BGRADB
// epilogue; FP32 compute without TF32, float32 bias. Handles, heuristics and the matmul
// need a device: only gpu_op_sweep runs them.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#ifdef LOOM_HAVE_CUDA
#include "runtime/cuda/cublaslt.h"
#endif

namespace loom {
namespace {

#ifdef LOOM_HAVE_CUDA
namespace lt = cuda::lt;

bool have_cublaslt() {
  try {
    lt::api();
    return true;
  } catch (const Error& e) {
    std::cout << "no cuBLASLt to load: " << e.what() << "\n";
    return false;
  }
}

template <class V>
V desc_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr) {
  V v{};
  size_t written = 0;
  EXPECT_EQ(lt::api().desc_get(d, attr, &v, sizeof v, &written), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof v);
  return v;
}

template <class V>
V layout_attr(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr) {
  V v{};
  size_t written = 0;
  EXPECT_EQ(lt::api().layout_get(l, attr, &v, sizeof v, &written), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof v);
  return v;
}

struct Dims {
  uint64_t rows, cols;
  int64_t ld;
};

Dims dims(cublasLtMatrixLayout_t l) {
  EXPECT_EQ(layout_attr<uint32_t>(l, CUBLASLT_MATRIX_LAYOUT_TYPE), uint32_t{CUDA_R_32F});
  EXPECT_EQ(layout_attr<int32_t>(l, CUBLASLT_MATRIX_LAYOUT_ORDER), int32_t{CUBLASLT_ORDER_COL});
  EXPECT_EQ(layout_attr<int32_t>(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT), 1);
  return {layout_attr<uint64_t>(l, CUBLASLT_MATRIX_LAYOUT_ROWS),
          layout_attr<uint64_t>(l, CUBLASLT_MATRIX_LAYOUT_COLS),
          layout_attr<int64_t>(l, CUBLASLT_MATRIX_LAYOUT_LD)};
}

void expect_dims(cublasLtMatrixLayout_t l, const Dims& want, const char* which) {
  SCOPED_TRACE(which);
  const Dims got = dims(l);
  EXPECT_EQ(got.rows, want.rows);
  EXPECT_EQ(got.cols, want.cols);
  EXPECT_EQ(got.ld, want.ld);
}

struct FcShape {
  int64_t n, k, h;
};

/// What a plan of one kind must hold for a shape: the transposes, the epilogue and the
/// column-major layouts of A, B and D.
struct PlanWant {
  cublasOperation_t transa, transb;
  cublasLtEpilogue_t epilogue;
  Dims a, b, d;
};

// Builds a plan of `kind` for square, tall and wide shapes, a vector (N = 1) and a single
// output (H = 1), and checks what both kinds share (FP32 compute without TF32, FP32 scale,
// a float32 bias whose pointer is set per call by run(), not at plan time) and want(shape).
template <class Want>
void check_plans(lt::FcPlan::Kind kind, Want want) {
  for (FcShape s : {FcShape{4, 4, 4}, FcShape{128, 3, 10}, FcShape{2, 1000, 7}, FcShape{1, 5, 3},
                    FcShape{9, 6, 1}}) {
    SCOPED_TRACE("N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) +
                 " H=" + std::to_string(s.h));
    const PlanWant w = want(s);
    lt::FcPlan plan(kind, s.n, s.k, s.h, "test");
    cublasLtMatmulDesc_t d = plan.desc();
    EXPECT_EQ(desc_attr<int32_t>(d, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE),
              int32_t{CUBLAS_COMPUTE_32F});  // not CUBLAS_COMPUTE_32F_FAST_TF32
    EXPECT_EQ(desc_attr<int32_t>(d, CUBLASLT_MATMUL_DESC_SCALE_TYPE), int32_t{CUDA_R_32F});
    EXPECT_EQ(desc_attr<int32_t>(d, CUBLASLT_MATMUL_DESC_TRANSA), static_cast<int32_t>(w.transa));
    EXPECT_EQ(desc_attr<int32_t>(d, CUBLASLT_MATMUL_DESC_TRANSB), static_cast<int32_t>(w.transb));
    EXPECT_EQ(desc_attr<uint32_t>(d, CUBLASLT_MATMUL_DESC_EPILOGUE),
              static_cast<uint32_t>(w.epilogue));
    EXPECT_EQ(desc_attr<int32_t>(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE), int32_t{CUDA_R_32F});
    EXPECT_EQ(desc_attr<const void*>(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER), nullptr);
    expect_dims(plan.a(), w.a, "A");
    expect_dims(plan.b(), w.b, "B");
    expect_dims(plan.d(), w.d, "D");
  }
}

TEST(CublasLtDesc, FullyConnectedPlanHoldsTheColumnMajorMapping) {
  if (!have_cublaslt()) GTEST_SKIP() << "libcublasLt not loadable here";
  check_plans(lt::FcPlan::kForward, [](const FcShape& s) {
    const uint64_t n = uint64_t(s.n), k = uint64_t(s.k), h = uint64_t(s.h);
    return PlanWant{CUBLAS_OP_T, CUBLAS_OP_N, CUBLASLT_EPILOGUE_BIAS,
                    // A = W: column-major (K, H) with ld K; op T makes it the (H, K) factor.
                    Dims{k, h, s.k},
                    // B = x: column-major (K, N) with ld K, used as is.
                    Dims{k, n, s.k},
                    // D = y: column-major (H, N) with ld H; the bias (length H) runs along
                    // its rows.
                    Dims{h, n, s.h}};
  });
}

TEST(CublasLtDesc, WeightGradPlanHoldsTheColumnMajorMapping) {
  if (!have_cublaslt()) GTEST_SKIP() << "libcublasLt not loadable here";
  check_plans(lt::FcPlan::kWeightGrad, [](const FcShape& s) {
    const uint64_t n = uint64_t(s.n), k = uint64_t(s.k), h = uint64_t(s.h);
    return PlanWant{CUBLAS_OP_N, CUBLAS_OP_T, CUBLASLT_EPILOGUE_BGRADB,
                    // A = x: column-major (K, N) with ld K, used as is.
                    Dims{k, n, s.k},
                    // B = dy: column-major (H, N) with ld H; op T makes it (N, H), reduced
                    // over N into db.
                    Dims{h, n, s.h},
                    // D = dW: column-major (K, H) with ld K (row-major (H, K)); db has D's H
                    // columns.
                    Dims{k, h, s.k}};
  });
}

TEST(CublasLtDesc, ErrorsNameTheCallAndStatus) {
  if (!have_cublaslt()) GTEST_SKIP() << "libcublasLt not loadable here";
  EXPECT_NO_THROW(lt::check(CUBLAS_STATUS_SUCCESS, "x"));
  try {
    lt::check(CUBLAS_STATUS_INVALID_VALUE, "FullyConnected node 'fc1': cublasLtMatmul");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cuBLASLt error in FullyConnected node 'fc1': cublasLtMatmul"),
              std::string::npos) << m;
    EXPECT_NE(m.find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos) << m;
  }
}
#endif

}  // namespace
}  // namespace loom
