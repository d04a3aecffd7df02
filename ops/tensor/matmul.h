// dot and batch_dot: parameters, the (m, n, k) of their products, and the gradient products,
// shared by the CPU kernels (dot.cc, batch_dot.cc, on tensor::gemm) and the CUDA kernels
// (matmul.cu, on cuBLAS): each side passes its own gemm to matmul_backward.
#pragma once

#include <string>

#include "ops/infer.h"

namespace loom::tensor {

struct DotParam {
  bool transpose_a, transpose_b;
  std::string forward_stype;
};
inline ParamSchema<DotParam> dot_schema() {
  return ParamSchema<DotParam>()
      .optional("transpose_a", &DotParam::transpose_a, false, "Contract lhs's first axis.")
      .optional("transpose_b", &DotParam::transpose_b, false, "Contract rhs's last axis.")
      .optional("forward_stype", &DotParam::forward_stype, std::string("None"),
                "Storage type of the output (dense only here).");
}

// lhs as (M, K) or (K, M), rhs as (K, N) or (N, K).
struct DotDims {
  int64_t m, n, k;
  Shape out;
};
inline DotDims dot_dims(const OpAttrs& a, const Shape& l, const Shape& r) {
  const auto& p = a.param<DotParam>();
  const int64_t kl = p.transpose_a ? l[0] : l[l.ndim() - 1];
  const int64_t kr = p.transpose_b ? r[r.ndim() - 1] : r[0];
  if (kl != kr)
    throw ShapeError("node '" + a.name + "' (op dot): cannot contract lhs " + l.str() +
                     " with rhs " + r.str() + (p.transpose_a ? " (transpose_a)" : "") +
                     (p.transpose_b ? " (transpose_b)" : "") + ": " + std::to_string(kl) + " vs " +
                     std::to_string(kr));
  std::vector<int64_t> o;
  if (p.transpose_a)
    o.assign(l.begin() + 1, l.end());
  else
    o.assign(l.begin(), l.end() - 1);
  if (p.transpose_b)
    o.insert(o.end(), r.begin(), r.end() - 1);
  else
    o.insert(o.end(), r.begin() + 1, r.end());
  if (o.empty()) o.push_back(1);
  return {l.numel() / kl, r.numel() / kr, kl, Shape(std::move(o))};
}

struct BatchDotParam {
  bool transpose_a, transpose_b;
  std::string forward_stype;
};
inline ParamSchema<BatchDotParam> batch_dot_schema() {
  return ParamSchema<BatchDotParam>()
      .optional("transpose_a", &BatchDotParam::transpose_a, false, "Use lhs^T per batch entry.")
      .optional("transpose_b", &BatchDotParam::transpose_b, false, "Use rhs^T per batch entry.")
      .optional("forward_stype", &BatchDotParam::forward_stype, std::string("None"),
                "Storage type of the output (dense only here).");
}

struct BatchDims {
  int64_t b, m, n, k;
};
inline BatchDims batch_dims(const OpAttrs& a, const Shape& l, const Shape& r) {
  const auto& p = a.param<BatchDotParam>();
  const std::string who = "node '" + a.name + "' (op batch_dot): ";
  if (l.ndim() != 3 || r.ndim() != 3)
    throw ShapeError(who + "lhs " + l.str() + " and rhs " + r.str() + " must both be 3-D");
  if (l[0] != r[0])
    throw ShapeError(who + "batch sizes of lhs " + l.str() + " and rhs " + r.str() + " differ");
  BatchDims d{l[0], p.transpose_a ? l[2] : l[1], p.transpose_b ? r[1] : r[2],
              p.transpose_a ? l[1] : l[2]};
  const int64_t kr = p.transpose_b ? r[2] : r[1];
  if (d.k != kr)
    throw ShapeError(who + "cannot multiply lhs " + l.str() + " by rhs " + r.str() + ": " +
                     std::to_string(d.k) + " vs " + std::to_string(kr));
  return d;
}

/// The gradients of Y = op(L)·op(R) (one product, row-major, contiguous) on any
/// gemm(ta, tb, m, n, k, A, B, C, add) computing C (=|+=) op(A)·op(B) with C m x n:
/// dL = dY·op(R)ᵀ in L's orientation, dR = op(L)ᵀ·dY in R's; dl / dr null: not requested.
template <class Gemm, class T>
void matmul_backward(Gemm gemm, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* g,
                     const T* l, const T* r, T* dl, T* dr, bool add_l, bool add_r) {
  if (dl) {
    // dL (M, K) = dY (M, N) op(R)^T; with transpose_a dL is (K, M) = op(R) dY^T.
    if (!ta)
      gemm(false, !tb, m, k, n, g, r, dl, add_l);
    else
      gemm(tb, true, k, m, n, r, g, dl, add_l);
  }
  if (dr) {
    // dR (K, N) = op(L)^T dY; with transpose_b dR is (N, K) = dY^T op(L).
    if (!tb)
      gemm(!ta, false, k, n, m, l, g, dr, add_r);
    else
      gemm(true, ta, n, k, m, g, l, dr, add_r);
  }
}

}  // namespace loom::tensor
