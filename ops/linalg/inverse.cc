// linalg.inverse(A), linalg.det(A) and linalg.slogdet(A) -> (sign, logabsdet), batched over
// leading axes (MXNet 1.9.1; through an LU factorization with partial pivoting, as getrf).
// Gradients: inverse dA = -B^T dB B^T (B = A^-1); det dA = ddet * det * A^-T; slogdet
// dA = dlogabsdet * A^-T (the sign has no gradient); both are zero for a singular A, as
// MXNet's StopZeroDetGrad. MXNet's hidden LU/pivot outputs are not exposed (the backward
// refactors A).
#include <cmath>

#include "ops/linalg/la_kernel.h"

namespace loom::linalg {
namespace {

void check_square(const Shape& s) {
  if (s.ndim() < 2)
    throw ShapeError("input A " + s.str() + " must have at least 2 axes");
  if (s[s.ndim() - 2] != s[s.ndim() - 1])
    throw ShapeError("input A " + s.str() +
                     " must be a tensor of square matrices (the last two axes equal)");
}

void infer_inverse(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0 && out[0].ndim() != 0) in[0] = out[0];
  if (in[0].ndim() == 0) return;
  check_square(in[0]);
  merge_shape(out[0], in[0], "output 0");
}

void infer_det(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  check_square(in[0]);
  std::vector<int64_t> o = leading(in[0], 2);
  if (o.empty()) o.push_back(1);
  for (size_t i = 0; i < out.size(); ++i) merge_shape(out[i], Shape(o), "output " + std::to_string(i));
}

// sign and log|det| of a square matrix.
void signed_logdet(const Dense& a, double* sign, double* logabs) {
  Dense f;
  std::vector<int64_t> perm;
  const int swaps = lu(a, &f, &perm);
  double s = swaps % 2 == 1 ? -1.0 : 1.0, l = 0.0;
  for (int64_t i = 0; i < f.r; ++i) {
    const double d = f(i, i);
    s *= static_cast<double>((0.0 < d) - (d < 0.0));
    l += std::log(std::fabs(d));
  }
  *sign = s;
  *logabs = l;
}

// scale * A^-T, or zeros when `zero` (singular A).
Dense scaled_inverse_t(const Dense& a, double scale, bool zero) {
  Dense inv;
  if (zero || !inverse(a, &inv)) return Dense(a.r, a.c);
  Dense t = transpose(inv);
  for (auto& e : t.v) e *= scale;
  return t;
}

const LaSpec kInverse{
    .in_rank = {2},
    .out_rank = {2},
    .row_axis = nullptr,
    .forward =
        [](const OpAttrs& a, const std::vector<Mats>& in, std::vector<Mats>& out) {
          for_batch(in[0], [&](size_t b) {
            if (!inverse(in[0][b], &out[0][b]))
              throw Error(la_label(a) + ": matrix " + std::to_string(b) +
                          " of input A is singular");
          });
        },
    .backward =
        [](const OpAttrs&, const std::vector<Mats>& og, const std::vector<Mats>&,
           const std::vector<Mats>& out, std::vector<Mats>& ig) {
          for_batch(og[0], [&](size_t b) {
            const Dense& B = out[0][b];
            ig[0][b] = matmul(B, true, matmul(og[0][b], false, B, true), false, -1.0);
          });
        },
};

const LaSpec kDet{
    .in_rank = {2},
    .out_rank = {0},
    .row_axis = nullptr,
    .forward =
        [](const OpAttrs&, const std::vector<Mats>& in, std::vector<Mats>& out) {
          for_batch(in[0], [&](size_t b) {
            double s, l;
            signed_logdet(in[0][b], &s, &l);
            out[0][b](0, 0) = s * std::exp(l);
          });
        },
    .backward =
        [](const OpAttrs&, const std::vector<Mats>& og, const std::vector<Mats>& in,
           const std::vector<Mats>& out, std::vector<Mats>& ig) {
          for_batch(og[0], [&](size_t b) {
            const double det = out[0][b](0, 0);
            ig[0][b] = scaled_inverse_t(in[0][b], og[0][b](0, 0) * det, det == 0.0);
          });
        },
};

const LaSpec kSlogdet{
    .in_rank = {2},
    .out_rank = {0, 0},
    .row_axis = nullptr,
    .forward =
        [](const OpAttrs&, const std::vector<Mats>& in, std::vector<Mats>& out) {
          for_batch(in[0], [&](size_t b) {
            signed_logdet(in[0][b], &out[0][b](0, 0), &out[1][b](0, 0));
          });
        },
    .backward =
        [](const OpAttrs&, const std::vector<Mats>& og, const std::vector<Mats>& in,
           const std::vector<Mats>& out, std::vector<Mats>& ig) {
          for_batch(og[1], [&](size_t b) {
            const double l = out[1][b](0, 0);
            ig[0][b] = scaled_inverse_t(in[0][b], og[1][b](0, 0), std::isinf(l) && l < 0);
          });
        },
};

LOOM_REGISTER_OP("_linalg_inverse")
    .alias("linalg_inverse")
    .describe("Batched inverse of square matrices.")
    .inputs({"A"})
    .shape_fn(infer_inverse)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = true})
    .kernel(DeviceType::kCPU, la_kernel(&kInverse))
    .sample({.attrs = {}, .in_shapes = {{3, 3}}})
    .sample({.attrs = {}, .in_shapes = {{2, 2, 2}}});

LOOM_REGISTER_OP("_linalg_det")
    .alias("linalg_det")
    .describe("Batched determinant of square matrices.")
    .inputs({"A"})
    .outputs({"output0"})  // MXNet's name: det has hidden outputs there
    .shape_fn(infer_det)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = true})
    .kernel(DeviceType::kCPU, la_kernel(&kDet))
    .sample({.attrs = {}, .in_shapes = {{3, 3}}})
    .sample({.attrs = {}, .in_shapes = {{2, 2, 2}}});

LOOM_REGISTER_OP("_linalg_slogdet")
    .alias("linalg_slogdet")
    .describe("Batched sign and log of the absolute value of the determinant.")
    .inputs({"A"})
    .outputs({"output0", "output1"})
    .shape_fn(infer_det)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = true})
    .kernel(DeviceType::kCPU, la_kernel(&kSlogdet))
    .sample({.attrs = {}, .in_shapes = {{3, 3}}})
    .sample({.attrs = {}, .in_shapes = {{2, 2, 2}}});

}  // namespace
}  // namespace loom::linalg
