// Range and constant creation ops of MXNet 1.9.1 (src/operator/tensor/init_op.*), no inputs
// (but _contrib_arange_like) and no gradient:
//   _arange(start, stop, step, repeat, infer_range, dtype)  start + (i / repeat) * step, of
//       ceil((stop - start) / step) * repeat elements; without stop (and infer_range off) the
//       range is [0, start). With infer_range and no stop the length comes from the consumer
//       (backward shape inference).
//   _linspace(start, stop, num, endpoint, dtype)  start + i * (stop - start) / (num - endpoint)
//   _eye(N, M, k, dtype)                           N x (M or N), ones on diagonal k
//   _full(shape, value, dtype)                     every element `value`
//   _contrib_arange_like(data; start, step, repeat, axis)  a range shaped like data (or like
//       data's axis), of data's dtype; zero gradient.
// Values are computed as MXNet does: in the element type (integer types and float16 take
// the start and step truncated to integers, unsigned ones wrap), linspace in double then
// converted.
#include <cmath>
#include <optional>

#include "ops/infer.h"
#include "ops/tensor/creation_math.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

using tensor::EyeParam;
using tensor::FullParam;
using tensor::LinspaceParam;
using tensor::RangeLikeParam;
using tensor::RangeParam;

// ------------------------------------------------------------------------------ params

const auto kRangeSchema =
    ParamSchema<RangeParam>()
        .required("start", &RangeParam::start,
                  "Start of the interval (its stop when stop is absent).")
        .optional("stop", &RangeParam::stop, std::optional<double>(),
                  "End of the interval (excluded).")
        .optional("step", &RangeParam::step, 1.0, "Spacing between values.")
        .optional("repeat", &RangeParam::repeat, 1, "Times each element is repeated.")
        .optional("infer_range", &RangeParam::infer_range, false,
                  "Infer the stop from the output size when stop is absent.")
        .optional("ctx", &RangeParam::ctx, std::string(), "Device context (ignored).")
        .optional("dtype", &RangeParam::dtype, std::string("float32"), "Output type.")
        .check([](RangeParam& p) {
          if (dtype_from_string(p.dtype) == DType::kBool)
            throw ParamError("dtype bool is not supported");
          if (!p.infer_range && !p.stop) {  // arange(n) is [0, n)
            p.stop = p.start;
            p.start = 0;
          }
        });

const auto kLinspaceSchema =
    ParamSchema<LinspaceParam>()
        .required("start", &LinspaceParam::start, "The first value.")
        .required("stop", &LinspaceParam::stop, "The last value (with endpoint).")
        .required("num", &LinspaceParam::num, "Number of values (non-negative).")
        .optional("endpoint", &LinspaceParam::endpoint, true, "Whether stop is included.")
        .optional("ctx", &LinspaceParam::ctx, std::string(), "Device context (ignored).")
        .optional("dtype", &LinspaceParam::dtype, std::string("float32"), "Output type.")
        .check([](LinspaceParam& p) {
          if (dtype_from_string(p.dtype) == DType::kBool)
            throw ParamError("dtype bool is not supported");
          if (p.num < 0) throw ParamError("num must be non-negative, got " + std::to_string(p.num));
        });

const auto kEyeSchema =
    ParamSchema<EyeParam>()
        .required("N", &EyeParam::N, "Number of rows.")
        .optional("M", &EyeParam::M, int64_t{0}, "Number of columns (0: N).")
        .optional("k", &EyeParam::k, int64_t{0},
                  "Diagonal: 0 the main one, positive above, negative below.")
        .optional("ctx", &EyeParam::ctx, std::string(), "Device context (ignored).")
        .optional("dtype", &EyeParam::dtype, std::string("float32"), "Output type.")
        .check([](EyeParam& p) {
          if (dtype_from_string(p.dtype) == DType::kBool)
            throw ParamError("dtype bool is not supported");
          if (p.N < 0 || p.M < 0)
            throw ParamError("N and M must be non-negative, got N=" + std::to_string(p.N) +
                             ", M=" + std::to_string(p.M));
        });

