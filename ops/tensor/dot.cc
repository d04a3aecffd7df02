// dot(lhs, rhs, transpose_a, transpose_b): contracts the last axis of lhs (its first with
// transpose_a) with the first axis of rhs (its last with transpose_b); the output has lhs's
// other axes then rhs's. Two 1-D arrays give shape (1,). dlhs = dy rhs^T, drhs = lhs^T dy,
// each in its own orientation.
#include "ops/infer.h"
#include "ops/tensor/gemm.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

struct DotParam {
  bool transpose_a, transpose_b;
  std::string forward_stype;
};
const auto kDotSchema =
    ParamSchema<DotParam>()
        .optional("transpose_a", &DotParam::transpose_a, false, "Contract lhs's first axis.")
        .optional("transpose_b", &DotParam::transpose_b, false, "Contract rhs's last axis.")
        .optional("forward_stype", &DotParam::forward_stype, std::string("None"),
                  "Storage type of the output (dense only here).");

// lhs as (M, K) or (K, M), rhs as (K, N) or (N, K).
struct DotDims {
  int64_t m, n, k;
  Shape out;
};
DotDims dot_dims(const OpAttrs& a, const Shape& l, const Shape& r) {
  const auto& p = a.param<DotParam>();
  const int64_t kl = p.transpose_a ? l[0] : l[l.ndim() - 1];
  const int64_t kr = p.transpose_b ? r[r.ndim() - 1] : r[0];
  if (kl != kr)
    throw ShapeError("node '" + a.name + "' (op dot): cannot contract lhs " + l.str() + " with rhs " +
                     r.str() + (p.transpose_a ? " (transpose_a)" : "") + (p.transpose_b ? " (transpose_b)" : "") +
                     ": " + std::to_string(kl) + " vs " + std::to_string(kr));
  std::vector<int64_t> o;
  if (p.transpose_a)
    o.assign(l.begin() + 1, l.end());
  else
    o.assign(l.begin(), l.end() - 1);
  if (p.transpose_b)
    o.insert(o.end(), r.begin(), r.end() - 1);
  else
    o.insert(o.end(), r.begin() + 1, r.end());
  if (o.empty()) o.push_back(1);
  return {l.numel() / kl, r.numel() / kr, kl, Shape(std::move(o))};
}

void infer_dot(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].known() || !in[1].known()) return;
  merge_shape(out[0], dot_dims(a, in[0], in[1]).out, "output 0");
}

class DotKernel final : public Kernel {
 public:
  explicit DotKernel(const KernelArgs& a)
      : p_(a.attrs.param<DotParam>()), d_(dot_dims(a.attrs, a.in_shapes[0], a.in_shapes[1])) {
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
    tensor::gemm(p_.transpose_a, p_.transpose_b, d_.m, d_.n, d_.k, in[0].cdata<T>(),
                 in[1].cdata<T>(), out[0].data<T>(), req[0] == Req::kAdd);
  }
  template <class T>
  void bwd(std::span<const NDArray> og, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> ig) {
    const T *g = og[0].cdata<T>(), *l = in[0].cdata<T>(), *r = in[1].cdata<T>();
    const int64_t m = d_.m, n = d_.n, k = d_.k;
    if (req[0] != Req::kNull) {
      // dL (M, K) = dY (M, N) op(R)^T; with transpose_a dL is (K, M) = op(R) dY^T.
      if (!p_.transpose_a)
        tensor::gemm(false, !p_.transpose_b, m, k, n, g, r, ig[0].data<T>(), req[0] == Req::kAdd);
      else
        tensor::gemm(p_.transpose_b, true, k, m, n, r, g, ig[0].data<T>(), req[0] == Req::kAdd);
    }
    if (req[1] != Req::kNull) {
      // dR (K, N) = op(L)^T dY; with transpose_b dR is (N, K) = dY^T op(L).
      if (!p_.transpose_b)
        tensor::gemm(!p_.transpose_a, false, k, n, m, l, g, ig[1].data<T>(), req[1] == Req::kAdd);
      else
        tensor::gemm(true, p_.transpose_a, n, k, m, g, l, ig[1].data<T>(), req[1] == Req::kAdd);
    }
  }

 private:
  DotParam p_;
  DotDims d_;
  bool f64_ = false;
};

LOOM_REGISTER_OP("dot")
    .describe("Matrix product over the last axis of lhs and the first axis of rhs.")
    .params(kDotSchema)
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
