// nansum / nanprod (MXNet 1.9.1 broadcast_reduce_op_value.cc): sum and product over axes
// treating NaN as 0 (sum) or 1 (product). Parameters as sum (axis, keepdims, exclude).
// Gradients: nansum  dx = isnan(x) ? 0 : dy;   nanprod  dx = isnan(x) ? 0 : dy * y / x.
// Integer dtypes have no NaN: they reduce as sum/prod (wrapping).
#include <cmath>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/reduce_axes.h"
#include "ops/tensor/reduce_extra_math.h"
#include "ops/tensor/reduce_math.h"

namespace loom {
namespace {

using tensor::AxesParam;
const auto kNanReduceSchema = tensor::axes_schema();

// The element map, combine and gradient are reduce_math.h's and reduce_extra_math.h's,
// which the GPU kernels (reduce_extra.cu) run too.
template <bool kProd>
class NanReduceKernel final : public Kernel {
  using Map = std::conditional_t<kProd, math::NanToOne, math::NanToZero>;
  using Grad = std::conditional_t<kProd, math::NanProdGrad, math::NanSumGrad>;

 public:
  explicit NanReduceKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kNumericDTypes)), what_(tensor::node_label(a)) {
    const Shape& in = a.in_shapes[0];
    const Shape keep = tensor::axes_keep_shape(a.attrs.param<AxesParam>(), in);
    plan_ = tensor::make_reduce_plan(in, keep);
    back_ = tensor::make_bcast_plan(keep, in, in);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      if constexpr (is_float_v<T>) {
        auto comb = [](double acc, T v) {
          const double d = Map::f(static_cast<double>(tensor::to_c(v)));
          return kProd ? math::ProdReduce::combine(acc, d) : math::SumReduce::combine(acc, d);
        };
        tensor::reduce_t(plan_, x, y, req[0], kProd ? 1.0 : 0.0, comb,
                         [](double acc) { return convert_value<T>(acc); });
      } else {
        auto comb = [](int64_t acc, T v) {
          return kProd ? tensor::wrap_mul<int64_t>(acc, v) : tensor::wrap_add<int64_t>(acc, v);
        };
        tensor::reduce_t(plan_, x, y, req[0], int64_t{kProd ? 1 : 0}, comb,
                         [](int64_t acc) { return convert_value<T>(acc); });
      }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T *g = og[0].data<T>(), *x = in[0].data<T>();
      const T* y = kProd ? out[0].data<T>() : nullptr;
      T* dx = ig[0].data<T>();
      const bool add = req[0] == Req::kAdd;
      tensor::bcast_for(back_, [=](int64_t i, int64_t o, int64_t) {
        const C v = Grad::grad(tensor::to_c(g[o]), tensor::to_c(x[i]),
                               kProd ? tensor::to_c(y[o]) : C(0));
        dx[i] = add ? tensor::add_value<T>(dx[i], tensor::from_c<T>(v)) : tensor::from_c<T>(v);
      });
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
  tensor::ReducePlan plan_;
  tensor::BcastPlan back_;
};

template <bool kProd>
void nan_reduce_op(const char* name, const char* doc) {
  OpDef& op = register_op(name);
  op.describe(doc)
      .params(kNanReduceSchema)
      .shape_fn(tensor::infer_axes_reduce)
      .deps(GradDeps{true, true, kProd})
      .cpu<NanReduceKernel<kProd>>();
  const std::string kind = kProd ? "positive" : "normal";
  op.sample({.attrs = {}, .in_shapes = {{2, 3, 4}}, .in_kinds = {kind}});
  op.sample({.attrs = {{"axis", "(0, -1)"}, {"keepdims", "True"}}, .in_shapes = {{2, 3, 4}},
             .in_kinds = {kind}});
  op.sample({.attrs = {{"axis", "1"}, {"exclude", "True"}}, .in_shapes = {{2, 3, 4}},
             .in_kinds = {kind}});
}

[[maybe_unused]] const bool kNanReduceRegistered = [] {
  nan_reduce_op<false>("nansum", "Sum over the given axes, treating NaN as zero.");
  nan_reduce_op<true>("nanprod", "Product over the given axes, treating NaN as one.");
  return true;
}();

}  // namespace
}  // namespace loom