const auto kFullSchema =
    ParamSchema<FullParam>()
        .optional("shape", &FullParam::shape, Shape(), "Shape of the output.")
        .optional("ctx", &FullParam::ctx, std::string(), "Device context (ignored).")
        .optional("dtype", &FullParam::dtype, std::string("float32"), "Output type.")
        .required("value", &FullParam::value, "The value every element gets.")
        .check([](FullParam& p) { dtype_from_string(p.dtype); });

const auto kRangeLikeSchema =
    ParamSchema<RangeLikeParam>()
        .optional("start", &RangeLikeParam::start, 0.0, "Start of the range.")
        .optional("step", &RangeLikeParam::step, 1.0, "Spacing between values.")
        .optional("repeat", &RangeLikeParam::repeat, 1, "Times each element is repeated.")
        .optional("ctx", &RangeLikeParam::ctx, std::string(), "Device context (ignored).")
        .optional("axis", &RangeLikeParam::axis, std::optional<int>(),
                  "The axis whose length the range has; absent: data's whole shape.")
        .check([](RangeLikeParam& p) {
          if (p.repeat <= 0)
            throw ParamError("repeat must be positive, got " + std::to_string(p.repeat));
        });

// ------------------------------------------------------------------------------ kernels

/// out[i] = start + (i / repeat) * step in T (MXNet's range_fwd).
template <class T>
void fill_range(T* out, int64_t n, double start, double step, int64_t repeat, Req req) {
  if constexpr (std::is_integral_v<T>) {
    // Integer types take start and step truncated (two's complement for unsigned ones).
    const int64_t s0 = static_cast<int64_t>(start), d = static_cast<int64_t>(step);
    tensor::write_t<T>(out, req, n, [=](int64_t i) {
      return static_cast<T>(tensor::range_elem_int(i, s0, d, repeat));
    });
  } else {
    using C = compute_t<T>;
    if constexpr (std::is_same_v<T, half_t>) {
      // MXNet 1.9.1 takes the integer path for float16 too (std::is_signed<half_t> is
      // false): arange(1.3, 5, 1.3, dtype=float16) is 1, 2, 3.
      start = static_cast<double>(static_cast<int64_t>(start));
      step = static_cast<double>(static_cast<int64_t>(step));
    }
    const C s0 = static_cast<C>(static_cast<T>(start)), d = static_cast<C>(static_cast<T>(step));
    // Rounded product then sum, as MXNet's kernel computes it (no fused multiply-add,
    // which rounds once and gives e.g. 7.7999997 instead of 7.8000002 for 1.3 + 5 * 1.3):
    // creation_math.h's rule, which the GPU kernel runs too.
    tensor::write_t<T>(out, req, n,
                       [=](int64_t i) { return static_cast<T>(tensor::range_elem(i, s0, d, repeat)); });
  }
}

class RangeKernel final : public Kernel {
 public:
  explicit RangeKernel(const KernelArgs& a) : t_(a.out_types[0]), what_(tensor::node_label(a)) {
    if (a.attrs.op->name == "_contrib_arange_like") {
      const auto& p = a.attrs.param<RangeLikeParam>();
      start_ = p.start, step_ = p.step, repeat_ = p.repeat;
    } else {
      const auto& p = a.attrs.param<RangeParam>();
      start_ = p.start, step_ = p.step, repeat_ = p.repeat;
    }
  }
  void forward(const OpContext&, std::span<const NDArray>, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_numeric(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          fill_range<T>(out[0].data<T>(), out[0].size(), start_, step_, repeat_, req[0]);
        },
        what_);
  }
  void backward(const OpContext&, std::span<const NDArray>, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    for (size_t k = 0; k < ig.size(); ++k)
      if (req[k] != Req::kNull && req[k] != Req::kAdd) ig[k].zero();
  }

 private:
  DType t_;
  std::string what_;
  double start_ = 0, step_ = 1;
  int64_t repeat_ = 1;
};

class LinspaceKernel final : public Kernel {
 public:
  explicit LinspaceKernel(const KernelArgs& a)
      : p_(a.attrs.param<LinspaceParam>()), t_(a.out_types[0]), what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray>, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const double step = tensor::linspace_step(p_), start = p_.start;
    tensor::dispatch_numeric(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          tensor::write_t<T>(out[0].data<T>(), req[0], out[0].size(), [=](int64_t i) {
            return convert_value<T>(tensor::linspace_elem(i, start, step));  // no FMA
          });
        },
        what_);
  }
  void backward(const OpContext&, std::span<const NDArray>, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req>, std::span<const NDArray>) override {
  }

 private:
  LinspaceParam p_;
  DType t_;
  std::string what_;
};

