// slice(begin, end, step): NumPy basic slicing per axis (None entries take the defaults,
// negative indices count from the end, a negative step walks backwards); axes past the
// given tuples are kept whole; slice_like(data, shape_like, axes) cuts data to another
// array's sizes. The gradient scatters into the sliced positions.
#include "ops/infer.h"
#include "ops/tensor/index_map.h"

namespace loom {
namespace {

struct SliceParam {
  std::string begin, end, step;
};
const auto kSliceSchema =
    ParamSchema<SliceParam>()
        .required("begin", &SliceParam::begin, "Start per axis (entries may be None).")
        .required("end", &SliceParam::end, "End per axis, exclusive (entries may be None).")
        .optional("step", &SliceParam::step, std::string("()"), "Step per axis (None: 1).");

struct Range {
  int64_t begin, step, size;
};

std::vector<Range> ranges_of(const OpAttrs& a, const Shape& s) {
  const auto& p = a.param<SliceParam>();
  auto b = parse_optional_tuple(p.begin), e = parse_optional_tuple(p.end),
       st = parse_optional_tuple(p.step);
  const std::string who = "node '" + a.name + "' (op slice): ";
  if (b.size() != e.size()) throw ShapeError(who + "begin " + p.begin + " and end " + p.end + " differ in length");
  if (!st.empty() && st.size() != b.size())
    throw ShapeError(who + "step " + p.step + " and begin " + p.begin + " differ in length");
  if (static_cast<int>(b.size()) > s.ndim())
    throw ShapeError(who + "begin " + p.begin + " has more entries than input 0 " + s.str() + " has axes");
  std::vector<Range> r;
  for (int d = 0; d < s.ndim(); ++d) {
    const int64_t n = s[d];
    if (d >= static_cast<int>(b.size())) {
      r.push_back({0, 1, n});
      continue;
    }
    const int64_t step = st.empty() || !st[d] ? 1 : *st[d];
    if (step == 0) throw ShapeError(who + "step cannot be 0");
    int64_t lo, hi;
    if (step > 0) {
      lo = b[d].value_or(0), hi = e[d].value_or(n);
      if (lo < 0) lo += n;
      if (hi < 0) hi += n;
      lo = std::clamp<int64_t>(lo, 0, n), hi = std::clamp<int64_t>(hi, 0, n);
    } else {
      lo = b[d].value_or(n - 1), hi = e[d] ? *e[d] : -1;
      if (lo < 0) lo += n;
      if (e[d] && hi < 0) hi += n;
      lo = std::clamp<int64_t>(lo, -1, n - 1), hi = std::clamp<int64_t>(hi, -1, n - 1);
    }
    const int64_t len = step > 0 ? (hi - lo + step - 1) / step : (lo - hi + (-step) - 1) / (-step);
    if (len <= 0)
      throw ShapeError(who + "axis " + std::to_string(d) + " of input 0 " + s.str() +
                       " sliced with begin " + p.begin + ", end " + p.end + " is empty");
    r.push_back({lo, step, len});
  }
  return r;
}

// Axes are sliced independently, so with a partial input (0 = unknown dim) the known axes
// still give their sizes and the unknown ones stay 0 (MXNet's infer_shape_partial).
void infer_slice(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  Shape probe = in[0];
  for (auto& d : probe.dims())
    if (d == 0) d = int64_t{1} << 40;  // stands for "any size"; its result is dropped below
  Shape o = in[0];
  auto r = ranges_of(a, probe);
  for (int d = 0; d < o.ndim(); ++d) o[d] = in[0][d] == 0 ? 0 : r[static_cast<size_t>(d)].size;
  merge_shape(out[0], o, "output 0");
}

std::unique_ptr<Kernel> make_slice(const KernelArgs& a) {
  const Shape& s = a.in_shapes[0];
  auto r = ranges_of(a.attrs, s);
  Shape o = s;
  tensor::IndexMap m(s, Shape());
  for (int d = 0; d < s.ndim(); ++d) {
    o[d] = r[static_cast<size_t>(d)].size;
    m.dims.push_back({.src = d, .begin = r[static_cast<size_t>(d)].begin, .step = r[static_cast<size_t>(d)].step});
  }
  m.out = o;
  return std::make_unique<tensor::IndexMapKernel>(a, std::move(m));
}

LOOM_REGISTER_OP("slice")
    .describe("Slices the input per axis with begin, end and step (NumPy basic slicing).")
    .alias("crop")
    .params(kSliceSchema)
    .shape_fn(infer_slice)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .kernel(DeviceType::kCPU, make_slice)
    .sample({.attrs = {{"begin", "(0, 1)"}, {"end", "(2, 3)"}}, .in_shapes = {{3, 4}}})
    .sample({.attrs = {{"begin", "(None, -3)"}, {"end", "(None, None)"}, {"step", "(2, 1)"}},
             .in_shapes = {{5, 4, 2}}})
    .sample({.attrs = {{"begin", "(None,)"}, {"end", "(None,)"}, {"step", "(-2,)"}}, .in_shapes = {{5, 3}}})
    .sample({.attrs = {{"begin", "(3,)"}, {"end", "(0,)"}, {"step", "(-1,)"}}, .in_shapes = {{4, 2}}});

// ---- slice_like ----
// The second input only lends its shape: any dtype (MXNet's *_like ops take an int32 rhs
// with a float lhs); the output has the first input's dtype.
void infer_slice_like_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  merge_type(out[0], in[0], "output 0");
  merge_type(in[0], out[0], input_label(a, 0));
}

struct SliceLikeParam {
  Shape axes;
};
const auto kSliceLikeSchema = ParamSchema<SliceLikeParam>().optional(
    "axes", &SliceLikeParam::axes, Shape(), "Axes to slice (() : all of shape_like's axes).");

// data's shape with the chosen axes cut to shape_like's sizes (slices start at 0).
Shape slice_like_shape(const OpAttrs& a, const Shape& d, const Shape& like) {
  const std::string who = "node '" + a.name + "' (op slice_like): ";
  const Shape& axes = a.param<SliceLikeParam>().axes;
  Shape o = d;
  auto cut = [&](int ax) {
    if (ax >= like.ndim() || like[ax] > d[ax])
      throw ShapeError(who + "cannot slice axis " + std::to_string(ax) + " of data " + d.str() +
                       " like " + like.str());
    o[ax] = like[ax];
  };
  if (axes.ndim() == 0) {
    if (like.ndim() != d.ndim())
      throw ShapeError(who + "data " + d.str() + " and shape_like " + like.str() + " differ in rank");
    for (int ax = 0; ax < d.ndim(); ++ax) cut(ax);
  } else {
    for (auto v : axes) cut(tensor::norm_axis(v, d.ndim(), who + "axis"));
  }
  return o;
}

std::unique_ptr<Kernel> make_slice_like(const KernelArgs& a) {
  const Shape& s = a.in_shapes[0];
  tensor::IndexMap m(s, slice_like_shape(a.attrs, s, a.in_shapes[1]));
  for (int d = 0; d < s.ndim(); ++d) m.dims.push_back({.src = d});
  return std::make_unique<tensor::IndexMapKernel>(a, std::move(m));
}

LOOM_REGISTER_OP("slice_like")
    .describe("Slices data from the start to the shape of shape_like along the given axes.")
    .params(kSliceLikeSchema)
    .inputs({"data", "shape_like"})
    .type_fn(infer_slice_like_type)
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      if (!in[0].known() || !in[1].known()) return;
      merge_shape(out[0], slice_like_shape(a, in[0], in[1]), "output 0");
    })
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .kernel(DeviceType::kCPU, make_slice_like)
    .sample({.attrs = {{"axes", "(0, 1)"}}, .in_shapes = {{3, 4, 5}, {2, 3}}})
    .sample({.attrs = {}, .in_shapes = {{3, 4}, {2, 3}}})
    .sample({.attrs = {{"axes", "(-1,)"}}, .in_shapes = {{3, 4}, {2, 3}}});

}  // namespace
}  // namespace loom
