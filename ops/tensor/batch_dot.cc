// batch_dot(lhs, rhs, transpose_a, transpose_b): one matrix product per batch entry of
// (B, M, K) and (B, K, N) arrays (either transposed in its last two axes) into (B, M, N).
#include "ops/infer.h"
#include "ops/tensor/gemm.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/half_buffer.h"
#include "ops/tensor/matmul.h"

namespace loom {
namespace {

using tensor::batch_dims;
using tensor::BatchDims;
using tensor::BatchDotParam;

// Partial shapes: an unknown (0) batch size takes the other side's; with both contracted
// dims known the output follows, unknown dims staying 0 (MXNet's infer_shape_partial).
void infer_batch_dot(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  Shape l = in[0], r = in[1];
  if (l.ndim() != 3 || r.ndim() != 3) {
    if (l.ndim() != 0 && r.ndim() != 0) batch_dims(a, l, r);  // throws the rank error
    return;
  }
  const auto& p = a.param<BatchDotParam>();
  if ((p.transpose_a ? l[1] : l[2]) == 0 || (p.transpose_b ? r[2] : r[1]) == 0) return;
  if (l[0] == 0) l[0] = r[0];
  if (r[0] == 0) r[0] = l[0];
  auto d = batch_dims(a, l, r);
  merge_shape(out[0], Shape{d.b, d.m, d.n}, "output 0");
}

class BatchDotKernel final : public Kernel {
 public:
  explicit BatchDotKernel(const KernelArgs& a)
      : p_(a.attrs.param<BatchDotParam>()), d_(batch_dims(a.attrs, a.in_shapes[0], a.in_shapes[1])) {
    t_ = tensor::check_dtypes(a, tensor::kFloatDTypes);
  }
  // float16 computes in float on float copies (as MXNet's CPU batch_dot does).
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
    for (int64_t b = 0; b < d_.b; ++b)
      tensor::gemm(p_.transpose_a, p_.transpose_b, d_.m, d_.n, d_.k, l + b * d_.m * d_.k,
                   r + b * d_.k * d_.n, y + b * d_.m * d_.n, add);
  }
  // dl / dr null: not requested.
  template <class T>
  void bwd(const T* g, const T* l, const T* r, T* dl0, T* dr0, bool add_l, bool add_r) {
    const int64_t m = d_.m, n = d_.n, k = d_.k, mk = m * k, kn = k * n, mn = m * n;
    auto gemm = [](bool ta, bool tb, int64_t mm, int64_t nn, int64_t kk, const T* a, const T* b,
                   T* c, bool add) { tensor::gemm(ta, tb, mm, nn, kk, a, b, c, add); };
    for (int64_t b = 0; b < d_.b; ++b)
      tensor::matmul_backward(gemm, p_.transpose_a, p_.transpose_b, m, n, k, g + b * mn,
                              l + b * mk, r + b * kn, dl0 ? dl0 + b * mk : nullptr,
                              dr0 ? dr0 + b * kn : nullptr, add_l, add_r);
  }

 private:
  BatchDotParam p_;
  BatchDims d_;
  DType t_ = DType::kFloat32;
};

LOOM_CPU_DTYPES("batch_dot", kDTypePolicyFloats);

LOOM_REGISTER_OP("batch_dot")
    .describe("Batched matrix product of (B, M, K) and (B, K, N) arrays.")
    .params(tensor::batch_dot_schema())
    .inputs({"lhs", "rhs"})
    .shape_fn(infer_batch_dot)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<BatchDotKernel>()
    .sample({.attrs = {}, .in_shapes = {{2, 3, 4}, {2, 4, 5}}})
    .sample({.attrs = {{"transpose_a", "True"}}, .in_shapes = {{2, 4, 3}, {2, 4, 2}}})
    .sample({.attrs = {{"transpose_b", "True"}}, .in_shapes = {{3, 2, 4}, {3, 5, 4}}})
    .sample({.attrs = {{"transpose_a", "True"}, {"transpose_b", "True"}}, .in_shapes = {{2, 3, 2}, {2, 4, 3}}});

}  // namespace
}  // namespace loom
