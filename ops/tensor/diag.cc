// diag(k, axis1, axis2): for a 1-D input, the square matrix with the input on the k-th diagonal;
// otherwise the k-th diagonal of the (axis1, axis2) sub-arrays, as a last axis after the
// remaining ones (MXNet 1.9.1). The gradient puts the head gradient back on the diagonal.
#include <algorithm>

#include "ops/infer.h"
#include "ops/tensor/gather_kernel.h"

namespace loom {
namespace {

struct DiagParam {
  int64_t k, axis1, axis2;
};
const auto kDiagSchema =
    ParamSchema<DiagParam>()
        .optional("k", &DiagParam::k, int64_t{0},
                  "Which diagonal: 0 the main one, > 0 above it, < 0 below it.")
        .optional("axis1", &DiagParam::axis1, int64_t{0},
                  "The first axis of the sub-arrays (ignored for 1-D input).")
        .optional("axis2", &DiagParam::axis2, int64_t{1},
                  "The second axis of the sub-arrays (ignored for 1-D input).");

struct DiagGeom {
  Shape out;
  int x1 = 0, x2 = 0;  // the axes (as given: x1 indexes rows)
  int64_t len = 0;     // diagonal length (nd >= 2)
};

DiagGeom diag_geom(const OpAttrs& a, const Shape& s) {
  const auto& p = a.param<DiagParam>();
  const std::string what = "node '" + a.name + "' (op diag)";
  DiagGeom g;
  if (s.ndim() == 1) {
    const int64_t n = dim_add(s[0], p.k < 0 ? -p.k : p.k, "diag output size");
    g.out = Shape{n, n};
    return g;
  }
  g.x1 = tensor::norm_axis(p.axis1, s.ndim(), what + ": axis1");
  g.x2 = tensor::norm_axis(p.axis2, s.ndim(), what + ": axis2");
  if (g.x1 == g.x2)
    throw ParamError(what + ": axis1 and axis2 both refer to axis " + std::to_string(g.x1));
  int64_t h = s[g.x1], w = s[g.x2];
  if (p.k > 0) w -= p.k;
  if (p.k < 0) h += p.k;
  g.len = std::min(h, w);
  if (g.len <= 0)
    throw ParamError(what + ": diagonal k=" + std::to_string(p.k) +
                     " does not exist in an input of shape " + s.str());
  std::vector<int64_t> o;
  for (int d = 0; d < s.ndim(); ++d)
    if (d != g.x1 && d != g.x2) o.push_back(s[d]);
  o.push_back(g.len);
  g.out = Shape(std::move(o));
  return g;
}

void infer_diag(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  merge_shape(out[0], diag_geom(a, in[0]).out, "output 0");
}

std::unique_ptr<Kernel> make_diag(const KernelArgs& a) {
  const Shape& s = a.in_shapes[0];
  const int64_t k = a.attrs.param<DiagParam>().k;
  const DiagGeom g = diag_geom(a.attrs, s);
  std::vector<int64_t> src(static_cast<size_t>(g.out.numel()), -1);
  if (s.ndim() == 1) {
    const int64_t n = g.out[0];
    for (int64_t t = 0; t < s[0]; ++t) {
      const int64_t r = t + (k < 0 ? -k : 0), c = t + (k > 0 ? k : 0);
      src[static_cast<size_t>(r * n + c)] = t;
    }
    return std::make_unique<tensor::GatherKernel>(a, std::move(src));
  }
  std::vector<int64_t> stride(static_cast<size_t>(s.ndim()), 1);
  for (int d = s.ndim() - 2; d >= 0; --d)
    stride[static_cast<size_t>(d)] = stride[static_cast<size_t>(d) + 1] * s[d + 1];
  std::vector<int> rest;
  for (int d = 0; d < s.ndim(); ++d)
    if (d != g.x1 && d != g.x2) rest.push_back(d);
  const int64_t r0 = k < 0 ? -k : 0, c0 = k > 0 ? k : 0;
  for (int64_t o = 0; o < g.out.numel(); ++o) {
    int64_t rem = o;
    const int64_t t = rem % g.len;
    rem /= g.len;
    int64_t base = 0;
    for (int i = static_cast<int>(rest.size()) - 1; i >= 0; --i) {
      const int d = rest[static_cast<size_t>(i)];
      base += (rem % s[d]) * stride[static_cast<size_t>(d)];
      rem /= s[d];
    }
    src[static_cast<size_t>(o)] = base + (t + r0) * stride[static_cast<size_t>(g.x1)] +
                                  (t + c0) * stride[static_cast<size_t>(g.x2)];
  }
  return std::make_unique<tensor::GatherKernel>(a, std::move(src));
}

LOOM_REGISTER_OP("diag")
    .describe("Extracts a diagonal, or builds a diagonal matrix from a 1-D array.")
    .params(kDiagSchema)
    .shape_fn(infer_diag)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .kernel(DeviceType::kCPU, make_diag)
    .sample({.attrs = {}, .in_shapes = {{3, 4}}})
    .sample({.attrs = {{"k", "1"}}, .in_shapes = {{3, 4}}})
    .sample({.attrs = {{"k", "-2"}}, .in_shapes = {{4}}})
    .sample({.attrs = {{"k", "1"}, {"axis1", "2"}, {"axis2", "0"}}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"k", "-1"}, {"axis1", "-1"}, {"axis2", "1"}}, .in_shapes = {{2, 3, 4}}});

}  // namespace
}  // namespace loom
