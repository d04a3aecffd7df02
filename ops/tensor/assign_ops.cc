// Assignment into part of an array (MXNet 1.9.1 tensor/matrix_op.cc, ndarray.cc):
//   _slice_assign(lhs, rhs, begin, end, step)        (alias _crop_assign): lhs with the
//       slice (NumPy basic slicing, as `slice`) replaced by rhs;
//   _slice_assign_scalar(data, scalar, begin, ...)   (alias _crop_assign_scalar): the slice
//       set to scalar;
//   fill_element_0index(lhs, mhs, rhs): lhs (N, M) with lhs[i, rhs[i]] = mhs[i].
// MXNet registers no gradient for these; Loom's routes the head gradient to whichever
// input supplied each output element (the replaced part of lhs gets zero).
// choose_element_0index is MXNet's alias of pick (registered here, beside its sibling).
#include <algorithm>
#include <array>
#include <cstring>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/index_map.h"
#include "ops/tensor/index_nd_math.h"

namespace loom {
namespace {

struct SliceAssignParam {
  std::string begin, end, step;
  double scalar = 0;
};
ParamSchema<SliceAssignParam> slice_assign_schema(bool scalar) {
  ParamSchema<SliceAssignParam> s;
  if (scalar)
    s.optional("scalar", &SliceAssignParam::scalar, 0.0, "The scalar value for assignment.");
  s.required("begin", &SliceAssignParam::begin, "Start per axis (entries may be None).")
      .required("end", &SliceAssignParam::end, "End per axis, exclusive (entries may be None).")
      .optional("step", &SliceAssignParam::step, std::string("()"), "Step per axis (None: 1).");
  return s;
}
const auto kSliceAssignSchema = slice_assign_schema(false);
const auto kSliceAssignScalarSchema = slice_assign_schema(true);

/// Per axis (begin, step, size) of the slice of `s`, with NumPy's rules (as op slice).
std::vector<std::array<int64_t, 3>> slice_ranges(const OpAttrs& a, const Shape& s) {
  const auto& p = a.param<SliceAssignParam>();
  const auto b = parse_optional_tuple(p.begin), e = parse_optional_tuple(p.end),
             st = parse_optional_tuple(p.step);
  const std::string who = "node '" + a.name + "' (op " + a.op->name + "): ";
  if (b.size() != e.size())
    throw ShapeError(who + "begin " + p.begin + " and end " + p.end + " differ in length");
  if (!st.empty() && st.size() != b.size())
    throw ShapeError(who + "step " + p.step + " and begin " + p.begin + " differ in length");
  if (static_cast<int>(b.size()) > s.ndim())
    throw ShapeError(who + "begin " + p.begin + " has more entries than input 0 " + s.str() +
                     " has axes");
  std::vector<std::array<int64_t, 3>> r;
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
    const int64_t len =
        step > 0 ? (hi - lo + step - 1) / step : (lo - hi + (-step) - 1) / (-step);
    if (len <= 0)
      throw ShapeError(who + "axis " + std::to_string(d) + " of input 0 " + s.str() +
                       " sliced with begin " + p.begin + ", end " + p.end + " is empty");
    r.push_back({lo, step, len});
  }
  return r;
}

Shape slice_shape(const OpAttrs& a, const Shape& s) {
  Shape o = s;
  const auto r = slice_ranges(a, s);
  for (int d = 0; d < s.ndim(); ++d) o[d] = r[static_cast<size_t>(d)][2];
  return o;
}

void infer_slice_assign(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim()) merge_shape(out[0], in[0], "output 0");
  else if (out[0].ndim()) merge_shape(in[0], out[0], "input 0 (lhs)");
  if (in[0].ndim() && in.size() > 1) merge_shape(in[1], slice_shape(a, in[0]), "input 1 (rhs)");
}