class EyeKernel final : public Kernel {
 public:
  explicit EyeKernel(const KernelArgs& a)
      : p_(a.attrs.param<EyeParam>()), t_(a.out_types[0]), what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray>, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const int64_t cols = p_.M > 0 ? p_.M : p_.N, k = p_.k;
    tensor::dispatch_numeric(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T one = convert_value<T>(1), zero = convert_value<T>(0);
          tensor::write_t<T>(out[0].data<T>(), req[0], out[0].size(),
                             [=](int64_t i) { return tensor::eye_one(i, cols, k) ? one : zero; });
        },
        what_);
  }
  void backward(const OpContext&, std::span<const NDArray>, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req>, std::span<const NDArray>) override {
  }

 private:
  EyeParam p_;
  DType t_;
  std::string what_;
};

class FullKernel final : public Kernel {
 public:
  explicit FullKernel(const KernelArgs& a)
      : v_(a.attrs.param<FullParam>().value), t_(a.out_types[0]), what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray>, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    dispatch_dtype(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          T v;
          if constexpr (std::is_same_v<T, bool>)
            v = v_ != 0;
          else if constexpr (std::is_integral_v<T>)
            v = static_cast<T>(static_cast<int64_t>(v_));
          else
            v = static_cast<T>(v_);
          tensor::write_t<T>(out[0].data<T>(), req[0], out[0].size(), [=](int64_t) { return v; });
        },
        what_);
  }
  void backward(const OpContext&, std::span<const NDArray>, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req>, std::span<const NDArray>) override {
  }

 private:
  double v_;
  DType t_;
  std::string what_;
};

// ------------------------------------------------------------------------------ inference

void infer_range(const OpAttrs& a, std::vector<Shape>&, std::vector<Shape>& out) {
  const auto& p = a.param<RangeParam>();
  if (p.step == 0) throw ShapeError("step must not be 0");
  if (p.repeat <= 0) throw ShapeError("repeat must be positive, got " + std::to_string(p.repeat));
  if (!p.stop) return;  // infer_range: the consumer decides the length
  const double stop = *p.stop;
  if (p.step > 0 ? !(p.start < stop) : !(p.start > stop))
    throw ShapeError("invalid range (start, stop, step) = (" + format_float(p.start) + ", " +
                     format_float(stop) + ", " + format_float(p.step) + ")");
  const double n = std::ceil((stop - p.start) / p.step) * p.repeat;
  merge_shape(out[0], Shape{static_cast<int64_t>(n)}, "output 0");
}

template <class P>
void infer_dtype_param(const OpAttrs& a, std::vector<DType>&, std::vector<DType>& out) {
  merge_type(out[0], dtype_from_string(a.param<P>().dtype), "output 0");
}

void infer_range_like(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const Shape& s = in[0];
  if (s.ndim() == 0) return;
  const auto& axis = a.param<RangeLikeParam>().axis;
  if (!axis) {
    merge_shape(out[0], s, "output 0");
    return;
  }
  const int nd = static_cast<int>(s.ndim());
  const int ax = *axis < 0 ? *axis + nd : *axis;
  if (ax < 0 || ax >= nd)
    throw ShapeError("axis " + std::to_string(*axis) + " is out of range for " + s.str());
  merge_shape(out[0], Shape{s[ax]}, "output 0");
}

void infer_range_like_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  if (in[0] != DType::kUnknown)
    merge_type(out[0], in[0], "output 0");
  else if (out[0] != DType::kUnknown)
    merge_type(in[0], out[0], "input 0");
}

