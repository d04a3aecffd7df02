// linalg.gelqf(A) -> (Q, L): the LQ factorization A = L Q of m x n matrices (m <= n), Q with
// orthonormal rows; linalg.syevd(A) -> (U, L): A = U^T diag(L) U for the symmetric matrix given
// by A's lower triangle, eigenvalues ascending, eigenvectors as rows of U with their
// largest-magnitude entry positive. Batched over leading axes; gradients as MXNet 1.9.1's
// gelqf_backward / syevd_backward.
#include <algorithm>

#include "ops/linalg/la_kernel.h"

namespace loom::linalg {
namespace {

void infer_gelqf(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  const Shape& s = in[0];
  if (s.ndim() >= 2) {
    const int nd = s.ndim();
    if (s[nd - 2] > s[nd - 1])
      throw ShapeError("input A " + s.str() +
                       ": the last axis must be at least as long as the second to last");
    merge_shape(out[0], s, "output 0 (Q)");
    std::vector<int64_t> l(s.dims());
    l[static_cast<size_t>(nd - 1)] = s[nd - 2];
    merge_shape(out[1], Shape(std::move(l)), "output 1 (L)");
    return;
  }
  if (s.ndim() == 1) throw ShapeError("input A " + s.str() + " must have at least 2 axes");
  if (out[0].ndim() >= 2) merge_shape(in[0], out[0], "input 0 (A)");
}

const LaSpec kGelqf{
    .in_rank = {2},
    .out_rank = {2, 2},
    .row_axis = nullptr,
    .forward =
        [](const OpAttrs&, const std::vector<Mats>& in, std::vector<Mats>& out) {
          for_batch(in[0], [&](size_t b) { lq(in[0][b], &out[0][b], &out[1][b]); });
        },
    .backward =
        [](const OpAttrs&, const std::vector<Mats>& og, const std::vector<Mats>&,
           const std::vector<Mats>& out, std::vector<Mats>& ig) {
          for_batch(og[0], [&](size_t b) {
            const Dense &dQ = og[0][b], &dL = og[1][b], &Q = out[0][b], &L = out[1][b];
            Dense m = trmm(L, dL, 1.0, false, true, true);
            m = matmul(dQ, false, Q, true, -1.0, &m, 1.0);
            mirror_triangle(m, false);
            const Dense d = matmul(m, false, Q, false, 1.0, &dQ, 1.0);
            ig[0][b] = trsm(L, d, 1.0, false, true, true);
          });
        },
};

void infer_syevd(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  const Shape& s = in[0];
  if (s.ndim() >= 2) {
    const int nd = s.ndim();
    if (s[nd - 2] != s[nd - 1])
      throw ShapeError("input A " + s.str() + " must be a tensor of square matrices");
    merge_shape(out[0], s, "output 0 (U)");
    merge_shape(out[1], Shape(leading(s, 1)), "output 1 (L)");
    return;
  }
  if (s.ndim() == 1) throw ShapeError("input A " + s.str() + " must have at least 2 axes");
  if (out[0].ndim() >= 2) merge_shape(in[0], out[0], "input 0 (A)");
}

const LaSpec kSyevd{
    .in_rank = {2},
    .out_rank = {2, 1},
    .row_axis = nullptr,
    .forward =
        [](const OpAttrs&, const std::vector<Mats>& in, std::vector<Mats>& out) {
          for_batch(in[0], [&](size_t b) {
            std::vector<double> w;
            syevd(in[0][b], &out[0][b], &w);
            for (size_t i = 0; i < w.size(); ++i) out[1][b](0, static_cast<int64_t>(i)) = w[i];
          });
        },
    .backward =
        [](const OpAttrs&, const std::vector<Mats>& og, const std::vector<Mats>&,
           const std::vector<Mats>& out, std::vector<Mats>& ig) {
          for_batch(og[0], [&](size_t b) {
            const Dense &dU = og[0][b], &dL = og[1][b], &U = out[0][b], &L = out[1][b];
            const int64_t n = U.r;
            const Dense x = matmul(dU, false, U, true);
            Dense y(n, n);
            for (int64_t i = 0; i < n; ++i) {
              for (int64_t j = 0; j < i; ++j) {
                const double denom = 2.0 * std::max(L(0, i) - L(0, j), 1e-100);
                y(i, j) = y(j, i) = (x(i, j) - x(j, i)) / denom;
              }
              y(i, i) = dL(0, i);
            }
            ig[0][b] = matmul(matmul(U, true, y, false), false, U, false);
          });
        },
};

LOOM_REGISTER_OP("_linalg_gelqf")
    .alias("linalg_gelqf")
    .describe("Batched LQ factorization A = L * Q (Q with orthonormal rows).")
    .inputs({"A"})
    .outputs({"output0", "output1"})
    .shape_fn(infer_gelqf)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = true})
    .kernel(DeviceType::kCPU, la_kernel(&kGelqf))
    .sample({.attrs = {}, .in_shapes = {{2, 3}}})
    .sample({.attrs = {}, .in_shapes = {{2, 3, 3}}})
    .sample({.attrs = {}, .in_shapes = {{2, 1, 4}}});

LOOM_REGISTER_OP("_linalg_syevd")
    .describe("Batched eigendecomposition A = U^T * diag(L) * U of symmetric matrices.")
    .inputs({"A"})
    .outputs({"output0", "output1"})
    .shape_fn(infer_syevd)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = true})
    .kernel(DeviceType::kCPU, la_kernel(&kSyevd))
    // Only the lower triangle is read and the gradient is symmetric (as MXNet's), which a
    // finite difference on one entry cannot see beyond 1 x 1; larger matrices are checked in
    // tests/unit/test_ops_linalg.cc.
    .sample({.attrs = {}, .in_shapes = {{3, 1, 1}}})
    .sample({.attrs = {}, .in_shapes = {{2, 3, 3}}, .check_grad = false});

}  // namespace
}  // namespace loom::linalg
