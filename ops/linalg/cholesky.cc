// Cholesky-related operators of MXNet 1.9.1's linalg family, batched over leading axes:
//   potrf(A): the Cholesky factor of the symmetric positive definite matrix given by A's
//             `lower` (or upper) triangle; potri(A): the inverse of L L^T (U^T U) from the
//             factor; sumlogdiag(A): sum of log(A_ii); syrk(A): alpha * A A^T (A^T A).
// Gradients follow MXNet's potrf/potri/sumlogdiag/syrk_backward (arXiv:1710.08717).
#include <cmath>

#include "ops/linalg/la_kernel.h"

namespace loom::linalg {
namespace {

struct CholParam {
  bool lower;
};
const auto kCholSchema = ParamSchema<CholParam>().optional(
    "lower", &CholParam::lower, true,
    "True if the triangular matrix is lower triangular, false if it is upper triangular.");

struct SyrkParam {
  bool transpose;
  double alpha;
};
const auto kSyrkSchema =
    ParamSchema<SyrkParam>()
        .optional("transpose", &SyrkParam::transpose, false, "Use transpose of input matrix.")
        .optional("alpha", &SyrkParam::alpha, 1.0, "Scalar factor to be applied to the result.");

void check_square(const Shape& s) {
  if (s.ndim() < 2 || s[s.ndim() - 2] != s[s.ndim() - 1])
    throw ShapeError("input A " + s.str() + " must be a tensor of square matrices");
}

void infer_square_same(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0 && out[0].ndim() != 0) in[0] = out[0];
  if (in[0].ndim() == 0) return;
  check_square(in[0]);
  merge_shape(out[0], in[0], "output 0");
}

const LaSpec kPotrf{
    .in_rank = {2},
    .out_rank = {2},
    .row_axis = nullptr,
    .forward =
        [](const OpAttrs& a, const std::vector<Mats>& in, std::vector<Mats>& out) {
          const bool lower = a.param<CholParam>().lower;
          for_batch(in[0], [&](size_t b) {
            if (!cholesky(in[0][b], lower, &out[0][b]))
              throw Error(la_label(a) + ": matrix " + std::to_string(b) +
                          " of input A is not symmetric positive definite (Cholesky failed)");
          });
        },
    .backward =
        [](const OpAttrs& a, const std::vector<Mats>& og, const std::vector<Mats>&,
           const std::vector<Mats>& out, std::vector<Mats>& ig) {
          const bool lower = a.param<CholParam>().lower;
          for_batch(og[0], [&](size_t b) {
            const Dense& L = out[0][b];
            Dense d = trmm(L, og[0][b], 1.0, !lower, lower, true);
            mirror_triangle(d, !lower);
            d = trsm(L, d, 1.0, false, lower, lower);
            ig[0][b] = trsm(L, d, 0.5, true, lower, !lower);
          });
        },
};

const LaSpec kPotri{
    .in_rank = {2},
    .out_rank = {2},
    .row_axis = nullptr,
    .forward =
        [](const OpAttrs& a, const std::vector<Mats>& in, std::vector<Mats>& out) {
          const bool lower = a.param<CholParam>().lower;
          for_batch(in[0], [&](size_t b) {
            const Dense& T = in[0][b];
            for (int64_t i = 0; i < T.r; ++i)
              if (T(i, i) == 0.0)
                throw Error(la_label(a) + ": matrix " + std::to_string(b) +
                            " of input A has a zero diagonal entry (not a Cholesky factor)");
            const Dense inv = trsm(T, Dense::eye(T.r), 1.0, false, lower, false);
            out[0][b] = lower ? matmul(inv, true, inv, false) : matmul(inv, false, inv, true);
          });
        },
    .backward =
        [](const OpAttrs& a, const std::vector<Mats>& og, const std::vector<Mats>& in,
           const std::vector<Mats>& out, std::vector<Mats>& ig) {
          const bool lower = a.param<CholParam>().lower;
          for_batch(og[0], [&](size_t b) {
            const Dense &g = og[0][b], &A = out[0][b];
            Dense d = lower ? matmul(A, false, g, false, 1.0) : matmul(g, false, A, false, 1.0);
            d = lower ? matmul(A, false, g, true, 1.0, &d, 1.0) : matmul(g, true, A, false, 1.0, &d, 1.0);
            d = trsm(in[0][b], d, -1.0, lower, lower, true);
            zero_triangle(d, !lower);
            ig[0][b] = std::move(d);
          });
        },
};

void infer_sumlogdiag(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  check_square(in[0]);
  std::vector<int64_t> o = leading(in[0], 2);
  if (o.empty()) o.push_back(1);
  merge_shape(out[0], Shape(std::move(o)), "output 0");
}

const LaSpec kSumLogDiag{
    .in_rank = {2},
    .out_rank = {0},
    .row_axis = nullptr,
    .forward =
        [](const OpAttrs&, const std::vector<Mats>& in, std::vector<Mats>& out) {
          for_batch(in[0], [&](size_t b) {
            double s = 0;
            for (int64_t i = 0; i < in[0][b].r; ++i) s += std::log(in[0][b](i, i));
            out[0][b](0, 0) = s;
          });
        },
    .backward =
        [](const OpAttrs&, const std::vector<Mats>& og, const std::vector<Mats>& in,
           const std::vector<Mats>&, std::vector<Mats>& ig) {
          for_batch(in[0], [&](size_t b) {
            for (int64_t i = 0; i < in[0][b].r; ++i)
              ig[0][b](i, i) = og[0][b](0, 0) / in[0][b](i, i);
          });
        },
};

void infer_syrk(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const Shape& s = in[0];
  if (s.ndim() == 0) return;
  if (s.ndim() < 2) throw ShapeError("input A " + s.str() + " must have at least 2 axes");
  std::vector<int64_t> o(s.dims());
  const int nd = s.ndim();
  const int64_t n = a.param<SyrkParam>().transpose ? s[nd - 1] : s[nd - 2];
  o[static_cast<size_t>(nd - 2)] = o[static_cast<size_t>(nd - 1)] = n;
  merge_shape(out[0], Shape(std::move(o)), "output 0");
}

const LaSpec kSyrk{
    .in_rank = {2},
    .out_rank = {2},
    .row_axis = nullptr,
    .forward =
        [](const OpAttrs& a, const std::vector<Mats>& in, std::vector<Mats>& out) {
          const auto& p = a.param<SyrkParam>();
          for_batch(in[0], [&](size_t b) {
            const Dense& A = in[0][b];
            out[0][b] = matmul(A, p.transpose, A, !p.transpose, p.alpha);
          });
        },
    .backward =
        [](const OpAttrs& a, const std::vector<Mats>& og, const std::vector<Mats>& in,
           const std::vector<Mats>&, std::vector<Mats>& ig) {
          const auto& p = a.param<SyrkParam>();
          for_batch(og[0], [&](size_t b) {
            const Dense &g = og[0][b], &A = in[0][b];
            if (p.transpose) {
              const Dense t = matmul(A, false, g, false, p.alpha);
              ig[0][b] = matmul(A, false, g, true, p.alpha, &t, 1.0);
            } else {
              const Dense t = matmul(g, false, A, false, p.alpha);
              ig[0][b] = matmul(g, true, A, false, p.alpha, &t, 1.0);
            }
          });
        },
};

LOOM_REGISTER_OP("_linalg_potrf")
    .alias("linalg_potrf")
    .describe("Batched Cholesky factorization of symmetric positive definite matrices.")
    .params(kCholSchema)
    .inputs({"A"})
    .shape_fn(infer_square_same)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = true})
    .kernel(DeviceType::kCPU, la_kernel(&kPotrf))
    // Random inputs are not positive definite beyond 1 x 1; larger matrices are covered by
    // tests/unit/test_ops_linalg.cc.
    .sample({.attrs = {}, .in_shapes = {{3, 1, 1}}, .in_kinds = {"positive"}})
    .sample({.attrs = {{"lower", "False"}}, .in_shapes = {{2, 2, 1, 1}}, .in_kinds = {"positive"}});

