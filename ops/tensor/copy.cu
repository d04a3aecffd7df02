// GPU kernels for _copy and BlockGrad (registered by copy.cc) and the shape-only views of
// reshape.cc (Reshape, Flatten, expand_dims, squeeze, reshape_like,
// _identity_with_attr_like_rhs): forward copies the input, backward passes the gradient
// through (BlockGrad's executor never asks for it); a view's second input (reshape_like's
// rhs) only lends its shape and gets a zero gradient. Also the constant fills of init_ops.cc
// (_zeros, _ones, zeros_like, ones_like): zeros of any dtype, ones in float32.
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

// dst (=|+=) src on the device's stream; a no-op write when dst aliases src.
void copy_req(const OpContext& ctx, const NDArray& dst, const NDArray& src, Req req) {
  if (req == Req::kNull || dst.size() == 0) return;
  cudaStream_t s = cuda::stream_of(ctx);
  if (req == Req::kAdd) {
    if (dst.dtype() != DType::kFloat32)
      throw Error(std::string("_copy: adding on the GPU supports float32 only, got ") +
                  dtype_name(dst.dtype()));
    int64_t n = dst.size();
    cuda::unary_forward_kernel<<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(
        math::Identity{}, src.data<float>(), dst.data<float>(), n, 1);
    cuda::check_launch("copy add kernel");
  } else if (dst.raw() != src.raw()) {
    cuda::check(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, s),
                "cudaMemcpyAsync");
  }
}

class CopyGpuKernel final : public Kernel {
 public:
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    copy_req(ctx, out[0], in[0], req[0]);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    copy_req(ctx, ig[0], og[0], req[0]);
  }
};

class ViewGpuKernel final : public Kernel {
 public:
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    copy_req(ctx, out[0], in[0], req[0]);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    copy_req(ctx, ig[0], og[0], req[0]);
    if (ig.size() > 1 && req[1] != Req::kNull && req[1] != Req::kAdd && ig[1].size() > 0)
      cuda::check(cudaMemsetAsync(ig[1].raw(), 0, ig[1].nbytes(), cuda::stream_of(ctx)),
                  "cudaMemsetAsync");
  }
};

std::unique_ptr<Kernel> make_copy(const KernelArgs&) { return std::make_unique<CopyGpuKernel>(); }

std::unique_ptr<Kernel> make_view(const KernelArgs& a) {
  if (a.in_types[0] != a.out_types[0])
    throw Error("op " + a.attrs.op->name + " (node " + a.attrs.name + "): output dtype " +
                dtype_name(a.out_types[0]) + " differs from input dtype " +
                dtype_name(a.in_types[0]));
  return std::make_unique<ViewGpuKernel>();
}

// y = v, ignoring the input (a unary functor for unary_forward_kernel).
struct Constant {
  float v;
  __device__ float f(float) const { return v; }
};

// zeros_like / ones_like / _zeros / _ones: out (=|+=) kValue; gradients are zero.
template <int kValue>
class FillGpuKernel final : public Kernel {
 public:
  void forward(const OpContext& ctx, std::span<const NDArray>, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const bool add = req[0] == Req::kAdd;
    if (req[0] == Req::kNull || out[0].size() == 0 || (add && kValue == 0)) return;
    cudaStream_t s = cuda::stream_of(ctx);
    if (kValue == 0) {
      cuda::check(cudaMemsetAsync(out[0].raw(), 0, out[0].nbytes(), s), "cudaMemsetAsync");
      return;
    }
    const int64_t n = out[0].size();
    float* y = out[0].data<float>();
    cuda::unary_forward_kernel<<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(
        Constant{static_cast<float>(kValue)}, y, y, n, add);
    cuda::check_launch("fill kernel");
  }
  void backward(const OpContext& ctx, std::span<const NDArray>, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    for (size_t k = 0; k < ig.size(); ++k)
      if (req[k] != Req::kNull && req[k] != Req::kAdd && ig[k].size() > 0)
        cuda::check(cudaMemsetAsync(ig[k].raw(), 0, ig[k].nbytes(), cuda::stream_of(ctx)),
                    "cudaMemsetAsync");
  }
};

template <int kValue>
KernelFactory fill_gpu() {
  return [](const KernelArgs& a) -> std::unique_ptr<Kernel> {
    if (kValue != 0 && a.out_types[0] != DType::kFloat32)
      throw Error("op " + a.attrs.op->name + " (node " + a.attrs.name + "): the GPU kernel " +
                  "fills float32 only, got " + dtype_name(a.out_types[0]));
    return std::make_unique<FillGpuKernel<kValue>>();
  };
}

LOOM_REGISTER_OP("_copy").kernel(DeviceType::kGPU, make_copy);
LOOM_REGISTER_OP("BlockGrad").kernel(DeviceType::kGPU, make_copy);
LOOM_REGISTER_OP("Reshape").kernel(DeviceType::kGPU, make_view);
LOOM_REGISTER_OP("Flatten").kernel(DeviceType::kGPU, make_view);
LOOM_REGISTER_OP("expand_dims").kernel(DeviceType::kGPU, make_view);
LOOM_REGISTER_OP("squeeze").kernel(DeviceType::kGPU, make_view);
LOOM_REGISTER_OP("reshape_like").kernel(DeviceType::kGPU, make_view);
LOOM_REGISTER_OP("_identity_with_attr_like_rhs").kernel(DeviceType::kGPU, make_view);
LOOM_REGISTER_OP("zeros_like").kernel(DeviceType::kGPU, fill_gpu<0>());
LOOM_REGISTER_OP("ones_like").kernel(DeviceType::kGPU, fill_gpu<1>());
LOOM_REGISTER_OP("_zeros").kernel(DeviceType::kGPU, fill_gpu<0>());
LOOM_REGISTER_OP("_ones").kernel(DeviceType::kGPU, fill_gpu<1>());

}  // namespace
}  // namespace loom
