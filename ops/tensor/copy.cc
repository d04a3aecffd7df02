// _copy (identity) and BlockGrad (stop_gradient): forward copies its input.
#include <cstring>

#include "ops/op.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

void copy_with_req(const NDArray& dst, const NDArray& src, Req req) {
  tensor::copy_req_any(dst, src, req);  // any dtype: integers wrap, float16 rounds
}

class CopyKernel final : public Kernel {
 public:
  explicit CopyKernel(const KernelArgs&) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    copy_with_req(out[0], in[0], req[0]);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    copy_with_req(ig[0], og[0], req[0]);
  }
};

LOOM_REGISTER_OP("_copy")
    .describe("Returns a copy of the input.")
    .alias("identity")
    .deps(GradDeps{true, false, false})
    .inplace_pairs({{0, 0}})
    .cpu<CopyKernel>()
    .layouts([](const OpAttrs&, const std::vector<Shape>&) {
      return elementwise_layout_rule(1, 1);
    })
    .sample({.attrs = {}, .in_shapes = {{2, 3}}});

LOOM_REGISTER_OP("BlockGrad")
    .describe("Identity in forward; stops the gradient: the input's gradient is zero.")
    .alias("stop_gradient")
    .deps(GradDeps{false, false, false})
    .zero_grad()
    .inplace_pairs({{0, 0}})
    .cpu<CopyKernel>()
    .sample({.attrs = {}, .in_shapes = {{2, 3}}, .check_grad = false});

}  // namespace
}  // namespace loom
