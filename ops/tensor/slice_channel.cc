// Splitting along one axis: SliceChannel (equal pieces, alias split) and slice_axis (one
// range). Both view the input as (outer, dim, inner) and move rows of `inner`-sized runs.
#include <array>
#include <optional>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/split_concat.h"

namespace loom {
namespace {

/// Moves `n` rows of `len` floats from src (row stride ss) to dst (row stride ds) with req.
template <class T>
void move_rows(const T* src, int64_t ss, T* dst, int64_t ds, int64_t n, int64_t len, Req req) {
  if (req == Req::kNull) return;
  auto one = [&](int64_t r) {
    const T* s = src + r * ss;
    T* d = dst + r * ds;
    if (req == Req::kAdd) {
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) d[j] = tensor::add_value<T>(d[j], s[j]);
    } else {
      std::memcpy(d, s, static_cast<size_t>(len) * sizeof(T));
    }
  };
  if (n * len >= tensor::kParallelMin && n > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r) one(r);
  } else {
    for (int64_t r = 0; r < n; ++r) one(r);
  }
}

using tensor::split3;
using tensor::Split3;

// ---- SliceChannel ----
using tensor::SliceChannelParam;

// Partial shapes both ways (MXNet's legacy 0 = unknown dim): a known input gives every
// output, unknown dims staying 0; known outputs give the input back (the split axis times
// num_outputs, or num_outputs reinserted with squeeze_axis).
void infer_slice_channel(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<SliceChannelParam>();
  if (in[0].ndim() > 0) {
    const int ax = tensor::norm_axis(p.axis, in[0].ndim(), "axis");
    const int64_t d = in[0][ax];
    if (d % p.num_outputs != 0)
      throw ShapeError("input 0 (data) of shape " + in[0].str() + " has " + std::to_string(d) +
                       " entries along axis " + std::to_string(p.axis) +
                       ", not divisible by num_outputs=" + std::to_string(p.num_outputs));
    auto dims = in[0].dims();
    dims[static_cast<size_t>(ax)] = d / p.num_outputs;
    if (p.squeeze_axis) {
      if (d != 0 && d != p.num_outputs)
        throw ShapeError("squeeze_axis needs pieces of size 1, but input 0 (data) of shape " +
                         in[0].str() + " splits into pieces of " + std::to_string(d / p.num_outputs));
      dims.erase(dims.begin() + ax);
      if (dims.empty()) dims.push_back(1);
    }
    for (size_t k = 0; k < out.size(); ++k)
      merge_shape(out[k], Shape(dims), "output " + std::to_string(k));
  }
  Shape o;
  for (size_t k = 0; k < out.size(); ++k) merge_shape(o, out[k], "output " + std::to_string(k));
  if (o.ndim() == 0) return;
  const int in_ndim = in[0].ndim() > 0 ? in[0].ndim() : o.ndim() + (p.squeeze_axis ? 1 : 0);
  if (p.squeeze_axis && in_ndim == 1) return;  // a (1,) piece of a 1-D input: nothing to add
  const int ax = tensor::norm_axis(p.axis, in_ndim, "axis");
  auto dims = o.dims();
  if (p.squeeze_axis) dims.insert(dims.begin() + ax, p.num_outputs);
  else dims[static_cast<size_t>(ax)] *= p.num_outputs;
  merge_shape(in[0], Shape(dims), "input 0 (data)");
}

