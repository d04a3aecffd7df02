// Three small ops of MXNet 1.9.1 that fit no other family:
//   _square_sum(data, axis, keepdims, exclude)   sum(data²) over axes (dense arrays; MXNet's
//       row_sparse fast path computes the same); gradient 2·x·dy.
//   _split_v2(data, indices, axis, squeeze_axis, sections)   pieces [indices[k],
//       indices[k+1]) along axis (the last to the end), or `sections` equal pieces; the
//       Python split_v2 wrappers prepend the 0. Gradient: the pieces' gradients side by side.
//   _histogram(data[, bins], bin_cnt, range)   counts (int64) of data in bin_cnt equal bins
//       over range, or in the given bin edges; and the edges. Values outside are ignored, the
//       last bin is closed. Not differentiable.
#include <algorithm>
#include <cstring>
#include <optional>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/reduce_axes.h"
#include "ops/tensor/reduce_extra_math.h"
#include "ops/tensor/reduce_extra_params.h"
#include "ops/tensor/split_concat.h"

namespace loom {
namespace {

// ---- _square_sum ----
class SquareSumKernel final : public Kernel {
 public:
  explicit SquareSumKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kFloatDTypes)), what_(tensor::node_label(a)) {
    const Shape& in = a.in_shapes[0];
    const Shape keep = tensor::axes_keep_shape(a.attrs.param<tensor::AxesParam>(), in);
    plan_ = tensor::make_reduce_plan(in, keep);
    back_ = tensor::make_bcast_plan(keep, in, in);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      tensor::reduce_t(
          plan_, in[0].data<T>(), out[0].data<T>(), req[0], 0.0,
          [](double acc, T v) {
            return acc + math::SquareMap::f(static_cast<double>(tensor::to_c(v)));
          },
          [](double acc) { return convert_value<T>(acc); });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *g = og[0].data<T>(), *x = in[0].data<T>();
      T* dx = ig[0].data<T>();
      const bool add = req[0] == Req::kAdd;
      tensor::bcast_for(back_, [=](int64_t i, int64_t o, int64_t) {
        const T v = tensor::from_c<T>(math::SquareSumGrad::grad(tensor::to_c(g[o]), tensor::to_c(x[i]),
                                                                decltype(tensor::to_c(x[i]))(0)));
        dx[i] = add ? tensor::add_value<T>(dx[i], v) : v;
      });
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
  tensor::ReducePlan plan_;
  tensor::BcastPlan back_;
};

// ---- _split_v2 ----
using tensor::SplitV2Param;  // split_concat.h (shared with split_concat.cu)
const auto kSplitV2Schema =
    ParamSchema<SplitV2Param>()
        .required("indices", &SplitV2Param::indices, "Indices of splits (the first is 0).")
        .optional("axis", &SplitV2Param::axis, 1, "Axis along which to split.")
        .optional("squeeze_axis", &SplitV2Param::squeeze_axis, false,
                  "If true, removes the split axis from the outputs (every piece must then "
                  "have length 1 along it).")
        .optional("sections", &SplitV2Param::sections, 0, "Number of equal sections (0: use indices).")
        .check([](SplitV2Param& p) {
          if (p.sections < 0) throw ParamError("sections must be >= 0");
          if (p.sections == 0) check_input_count(p.indices.ndim(), "indices");
          else check_input_count(p.sections, "sections");
        });

int split_count(const SplitV2Param& p) {
  return p.sections > 0 ? p.sections : static_cast<int>(p.indices.ndim());
}

using tensor::split_bounds;

void infer_split_v2(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  const auto& p = a.param<SplitV2Param>();
  const int ax = tensor::norm_axis(p.axis, in[0].ndim(), "axis");
  const auto b = split_bounds(a, in[0][ax]);
  for (size_t k = 0; k < out.size(); ++k) {
    std::vector<int64_t> d = in[0].dims();
    const int64_t len = b[k + 1] - b[k];
    if (p.squeeze_axis) {
      if (len != 1)
        throw ShapeError("squeeze_axis needs pieces of length 1, piece " + std::to_string(k) +
                         " has " + std::to_string(len));
      d.erase(d.begin() + ax);
      if (d.empty()) d.push_back(1);
    } else {
      d[static_cast<size_t>(ax)] = len;
    }
    merge_shape(out[k], Shape(std::move(d)), "output " + std::to_string(k));
  }
}

class SplitV2Kernel final : public Kernel {
 public:
  explicit SplitV2Kernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kNumericDTypes)), what_(tensor::node_label(a)) {
    const Shape& s = a.in_shapes[0];
    const int ax = tensor::norm_axis(a.attrs.param<SplitV2Param>().axis, s.ndim(), "axis");
    bounds_ = split_bounds(a.attrs, s[ax]);
    outer_ = 1, inner_ = 1, dim_ = s[ax];
    for (int d = 0; d < ax; ++d) outer_ *= s[d];
    for (int d = ax + 1; d < s.ndim(); ++d) inner_ *= s[d];
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      for (size_t k = 0; k < out.size(); ++k) {
        if (req[k] == Req::kNull) continue;
        const int64_t len = (bounds_[k + 1] - bounds_[k]) * inner_, start = bounds_[k] * inner_;
        T* y = out[k].data<T>();
        const bool add = req[k] == Req::kAdd;
        for (int64_t o = 0; o < outer_; ++o)
          for (int64_t j = 0; j < len; ++j) {
            const T v = x[o * dim_ * inner_ + start + j];
            T& d = y[o * len + j];
            d = add ? tensor::add_value<T>(d, v) : v;
          }
      }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* dx = ig[0].data<T>();
      const bool add = req[0] == Req::kAdd;
      for (size_t k = 0; k < og.size(); ++k) {
        const int64_t len = (bounds_[k + 1] - bounds_[k]) * inner_, start = bounds_[k] * inner_;
        const T* g = og[k].is_none() ? nullptr : og[k].data<T>();
        for (int64_t o = 0; o < outer_; ++o)
          for (int64_t j = 0; j < len; ++j) {
            T& d = dx[o * dim_ * inner_ + start + j];
            const T v = g ? g[o * len + j] : convert_value<T>(0);
            d = add ? tensor::add_value<T>(d, v) : v;
          }
      }
    }, what_);
  }

 private:
  DType t_;
  std::string what_;
  std::vector<int64_t> bounds_;
  int64_t outer_ = 1, inner_ = 1, dim_ = 1;
};