LOOM_REGISTER_OP("_linalg_potri")
    .alias("linalg_potri")
    .describe("Batched inverse of L L^T (U^T U) from its Cholesky factor.")
    .params(kCholSchema)
    .inputs({"A"})
    .shape_fn(infer_square_same)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = true})
    .kernel(DeviceType::kCPU, la_kernel(&kPotri))
    .sample({.attrs = {}, .in_shapes = {{3, 3}}, .in_kinds = {"above1"}})
    .sample({.attrs = {{"lower", "False"}}, .in_shapes = {{2, 2, 2}}, .in_kinds = {"above1"}});

LOOM_REGISTER_OP("_linalg_sumlogdiag")
    .alias("linalg_sumlogdiag")
    .describe("Batched sum of the logarithms of the diagonal elements of square matrices.")
    .inputs({"A"})
    .shape_fn(infer_sumlogdiag)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .kernel(DeviceType::kCPU, la_kernel(&kSumLogDiag))
    .sample({.attrs = {}, .in_shapes = {{3, 3}}, .in_kinds = {"positive"}})
    .sample({.attrs = {}, .in_shapes = {{2, 2, 2, 2}}, .in_kinds = {"positive"}});

LOOM_REGISTER_OP("_linalg_syrk")
    .alias("linalg_syrk")
    .describe("Batched alpha * A * A^T (or alpha * A^T * A with transpose).")
    .params(kSyrkSchema)
    .inputs({"A"})
    .shape_fn(infer_syrk)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .kernel(DeviceType::kCPU, la_kernel(&kSyrk))
    .sample({.attrs = {{"alpha", "2"}}, .in_shapes = {{2, 3}}})
    .sample({.attrs = {{"transpose", "True"}, {"alpha", "-0.5"}}, .in_shapes = {{2, 3, 4}}});

}  // namespace
}  // namespace loom::linalg
