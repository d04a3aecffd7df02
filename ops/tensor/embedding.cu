// GPU kernel of Embedding (registered by embedding.cc): rows of the weight gathered by the
// index rule of embedding_math.h (the CPU kernel's), the weight gradient scattered with
// atomic adds (so repeated indices sum in an unspecified order: float rounding may differ
// from the CPU's serial sum). float32 weights; float32 or int32 indices.
#include "ops/tensor/embedding_math.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

// y[i, j] (=|+=) w[row(idx[i]), j] over n x dim outputs.
template <class I>
__global__ void embedding_forward(const I* idx, const float* w, float* y, int64_t n, int64_t dim,
                                  int64_t rows, int add) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n * dim;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / dim, j = k % dim;
    const int64_t r = tensor::embedding_row(static_cast<double>(idx[i]), rows);
    math::assign_req(y + k, add, w[r * dim + j]);
  }
}

// dw[row(idx[i]), j] += g[i, j].
template <class I>
__global__ void embedding_backward(const I* idx, const float* g, float* dw, int64_t n, int64_t dim,
                                   int64_t rows) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n * dim;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = k / dim, j = k % dim;
    const int64_t r = tensor::embedding_row(static_cast<double>(idx[i]), rows);
    atomicAdd(dw + r * dim + j, g[k]);
  }
}

template <class I>
class EmbeddingGpuKernel final : public Kernel {
 public:
  explicit EmbeddingGpuKernel(const KernelArgs& a)
      : rows_(a.in_shapes[1][0]), dim_(a.in_shapes[1][1]), n_(a.in_shapes[0].numel()) {}
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull || n_ * dim_ == 0) return;
    embedding_forward<I><<<cuda::grid_size(n_ * dim_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        in[0].data<I>(), in[1].data<float>(), out[0].data<float>(), n_, dim_, rows_,
        req[0] == Req::kAdd);
    cuda::check_launch("embedding_forward");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[1] == Req::kNull) return;
    cudaStream_t s = cuda::stream_of(ctx);
    if (req[1] != Req::kAdd)
      cuda::check(cudaMemsetAsync(ig[1].raw(), 0, ig[1].nbytes(), s), "cudaMemsetAsync");
    if (n_ * dim_ == 0) return;
    embedding_backward<I><<<cuda::grid_size(n_ * dim_), cuda::kBlockSize, 0, s>>>(
        in[0].data<I>(), og[0].data<float>(), ig[1].data<float>(), n_, dim_, rows_);
    cuda::check_launch("embedding_backward");
  }

 private:
  int64_t rows_, dim_, n_;
};

std::unique_ptr<Kernel> make_embedding(const KernelArgs& a) {
  auto fail = [&](const std::string& what) {
    return Error("op Embedding (node " + a.attrs.name + "): the GPU kernel " + what);
  };
  if (a.in_types[1] != DType::kFloat32 || a.out_types[0] != DType::kFloat32)
    throw fail("supports float32 weights only, got " + std::string(dtype_name(a.in_types[1])));
  if (a.in_types[0] == DType::kFloat32) return std::make_unique<EmbeddingGpuKernel<float>>(a);
  if (a.in_types[0] == DType::kInt32) return std::make_unique<EmbeddingGpuKernel<int32_t>>(a);
  throw fail("takes float32 or int32 indices, got " + std::string(dtype_name(a.in_types[0])));
}

LOOM_REGISTER_OP("Embedding").kernel(DeviceType::kGPU, make_embedding);

}  // namespace
}  // namespace loom
