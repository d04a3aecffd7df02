// Concat: joins num_args arrays along `dim`.
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/split_concat.h"

namespace loom {
namespace {

using tensor::ConcatParam;

void infer_concat(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<ConcatParam>();
  int nd = out[0].ndim();
  for (const auto& s : in) nd = std::max(nd, s.ndim());
  if (nd == 0) return;
  const int ax = tensor::norm_axis(p.dim, nd, "dim");
  // All inputs agree with each other and the output except along `ax` (0 = unknown there).
  Shape common;
  auto masked = [&](Shape s) {
    if (s.ndim() != 0 && s.ndim() != nd) return s;  // let merge_shape report the rank mismatch
    if (s.ndim() != 0) s[ax] = 0;
    return s;
  };
  for (size_t i = 0; i < in.size(); ++i) {
    try {
      merge_shape(common, masked(in[i]), input_label(a, i));
    } catch (const ShapeError&) {
      throw ShapeError(input_label(a, i) + " has shape " + in[i].str() +
                       ", which does not match the other inputs outside dim " + std::to_string(ax));
    }
  }
  merge_shape(common, masked(out[0]), "output 0");
  if (common.ndim() == 0) return;
  int64_t total = 0, unknown = -1, n_unknown = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t d = in[i].ndim() ? in[i][ax] : 0;
    Shape s = common;
    s[ax] = d;
    in[i] = s;
    if (d == 0) {
      ++n_unknown;
      unknown = static_cast<int64_t>(i);
    }
    total += d;
  }
  Shape o = common;
  if (n_unknown == 0) {
    o[ax] = total;
  } else if (n_unknown == 1 && out[0].ndim() == nd && out[0][ax] > total) {
    in[static_cast<size_t>(unknown)][ax] = out[0][ax] - total;  // infer the missing input
    o[ax] = out[0][ax];
  } else {
    o[ax] = out[0].ndim() == nd ? out[0][ax] : 0;
  }
  merge_shape(out[0], o, "output 0");
}

std::vector<std::string> arg_names(const OpAttrs& a) {
  std::vector<std::string> v;
  for (int i = 0; i < a.param<ConcatParam>().num_args; ++i) v.push_back("arg" + std::to_string(i));
  return v;
}

class ConcatKernel final : public Kernel {
 public:
  explicit ConcatKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kNumericDTypes | tensor::dtype_bit(DType::kBool))),
        what_(tensor::node_label(a)) {
    const tensor::ConcatRows r = tensor::concat_rows(a);
    outer_ = r.outer;
    row_ = r.row;
    chunk_ = r.chunk;
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    dispatch_dtype(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* y = out[0].data<T>();
      int64_t at = 0;
      for (size_t k = 0; k < in.size(); ++k) {
        move(in[k].data<T>(), y + at, chunk_[k], req[0], true);
        at += chunk_[k];
      }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g = og[0].data<T>();
      int64_t at = 0;
      for (size_t k = 0; k < ig.size(); ++k) {
        if (req[k] != Req::kNull) move(g + at, ig[k].data<T>(), chunk_[k], req[k], false);
        at += chunk_[k];
      }
    }, what_);
  }

 private:
  // Copies rows of `chunk` elements between a piece (stride chunk) and the whole (stride row_).
  template <class T>
  void move(const T* src, T* dst, int64_t chunk, Req req, bool to_whole) const {
    const int64_t row = row_;
    auto one = [&](int64_t r) {
      const T* s = src + r * (to_whole ? chunk : row);
      T* d = dst + r * (to_whole ? row : chunk);
      if (req == Req::kAdd) {
#pragma omp simd
        for (int64_t j = 0; j < chunk; ++j) d[j] = tensor::add_value<T>(d[j], s[j]);
      } else {
        std::memcpy(d, s, static_cast<size_t>(chunk) * sizeof(T));
      }
    };
    if (outer_ * chunk >= tensor::kParallelMin && outer_ > 1) {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < outer_; ++r) one(r);
    } else {
      for (int64_t r = 0; r < outer_; ++r) one(r);
    }
  }
  DType t_;
  std::string what_;
  int64_t outer_ = 1, row_ = 0;
  std::vector<int64_t> chunk_;
};

LOOM_REGISTER_OP("Concat")
    .describe("Concatenates num_args arrays along dim.")
    .alias("concat")
    .params(tensor::concat_schema())
    .inputs(arg_names)
    .shape_fn(infer_concat)
    .deps(GradDeps{true, false, false})
    .cpu<ConcatKernel>()
    .sample({.attrs = {{"num_args", "3"}}, .in_shapes = {{2, 1, 3}, {2, 4, 3}, {2, 2, 3}}})
    .sample({.attrs = {{"num_args", "2"}, {"dim", "0"}}, .in_shapes = {{1, 3}, {2, 3}}})
    .sample({.attrs = {{"num_args", "2"}, {"dim", "-1"}}, .in_shapes = {{2, 3}, {2, 1}}});

}  // namespace
}  // namespace loom
