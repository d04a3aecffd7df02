// dot(lhs, rhs, transpose_a, transpose_b): contracts the last axis of lhs (its first with
// transpose_a) with the first axis of rhs (its last with transpose_b); the output has lhs's
// other axes then rhs's. Two 1-D arrays give shape (1,). dlhs = dy rhs^T, drhs = lhs^T dy,
// each in its own orientation.
#include "ops/infer.h"
#include "ops/tensor/gemm.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/half_buffer.h"
#include "ops/tensor/matmul.h"

namespace loom {
namespace {

using tensor::dot_dims;
using tensor::DotDims;
using tensor::DotParam;

// Partial shapes (MXNet's legacy 0 = unknown dim): once both ranks and the contracted
// dims are known, the output follows, unknown dims staying 0 ((0, 3, 4) . (4, 5) -> (0, 3, 5)).
void infer_dot(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const Shape &l = in[0], &r = in[1];
  if (l.ndim() == 0 || r.ndim() == 0) return;
  const auto& p = a.param<DotParam>();
  if ((p.transpose_a ? l[0] : l[l.ndim() - 1]) == 0 || (p.transpose_b ? r[r.ndim() - 1] : r[0]) == 0)
    return;
  merge_shape(out[0], dot_dims(a, l, r).out, "output 0");
}

class DotKernel final : public Kernel {
 public:
  explicit DotKernel(const KernelArgs& a)
      : p_(a.attrs.param<DotParam>()), d_(dot_dims(a.attrs, a.in_shapes[0], a.in_shapes[1])) {
    t_ = tensor::check_dtypes(a, tensor::kFloatDTypes);
  }
  // float16 computes in float on float copies (as MXNet's CPU dot does).
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    if (t_ == DType::kFloat64)
      fwd(in[0].cdata<double>(), in[1].cdata<double>(), out[0].data<double>(), req[0] == Req::kAdd);
    else if (t_ == DType::kFloat32)
      fwd(in[0].cdata<float>(), in[1].cdata<float>(), out[0].data<float>(), req[0] == Req::kAdd);
    else {
      auto l = tensor::half_to_float(in[0]), r = tensor::half_to_float(in[1]);
      std::vector<float> y(static_cast<size_t>(out[0].size()));
      fwd(l.data(), r.data(), y.data(), false);
      tensor::store_half(y, out[0], req[0]);
    }
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (t_ == DType::kFloat64) {
      bwd(og[0].cdata<double>(), in[0].cdata<double>(), in[1].cdata<double>(),
          req[0] == Req::kNull ? nullptr : ig[0].data<double>(),
          req[1] == Req::kNull ? nullptr : ig[1].data<double>(), req[0] == Req::kAdd,
          req[1] == Req::kAdd);
    } else if (t_ == DType::kFloat32) {
      bwd(og[0].cdata<float>(), in[0].cdata<float>(), in[1].cdata<float>(),
          req[0] == Req::kNull ? nullptr : ig[0].data<float>(),
          req[1] == Req::kNull ? nullptr : ig[1].data<float>(), req[0] == Req::kAdd,
          req[1] == Req::kAdd);
    } else {
      auto g = tensor::half_to_float(og[0]), l = tensor::half_to_float(in[0]),
           r = tensor::half_to_float(in[1]);
      std::vector<float> dl(l.size()), dr(r.size());
      bwd(g.data(), l.data(), r.data(), req[0] == Req::kNull ? nullptr : dl.data(),
          req[1] == Req::kNull ? nullptr : dr.data(), false, false);
      tensor::store_half(dl, ig[0], req[0]);
      tensor::store_half(dr, ig[1], req[1]);
    }
  }

 private:
  template <class T>
  void fwd(const T* l, const T* r, T* y, bool add) {
    tensor::gemm(p_.transpose_a, p_.transpose_b, d_.m, d_.n, d_.k, l, r, y, add);
  }
  // dl / dr null: not requested.
  template <class T>
  void bwd(const T* g, const T* l, const T* r, T* dl, T* dr, bool add_l, bool add_r) {
    auto gemm = [](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, const T* b,
                   T* c, bool add) { tensor::gemm(ta, tb, m, n, k, a, b, c, add); };
    tensor::matmul_backward(gemm, p_.transpose_a, p_.transpose_b, d_.m, d_.n, d_.k, g, l, r, dl,
                            dr, add_l, add_r);
  }

 private:
  DotParam p_;
  DotDims d_;
  DType t_ = DType::kFloat32;
};

LOOM_CPU_DTYPES("dot", kDTypePolicyFloats);

LOOM_REGISTER_OP("dot")
    .describe("Matrix product over the last axis of lhs and the first axis of rhs.")
    .params(tensor::dot_schema())
    .inputs({"lhs", "rhs"})
    .shape_fn(infer_dot)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<DotKernel>()
    .sample({.attrs = {}, .in_shapes = {{3, 4}, {4, 5}}})
    .sample({.attrs = {{"transpose_a", "True"}}, .in_shapes = {{2, 3, 4}, {2, 5}}})
    .sample({.attrs = {{"transpose_b", "True"}}, .in_shapes = {{3, 4}, {5, 2, 4}}})
    .sample({.attrs = {{"transpose_a", "True"}, {"transpose_b", "True"}}, .in_shapes = {{2, 3}, {5, 2}}})
    .sample({.attrs = {}, .in_shapes = {{3}, {3}}});

}  // namespace
}  // namespace loom
