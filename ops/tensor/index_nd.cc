// N-d index ops (MXNet 1.9.1 tensor/indexing_op.cc, tensor/ravel.cc):
//   gather_nd(data, indices)          indices (M, Y...) picks data[indices[:, y]] (M leading
//                                     axes): output Y... + data.shape[M:]; negative indices
//                                     count from the end; out of range is an IndexError.
//                                     Gradient: the head gradient scattered back (summed).
//   scatter_nd(data, indices, shape)  zeros of `shape` with out[indices[:, y]] = data[y];
//                                     gradient of data: gather_nd of the head gradient.
//   ravel_multi_index(data, shape)    (ndim, N) coordinates -> (N,) flat indices;
//   unravel_index(data, shape)        (N,) flat indices -> (ndim, N) coordinates; shape[0]
//                                     may be -1 (unbounded leading axis). Not differentiable.
// Index arrays may have any dtype (read as integers, truncating).
#include <algorithm>
#include <cstring>
#include <memory>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/index_nd_math.h"

namespace loom {
namespace {

/// The flat element offsets of the n selections (index_nd_math.h's rule), checked.
struct NdIndex {
  int64_t n = 0, block = 1;
  std::vector<int64_t> offset;  // n entries: flat element offset of each selection
};

NdIndex nd_index(const NDArray& idx, const Shape& dims, const std::string& what) {
  const tensor::NdDims d = tensor::nd_dims(idx.shape(), dims, what);
  NdIndex r;
  r.n = d.n;
  r.block = d.block;
  std::vector<int64_t> coords(static_cast<size_t>(idx.size()));
  dispatch_dtype(idx.dtype(), [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = idx.data<I>();
    for (int64_t i = 0; i < idx.size(); ++i)
      coords[static_cast<size_t>(i)] = tensor::trunc_index(convert_value<double>(p[i]));
  }, what);
  r.offset.assign(static_cast<size_t>(r.n), 0);
  for (int64_t j = 0; j < r.n; ++j) {
    const int64_t off = tensor::nd_offset(d, coords.data(), j);
    if (off < 0) {
      const int64_t k = -1 - off;
      throw Error("IndexError: " + what + ": index " +
                  std::to_string(coords[static_cast<size_t>(k * r.n + j)]) +
                  " is out of bounds for axis " + std::to_string(k) + " with size " +
                  std::to_string(d.size[k]));
    }
    r.offset[static_cast<size_t>(j)] = off;
  }
  return r;
}

void check_index_shape(const Shape& data, const Shape& idx, const char* what) {
  if (idx.ndim() < 1 || idx[0] < 1 || idx[0] > data.ndim())
    throw ShapeError(std::string(what) + ": indices of shape " + idx.str() +
                     " need a first dimension between 1 and the data's ndim (" +
                     std::to_string(data.ndim()) + ")");
}

void infer_gather_nd(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0 || in[1].ndim() == 0) return;
  check_index_shape(in[0], in[1], "gather_nd");
  std::vector<int64_t> s(in[1].dims().begin() + 1, in[1].dims().end());
  for (int d = static_cast<int>(in[1][0]); d < in[0].ndim(); ++d) s.push_back(in[0][d]);
  if (s.empty()) s.push_back(1);
  merge_shape(out[0], Shape(std::move(s)), "output 0");
}

void infer_data_type(const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
  if (in[0] != DType::kUnknown) merge_type(out[0], in[0], "output 0");
  else if (out[0] != DType::kUnknown) in[0] = out[0];
}

/// dst[offset[j] + b] (+)= src[j * block + b] (gather when kGather swaps the roles).
template <bool kGather>
class NdMoveKernel final : public Kernel {
 public:
  explicit NdMoveKernel(const KernelArgs& a)
      : t_(a.in_types[0]), what_(tensor::node_label(a)), big_(kGather ? a.in_shapes[0] : a.out_shapes[0]) {
    if (a.out_types[0] != t_)
      throw Error(what_ + ": output dtype " + dtype_name(a.out_types[0]) +
                  " differs from data dtype " + dtype_name(t_));
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const NdIndex ix = nd_index(in[1], big_, what_);
    dispatch_dtype(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      const bool add = req[0] == Req::kAdd;
      if constexpr (kGather) {
        for (int64_t j = 0; j < ix.n; ++j)
          for (int64_t b = 0; b < ix.block; ++b) {
            T& d = y[j * ix.block + b];
            const T v = x[ix.offset[static_cast<size_t>(j)] + b];
            d = add ? tensor::add_value<T>(d, v) : v;
          }
      } else {
        // scatter_nd: zeros, then assignments (a later duplicate wins), then req.
        std::unique_ptr<T[]> tmp(new T[static_cast<size_t>(out[0].size())]);
        std::fill(tmp.get(), tmp.get() + out[0].size(), convert_value<T>(0));
        for (int64_t j = 0; j < ix.n; ++j)
          for (int64_t b = 0; b < ix.block; ++b)
            tmp[static_cast<size_t>(ix.offset[static_cast<size_t>(j)] + b)] = x[j * ix.block + b];
        const T* t = tmp.get();
        tensor::write_t<T>(y, req[0], out[0].size(), [=](int64_t i) { return t[i]; });
      }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    const NdIndex ix = nd_index(in[1], big_, what_);
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g = og[0].data<T>();
      T* dx = ig[0].data<T>();
      if (req[0] != Req::kAdd) std::memset(static_cast<void*>(dx), 0, static_cast<size_t>(ig[0].nbytes()));
      for (int64_t j = 0; j < ix.n; ++j)
        for (int64_t b = 0; b < ix.block; ++b) {
          const int64_t big = ix.offset[static_cast<size_t>(j)] + b, small = j * ix.block + b;
          if constexpr (kGather) dx[big] = tensor::add_value<T>(dx[big], g[small]);
          else dx[small] = tensor::add_value<T>(dx[small], g[big]);
        }
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
  Shape big_;  // the array the indices address: gather's data, scatter's output
};

struct ScatterNdParam {
  Shape shape;
};
const auto kScatterNdSchema =
    ParamSchema<ScatterNdParam>().required("shape", &ScatterNdParam::shape, "Shape of output.");

void infer_scatter_nd(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const Shape& s = a.param<ScatterNdParam>().shape;
  merge_shape(out[0], s, "output 0");
  if (in[1].ndim() == 0) return;
  check_index_shape(s, in[1], "scatter_nd");
  std::vector<int64_t> d(in[1].dims().begin() + 1, in[1].dims().end());
  for (int k = static_cast<int>(in[1][0]); k < s.ndim(); ++k) d.push_back(s[k]);
  if (d.empty()) d.push_back(1);
  merge_shape(in[0], Shape(std::move(d)), "input 0 (data)");
}

// ---- ravel / unravel ----
using tensor::RavelParam;  // index_nd_math.h (shared with index_nd.cu)
const auto kRavelSchema = ParamSchema<RavelParam>().optional(
    "shape", &RavelParam::shape, Shape(), "Shape of the array into which the multi-indices apply.");

void infer_ravel(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const Shape& s = a.param<RavelParam>().shape;
  if (s.ndim() == 0) throw ShapeError("Empty shape parameter for ravel operator.");
  if (in[0].ndim() > 0) {
    if (in[0].ndim() != 2 || in[0][0] != s.ndim())
      throw ShapeError("input of shape " + in[0].str() + " must be 2-D with first dimension " +
                       std::to_string(s.ndim()) + " (the shape parameter's ndim)");
    merge_shape(out[0], Shape{in[0][1]}, "output 0");
  } else if (out[0].ndim() > 0) {
    merge_shape(in[0], Shape{s.ndim(), out[0][0]}, "input 0");
  }
}
void infer_unravel(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const Shape& s = a.param<RavelParam>().shape;
  if (s.ndim() == 0) throw ShapeError("Empty shape parameter for unravel operator.");
  if (in[0].ndim() > 0) {
    merge_shape(out[0], Shape{s.ndim(), in[0][0]}, "output 0");
  } else if (out[0].ndim() > 0) {
    merge_shape(in[0], Shape{out[0][1]}, "input 0");
  }
}

template <bool kRavel>
class RavelKernel final : public Kernel {
 public:
  explicit RavelKernel(const KernelArgs& a)
      : t_(a.in_types[0]), what_(tensor::node_label(a)),
        d_(tensor::ravel_dims(a.attrs.param<RavelParam>().shape, what_)) {
    if (a.out_types[0] != t_) throw Error(what_ + ": output dtype must equal the input's");
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      const int nd = d_.nd;
      const int64_t n = kRavel ? out[0].size() : in[0].size();
      std::vector<T> tmp(static_cast<size_t>(out[0].size()));
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (kRavel) {
          tmp[static_cast<size_t>(i)] =
              convert_value<T>(static_cast<double>(tensor::ravel_index(d_, x, n, i)));
        } else {
          const int64_t flat = static_cast<int64_t>(convert_value<double>(x[i]));
          for (int j = 0; j < nd; ++j)
            tmp[static_cast<size_t>(j * n + i)] =
                convert_value<T>(static_cast<double>(tensor::unravel_coord(d_, flat, j)));
        }
      }
      const T* t = tmp.data();
      tensor::write_t<T>(y, req[0], out[0].size(), [=](int64_t i) { return t[i]; });
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
  tensor::RavelDims d_;
};

[[maybe_unused]] const bool kIndexNdRegistered = [] {
  register_op("gather_nd")
      .describe("Gathers elements or slices from data into an array of shape indices.shape[1:] "
                "+ data.shape[indices.shape[0]:]; negative indices count from the end.")
      .inputs({"data", "indices"})
      .shape_fn(infer_gather_nd)
      .type_fn(infer_data_type)
      .no_grad({1})
      .deps(GradDeps{true, true, false})
      .cpu<NdMoveKernel<true>>()
      .sample({.attrs = {}, .in_shapes = {{3, 4}, {2, 5}}, .in_kinds = {"normal", "index:3"}})
      .sample({.attrs = {}, .in_shapes = {{3, 4, 2}, {1, 2, 2}}, .in_kinds = {"normal", "index:3"}});
  register_op("scatter_nd")
      .describe("Scatters data into a zero array of the given shape at indices (the inverse of "
                "gather_nd; with repeated indices one of the values is kept).")
      .params(kScatterNdSchema)
      .inputs({"data", "indices"})
      .shape_fn(infer_scatter_nd)
      .type_fn(infer_data_type)
      .no_grad({1})
      .deps(GradDeps{true, true, false})
      .cpu<NdMoveKernel<false>>()
      .sample({.attrs = {{"shape", "(5, 3)"}}, .in_shapes = {{1}, {2, 1}},
               .in_kinds = {"normal", "index:3"}})
      .sample({.attrs = {{"shape", "(4, 3)"}}, .in_shapes = {{1, 3}, {1, 1}},
               .in_kinds = {"normal", "index:4"}});
  register_op("_ravel_multi_index")
      .describe("Converts a batch of index arrays (ndim, N) into flat indices (N,) for an "
                "array of the given shape.")
      .alias("ravel_multi_index")
      .params(kRavelSchema)
      .shape_fn(infer_ravel)
      .zero_grad()
      .deps(GradDeps{false, false, false})
      .cpu<RavelKernel<true>>()
      .sample({.attrs = {{"shape", "(4, 3)"}}, .in_shapes = {{2, 5}}, .in_kinds = {"index:3"},
               .check_grad = false});
  register_op("_unravel_index")
      .describe("Converts flat indices (N,) into coordinate arrays (ndim, N) for an array of "
                "the given shape (its first dimension may be -1).")
      .alias("unravel_index")
      .params(kRavelSchema)
      .shape_fn(infer_unravel)
      .zero_grad()
      .deps(GradDeps{false, false, false})
      .cpu<RavelKernel<false>>()
      .sample({.attrs = {{"shape", "(-1, 3)"}}, .in_shapes = {{5}}, .in_kinds = {"index:12"},
               .check_grad = false});
  return true;
}();

}  // namespace
}  // namespace loom
