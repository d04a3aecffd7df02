// Small contrib ops of MXNet 1.9.1 (src/operator/contrib/):
//   _contrib_div_sqrt_dim(data)          data / sqrt(data.shape[-1]); gradient dy / sqrt(d).
//   _contrib_quadratic(data, a, b, c)    a·x² + b·x + c; gradient (2a·x + b)·dy.
//   _contrib_index_array(data, axes)     int64 array data.shape + (len(axes),) holding each
//                                        element's coordinates (all axes by default); zero
//                                        gradient.
//   _contrib_allclose(a, b, rtol, atol, equal_nan)   uint8 1 when |a − b| <= atol + rtol·|b|
//                                        everywhere (NaNs equal when equal_nan), else 0;
//                                        shape (1,) (MXNet's is 0-d). Not differentiable.
#include <cmath>
#include <optional>

#include "ops/infer.h"
#include "ops/tensor/creation_math.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/reduce_extra_math.h"
#include "ops/tensor/reduce_extra_params.h"
#include "ops/tensor/unary_extra_math.h"

namespace loom {
namespace {

/// y = x·scale elementwise (div_sqrt_dim): the scale is fixed by the input shape.
class DivSqrtDimKernel final : public Kernel {
 public:
  explicit DivSqrtDimKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kFloatDTypes)), what_(tensor::node_label(a)) {
    const Shape& s = a.in_shapes[0];
    scale_ = 1.0 / std::sqrt(static_cast<double>(s[s.ndim() - 1]));
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    apply(in[0], out[0], req[0]);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    apply(og[0], ig[0], req[0]);
  }

 private:
  void apply(const NDArray& src, const NDArray& dst, Req req) {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = src.data<T>();
      const math::Scale f{scale_};
      tensor::write_t<T>(dst.data<T>(), req, src.size(),
                         [=](int64_t i) { return tensor::from_c<T>(f.f(tensor::to_c(x[i]))); });
    }, what_);
  }
  DType t_;
  std::string what_;
  double scale_ = 1;
};

using tensor::QuadraticParam;  // unary_extra_math.h (shared with elemwise_extra.cu)
const auto kQuadraticSchema =
    ParamSchema<QuadraticParam>()
        .optional("a", &QuadraticParam::a, 0.f, "Coefficient of the quadratic term in the quadratic function.")
        .optional("b", &QuadraticParam::b, 0.f, "Coefficient of the linear term in the quadratic function.")
        .optional("c", &QuadraticParam::c, 0.f, "Constant term in the quadratic function.");

class QuadraticKernel final : public Kernel {
 public:
  explicit QuadraticKernel(const KernelArgs& a)
      : p_(a.attrs.param<QuadraticParam>()),
        t_(tensor::check_dtypes(a, tensor::kFloatDTypes)),
        what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      const math::Quadratic q{p_.a, p_.b, p_.c};
      tensor::write_t<T>(out[0].data<T>(), req[0], in[0].size(),
                         [=](int64_t i) { return tensor::from_c<T>(q.f(tensor::to_c(x[i]))); });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T *x = in[0].data<T>(), *g = og[0].data<T>();
      const math::Quadratic q{p_.a, p_.b, p_.c};
      tensor::write_t<T>(ig[0].data<T>(), req[0], in[0].size(), [=](int64_t i) {
        const C v = tensor::to_c(x[i]);
        return tensor::from_c<T>(q.d(v, v) * tensor::to_c(g[i]));
      });
    }, what_);
  }

 private:
  QuadraticParam p_;
  DType t_;
  std::string what_;
};

using tensor::IndexArrayParam;
const auto kIndexArraySchema = ParamSchema<IndexArrayParam>().optional(
    "axes", &IndexArrayParam::axes, std::optional<Shape>(),
    "The axes to include in the index array. Supports negative values.");

using tensor::index_array_axes;

void infer_index_array(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  std::vector<int64_t> d = in[0].dims();
  d.push_back(static_cast<int64_t>(index_array_axes(a, in[0].ndim()).size()));
  merge_shape(out[0], Shape(std::move(d)), "output 0");
}

class IndexArrayKernel final : public Kernel {
 public:
  explicit IndexArrayKernel(const KernelArgs& a)
      : shape_(a.in_shapes[0]), axes_(index_array_axes(a.attrs, a.in_shapes[0].ndim())),
        t_(a.out_types[0]), what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray>, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* y = out[0].data<T>();
      // The element rule of creation_math.h (the GPU kernel's).
      const tensor::IndexArrayView v = tensor::index_array_view(shape_, axes_, what_);
      const int64_t n = shape_.numel() * static_cast<int64_t>(axes_.size());
      for (int64_t e = 0; e < n; ++e) tensor::store_t<T>(y + e, req[0], convert_value<T>(v.value(e)));
    }, what_);
  }

 private:
  Shape shape_;
  std::vector<int> axes_;
  DType t_;
  std::string what_;
};

