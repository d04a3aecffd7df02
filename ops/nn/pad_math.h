// Pad's parameters and index rule, shared by the CPU kernel (pad.cc) and the CUDA kernel
// (pad.cu): which input element each output element copies.
#pragma once

#include <cstdint>
#include <string>

#include "ops/elemwise_math.h"
#include "runtime/base.h"

namespace loom::nn {

struct PadParam {
  std::string mode;
  Shape pad_width;
  double constant_value;
};

enum PadMode : int { kPadConstant, kPadEdge, kPadReflect };

inline PadMode pad_mode(const std::string& m) {
  return m == "constant" ? kPadConstant : m == "edge" ? kPadEdge : kPadReflect;
}

/// The input index along an axis of length n that output index o copies, with `before`
/// padding in front; −1 for the constant fill.
LOOM_HD int64_t pad_source_index(int64_t o, int64_t n, int64_t before, int mode) {
  int64_t i = o - before;
  if (i < 0 || i >= n) {
    if (mode == kPadConstant) i = -1;
    else if (mode == kPadEdge) i = i < 0 ? 0 : n - 1;
    else i = i < 0 ? -i : 2 * (n - 1) - i;  // reflect
  }
  return i;
}

/// The whole array's rule as plain numbers (usable on the device).
struct PadView {
  static constexpr int kMaxDims = 5;  // Pad takes 4-D and 5-D arrays
  int nd = 0, mode = kPadConstant;
  int64_t in[kMaxDims] = {}, out[kMaxDims] = {}, before[kMaxDims] = {}, stride[kMaxDims] = {};
  /// The flat input element output o copies, or −1 for the fill.
  LOOM_HD int64_t source(int64_t o) const {
    int64_t k = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const int64_t i = pad_source_index(o % out[d], in[d], before[d], mode);
      o /= out[d];
      if (i < 0) return -1;
      k += i * stride[d];
    }
    return k;
  }
};

inline PadView pad_view(const PadParam& p, const Shape& in, const Shape& out) {
  PadView v;
  v.nd = in.ndim();
  v.mode = pad_mode(p.mode);
  int64_t st = 1;
  for (int d = v.nd - 1; d >= 0; --d) {
    v.in[d] = in[d];
    v.out[d] = out[d];
    v.before[d] = p.pad_width[2 * d];
    v.stride[d] = st;
    st *= in[d];
  }
  return v;
}

}  // namespace loom::nn