class SliceChannelKernel final : public Kernel {
 public:
  explicit SliceChannelKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kNumericDTypes | tensor::dtype_bit(DType::kBool))),
        what_(tensor::node_label(a)) {
    const auto& p = a.attrs.param<SliceChannelParam>();
    s_ = split3(a.in_shapes[0], tensor::norm_axis(p.axis, a.in_shapes[0].ndim(), "axis"));
    piece_ = s_.dim / p.num_outputs * s_.inner;
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    dispatch_dtype(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      for (size_t k = 0; k < out.size(); ++k)
        if (req[k] != Req::kNull)
          move_rows(x + static_cast<int64_t>(k) * piece_, s_.dim * s_.inner, out[k].data<T>(),
                    piece_, s_.outer, piece_, req[k]);
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* dx = ig[0].data<T>();
      for (size_t k = 0; k < og.size(); ++k) {
        T* dst = dx + static_cast<int64_t>(k) * piece_;
        if (og[k].is_none()) {  // an unused output contributes nothing
          if (req[0] != Req::kAdd)
            for (int64_t r = 0; r < s_.outer; ++r)
              std::memset(static_cast<void*>(dst + r * s_.dim * s_.inner), 0,
                          static_cast<size_t>(piece_) * sizeof(T));
          continue;
        }
        move_rows(og[k].data<T>(), piece_, dst, s_.dim * s_.inner, s_.outer, piece_, req[0]);
      }
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
  Split3 s_;
  int64_t piece_ = 0;
};

LOOM_REGISTER_OP("SliceChannel")
    .describe("Splits the input into num_outputs equal pieces along axis.")
    .alias("split")
    .params(tensor::slice_channel_schema())
    .outputs([](const OpAttrs& a) {
      std::vector<std::string> v;
      for (int i = 0; i < a.param<SliceChannelParam>().num_outputs; ++i)
        v.push_back("output" + std::to_string(i));
      return v;
    })
    .shape_fn(infer_slice_channel)
    .deps(GradDeps{true, false, false})
    .cpu<SliceChannelKernel>()
    .sample({.attrs = {{"num_outputs", "2"}}, .in_shapes = {{2, 4, 3}}})
    .sample({.attrs = {{"num_outputs", "3"}, {"axis", "-1"}, {"squeeze_axis", "True"}},
             .in_shapes = {{2, 3}}});

// ---- slice_axis ----
using tensor::slice_range;
using tensor::SliceAxisParam;

// Partial input: the other axes pass through (0 = unknown stays 0); an unknown sliced axis
// leaves its output size unknown.
void infer_slice_axis(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  const auto& p = a.param<SliceAxisParam>();
  Shape o = in[0];
  const int ax = tensor::norm_axis(p.axis, in[0].ndim(), "axis");
  if (in[0][ax] == 0) {
    o[ax] = 0;
  } else {
    auto [ax2, b, e] = slice_range(p, in[0]);
    o[static_cast<int>(ax2)] = e - b;
  }
  merge_shape(out[0], o, "output 0");
}

class SliceAxisKernel final : public Kernel {
 public:
  explicit SliceAxisKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kNumericDTypes | tensor::dtype_bit(DType::kBool))),
        what_(tensor::node_label(a)) {
    auto [ax, b, e] = slice_range(a.attrs.param<SliceAxisParam>(), a.in_shapes[0]);
    s_ = split3(a.in_shapes[0], static_cast<int>(ax));
    begin_ = b * s_.inner;
    len_ = (e - b) * s_.inner;
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    dispatch_dtype(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      move_rows(in[0].data<T>() + begin_, s_.dim * s_.inner, out[0].data<T>(), len_, s_.outer,
                len_, req[0]);
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (req[0] != Req::kAdd) ig[0].zero();  // outside the slice the gradient is zero
      move_rows(og[0].data<T>(), len_, ig[0].data<T>() + begin_, s_.dim * s_.inner, s_.outer,
                len_, req[0]);
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
  Split3 s_;
  int64_t begin_ = 0, len_ = 0;
};

LOOM_REGISTER_OP("slice_axis")
    .describe("Takes entries [begin, end) along one axis.")
    .params(tensor::slice_axis_schema())
    .shape_fn(infer_slice_axis)
    .deps(GradDeps{true, false, false})
    .cpu<SliceAxisKernel>()
    .sample({.attrs = {{"axis", "1"}, {"begin", "1"}, {"end", "3"}}, .in_shapes = {{2, 4, 3}}})
    .sample({.attrs = {{"axis", "-1"}, {"begin", "-2"}, {"end", "None"}}, .in_shapes = {{3, 5}}});

}  // namespace
}  // namespace loom
