// batch_dot(lhs, rhs, transpose_a, transpose_b): one matrix product per batch entry of
// (B, M, K) and (B, K, N) arrays (either transposed in its last two axes) into (B, M, N).
#include "ops/infer.h"
#include "ops/tensor/gemm.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

struct BatchDotParam {
  bool transpose_a, transpose_b;
  std::string forward_stype;
};
const auto kBatchDotSchema =
    ParamSchema<BatchDotParam>()
        .optional("transpose_a", &BatchDotParam::transpose_a, false, "Use lhs^T per batch entry.")
        .optional("transpose_b", &BatchDotParam::transpose_b, false, "Use rhs^T per batch entry.")
        .optional("forward_stype", &BatchDotParam::forward_stype, std::string("None"),
                  "Storage type of the output (dense only here).");

struct BatchDims {
  int64_t b, m, n, k;
};
BatchDims batch_dims(const OpAttrs& a, const Shape& l, const Shape& r) {
  const auto& p = a.param<BatchDotParam>();
  const std::string who = "node '" + a.name + "' (op batch_dot): ";
  if (l.ndim() != 3 || r.ndim() != 3)
    throw ShapeError(who + "lhs " + l.str() + " and rhs " + r.str() + " must both be 3-D");
  if (l[0] != r[0]) throw ShapeError(who + "batch sizes of lhs " + l.str() + " and rhs " + r.str() + " differ");
  BatchDims d{l[0], p.transpose_a ? l[2] : l[1], p.transpose_b ? r[1] : r[2], p.transpose_a ? l[1] : l[2]};
  const int64_t kr = p.transpose_b ? r[2] : r[1];
  if (d.k != kr)
    throw ShapeError(who + "cannot multiply lhs " + l.str() + " by rhs " + r.str() + ": " +
                     std::to_string(d.k) + " vs " + std::to_string(kr));
  return d;
}

void infer_batch_dot(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].known() || !in[1].known()) return;
  auto d = batch_dims(a, in[0], in[1]);
  merge_shape(out[0], Shape{d.b, d.m, d.n}, "output 0");
}

class BatchDotKernel final : public Kernel {
 public:
  explicit BatchDotKernel(const KernelArgs& a)
      : p_(a.attrs.param<BatchDotParam>()), d_(batch_dims(a.attrs, a.in_shapes[0], a.in_shapes[1])) {
    const DType t = tensor::check_dtypes(a, tensor::dtype_bit(DType::kFloat32) | tensor::dtype_bit(DType::kFloat64));
    f64_ = t == DType::kFloat64;
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (f64_) fwd<double>(in, req, out);
    else fwd<float>(in, req, out);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (f64_) bwd<double>(og, in, req, ig);
    else bwd<float>(og, in, req, ig);
  }

 private:
  template <class T>
  void fwd(std::span<const NDArray> in, std::span<const Req> req, std::span<const NDArray> out) {
    if (req[0] == Req::kNull) return;
    const T *l = in[0].cdata<T>(), *r = in[1].cdata<T>();
    T* y = out[0].data<T>();
    for (int64_t b = 0; b < d_.b; ++b)
      tensor::gemm(p_.transpose_a, p_.transpose_b, d_.m, d_.n, d_.k, l + b * d_.m * d_.k,
                   r + b * d_.k * d_.n, y + b * d_.m * d_.n, req[0] == Req::kAdd);
  }
  template <class T>
  void bwd(std::span<const NDArray> og, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> ig) {
    const T *g = og[0].cdata<T>(), *l = in[0].cdata<T>(), *r = in[1].cdata<T>();
    const int64_t m = d_.m, n = d_.n, k = d_.k, mk = m * k, kn = k * n, mn = m * n;
    for (int64_t b = 0; b < d_.b; ++b) {
      const T *gb = g + b * mn, *lb = l + b * mk, *rb = r + b * kn;
      if (req[0] != Req::kNull) {
        T* dl = ig[0].data<T>() + b * mk;
        if (!p_.transpose_a)
          tensor::gemm(false, !p_.transpose_b, m, k, n, gb, rb, dl, req[0] == Req::kAdd);
        else
          tensor::gemm(p_.transpose_b, true, k, m, n, rb, gb, dl, req[0] == Req::kAdd);
      }
      if (req[1] != Req::kNull) {
        T* dr = ig[1].data<T>() + b * kn;
        if (!p_.transpose_b)
          tensor::gemm(!p_.transpose_a, false, k, n, m, lb, gb, dr, req[1] == Req::kAdd);
        else
          tensor::gemm(true, p_.transpose_a, n, k, m, gb, lb, dr, req[1] == Req::kAdd);
      }
    }
  }

 private:
  BatchDotParam p_;
  BatchDims d_;
  bool f64_ = false;
};

LOOM_REGISTER_OP("batch_dot")
    .describe("Batched matrix product of (B, M, K) and (B, K, N) arrays.")
    .params(kBatchDotSchema)
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
