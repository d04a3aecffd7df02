// GPU kernels of dot and batch_dot (registered by dot.cc and batch_dot.cc): their products on
// cuBLAS (batch_dot as one strided-batched call), the gradient recipe of matmul.h that the
// CPU kernels run on their own gemm.
#include "ops/tensor/matmul.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

// `batch` row-major contiguous products C (=|+=) op(A)·op(B), each operand's entries one
// after the other.
struct CublasGemm {
  int dev;
  int64_t batch;
  void operator()(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                  const float* b, float* c, bool add) const {
    cuda::gemm_batched(dev, ta, tb, m, n, k, 1.f, a, ta ? m : k, m * k, b, tb ? k : n, k * n,
                       add ? 1.f : 0.f, c, n, m * n, batch);
  }
};

/// dot (batch 1) and batch_dot: (batch, m, n, k) and the transposes from the op's own
/// shape rules.
class MatmulGpuKernel final : public Kernel {
 public:
  MatmulGpuKernel(bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k)
      : ta_(ta), tb_(tb), batch_(batch), m_(m), n_(n), k_(k) {}

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    cuda::set_device(ctx.device.id);
    CublasGemm{ctx.device.id, batch_}(ta_, tb_, m_, n_, k_, in[0].data<float>(),
                                      in[1].data<float>(), out[0].data<float>(),
                                      req[0] == Req::kAdd);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    cuda::set_device(ctx.device.id);
    tensor::matmul_backward(CublasGemm{ctx.device.id, batch_}, ta_, tb_, m_, n_, k_,
                            og[0].data<float>(), in[0].data<float>(), in[1].data<float>(),
                            req[0] == Req::kNull ? nullptr : ig[0].data<float>(),
                            req[1] == Req::kNull ? nullptr : ig[1].data<float>(),
                            req[0] == Req::kAdd, req[1] == Req::kAdd);
  }

 private:
  bool ta_, tb_;
  int64_t batch_, m_, n_, k_;
};

std::unique_ptr<Kernel> make_dot(const KernelArgs& a) {
  cuda::require_float32(a);
  const auto& p = a.attrs.param<tensor::DotParam>();
  const tensor::DotDims d = tensor::dot_dims(a.attrs, a.in_shapes[0], a.in_shapes[1]);
  return std::make_unique<MatmulGpuKernel>(p.transpose_a, p.transpose_b, 1, d.m, d.n, d.k);
}

std::unique_ptr<Kernel> make_batch_dot(const KernelArgs& a) {
  cuda::require_float32(a);
  const auto& p = a.attrs.param<tensor::BatchDotParam>();
  const tensor::BatchDims d = tensor::batch_dims(a.attrs, a.in_shapes[0], a.in_shapes[1]);
  return std::make_unique<MatmulGpuKernel>(p.transpose_a, p.transpose_b, d.b, d.m, d.n, d.k);
}

LOOM_REGISTER_OP("dot").kernel(DeviceType::kGPU, make_dot);
LOOM_REGISTER_OP("batch_dot").kernel(DeviceType::kGPU, make_batch_dot);

}  // namespace
}  // namespace loom
