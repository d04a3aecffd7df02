// Parameters and index rules of take, pick, one_hot and batch_take, shared by their CPU kernels
// (take.cc, pick.cc, one_hot.cc, batch_take.cc) and the CUDA kernels (gathers.cu).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ops/op.h"
#include "ops/tensor/index_util.h"
#include "ops/tensor/tensor_util.h"

namespace loom::tensor {

struct TakeParam {
  int64_t axis;
  std::string mode;
};
struct PickParam {
  std::optional<int64_t> axis;
  bool keepdims;
  std::string mode;
};
struct OneHotParam {
  int64_t depth;
  double on_value, off_value;
  std::string dtype;
};

/// The row an index selects from n rows: truncated toward zero, then wrapped modulo n
/// (`wrap`) or clipped into [0, n).
LOOM_HD int64_t index_row(float v, int64_t n, bool wrap) {
  return wrap ? wrap_index(v, n) : clip_index(v, n);
}

/// one_hot's hot position for index v: v truncated toward zero, or −1 (a row of off_value)
/// outside [0, depth). Compared in float so NaN and huge values never reach an integer cast.
LOOM_HD int64_t one_hot_position(float v, int64_t depth) {
  return v > -1.f && v < static_cast<float>(depth) ? static_cast<int64_t>(v) : -1;
}

/// batch_take's column for index value v in a row of m: truncated toward zero (MXNet's
/// cast), then clamped into [0, m).
LOOM_HD int64_t batch_take_column(double v, int64_t m) {
  const int64_t j = static_cast<int64_t>(v);
  return j < 0 ? 0 : j > m - 1 ? m - 1 : j;
}

/// The (outer, n, inner) view of data around an axis (the flattened array without one).
struct Layout3 {
  int64_t outer, n, inner;
};
inline Layout3 pick_layout(const PickParam& p, const Shape& s, const std::string& what) {
  if (!p.axis) return {1, s.numel(), 1};
  int ax = norm_axis(*p.axis, s.ndim(), what);
  Layout3 l{1, s[ax], 1};
  for (int i = 0; i < ax; ++i) l.outer *= s[i];
  for (int i = ax + 1; i < s.ndim(); ++i) l.inner *= s[i];
  return l;
}

}  // namespace loom::tensor
