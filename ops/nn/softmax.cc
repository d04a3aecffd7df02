// softmax and log_softmax along one axis, with temperature (spec 6.14). The two share
// parameters and kernel and differ in one flag, so they are registered together.
#include <optional>

#include "ops/infer.h"
#include "ops/nn/softmax_common.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/tensor_util.h"

namespace loom {
namespace {

using nn::SoftmaxParam;

const auto kSoftmaxSchema =
    ParamSchema<SoftmaxParam>()
        .optional("axis", &SoftmaxParam::axis, -1, "The axis along which to compute softmax.")
        .optional("temperature", &SoftmaxParam::temperature, std::optional<double>(),
                  "Temperature parameter in softmax (None = 1).")
        .optional("dtype", &SoftmaxParam::dtype, std::optional<std::string>(),
                  "Output dtype (only float32 is supported).")
        .optional("use_length", &SoftmaxParam::use_length, false,
                  "Whether to use the length input as a mask over the data input.")
        .check([](SoftmaxParam& p) {
          if (p.dtype && *p.dtype != "float32")
            throw ParamError("dtype " + *p.dtype + " is not supported (float32 only)");
          if (p.temperature && *p.temperature == 0) throw ParamError("temperature must be != 0");
        });

// use_length: a second input `length` (data's shape without the softmax axis, any numeric
// dtype) limits each row to its first `length` entries; the rest is 0 (MXNet's masked
// softmax). It gets no gradient (zeros are written when one is asked for).
std::vector<std::string> softmax_inputs(const OpAttrs& a) {
  if (a.param<SoftmaxParam>().use_length) return {"data", "length"};
  return {"data"};
}

void infer_softmax_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  merge_shape(out[0], in[0], "output 0");
  merge_shape(in[0], out[0], input_label(a, 0));
  if (in.size() < 2 || in[0].ndim() == 0) return;
  const int ax = nn::normalize_axis(a.param<SoftmaxParam>().axis, in[0].ndim(), a.op->name.c_str());
  auto dims = in[0].dims();
  dims.erase(dims.begin() + ax);
  if (dims.empty()) dims.push_back(1);
  merge_shape(in[1], Shape(dims), input_label(a, 1));
}

void infer_softmax_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  merge_type(out[0], in[0], "output 0");
  merge_type(in[0], out[0], input_label(a, 0));
  if (in.size() > 1 && in[1] == DType::kUnknown) in[1] = DType::kInt32;
}

template <bool kLog>
class SoftmaxKernel final : public Kernel {
 public:
  explicit SoftmaxKernel(const KernelArgs& a)
      : view_(a.in_shapes[0], nn::normalize_axis(a.attrs.param<SoftmaxParam>().axis,
                                                 a.in_shapes[0].ndim(), a.attrs.op->name.c_str())),
        t_(static_cast<float>(a.attrs.param<SoftmaxParam>().temperature.value_or(1.0))),
        dtype_(a.in_types[0]), use_length_(a.attrs.param<SoftmaxParam>().use_length),
        what_("node '" + a.attrs.name + "' (op " + a.attrs.op->name + ")") {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const int64_t* len = lengths(in);
    nn::dispatch_floats(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      nn::softmax_forward(in[0].data<T>(), out[0].data<T>(), view_, t_, kLog, nn::is_add(req[0]),
                          len);
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (use_length_ && req.size() > 1 && req[1] == Req::kWrite) tensor::fill_req(ig[1], req[1], 0.f);
    if (req[0] == Req::kNull) return;
    const int64_t* len = lengths(in);
    nn::dispatch_floats(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      nn::softmax_backward(og[0].data<T>(), out[0].data<T>(), ig[0].data<T>(), view_, t_, kLog,
                           nn::is_add(req[0]), len);
    }, what_);
  }

 private:
  // The length input as int64 (any numeric dtype), or null without use_length.
  const int64_t* lengths(std::span<const NDArray> in) {
    if (!use_length_ || in.size() < 2) return nullptr;
    const NDArray& l = in[1];
    len_.resize(static_cast<size_t>(l.size()));
    dispatch_dtype(l.dtype(), [&](auto tag) {
      using L = typename decltype(tag)::type;
      const L* p = l.data<L>();
      for (int64_t i = 0; i < l.size(); ++i)
        len_[static_cast<size_t>(i)] = static_cast<int64_t>(tensor::to_c(p[i]));
    }, what_);
    return len_.data();
  }

  nn::SoftmaxView view_;
  float t_;
  DType dtype_;
  bool use_length_;
  std::vector<int64_t> len_;
  std::string what_;
};

LOOM_CPU_DTYPES("softmax", kDTypePolicyFloats, {.any_inputs = {1}});
LOOM_CPU_DTYPES("log_softmax", kDTypePolicyFloats, {.any_inputs = {1}});

constexpr GradDeps kSoftmaxDeps{.out_grad = true, .in_data = false, .out_data = true};

LOOM_REGISTER_OP("softmax")
    .describe("Applies the softmax function along an axis: exp(x/T) / Σ exp(x/T); with "
              "use_length, each row over its first `length` entries only.")
    .params(kSoftmaxSchema)
    .inputs(softmax_inputs)
    .shape_fn(infer_softmax_shape)
    .type_fn(infer_softmax_type)
    .no_grad({1})
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = true})
    .inplace_pairs({{0, 0}})
    .cpu<SoftmaxKernel<false>>()
    .sample({.attrs = {}, .in_shapes = {{2, 3, 5}}})
    .sample({.attrs = {{"axis", "1"}, {"temperature", "2.0"}}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"axis", "1"}, {"use_length", "True"}},
             .in_shapes = {{2, 4, 3}, {2, 3}},
             .in_kinds = {"normal", "index:5"}});

LOOM_REGISTER_OP("log_softmax")
    .describe("Computes the log of softmax along an axis (with use_length, over each row's "
              "first `length` entries).")
    .params(kSoftmaxSchema)
    .inputs(softmax_inputs)
    .shape_fn(infer_softmax_shape)
    .type_fn(infer_softmax_type)
    .no_grad({1})
    .deps(kSoftmaxDeps)
    .inplace_pairs({{0, 0}})
    .cpu<SoftmaxKernel<true>>()
    .sample({.attrs = {}, .in_shapes = {{2, 3, 5}}})
    .sample({.attrs = {{"axis", "0"}, {"temperature", "0.5"}}, .in_shapes = {{3, 4}}});

}  // namespace
}  // namespace loom
