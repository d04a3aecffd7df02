// SoftmaxActivation (deprecated): softmax over the last axis (instance) or over the channel
// axis at each position (channel) (spec 6.15). MXNet's instance mode views the data with
// mshadow's FlatTo2D, i.e. (size/last, last): for 2-d (N, K) data that is one softmax per
// sample, for >2-d data it is a softmax over the last axis (checked against MXNet 1.9.1 by
// tests/conformance). MXNet's backward applies the channel-mode formula in both modes, which
// is not the gradient of its instance forward for >2-d data; Loom differentiates its forward.
#include "ops/dtype_policy.h"
#include "ops/nn/softmax_common.h"

namespace loom {
namespace {

using nn::SoftmaxActParam;

const auto kSoftmaxActSchema = ParamSchema<SoftmaxActParam>().choice(
    "mode", &SoftmaxActParam::mode, {"instance", "channel"}, "instance",
    "instance: softmax over the last axis (each sample's features for 2-d data); channel: "
    "over axis 1.");

class SoftmaxActKernel final : public Kernel {
 public:
  explicit SoftmaxActKernel(const KernelArgs& a)
      : view_(nn::softmax_act_view(a.attrs.param<SoftmaxActParam>().mode, a.in_shapes[0])) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    nn::softmax_forward(in[0].data<float>(), out[0].data<float>(), view_, 1.f, false,
                        nn::is_add(req[0]));
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    nn::softmax_backward(og[0].data<float>(), out[0].data<float>(), ig[0].data<float>(), view_, 1.f,
                         false, nn::is_add(req[0]));
  }

 private:
  nn::SoftmaxView view_;
};

// float32 only: oneDNN/naive float kernels; MXNet's CPU tests of SoftmaxActivation use float32.
LOOM_CPU_DTYPES("SoftmaxActivation", kDTypePolicyF32);

LOOM_REGISTER_OP("SoftmaxActivation")
    .describe("Softmax over each instance's features or over channels (deprecated).")
    .params(kSoftmaxActSchema)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = true})
    .inplace_pairs({{0, 0}})
    .cpu<SoftmaxActKernel>()
    .sample({.attrs = {}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"mode", "channel"}}, .in_shapes = {{2, 3, 2, 2}}});

}  // namespace
}  // namespace loom
