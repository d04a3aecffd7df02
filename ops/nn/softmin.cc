// softmin(axis, temperature): softmax of -x / temperature along an axis (MXNet 1.9.1), shifted
// by the minimum so large inputs do not overflow. The gradient follows from softmax's:
// dx = -y * (dy - sum(dy * y)) / t. The row arithmetic is in softmax_common.h (shared with
// the CUDA kernel, softmax.cu).
#include <cmath>
#include <optional>

#include "ops/infer.h"
#include "ops/nn/softmax_common.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

using nn::SoftminParam;

const auto kSoftminSchema =
    ParamSchema<SoftminParam>()
        .optional("axis", &SoftminParam::axis, int64_t{-1},
                  "The axis along which to compute softmin.")
        .optional("temperature", &SoftminParam::temperature, std::optional<double>(),
                  "Temperature parameter (None = 1).")
        .optional("dtype", &SoftminParam::dtype, std::optional<std::string>(),
                  "Output dtype (only float32 is supported; None keeps the input's).")
        .optional("use_length", &SoftminParam::use_length, false,
                  "Whether to use a length input as a mask (not supported).")
        .check([](SoftminParam& p) {
          if (p.dtype && *p.dtype != "float32")
            throw ParamError("dtype " + *p.dtype + " is not supported (float32 only)");
          if (p.use_length) throw ParamError("use_length=True is not supported");
          if (p.temperature && *p.temperature == 0) throw ParamError("temperature must be != 0");
        });

class SoftminKernel final : public Kernel {
 public:
  explicit SoftminKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kFloatDTypes)), what_(tensor::node_label(a)) {
    const auto& p = a.attrs.param<SoftminParam>();
    const Shape& s = a.in_shapes[0];
    const int ax = tensor::norm_axis(p.axis, s.ndim(), what_ + ": axis");
    for (int d = 0; d < ax; ++d) outer_ *= s[d];
    for (int d = ax + 1; d < s.ndim(); ++d) inner_ *= s[d];
    n_ = s[ax];
    temp_ = p.temperature.value_or(1.0);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* x = in[0].cdata<T>();
          T* y = out[0].data<T>();
          for (int64_t o = 0; o < outer_; ++o)
            for (int64_t j = 0; j < inner_; ++j) {
              const int64_t base = o * n_ * inner_ + j;
              nn::softmin_row_forward(x + base, y + base, n_, inner_, -1.0 / temp_,
                                      req[0] == Req::kAdd);
            }
        },
        what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T *g = og[0].cdata<T>(), *y = out[0].cdata<T>();
          T* dx = ig[0].data<T>();
          for (int64_t o = 0; o < outer_; ++o)
            for (int64_t j = 0; j < inner_; ++j) {
              const int64_t base = o * n_ * inner_ + j;
              nn::softmin_row_backward(g + base, y + base, dx + base, n_, inner_, temp_,
                                       req[0] == Req::kAdd);
            }
        },
        what_);
  }

 private:
  int64_t outer_ = 1, n_ = 1, inner_ = 1;
  double temp_ = 1;
  DType t_;
  std::string what_;
};

LOOM_REGISTER_OP("softmin")
    .describe("Applies softmin along an axis: exp(-x/T) / sum exp(-x/T).")
    .params(kSoftminSchema)
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      if (in[0].ndim() != 0)
        tensor::norm_axis(a.param<SoftminParam>().axis, in[0].ndim(),
                          "node '" + a.name + "' (op softmin): axis");
      infer_shape_same(a, in, out);
    })
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      // dtype='float32' fixes the output; the kernel then needs a float32 input too.
      if (a.param<SoftminParam>().dtype) merge_type(out[0], DType::kFloat32, "output 0");
      if (in[0] != DType::kUnknown) merge_type(out[0], in[0], "output 0");
      if (out[0] != DType::kUnknown) merge_type(in[0], out[0], input_label(a, 0));
      if (in[0] == DType::kUnknown) in[0] = out[0] = DType::kFloat32;
    })
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = true})
    .inplace_pairs({{0, 0}})
    .cpu<SoftminKernel>()
    .sample({.attrs = {}, .in_shapes = {{2, 3, 5}}})
    .sample({.attrs = {{"axis", "1"}, {"temperature", "2.0"}}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"axis", "0"}, {"temperature", "0.5"}}, .in_shapes = {{3, 4}}});

}  // namespace
}  // namespace loom
