// One CPU kernel for every _linalg_* operator: each tensor is read as a batch of matrices
// (MXNet batches over the leading axes; gemm/gemm2 may put the row axis elsewhere), converted
// to double, handed to the op's forward/backward functions, and written back in the tensor's
// dtype honouring req (write/add/null). float32 and float64, as MXNet (SGL_DBL types).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ops/infer.h"
#include "ops/linalg/la_dense.h"

namespace loom::linalg {

/// A tensor as a batch of matrices.
using Mats = std::vector<Dense>;

using LaForward = std::function<void(const OpAttrs&, const std::vector<Mats>& in,
                                     std::vector<Mats>& out)>;
/// og: output gradients (zeros where none flows); in/out: forward inputs/outputs when the op
/// declared them in GradDeps (empty otherwise); ig: zero-filled input gradients to fill.
using LaBackward =
    std::function<void(const OpAttrs&, const std::vector<Mats>& og, const std::vector<Mats>& in,
                       const std::vector<Mats>& out, std::vector<Mats>& ig)>;

/// How an operator's tensors map to matrices, and its math.
struct LaSpec {
  /// Matrix rank of each input/output: 2 = the last two axes are a matrix, 1 = the last axis
  /// is a 1 x n row, 0 = every element is a 1 x 1 matrix.
  std::vector<int> in_rank, out_rank;
  /// The row axis of rank-2 tensors (gemm's `axis`); null = the second-to-last axis.
  std::function<int64_t(const OpAttrs&)> row_axis;
  LaForward forward;
  LaBackward backward;
};

/// Runs fn(b) for every matrix b of `like` (a batch the loop reads), in parallel over the
/// batch when the work (about n * r * c * max(r, c)) is large enough to pay for the threads.
/// An exception thrown by fn (a failed factorization) is rethrown after the loop.
void for_batch(const Mats& like, const std::function<void(size_t)>& fn);

/// The kernel factory for an op described by `spec` (which must outlive the registry).
KernelFactory la_kernel(const LaSpec* spec);

/// "node 'x' (op _linalg_potrf)": prefix of errors raised by the math functions.
std::string la_label(const OpAttrs& a);

/// Batch dimensions of a shape for the shape functions: s without its last `rank` axes.
std::vector<int64_t> leading(const Shape& s, int rank);

}  // namespace loom::linalg
