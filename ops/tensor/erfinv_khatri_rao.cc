// erfinv and khatri_rao (MXNet 1.9.1 tensor/elemwise_unary_op_basic.cc, contrib/krprod.cc):
//   erfinv(x)         the inverse error function (±1 give ±inf, |x| > 1 NaN); gradient
//                     dy · √π/2 · exp(y²) from the output.
//   khatri_rao(A_1.., num_args)   the column-wise Kronecker product of matrices (I_k, R):
//                     an (∏ I_k, R) matrix whose row Σ i_k·∏_{j>k} I_j holds ∏_k A_k[i_k, :]
//                     (row-major: the last matrix's row index varies fastest). MXNet
//                     registers no gradient; Loom's is the product rule.
#include <cmath>
#include <limits>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/erfinv_math.h"
#include "ops/tensor/khatri_rao_math.h"

namespace loom {
namespace {

class ErfinvKernel final : public Kernel {
 public:
  explicit ErfinvKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kFloatDTypes)), what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      tensor::write_t<T>(out[0].data<T>(), req[0], in[0].size(), [=](int64_t i) {
        return convert_value<T>(tensor::erfinv_d(convert_value<double>(x[i])));
      });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *g = og[0].data<T>(), *y = out[0].data<T>();
      tensor::write_t<T>(ig[0].data<T>(), req[0], og[0].size(), [=](int64_t i) {
        return convert_value<T>(
            tensor::erfinv_grad(convert_value<double>(g[i]), convert_value<double>(y[i])));
      });
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
};

struct KhatriRaoParam {
  int num_args;
};
const auto kKhatriRaoSchema =
    ParamSchema<KhatriRaoParam>()
        .required("num_args", &KhatriRaoParam::num_args, "Number of input matrices.")
        .check([](KhatriRaoParam& p) { check_input_count(p.num_args, "num_args"); });

void infer_khatri_rao(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  int64_t rows = 1, cols = -1;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k].ndim() == 0) return;
    if (in[k].ndim() != 2)
      throw ShapeError("input " + std::to_string(k) + " must be a matrix, got " + in[k].str());
    if (cols >= 0 && in[k][1] != cols)
      throw ShapeError("input " + std::to_string(k) + " has " + std::to_string(in[k][1]) +
                       " columns but input 0 has " + std::to_string(cols));
    cols = in[k][1];
    rows = dim_mul(rows, in[k][0], "khatri_rao rows");
  }
  merge_shape(out[0], Shape{rows, cols}, "output 0");
}

class KhatriRaoKernel final : public Kernel {
 public:
  explicit KhatriRaoKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kFloatDTypes)), what_(tensor::node_label(a)) {
    for (const Shape& s : a.in_shapes) rows_.push_back(s[0]);
    cols_ = a.in_shapes[0][1];
    total_ = a.out_shapes[0][0];
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* y = out[0].data<T>();
      std::vector<const T*> a;
      for (const NDArray& x : in) a.push_back(x.data<T>());
      const int num = static_cast<int>(a.size());
      for (int64_t r = 0; r < total_; ++r)
        for (int64_t c = 0; c < cols_; ++c)
          tensor::store_t<T>(y + r * cols_ + c, req[0],
                             convert_value<T>(tensor::khatri_rao_value(
                                 a.data(), rows_.data(), num, cols_, r, c)));
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g = og[0].data<T>();
      std::vector<const T*> a;
      for (const NDArray& x : in) a.push_back(x.data<T>());
      const int num = static_cast<int>(a.size());
      for (int k = 0; k < num; ++k) {
        if (req[static_cast<size_t>(k)] == Req::kNull) continue;
        const int64_t rk = rows_[static_cast<size_t>(k)];
        tensor::write_t<T>(ig[static_cast<size_t>(k)].data<T>(), req[static_cast<size_t>(k)],
                           rk * cols_, [&](int64_t e) {
                             return convert_value<T>(tensor::khatri_rao_grad(
                                 g, a.data(), rows_.data(), num, cols_, k, e / cols_, e % cols_));
                           });
      }
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
  std::vector<int64_t> rows_;
  int64_t cols_ = 0, total_ = 0;
};

[[maybe_unused]] const bool kErfinvKhatriRaoRegistered = [] {
  register_op("erfinv")
      .describe("The inverse error function, elementwise.")
      .deps(GradDeps{true, false, true})
      .cpu<ErfinvKernel>()
      .sample({.attrs = {}, .in_shapes = {{3, 4}}, .in_kinds = {"unit"}});
  register_op("khatri_rao")
      .describe("The Khatri-Rao product (column-wise Kronecker product) of num_args matrices "
                "with the same number of columns.")
      .params(kKhatriRaoSchema)
      .inputs([](const OpAttrs& a) {
        std::vector<std::string> v;
        for (int i = 0; i < a.param<KhatriRaoParam>().num_args; ++i) v.push_back("arg" + std::to_string(i));
        return v;
      })
      .shape_fn(infer_khatri_rao)
      .deps(GradDeps{true, true, false})
      .cpu<KhatriRaoKernel>()
      .sample({.attrs = {{"num_args", "2"}}, .in_shapes = {{3, 2}, {4, 2}}})
      .sample({.attrs = {{"num_args", "3"}}, .in_shapes = {{3, 2}, {1, 2}, {2, 2}}})
      .sample({.attrs = {{"num_args", "1"}}, .in_shapes = {{2, 4}}});
  return true;
}();

}  // namespace
}  // namespace loom