using tensor::AllCloseParam;
const auto kAllCloseSchema =
    ParamSchema<AllCloseParam>()
        .optional("rtol", &AllCloseParam::rtol, 1e-05f, "Relative tolerance.")
        .optional("atol", &AllCloseParam::atol, 1e-08f, "Absolute tolerance.")
        .optional("equal_nan", &AllCloseParam::equal_nan, true,
                  "Whether to compare NaN's as equal. If True, NaN's in A will be considered "
                  "equal to NaN's in B in the output array.");

class AllCloseKernel final : public Kernel {
 public:
  explicit AllCloseKernel(const KernelArgs& a)
      : p_(a.attrs.param<AllCloseParam>()), t_(a.in_types[0]), what_(tensor::node_label(a)) {
    if (a.in_types[1] != t_)
      throw Error(what_ + ": inputs have dtypes " + dtype_name(t_) + " and " +
                  dtype_name(a.in_types[1]) + "; they must be equal");
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    bool close = true;
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *x = in[0].data<T>(), *y = in[1].data<T>();
      const double rtol = p_.rtol, atol = p_.atol;
      for (int64_t i = 0; i < in[0].size() && close; ++i) {
        // The element test of reduce_extra_math.h (the GPU kernel's).
        close = math::allclose_elem(convert_value<double>(x[i]), convert_value<double>(y[i]), rtol,
                                    atol, p_.equal_nan);
      }
    }, what_);
    tensor::store_t<uint8_t>(out[0].data<uint8_t>(), req[0], close ? 1 : 0);
  }

 private:
  AllCloseParam p_;
  DType t_;
  std::string what_;
};

[[maybe_unused]] const bool kSmallContribRegistered = [] {
  register_op("_contrib_div_sqrt_dim")
      .describe("Rescales the input by the square root of its last dimension.")
      .deps(GradDeps{true, false, false})
      .cpu<DivSqrtDimKernel>()
      .sample({.attrs = {}, .in_shapes = {{2, 3, 4}}})
      .sample({.attrs = {}, .in_shapes = {{9}}});
  register_op("_contrib_quadratic")
      .describe("a * x^2 + b * x + c elementwise.")
      .params(kQuadraticSchema)
      .deps(GradDeps{true, true, false})
      .cpu<QuadraticKernel>()
      .sample({.attrs = {{"a", "0.5"}, {"b", "-1.5"}, {"c", "2"}}, .in_shapes = {{3, 4}}})
      .sample({.attrs = {}, .in_shapes = {{5}}});
  register_op("_contrib_index_array")
      .describe("An int64 array of the coordinates of every element of the input (along the "
                "selected axes), in a trailing axis.")
      .params(kIndexArraySchema)
      .shape_fn(infer_index_array)
      .type_fn([](const OpAttrs&, std::vector<DType>&, std::vector<DType>& out) {
        merge_type(out[0], DType::kInt64, "output 0");
      })
      .zero_grad()
      .deps(GradDeps{false, false, false})
      .cpu<IndexArrayKernel>()
      .sample({.attrs = {}, .in_shapes = {{2, 3}}})
      .sample({.attrs = {{"axes", "(-1, 0)"}}, .in_shapes = {{2, 3, 2}}});
  register_op("_contrib_allclose")
      .describe("1 (uint8) when every |a - b| <= atol + rtol * |b| (NaNs equal with equal_nan), "
                "else 0.")
      .params(kAllCloseSchema)
      .inputs({"a", "b"})
      .shape_fn([](const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
        if (in[0].ndim() && in[1].ndim() && in[0] != in[1])
          throw ShapeError("a " + in[0].str() + " and b " + in[1].str() + " differ in shape");
        merge_shape(out[0], Shape{1}, "output 0");
      })
      .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
        if (in[0] != DType::kUnknown) merge_type(in[1], in[0], "input 1 (b)");
        merge_type(out[0], DType::kUint8, "output 0");
      })
      .zero_grad()
      .deps(GradDeps{false, false, false})
      .cpu<AllCloseKernel>()
      .sample({.attrs = {}, .in_shapes = {{3, 4}, {3, 4}}})
      .sample({.attrs = {{"rtol", "10"}, {"atol", "10"}}, .in_shapes = {{5}, {5}}});
  return true;
}();

}  // namespace
}  // namespace loom
