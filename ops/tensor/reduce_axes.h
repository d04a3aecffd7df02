// The axis/keepdims/exclude parameters of MXNet's sum-like reductions, shared by reductions
// that live outside reduce.cc (nansum/nanprod, _square_sum). Internal to ops/tensor/.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ops/infer.h"
#include "ops/tensor/tensor_util.h"

namespace loom::tensor {

struct AxesParam {
  std::optional<Shape> axis;
  bool keepdims, exclude;
};
inline ParamSchema<AxesParam> axes_schema() {
  return ParamSchema<AxesParam>()
      .optional("axis", &AxesParam::axis, std::optional<Shape>(),
                "Axes to reduce (int or tuple, negatives allowed); None or () = all.")
      .optional("keepdims", &AxesParam::keepdims, false, "Keep reduced axes with size 1.")
      .optional("exclude", &AxesParam::exclude, false,
                "Reduce over all axes except the listed ones.");
}

/// Which axes of an input of `ndim` dims the parameters reduce.
inline std::vector<bool> axes_reduced(const AxesParam& p, int ndim) {
  if (!p.axis || p.axis->ndim() == 0) return std::vector<bool>(static_cast<size_t>(ndim), true);
  std::vector<bool> listed(static_cast<size_t>(ndim), false);
  for (int64_t ax : *p.axis) {
    const int a = norm_axis(ax, ndim, "axis");
    if (listed[a]) throw ShapeError("axis " + std::to_string(ax) + " is repeated");
    listed[a] = true;
  }
  if (p.exclude) listed.flip();
  return listed;
}

/// `in` with the reduced axes set to 1 (the kernels' view of the output).
inline Shape axes_keep_shape(const AxesParam& p, const Shape& in) {
  const auto red = axes_reduced(p, in.ndim());
  Shape s = in;
  for (int d = 0; d < in.ndim(); ++d)
    if (red[d]) s[d] = 1;
  return s;
}

/// Shape rule of a reduction with these parameters (no 0-d results: () becomes (1,)).
inline void infer_axes_reduce(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  const auto& p = a.param<AxesParam>();
  const auto red = axes_reduced(p, in[0].ndim());
  Shape s;
  for (int d = 0; d < in[0].ndim(); ++d) {
    if (!red[d]) s.push_back(in[0][d]);
    else if (p.keepdims) s.push_back(1);
  }
  if (s.ndim() == 0) s.push_back(1);
  merge_shape(out[0], s, "output 0");
}

}  // namespace loom::tensor
