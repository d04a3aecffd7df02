// Reductions over axes: sum (sum_axis), mean, max, min, prod, for every numeric dtype. The
// float32 path combines and differentiates through the functors of reduce_math.h, which the
// CUDA kernels (broadcast_reduce.cu) use too.
#include <cmath>
#include <limits>
#include <optional>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/reduce_math.h"

namespace loom {
namespace {

struct ReduceParam {
  std::optional<Shape> axis;
  bool keepdims, exclude;
};
const auto kReduceSchema =
    ParamSchema<ReduceParam>()
        .optional("axis", &ReduceParam::axis, std::optional<Shape>(),
                  "Axes to reduce (int or tuple, negatives allowed); None or () = all.")
        .optional("keepdims", &ReduceParam::keepdims, false, "Keep reduced axes with size 1.")
        .optional("exclude", &ReduceParam::exclude, false,
                  "Reduce over all axes except the listed ones.");

/// Which axes of an input of `ndim` dims the parameters reduce.
std::vector<bool> reduced_axes(const ReduceParam& p, int ndim) {
  const bool all = !p.axis || p.axis->ndim() == 0;
  if (all) return std::vector<bool>(static_cast<size_t>(ndim), true);
  std::vector<bool> listed(static_cast<size_t>(ndim), false);
  for (int64_t ax : *p.axis) {
    int a = tensor::norm_axis(ax, ndim, "axis");
    if (listed[a]) throw ShapeError("axis " + std::to_string(ax) + " is repeated");
    listed[a] = true;
  }
  if (p.exclude) listed.flip();
  return listed;
}

/// The output shape with reduced axes kept as 1 (the kernels' view of the output).
Shape keepdims_shape(const ReduceParam& p, const Shape& in) {
  auto red = reduced_axes(p, in.ndim());
  Shape s = in;
  for (int d = 0; d < in.ndim(); ++d)
    if (red[d]) s[d] = 1;
  return s;
}

void infer_reduce(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  const auto& p = a.param<ReduceParam>();
  auto red = reduced_axes(p, in[0].ndim());
  Shape s;
  for (int d = 0; d < in[0].ndim(); ++d) {
    if (!red[d])
      s.push_back(in[0][d]);
    else if (p.keepdims)
      s.push_back(1);
  }
  if (s.ndim() == 0) s.push_back(1);  // legacy shape semantics: no 0-d results
  merge_shape(out[0], s, "output 0");
}

enum class Kind { kSum, kMean, kMax, kMin, kProd };

/// Accumulator of a reduction over T: double for float types, int64 (wrapping) for integers.
template <class T>
using acc_t = std::conditional_t<is_float_v<T>, double, int64_t>;

template <Kind K>
class ReduceKernel final : public Kernel {
 public:
  explicit ReduceKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kNumericDTypes)), what_(tensor::node_label(a)) {
    const Shape& in = a.in_shapes[0];
    keep_ = keepdims_shape(a.attrs.param<ReduceParam>(), in);
    plan_ = tensor::make_reduce_plan(in, keep_);
    back_ = tensor::make_bcast_plan(keep_, in, in);
    n_red_ = keep_.numel() ? in.numel() / keep_.numel() : 1;
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float>)
        forward_f32(in[0].data<float>(), out[0].data<float>(), req[0]);
      else
        forward_t<T>(in[0].data<T>(), out[0].data<T>(), req[0]);
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T* g = og[0].data<T>();
      T* dx = ig[0].data<T>();
      const bool add = req[0] == Req::kAdd;
      auto put = [=](int64_t i, C v) {
        dx[i] = add ? tensor::add_value<T>(dx[i], tensor::from_c<T>(v)) : tensor::from_c<T>(v);
      };
      if constexpr (K == Kind::kSum || K == Kind::kMean) {
        const C scale = K == Kind::kMean ? C(1) / static_cast<C>(n_red_) : C(1);
        tensor::bcast_for(back_, [=](int64_t i, int64_t o, int64_t) {
          put(i, tensor::to_c(g[o]) * scale);
        });
      } else if constexpr (K == Kind::kProd) {
        // d prod / d x_i = prod / x_i, as MXNet (rdiv of output by input).
        const T *x = in[0].data<T>(), *y = out[0].data<T>();
        tensor::bcast_for(back_, [=](int64_t i, int64_t o, int64_t) {
          const C gi = tensor::to_c(g[o]);
          put(i, math::ProdGrad::grad(gi, tensor::to_c(x[i]), tensor::to_c(y[o])));
        });
      } else {
        // Every element equal to the extremum receives the gradient, as MXNet.
        const T *x = in[0].data<T>(), *y = out[0].data<T>();
        tensor::bcast_for(back_, [=](int64_t i, int64_t o, int64_t) {
          const C gi = tensor::to_c(g[o]);
          put(i, math::ExtremumGrad::grad(gi, tensor::to_c(x[i]), tensor::to_c(y[o])));
        });
      }
    }, what_);
  }

 private:
  void forward_f32(const float* x, float* y, Req req) {
    auto id = [](double v) { return v; };
    if constexpr (K == Kind::kSum) {
      tensor::reduce_sum(plan_, x, y, req);
    } else if constexpr (K == Kind::kMean) {
      tensor::reduce_sum(plan_, x, y, req, 1.0 / static_cast<double>(n_red_));
    } else {
      using R = std::conditional_t<K == Kind::kMax, math::MaxReduce,
                                   std::conditional_t<K == Kind::kMin, math::MinReduce,
                                                      math::ProdReduce>>;
      tensor::reduce(
          plan_, x, y, req, R::template init<double>(),
          [](double m, double v) { return R::combine(m, v); }, id);
    }
  }
  template <class T>
  void forward_t(const T* x, T* y, Req req) {
    using A = acc_t<T>;
    const int64_t n = n_red_;
    auto load = [](T v) -> A {
      if constexpr (is_float_v<T>) return static_cast<double>(v);
      else return static_cast<int64_t>(v);
    };
    auto out = [](A v) { return convert_value<T>(v); };
    if constexpr (K == Kind::kSum || K == Kind::kMean) {
      auto comb = [=](A acc, T v) {
        if constexpr (is_float_v<T>) return acc + load(v);
        else return tensor::wrap_add<int64_t>(acc, load(v));
      };
      // Integer means truncate toward zero (MXNet: mean of int32 [-1, -2] is -1).
      auto fin = [=](A acc) { return out(K == Kind::kMean ? acc / static_cast<A>(n) : acc); };
      tensor::reduce_t(plan_, x, y, req, A(0), comb, fin);
    } else if constexpr (K == Kind::kProd) {
      auto comb = [=](A acc, T v) {
        if constexpr (is_float_v<T>) return acc * load(v);
        else return tensor::wrap_mul<int64_t>(acc, load(v));
      };
      tensor::reduce_t(plan_, x, y, req, A(1), comb, out);
    } else {
      A init;
      if constexpr (is_float_v<T>)
        init = K == Kind::kMax ? -std::numeric_limits<double>::infinity()
                               : std::numeric_limits<double>::infinity();
      else
        init = K == Kind::kMax ? std::numeric_limits<int64_t>::lowest()
                               : std::numeric_limits<int64_t>::max();
      auto comb = [=](A m, T v) {
        const A a = load(v);
        // A NaN propagates, as NumPy's and MXNet's max/min (a != a only for NaN).
        if constexpr (K == Kind::kMax) return a > m || a != a ? a : m;
        else return a < m || a != a ? a : m;
      };
      tensor::reduce_t(plan_, x, y, req, init, comb, out);
    }
  }

  DType t_;
  std::string what_;
  Shape keep_;
  tensor::ReducePlan plan_;
  tensor::BcastPlan back_;
  int64_t n_red_ = 1;
};