/// Output = input 0 with the slice's elements replaced by input 1 (or the scalar). The slice
/// is an IndexMap over lhs (slice_assign_map), whose per-element rule IndexMapView::source
/// the GPU kernel (creation.cu) runs too.
class SliceAssignKernel final : public Kernel {
 public:
  explicit SliceAssignKernel(const KernelArgs& a)
      : view_(tensor::index_map_view(tensor::slice_assign_map(a.attrs, a.in_shapes[0]),
                                     tensor::node_label(a))),
        n_(slice_shape(a.attrs, a.in_shapes[0]).numel()),
        scalar_(a.in_shapes.size() == 1),
        value_(a.attrs.param<SliceAssignParam>().scalar),
        t_(tensor::check_dtypes(a, tensor::kNumericDTypes)),
        what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      if (req[0] == Req::kAdd) {
        std::vector<T> tmp(x, x + in[0].size());
        fill(tmp.data(), in);
        const T* t = tmp.data();
        tensor::write_t<T>(y, req[0], in[0].size(), [=](int64_t i) { return t[i]; });
        return;
      }
      if (y != x) std::memcpy(static_cast<void*>(y), x, static_cast<size_t>(in[0].nbytes()));
      fill(y, in);
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g = og[0].data<T>();
      if (req[0] != Req::kNull) {
        std::vector<T> tmp(g, g + og[0].size());
        for (int64_t k = 0; k < n_; ++k) tmp[static_cast<size_t>(view_.source(k))] = convert_value<T>(0);
        const T* t = tmp.data();
        tensor::write_t<T>(ig[0].data<T>(), req[0], og[0].size(), [=](int64_t i) { return t[i]; });
      }
      if (!scalar_ && req[1] != Req::kNull) {
        const tensor::IndexMapView v = view_;
        tensor::write_t<T>(ig[1].data<T>(), req[1], n_, [=](int64_t k) { return g[v.source(k)]; });
      }
    }, what_);
  }

 private:
  template <class T>
  void fill(T* y, std::span<const NDArray> in) const {
    if (scalar_) {
      const T v = convert_value<T>(value_);
      for (int64_t k = 0; k < n_; ++k) y[view_.source(k)] = v;
    } else {
      const T* r = in[1].data<T>();
      for (int64_t k = 0; k < n_; ++k) y[view_.source(k)] = r[k];
    }
  }

  tensor::IndexMapView view_;
  int64_t n_;
  bool scalar_;
  double value_;
  DType t_;
  std::string what_;
};

// ---- fill_element_0index ----
void infer_fill_element(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  if (in[0].ndim() != 2)
    throw ShapeError("input 0 (lhs) must be 2-D, got " + in[0].str());
  merge_shape(out[0], in[0], "output 0");
  merge_shape(in[1], Shape{in[0][0]}, "input 1 (mhs)");
  merge_shape(in[2], Shape{in[0][0]}, "input 2 (rhs)");
}

class FillElementKernel final : public Kernel {
 public:
  explicit FillElementKernel(const KernelArgs& a)
      : rows_(a.in_shapes[0][0]), cols_(a.in_shapes[0][1]),
        t_(tensor::check_dtypes(a, tensor::kNumericDTypes)), what_(tensor::node_label(a)) {}
  std::vector<int64_t> positions(const NDArray& idx) const {
    std::vector<int64_t> pos(static_cast<size_t>(rows_));
    dispatch_dtype(idx.dtype(), [&](auto tag) {
      using I = typename decltype(tag)::type;
      const I* p = idx.data<I>();
      for (int64_t i = 0; i < rows_; ++i) {
        // The GPU kernel's rule too (index_nd_math.h).
        const double v = convert_value<double>(p[i]);
        const int64_t c = tensor::checked_position(v, cols_);
        if (c < 0)
          throw Error(what_ + ": index " + std::to_string(tensor::trunc_index(v)) + " in row " +
                      std::to_string(i) + " is out of range [0, " + std::to_string(cols_) + ")");
        pos[static_cast<size_t>(i)] = i * cols_ + c;
      }
    }, what_);
    return pos;
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const auto pos = positions(in[2]);
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *x = in[0].data<T>(), *m = in[1].data<T>();
      std::vector<T> tmp(x, x + in[0].size());
      for (int64_t i = 0; i < rows_; ++i) tmp[static_cast<size_t>(pos[static_cast<size_t>(i)])] = m[i];
      const T* t = tmp.data();
      tensor::write_t<T>(out[0].data<T>(), req[0], in[0].size(), [=](int64_t i) { return t[i]; });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    const auto pos = positions(in[2]);
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g = og[0].data<T>();
      if (req[0] != Req::kNull) {
        std::vector<T> tmp(g, g + og[0].size());
        for (int64_t p : pos) tmp[static_cast<size_t>(p)] = convert_value<T>(0);
        const T* t = tmp.data();
        tensor::write_t<T>(ig[0].data<T>(), req[0], og[0].size(), [=](int64_t i) { return t[i]; });
      }
      if (req[1] != Req::kNull) {
        const int64_t* p = pos.data();
        tensor::write_t<T>(ig[1].data<T>(), req[1], rows_, [=](int64_t i) { return g[p[i]]; });
      }
    }, what_);
  }

 private:
  int64_t rows_, cols_;
  DType t_;
  std::string what_;
};

}  // namespace