// ---- _histogram ----
using tensor::HistogramParam;
using tensor::histogram_range;
const auto kHistogramSchema =
    ParamSchema<HistogramParam>()
        .optional("bin_cnt", &HistogramParam::bin_cnt, std::optional<int>(),
                  "Number of bins for uniform case")
        .optional("range", &HistogramParam::range, std::string("None"),
                  "The lower and upper range of the bins (required with bin_cnt); values "
                  "outside the range are ignored.")
        .check([](HistogramParam& p) {
          const bool has_range = p.range != "None";
          if (p.bin_cnt.has_value() != has_range)
            throw ParamError("bin_cnt and range should both or neither be specified");
          if (p.bin_cnt && *p.bin_cnt < 1) throw ParamError("bin_cnt must be >= 1");
        });


void infer_histogram(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<HistogramParam>();
  if (p.bin_cnt) {
    const int64_t n = *p.bin_cnt;
    merge_shape(out[0], Shape{n}, "output 0");
    merge_shape(out[1], Shape{n + 1}, "output 1");
    return;
  }
  if (in[1].ndim() == 0) return;
  if (in[1].ndim() != 1 || in[1][0] < 2)
    throw ShapeError("bins must be a 1-D array of at least 2 edges, got " + in[1].str());
  merge_shape(out[0], Shape{in[1][0] - 1}, "output 0");
  merge_shape(out[1], in[1], "output 1");
}

