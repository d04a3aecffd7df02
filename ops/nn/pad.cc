// Pad(mode, pad_width, constant_value): pads the spatial axes of a 4-D or 5-D array (MXNet
// supports no others, and no padding of N or C) with a constant, the edge value, or the
// mirror image without repeating the edge (reflect). The gradient adds each output's
// gradient into the input element it copies (several, at edges and reflections).
#include "ops/infer.h"
#include "ops/nn/nn_dtype.h"
#include "ops/nn/pad_math.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

using nn::PadParam;  // pad_math.h (shared with pad.cu)
const auto kPadSchema =
    ParamSchema<PadParam>()
        .choice("mode", &PadParam::mode, {"constant", "edge", "reflect"}, "constant",
                "constant: fill with constant_value; edge: repeat the border; reflect: mirror.")
        .required("pad_width", &PadParam::pad_width,
                  "(before, after) per axis, axis 0 first: 2 * ndim entries.")
        .optional("constant_value", &PadParam::constant_value, 0.0, "The fill of constant mode.");

Shape pad_shape_of(const OpAttrs& a, const Shape& s) {
  const auto& p = a.param<PadParam>();
  const std::string who = "node '" + a.name + "' (op Pad): ";
  if (s.ndim() != 4 && s.ndim() != 5)
    throw ShapeError(who + "input 0 " + s.str() + " must be 4-D or 5-D (as in MXNet)");
  if (p.pad_width.ndim() != 2 * s.ndim())
    throw ShapeError(who + "pad_width " + p.pad_width.str() + " needs " + std::to_string(2 * s.ndim()) + " entries");
  Shape o = s;
  for (int d = 0; d < s.ndim(); ++d) {
    int64_t before = p.pad_width[2 * d], after = p.pad_width[2 * d + 1];
    if (before < 0 || after < 0) throw ShapeError(who + "pad_width " + p.pad_width.str() + " is negative");
    if (d < 2 && (before || after))
      throw ShapeError(who + "pad_width " + p.pad_width.str() + " pads the batch or channel axis");
    if (p.mode == "reflect" && (before >= s[d] || after >= s[d]))
      throw ShapeError(who + "reflect padding " + p.pad_width.str() + " must be smaller than input 0 " + s.str());
    o[d] = dim_add(dim_add(s[d], before, "Pad output"), after, "Pad output");
  }
  return o;
}

class PadKernel final : public Kernel {
 public:
  explicit PadKernel(const KernelArgs& a)
      : value_(a.attrs.param<PadParam>().constant_value), out_(a.out_shapes[0]),
        dtype_(a.in_types[0]), what_(tensor::node_label(a)) {
    const auto& p = a.attrs.param<PadParam>();
    const Shape& s = a.in_shapes[0];
    stride_.assign(static_cast<size_t>(s.ndim()), 1);
    for (int d = s.ndim() - 2; d >= 0; --d) stride_[d] = stride_[d + 1] * s[d + 1];
    // Per axis: the input index each output index copies, or -1 for the constant.
    for (int d = 0; d < s.ndim(); ++d) {
      const int64_t n = s[d], before = p.pad_width[2 * d];
      std::vector<int64_t> m(static_cast<size_t>(out_[d]));
      for (int64_t o = 0; o < out_[d]; ++o)
        m[static_cast<size_t>(o)] = nn::pad_source_index(o, n, before, nn::pad_mode(p.mode));
      src_.push_back(std::move(m));
    }
  }
  // A copy: exact in every numeric dtype (the fill converts like a cast).
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_numeric(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].cdata<T>();
      T* y = out[0].data<T>();
      const T fill = convert_value<T>(value_);
      const bool add = req[0] == Req::kAdd;
      tensor::for_each(out_.numel(), [&](int64_t o) {
        int64_t k = source(o);
        T v = k < 0 ? fill : x[k];
        if constexpr (is_float_v<T>)
          y[o] = add ? T(compute_t<T>(y[o]) + compute_t<T>(v)) : v;
        else
          y[o] = add ? static_cast<T>(y[o] + v) : v;
      });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      // Accumulate in the compute type, then store once (float16 rounds once per element).
      std::vector<C> acc(static_cast<size_t>(ig[0].size()), C(0));
      const T* g = og[0].cdata<T>();
      for (int64_t o = 0; o < out_.numel(); ++o)
        if (int64_t k = source(o); k >= 0) acc[static_cast<size_t>(k)] += nn::ld(g, o);
      T* dx = ig[0].data<T>();
      const bool add = req[0] == Req::kAdd;
      for (int64_t k = 0; k < ig[0].size(); ++k) nn::st(dx, k, acc[static_cast<size_t>(k)], add);
    }, what_);
  }

 private:
  int64_t source(int64_t o) const {
    int64_t k = 0;
    for (int d = out_.ndim() - 1; d >= 0; --d) {
      const int64_t i = src_[static_cast<size_t>(d)][static_cast<size_t>(o % out_[d])];
      o /= out_[d];
      if (i < 0) return -1;
      k += i * stride_[static_cast<size_t>(d)];
    }
    return k;
  }
  double value_;
  Shape out_;
  DType dtype_;
  std::string what_;
  std::vector<int64_t> stride_;
  std::vector<std::vector<int64_t>> src_;
};

LOOM_CPU_DTYPES("Pad", {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kUint8,
                        DType::kInt8, DType::kInt32, DType::kInt64});

LOOM_REGISTER_OP("Pad")
    .describe("Pads the spatial axes of a 4-D or 5-D array.")
    .alias("pad")
    .params(kPadSchema)
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      if (!in[0].known()) return;
      merge_shape(out[0], pad_shape_of(a, in[0]), "output 0");
    })
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .cpu<PadKernel>()
    .sample({.attrs = {{"mode", "constant"}, {"pad_width", "(0, 0, 0, 0, 1, 2, 2, 1)"}, {"constant_value", "-1"}},
             .in_shapes = {{1, 2, 3, 3}}})
    .sample({.attrs = {{"mode", "edge"}, {"pad_width", "(0, 0, 0, 0, 1, 2, 2, 1)"}}, .in_shapes = {{2, 1, 3, 3}}})
    .sample({.attrs = {{"mode", "reflect"}, {"pad_width", "(0, 0, 0, 0, 1, 2, 2, 1)"}}, .in_shapes = {{1, 1, 3, 4}}})
    .sample({.attrs = {{"mode", "edge"}, {"pad_width", "(0, 0, 0, 0, 1, 0, 0, 1, 1, 1)"}}, .in_shapes = {{1, 2, 2, 2, 3}}});

}  // namespace
}  // namespace loom