template <Kind K>
OpDef& reduce_op(const char* name, const char* doc) {
  OpDef& op = register_op(name);
  op.describe(doc).params(kReduceSchema).shape_fn(infer_reduce).cpu<ReduceKernel<K>>();
  const bool extremum = K == Kind::kMax || K == Kind::kMin || K == Kind::kProd;
  op.deps(GradDeps{true, extremum, extremum});
  op.sample({.attrs = {}, .in_shapes = {{2, 3, 4}}});
  op.sample({.attrs = {{"axis", "(0, -1)"}, {"keepdims", "True"}}, .in_shapes = {{2, 3, 4}}});
  op.sample({.attrs = {{"axis", "1"}, {"exclude", "True"}}, .in_shapes = {{2, 3, 4}}});
  return op;
}

// Registered at static-initialisation time like LOOM_REGISTER_OP, through one helper.
[[maybe_unused]] const bool kReduceRegistered = [] {
  reduce_op<Kind::kSum>("sum", "Sum over the given axes.").alias("sum_axis");
  reduce_op<Kind::kMean>("mean", "Mean over the given axes.");
  reduce_op<Kind::kMax>("max", "Maximum over the given axes.").alias("max_axis");
  reduce_op<Kind::kMin>("min", "Minimum over the given axes.").alias("min_axis");
  // The gradient divides by the input (MXNet): sample inputs away from zero.
  OpDef& prod = reduce_op<Kind::kProd>("prod", "Product over the given axes.");
  for (auto& s : prod.samples) s.in_kinds = {"positive"};
  return true;
}();

}  // namespace
}  // namespace loom