[[maybe_unused]] const bool kRangeOpsRegistered = [] {
  register_op("_arange")
      .describe("Evenly spaced values in [start, stop), each repeated `repeat` times.")
      .params(kRangeSchema)
      .inputs(std::vector<std::string>{})
      .shape_fn(infer_range)
      .type_fn(infer_dtype_param<RangeParam>)
      .deps(GradDeps{false, false, false})
      .zero_grad()
      .cpu<RangeKernel>()
      .sample({.attrs = {{"start", "10"}}, .in_shapes = {}, .check_grad = false})
      .sample({.attrs = {{"start", "1.3"}, {"stop", "20"}, {"step", "1.3"}, {"repeat", "3"}},
               .in_shapes = {},
               .check_grad = false})
      .sample({.attrs = {{"start", "50"}, {"stop", "-50"}, {"step", "-2"}},
               .in_shapes = {},
               .check_grad = false});
  register_op("_linspace")
      .describe("num evenly spaced values from start to stop (stop excluded without endpoint).")
      .params(kLinspaceSchema)
      .inputs(std::vector<std::string>{})
      .shape_fn([](const OpAttrs& a, std::vector<Shape>&, std::vector<Shape>& out) {
        merge_shape(out[0], Shape{a.param<LinspaceParam>().num}, "output 0");
      })
      .type_fn(infer_dtype_param<LinspaceParam>)
      .deps(GradDeps{false, false, false})
      .zero_grad()
      .cpu<LinspaceKernel>()
      .sample({.attrs = {{"start", "0"}, {"stop", "10"}, {"num", "7"}},
               .in_shapes = {},
               .check_grad = false})
      .sample({.attrs = {{"start", "-1.5"}, {"stop", "3"}, {"num", "5"}, {"endpoint", "False"}},
               .in_shapes = {},
               .check_grad = false});
  register_op("_eye")
      .describe("An N x M (M = 0: N x N) matrix with ones on diagonal k.")
      .params(kEyeSchema)
      .inputs(std::vector<std::string>{})
      .shape_fn([](const OpAttrs& a, std::vector<Shape>&, std::vector<Shape>& out) {
        const auto& p = a.param<EyeParam>();
        merge_shape(out[0], Shape{p.N, p.M > 0 ? p.M : p.N}, "output 0");
      })
      .type_fn(infer_dtype_param<EyeParam>)
      .deps(GradDeps{false, false, false})
      .zero_grad()
      .cpu<EyeKernel>()
      .sample({.attrs = {{"N", "4"}}, .in_shapes = {}, .check_grad = false})
      .sample({.attrs = {{"N", "3"}, {"M", "5"}, {"k", "2"}}, .in_shapes = {}, .check_grad = false})
      .sample(
          {.attrs = {{"N", "5"}, {"M", "3"}, {"k", "-1"}}, .in_shapes = {}, .check_grad = false});
  register_op("_full")
      .describe("An array of the given shape and dtype filled with `value`.")
      .params(kFullSchema)
      .inputs(std::vector<std::string>{})
      .shape_fn([](const OpAttrs& a, std::vector<Shape>&, std::vector<Shape>& out) {
        // -1 (or 0) dims are unknown and come from the consumers, as for _zeros / _ones
        Shape s = a.param<FullParam>().shape;
        for (auto& d : s.dims())
          if (d < 0) d = 0;
        merge_shape(out[0], s, "output 0");
      })
      .type_fn(infer_dtype_param<FullParam>)
      .deps(GradDeps{false, false, false})
      .zero_grad()
      .cpu<FullKernel>()
      .sample(
          {.attrs = {{"shape", "(2, 3)"}, {"value", "2.5"}}, .in_shapes = {}, .check_grad = false});
  register_op("_contrib_arange_like")
      .describe("A range (start + (i / repeat) * step) shaped like data, or like one of its axes.")
      .params(kRangeLikeSchema)
      .inputs({"data"})
      .shape_fn(infer_range_like)
      .type_fn(infer_range_like_type)
      .deps(GradDeps{false, false, false})
      .zero_grad()
      .cpu<RangeKernel>()
      .sample({.attrs = {}, .in_shapes = {{2, 3}}, .check_grad = false})
      // integer start and step: float16 truncates them (MXNet), the dtype audit compares
      // float16 with float32
      .sample({.attrs = {{"start", "1"}, {"step", "2"}, {"repeat", "2"}, {"axis", "-1"}},
               .in_shapes = {{3, 4}},
               .check_grad = false});
  return true;
}();

}  // namespace
}  // namespace loom
