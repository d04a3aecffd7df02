// linalg.inverse(A), linalg.det(A) and linalg.slogdet(A) -> (sign, logabsdet), batched over
// leading axes (MXNet 1.9.1; through an LU factorization with partial pivoting, as getrf).
// Gradients: inverse dA = -B^T dB B^T (B = A^-1); det dA = ddet * det * A^-T; slogdet
// dA = dlogabsdet * A^-T (the sign has no gradient); both are zero for a singular A, as
// MXNet's StopZeroDetGrad. MXNet's hidden LU/pivot outputs are not exposed (the backward
// refactors A).
#include "ops/linalg/la_kernel.h"

namespace loom::linalg {
namespace {

void check_square_inverse(const Shape& s) {
  if (s.ndim() < 2) throw ShapeError("input A " + s.str() + " must have at least 2 axes");
  if (s[s.ndim() - 2] != s[s.ndim() - 1])
    throw ShapeError("input A " + s.str() +
                     " must be a tensor of square matrices (the last two axes equal)");
}

void infer_inverse(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0 && out[0].ndim() != 0) in[0] = out[0];
  if (in[0].ndim() == 0) return;
  check_square_inverse(in[0]);
  merge_shape(out[0], in[0], "output 0");
}

void infer_det(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  check_square_inverse(in[0]);
  std::vector<int64_t> o = leading(in[0], 2);
  if (o.empty()) o.push_back(1);
  for (size_t i = 0; i < out.size(); ++i)
    merge_shape(out[i], Shape(o), "output " + std::to_string(i));
}

LOOM_REGISTER_OP("_linalg_inverse")
    .alias("linalg_inverse")
    .describe("Batched inverse of square matrices.")
    .inputs({"A"})
    .shape_fn(infer_inverse)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = true})
    .kernel(DeviceType::kCPU, la_kernel<InverseOp>())
    .sample({.attrs = {}, .in_shapes = {{3, 3}}})
    .sample({.attrs = {}, .in_shapes = {{2, 2, 2}}});

LOOM_REGISTER_OP("_linalg_det")
    .alias("linalg_det")
    .describe("Batched determinant of square matrices.")
    .inputs({"A"})
    .outputs({"output0"})  // MXNet's name: det has hidden outputs there
    .shape_fn(infer_det)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = true})
    .kernel(DeviceType::kCPU, la_kernel<DetOp<false>>())
    .sample({.attrs = {}, .in_shapes = {{3, 3}}})
    .sample({.attrs = {}, .in_shapes = {{2, 2, 2}}});

LOOM_REGISTER_OP("_linalg_slogdet")
    .alias("linalg_slogdet")
    .describe("Batched sign and log of the absolute value of the determinant.")
    .inputs({"A"})
    .outputs({"output0", "output1"})
    .shape_fn(infer_det)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = true})
    .kernel(DeviceType::kCPU, la_kernel<DetOp<true>>())
    .sample({.attrs = {}, .in_shapes = {{3, 3}}})
    .sample({.attrs = {}, .in_shapes = {{2, 2, 2}}});

}  // namespace
}  // namespace loom::linalg
