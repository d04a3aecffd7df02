// transpose(axes): permutes dimensions; axes () reverses them. Backward applies the
// inverse permutation.
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/index_map.h"

namespace loom {
namespace {

struct TransposeParam {
  Shape axes;
};
const auto kTransposeSchema = ParamSchema<TransposeParam>().optional(
    "axes", &TransposeParam::axes, Shape(), "Target axis order; () reverses the axes.");

/// The permutation for `ndim` dims (validated: each axis exactly once).
std::vector<int> permutation(const TransposeParam& p, int ndim) {
  std::vector<int> perm(static_cast<size_t>(ndim));
  if (p.axes.ndim() == 0) {
    for (int d = 0; d < ndim; ++d) perm[d] = ndim - 1 - d;
    return perm;
  }
  if (p.axes.ndim() != ndim)
    throw ShapeError("axes " + p.axes.str() + " do not match input 0 (data) with " +
                     std::to_string(ndim) + " dims");
  std::vector<bool> seen(static_cast<size_t>(ndim), false);
  for (int d = 0; d < ndim; ++d) {
    perm[d] = tensor::norm_axis(p.axes[d], ndim, "axes entry");
    if (seen[perm[d]]) throw ShapeError("axes " + p.axes.str() + " repeat an axis");
    seen[perm[d]] = true;
  }
  return perm;
}

// Both ways: output dim d is input dim perm[d], so a known output gives the input back.
void infer_transpose(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const int nd = in[0].ndim() > 0 ? in[0].ndim() : out[0].ndim();
  if (nd == 0) return;
  auto perm = permutation(a.param<TransposeParam>(), nd);
  if (in[0].ndim() > 0) {
    Shape o = in[0];
    for (int d = 0; d < nd; ++d) o[d] = in[0][perm[d]];
    merge_shape(out[0], o, "output 0");
  }
  Shape i = out[0];
  for (int d = 0; d < nd; ++d) i[perm[d]] = out[0][d];
  merge_shape(in[0], i, "input 0 (data)");
}

/// out[j] = in[src(j)] where out dim d is in dim perm[d].
struct Permute {
  std::vector<int64_t> out_dims, src_strides;
  int64_t size = 0;
  Permute(const Shape& in, const std::vector<int>& perm) {
    std::vector<int64_t> st(static_cast<size_t>(in.ndim()), 1);
    for (int d = in.ndim() - 2; d >= 0; --d) st[d] = st[d + 1] * in[d + 1];
    for (int p : perm) {
      out_dims.push_back(in[p]);
      src_strides.push_back(st[p]);
    }
    size = in.numel();
  }
  template <class T>
  void run(const T* src, T* dst, Req req) const {
    if (req == Req::kNull) return;
    const int nd = static_cast<int>(out_dims.size());
    const int64_t inner = out_dims[nd - 1], rows = size / inner, is = src_strides[nd - 1];
    auto row = [&](int64_t r) {
      int64_t off = 0, rem = r;
      for (int d = nd - 2; d >= 0; --d) {
        off += (rem % out_dims[d]) * src_strides[d];
        rem /= out_dims[d];
      }
      T* o = dst + r * inner;
      const T* s = src + off;
      if (req == Req::kAdd)
        for (int64_t j = 0; j < inner; ++j) o[j] = tensor::add_value<T>(o[j], s[j * is]);
      else
        for (int64_t j = 0; j < inner; ++j) o[j] = s[j * is];
    };
    if (size >= tensor::kParallelMin && rows > 1) {
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) row(r);
    } else {
      for (int64_t r = 0; r < rows; ++r) row(r);
    }
  }
};

std::vector<int> inverse(const std::vector<int>& perm) {
  std::vector<int> inv(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) inv[static_cast<size_t>(perm[d])] = static_cast<int>(d);
  return inv;
}

class TransposeKernel final : public Kernel {
 public:
  explicit TransposeKernel(const KernelArgs& a)
      : fwd_(a.in_shapes[0], permutation(a.attrs.param<TransposeParam>(), a.in_shapes[0].ndim())),
        bwd_(a.out_shapes[0],
             inverse(permutation(a.attrs.param<TransposeParam>(), a.in_shapes[0].ndim()))),
        t_(tensor::check_dtypes(a, tensor::kNumericDTypes | tensor::dtype_bit(DType::kBool))),
        what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    dispatch_dtype(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      fwd_.run(in[0].data<T>(), out[0].data<T>(), req[0]);
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      bwd_.run(og[0].data<T>(), ig[0].data<T>(), req[0]);
    }, what_);
  }

 private:
  Permute fwd_, bwd_;
  DType t_;
  std::string what_;
};

LOOM_REGISTER_OP("transpose")
    .describe("Permutes the dimensions; axes () reverses them.")
    .params(kTransposeSchema)
    .shape_fn(infer_transpose)
    .deps(GradDeps{true, false, false})
    .cpu<TransposeKernel>()
    .sample({.attrs = {}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"axes", "(0, 2, 1)"}}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"axes", "(1, -1, 0)"}}, .in_shapes = {{2, 3, 4}}});

}  // namespace

tensor::IndexMap tensor::transpose_index_map(const OpAttrs& a, const Shape& in) {
  const auto perm = permutation(a.param<TransposeParam>(), in.ndim());
  Shape o = in;
  for (int d = 0; d < in.ndim(); ++d) o[d] = in[perm[static_cast<size_t>(d)]];
  IndexMap m(in, o);
  for (int d = 0; d < in.ndim(); ++d) m.dims.push_back({.src = perm[static_cast<size_t>(d)]});
  return m;
}

}  // namespace loom