class HistogramKernel final : public Kernel {
 public:
  explicit HistogramKernel(const KernelArgs& a)
      : p_(a.attrs.param<HistogramParam>()), t_(a.in_types[0]), what_(tensor::node_label(a)) {
    if (a.in_types.size() > 1 && a.in_types[1] != t_)
      throw Error(what_ + ": bins dtype " + dtype_name(a.in_types[1]) + " differs from data's " +
                  dtype_name(t_));
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].data<T>();
      T* edges = out[1].data<T>();
      const int64_t nb = out[0].size();
      std::vector<T> e(static_cast<size_t>(nb + 1));
      std::vector<int64_t> counts(static_cast<size_t>(nb), 0);
      auto load = [](T v) { return convert_value<double>(v); };
      if (p_.bin_cnt) {
        const auto [lo, hi] = histogram_range(p_);
        // The edges and bin rules of reduce_extra_math.h (the GPU kernel's too).
        for (int64_t i = 0; i <= nb; ++i)
          e[static_cast<size_t>(i)] = convert_value<T>(math::histogram_edge(i, nb, lo, hi));
        for (int64_t i = 0; i < in[0].size(); ++i) {
          const int64_t k =
              math::histogram_uniform_bin(convert_value<double>(x[i]), lo, hi, nb, e.data(), load);
          if (k >= 0) ++counts[static_cast<size_t>(k)];
        }
      } else {
        const T* b = in[1].data<T>();
        std::copy(b, b + nb + 1, e.begin());
        for (int64_t i = 0; i < in[0].size(); ++i) {
          const int64_t k = math::histogram_edges_bin(convert_value<double>(x[i]), nb, e.data(), load);
          if (k >= 0) ++counts[static_cast<size_t>(k)];
        }
      }
      if (req[1] != Req::kNull) {
        const T* ep = e.data();
        tensor::write_t<T>(edges, req[1], nb + 1, [=](int64_t i) { return ep[i]; });
      }
      if (req[0] != Req::kNull) {
        int64_t* c = out[0].data<int64_t>();
        const int64_t* cp = counts.data();
        tensor::write_t<int64_t>(c, req[0], nb, [=](int64_t i) { return cp[i]; });
      }
    }, what_);
  }

 private:
  HistogramParam p_;
  DType t_;
  std::string what_;
};

[[maybe_unused]] const bool kMiscOpsRegistered = [] {
  register_op("_square_sum")
      .describe("Sum of squares over the given axes (MXNet's sparse square_sum, on dense "
                "arrays).")
      .params(tensor::axes_schema())
      .shape_fn(tensor::infer_axes_reduce)
      .deps(GradDeps{true, true, false})
      .cpu<SquareSumKernel>()
      .sample({.attrs = {}, .in_shapes = {{2, 3, 4}}})
      .sample({.attrs = {{"axis", "1"}, {"keepdims", "True"}}, .in_shapes = {{4, 3}}})
      .sample({.attrs = {{"axis", "(0, 2)"}, {"exclude", "True"}}, .in_shapes = {{2, 3, 4}}});
  register_op("_split_v2")
      .describe("Splits an array along an axis at the given indices, or into equal sections.")
      .params(kSplitV2Schema)
      .outputs([](const OpAttrs& a) {
        std::vector<std::string> v;
        for (int i = 0; i < split_count(a.param<SplitV2Param>()); ++i)
          v.push_back("output" + std::to_string(i));
        return v;
      })
      .shape_fn(infer_split_v2)
      .deps(GradDeps{true, false, false})
      .cpu<SplitV2Kernel>()
      .sample({.attrs = {{"indices", "(0, 1, 3)"}, {"axis", "1"}}, .in_shapes = {{2, 5, 3}}})
      .sample({.attrs = {{"indices", "(0,)"}, {"sections", "2"}, {"axis", "-1"}},
               .in_shapes = {{3, 4}}})
      .sample({.attrs = {{"indices", "(0, 1, 2)"}, {"axis", "0"}, {"squeeze_axis", "True"}},
               .in_shapes = {{3, 2}}});
  register_op("_histogram")
      .describe("Histogram of the flattened data: int64 counts over bin_cnt equal bins in "
                "range, or over the given bin edges, and the bin edges.")
      .params(kHistogramSchema)
      .inputs([](const OpAttrs& a) {
        return a.param<HistogramParam>().bin_cnt ? std::vector<std::string>{"data"}
                                                 : std::vector<std::string>{"data", "bins"};
      })
      .outputs({"output0", "output1"})
      .shape_fn(infer_histogram)
      .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
        merge_type(out[0], DType::kInt64, "output 0");
        if (in[0] != DType::kUnknown) {
          merge_type(out[1], in[0], "output 1");
          if (in.size() > 1) merge_type(in[1], in[0], "input 1 (bins)");
        }
      })
      .zero_grad()
      .deps(GradDeps{false, false, false})
      .cpu<HistogramKernel>()
      .sample({.attrs = {{"bin_cnt", "4"}, {"range", "(-1.5, 1.5)"}}, .in_shapes = {{3, 5}},
               .check_grad = false});
  return true;
}();

}  // namespace
}  // namespace loom
