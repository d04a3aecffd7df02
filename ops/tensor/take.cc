// take(a, indices, axis, mode): out = a with `axis` replaced by the indices' axes, each
// index (truncated) selecting a slice: clipped into range (clip), taken modulo the axis size
// (wrap), or an error when out of range (raise). The gradient adds each output slice back
// into the slice it came from; the indices get none.
#include "ops/infer.h"
#include "ops/tensor/gather_math.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

using tensor::TakeParam;  // gather_math.h (shared with gathers.cu)
const auto kTakeSchema =
    ParamSchema<TakeParam>()
        .optional("axis", &TakeParam::axis, int64_t{0}, "The axis of a to take along.")
        .choice("mode", &TakeParam::mode, {"clip", "wrap", "raise"}, "clip",
                "Out-of-range indices: clip, wrap around, or raise an error.");

void infer_take(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0 || in[1].ndim() == 0) return;
  int ax = tensor::norm_axis(a.param<TakeParam>().axis, in[0].ndim(), "node '" + a.name + "' (op take): axis");
  std::vector<int64_t> d(in[0].begin(), in[0].begin() + ax);
  d.insert(d.end(), in[1].begin(), in[1].end());
  d.insert(d.end(), in[0].begin() + ax + 1, in[0].end());
  merge_shape(out[0], Shape(std::move(d)), "output 0");
}

void infer_take_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  if (in[0] != DType::kUnknown) merge_type(out[0], in[0], "output 0");
  if (out[0] != DType::kUnknown) merge_type(in[0], out[0], input_label(a, 0));
  if (in[1] == DType::kUnknown) in[1] = DType::kFloat32;  // indices: float32 by default
}

class TakeKernel final : public Kernel {
 public:
  explicit TakeKernel(const KernelArgs& a)
      : name_(a.attrs.name), t_(a.in_types[0]), what_(tensor::node_label(a)) {
    const std::string& m = a.attrs.param<TakeParam>().mode;
    mode_ = m == "wrap" ? Mode::kWrap : m == "raise" ? Mode::kRaise : Mode::kClip;
    if (a.out_types[0] != t_)
      throw Error(what_ + ": output dtype " + dtype_name(a.out_types[0]) +
                  " differs from input dtype " + dtype_name(t_));
    dispatch_dtype(t_, [](auto) {}, what_);
    dispatch_dtype(a.in_types[1], [](auto) {}, what_);
    const Shape& s = a.in_shapes[0];
    int ax = tensor::norm_axis(a.attrs.param<TakeParam>().axis, s.ndim(), "axis");
    for (int d = 0; d < ax; ++d) outer_ *= s[d];
    for (int d = ax + 1; d < s.ndim(); ++d) inner_ *= s[d];
    n_ = s[ax];
    count_ = a.in_shapes[1].numel();
  }
  // The output as (outer, count, inner) reading a as (outer, n, inner). Data of any dtype;
  // indices of any dtype (read as float, as MXNet).
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const std::vector<int64_t> rows = read_rows(in[1]);
    dispatch_dtype(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].cdata<T>();
      T* y = out[0].data<T>();
      const bool add = req[0] == Req::kAdd;
      for (int64_t o = 0; o < outer_; ++o)
        for (int64_t j = 0; j < count_; ++j) {
          const T* src = x + (o * n_ + rows[static_cast<size_t>(j)]) * inner_;
          T* dst = y + (o * count_ + j) * inner_;
          for (int64_t i = 0; i < inner_; ++i)
            dst[i] = add ? tensor::add_value<T>(dst[i], src[i]) : src[i];
        }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    const std::vector<int64_t> rows = read_rows(in[1]);
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (req[0] != Req::kAdd) tensor::fill_req(ig[0], req[0], 0.f);
      const T* g = og[0].cdata<T>();
      T* dx = ig[0].data<T>();
      for (int64_t o = 0; o < outer_; ++o)
        for (int64_t j = 0; j < count_; ++j) {
          T* dst = dx + (o * n_ + rows[static_cast<size_t>(j)]) * inner_;
          const T* src = g + (o * count_ + j) * inner_;
          for (int64_t i = 0; i < inner_; ++i) dst[i] = tensor::add_value<T>(dst[i], src[i]);
        }
    }, what_);
  }

 private:
  std::vector<int64_t> read_rows(const NDArray& idx) const {
    std::vector<int64_t> rows(static_cast<size_t>(count_));
    dispatch_dtype(idx.dtype(), [&](auto tag) {
      using I = typename decltype(tag)::type;
      const I* p = idx.cdata<I>();
      for (int64_t j = 0; j < count_; ++j)
        rows[static_cast<size_t>(j)] = row(static_cast<float>(convert_value<double>(p[j])));
    }, what_);
    return rows;
  }
  // An index truncated toward zero, then clipped, wrapped or checked.
  int64_t row(float v) const {
    if (mode_ == Mode::kWrap) return tensor::index_row(v, n_, true);
    if (mode_ == Mode::kRaise && !(v > -1.f && v < static_cast<float>(n_)))
      throw Error("node '" + name_ + "' (op take): index " + std::to_string(v) +
                  " is out of range for an axis of size " + std::to_string(n_));
    return tensor::index_row(v, n_, false);
  }
  enum class Mode { kClip, kWrap, kRaise };
  std::string name_;
  DType t_;
  std::string what_;
  Mode mode_;
  int64_t outer_ = 1, inner_ = 1, n_ = 1, count_ = 0;
};

LOOM_REGISTER_OP("take")
    .describe("Takes slices of an array along an axis at the given indices.")
    .params(kTakeSchema)
    .inputs({"a", "indices"})
    .shape_fn(infer_take)
    .type_fn(infer_take_type)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .no_grad({1})
    .cpu<TakeKernel>()
    .sample({.attrs = {}, .in_shapes = {{3, 4}, {4}}, .in_kinds = {"normal", "index:5"}})
    .sample({.attrs = {{"axis", "1"}, {"mode", "wrap"}}, .in_shapes = {{3, 4}, {2, 3}},
             .in_kinds = {"normal", "index:9"}})
    .sample({.attrs = {{"axis", "-1"}}, .in_shapes = {{2, 3, 4}, {2}}, .in_kinds = {"normal", "index:4"}});

}  // namespace
}  // namespace loom