tensor::IndexMap tensor::slice_assign_map(const OpAttrs& a, const Shape& lhs) {
  const auto r = slice_ranges(a, lhs);
  IndexMap m(lhs, slice_shape(a, lhs));
  for (int d = 0; d < lhs.ndim(); ++d)
    m.dims.push_back({.src = d, .begin = r[static_cast<size_t>(d)][0], .step = r[static_cast<size_t>(d)][1]});
  return m;
}

double tensor::slice_assign_scalar(const OpAttrs& a) { return a.param<SliceAssignParam>().scalar; }

namespace {

[[maybe_unused]] const bool kAssignOpsRegistered = [] {
  register_op("_slice_assign")
      .describe("Assigns rhs to a slice of lhs (begin, end, step as slice): returns lhs with "
                "that part replaced.")
      .alias("_crop_assign")
      .params(kSliceAssignSchema)
      .inputs({"lhs", "rhs"})
      .shape_fn(infer_slice_assign)
      .deps(GradDeps{true, false, false})
      .inplace_pairs({{0, 0}})
      .cpu<SliceAssignKernel>()
      .sample({.attrs = {{"begin", "(0, 1)"}, {"end", "(2, 3)"}}, .in_shapes = {{3, 4}, {2, 2}}})
      .sample({.attrs = {{"begin", "(None, -1)"}, {"end", "(None, 0)"}, {"step", "(2, -1)"}},
               .in_shapes = {{5, 4}, {3, 3}}});
  register_op("_slice_assign_scalar")
      .describe("Sets a slice of data (begin, end, step as slice) to scalar.")
      .alias("_crop_assign_scalar")
      .params(kSliceAssignScalarSchema)
      .shape_fn(infer_slice_assign)
      .deps(GradDeps{true, false, false})
      .inplace_pairs({{0, 0}})
      .cpu<SliceAssignKernel>()
      .sample({.attrs = {{"scalar", "2.5"}, {"begin", "(1,)"}, {"end", "(3,)"}},
               .in_shapes = {{4, 3}}});
  register_op("fill_element_0index")
      .describe("lhs (N, M) with lhs[i, rhs[i]] = mhs[i] for every row i.")
      .inputs({"lhs", "mhs", "rhs"})
      .shape_fn(infer_fill_element)
      .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
        if (in[0] == DType::kUnknown) return;
        merge_type(out[0], in[0], "output 0");
        merge_type(in[1], in[0], "input 1 (mhs)");
      })
      .no_grad({2})
      .deps(GradDeps{true, true, false})
      .cpu<FillElementKernel>()
      .sample({.attrs = {}, .in_shapes = {{3, 4}, {3}, {3}}, .in_kinds = {"normal", "normal", "index:4"}});
  register_op("pick").alias("choose_element_0index");
  return true;
}();

}  // namespace
}  // namespace loom
