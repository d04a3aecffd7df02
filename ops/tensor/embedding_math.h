// Embedding's index rule, shared by the CPU kernel (embedding.cc) and the CUDA kernel
// (embedding.cu).
#pragma once

#include <cstdint>

#include "ops/elemwise_math.h"

namespace loom::tensor {

/// The weight row of index value v, as MXNet: truncated toward zero and clipped into
/// [0, rows) (NaN and negative values give row 0).
LOOM_HD int64_t embedding_row(double v, int64_t rows) {
  return !(v > 0) ? 0 : v >= static_cast<double>(rows - 1) ? rows - 1 : static_cast<int64_t>(v);
}

}  // namespace loom::tensor
