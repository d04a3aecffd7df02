// softmax and log_softmax along one axis, with temperature (spec 6.14). The two share
// parameters and kernel and differ in one flag, so they are registered together.
#include <optional>

#include "ops/nn/softmax_common.h"

namespace loom {
namespace {

struct SoftmaxParam {
  int axis;
  std::optional<double> temperature;
  std::optional<std::string> dtype;
  bool use_length;
};

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
          if (p.use_length) throw ParamError("use_length=True is not supported");
          if (p.temperature && *p.temperature == 0) throw ParamError("temperature must be != 0");
        });

template <bool kLog>
class SoftmaxKernel final : public Kernel {
 public:
  explicit SoftmaxKernel(const KernelArgs& a)
      : view_(a.in_shapes[0], nn::normalize_axis(a.attrs.param<SoftmaxParam>().axis,
                                                 a.in_shapes[0].ndim(), a.attrs.op->name.c_str())),
        t_(static_cast<float>(a.attrs.param<SoftmaxParam>().temperature.value_or(1.0))),
        dtype_(a.in_types[0]), what_("node '" + a.attrs.name + "' (op " + a.attrs.op->name + ")") {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    nn::dispatch_floats(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      nn::softmax_forward(in[0].data<T>(), out[0].data<T>(), view_, t_, kLog, nn::is_add(req[0]));
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    nn::dispatch_floats(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      nn::softmax_backward(og[0].data<T>(), out[0].data<T>(), ig[0].data<T>(), view_, t_, kLog,
                           nn::is_add(req[0]));
    }, what_);
  }

 private:
  nn::SoftmaxView view_;
  float t_;
  DType dtype_;
  std::string what_;
};

LOOM_CPU_DTYPES("softmax", kDTypePolicyFloats);
LOOM_CPU_DTYPES("log_softmax", kDTypePolicyFloats);

constexpr GradDeps kSoftmaxDeps{.out_grad = true, .in_data = false, .out_data = true};

LOOM_REGISTER_OP("softmax")
    .describe("Applies the softmax function along an axis: exp(x/T) / Σ exp(x/T).")
    .params(kSoftmaxSchema)
    .deps(kSoftmaxDeps)
    .inplace_pairs({{0, 0}})
    .cpu<SoftmaxKernel<false>>()
    .sample({.attrs = {}, .in_shapes = {{2, 3, 5}}})
    .sample({.attrs = {{"axis", "1"}, {"temperature", "2.0"}}, .in_shapes = {{2, 3, 4}}});

LOOM_REGISTER_OP("log_softmax")
    .describe("Computes the log of softmax along an axis.")
    .params(kSoftmaxSchema)
    .deps(kSoftmaxDeps)
    .inplace_pairs({{0, 0}})
    .cpu<SoftmaxKernel<true>>()
    .sample({.attrs = {}, .in_shapes = {{2, 3, 5}}})
    .sample({.attrs = {{"axis", "0"}, {"temperature", "0.5"}}, .in_shapes = {{3, 4}}});

}  // namespace
}  // namespace loom
