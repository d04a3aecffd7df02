// The table of _loom_bucket's multi-tensor GPU kernel (bucket.cu), as host code the CPU tests
// check: the tensors' element ranges in the concatenation of the bucket (prefix offsets) and
// the lookup of the tensor that owns a concatenated element index, which every GPU thread
// runs. The per-tensor entries (operand pointers, per-tensor steps and scalars) are built by
// bucket.cu from these offsets. No OpenMP and no CUDA headers: .cu and .cc files include it.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/elemwise_math.h"  // LOOM_HD

namespace loom::update {

/// Prefix offsets of tensors with `sizes` elements: n + 1 values, offsets[i] the first element
/// of tensor i in the concatenation, offsets[n] the total. Empty tensors get empty ranges.
/// Throws std::invalid_argument for a negative size.
inline std::vector<int64_t> bucket_offsets(std::span<const int64_t> sizes) {
  std::vector<int64_t> off(sizes.size() + 1, 0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] < 0)
      throw std::invalid_argument("bucket tensor " + std::to_string(i) + " has a negative size (" +
                                  std::to_string(sizes[i]) + ")");
    off[i + 1] = off[i] + sizes[i];
  }
  return off;
}

/// The tensor that holds element e of the concatenation: the last t < n with off[t] <= e
/// (binary search over the n + 1 prefix offsets; empty tensors are never returned for
/// 0 <= e < off[n]). Requires n >= 1 and off[0] == 0 <= e.
LOOM_HD int64_t bucket_find(const int64_t* off, int64_t n, int64_t e) {
  int64_t lo = 0, hi = n;  // off[lo] <= e; the answer is in [lo, hi)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (off[mid] <= e) lo = mid;
    else hi = mid;
  }
  return lo;
}

}  // namespace loom::update
