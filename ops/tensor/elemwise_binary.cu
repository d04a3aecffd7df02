// GPU kernels for the same-shape binary ops (elemwise_add, _maximum, _equal, ...) and add_n (the
// ops and their CPU kernels are registered by elemwise_binary.cc). Arithmetic from the functors in
// ops/elemwise_math.h.
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

template <class F>
__global__ void binary_forward_kernel(const float* a, const float* b, float* z, int64_t n,
                                      int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    math::assign_req(z + i, add, F::f(a[i], b[i]));
}

// da/db may be null (req null). Every read precedes the writes, so either gradient may
// alias g (in-place gradient).
template <class F>
__global__ void binary_backward_kernel(const float* g, const float* a, const float* b, float* da,
                                       float* db, int64_t n, int add_a, int add_b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float gi = g[i], ai = a[i], bi = b[i];
    float va = gi * F::da(ai, bi), vb = gi * F::db(ai, bi);
    if (da) math::assign_req(da + i, add_a, va);
    if (db) math::assign_req(db + i, add_b, vb);
  }
}

template <class F>
class BinaryGpuKernel final : public Kernel {
 public:
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    int64_t n = out[0].size();
    if (n == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    binary_forward_kernel<F><<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(
        in[0].data<float>(), in[1].data<float>(), out[0].data<float>(), n, req[0] == Req::kAdd);
    cuda::check_launch("binary_forward_kernel");
  }

  // Inputs the op's GradDeps leave out are replaced by g: the functor ignores them.
  void backward(const OpContext& ctx, std::span<const NDArray> out_grad,
                std::span<const NDArray> in_data, std::span<const NDArray>,
                std::span<const Req> req, std::span<const NDArray> in_grad) override {
    float* da = req[0] == Req::kNull ? nullptr : in_grad[0].data<float>();
    float* db = req[1] == Req::kNull ? nullptr : in_grad[1].data<float>();
    if (!da && !db) return;
    int64_t n = out_grad[0].size();
    if (n == 0) return;
    const float* g = out_grad[0].data<float>();
    auto operand = [&](size_t i) {
      return in_data.size() <= i || in_data[i].is_none() ? g : in_data[i].data<float>();
    };
    cudaStream_t s = cuda::stream_of(ctx);
    binary_backward_kernel<F><<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(
        g, operand(0), operand(1), da, db, n, req[0] == Req::kAdd, req[1] == Req::kAdd);
    cuda::check_launch("binary_backward_kernel");
  }
};

template <class F>
KernelFactory binary_gpu() {
  return [](const KernelArgs& a) -> std::unique_ptr<Kernel> {
    cuda::require_float32(a);
    if (a.in_shapes.size() != 2 || a.in_shapes[0] != a.in_shapes[1] ||
        a.out_shapes[0] != a.in_shapes[0])
      throw ShapeError("op " + a.attrs.op->name + " (node " + a.attrs.name +
                       "): the GPU kernel needs two operands of the output's shape");
    return std::make_unique<BinaryGpuKernel<F>>();
  };
}

// add_n: y (=|+=) in0 + in1, then y += in_k for k >= 2 (y may alias in0: each pass reads an
// element before writing it); backward copies the output gradient to every input.
class AddNGpuKernel final : public Kernel {
 public:
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const int64_t n = out[0].size();
    if (n == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    float* y = out[0].data<float>();
    const int add = req[0] == Req::kAdd;
    if (in.size() == 1) {
      copy(s, y, in[0].data<float>(), n, add);
      return;
    }
    binary_forward_kernel<math::Add><<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(
        in[0].data<float>(), in[1].data<float>(), y, n, add);
    cuda::check_launch("add_n kernel");
    for (size_t k = 2; k < in.size(); ++k) copy(s, y, in[k].data<float>(), n, 1);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    cudaStream_t s = cuda::stream_of(ctx);
    for (size_t k = 0; k < ig.size(); ++k)
      if (req[k] != Req::kNull && ig[k].size() > 0)
        copy(s, ig[k].data<float>(), og[0].data<float>(), ig[k].size(), req[k] == Req::kAdd);
  }

 private:
  // dst (=|+=) src; a write over itself is a no-op (in-place gradient).
  static void copy(cudaStream_t s, float* dst, const float* src, int64_t n, int add) {
    if (add) {
      cuda::unary_forward_kernel<<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(math::Identity{},
                                                                                 src, dst, n, 1);
      cuda::check_launch("add_n add kernel");
    } else if (dst != src) {
      cuda::check(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, s),
                  "cudaMemcpyAsync");
    }
  }
};

LOOM_REGISTER_OP("elemwise_add").kernel(DeviceType::kGPU, binary_gpu<math::Add>());
LOOM_REGISTER_OP("elemwise_sub").kernel(DeviceType::kGPU, binary_gpu<math::Sub>());
LOOM_REGISTER_OP("elemwise_mul").kernel(DeviceType::kGPU, binary_gpu<math::Mul>());
LOOM_REGISTER_OP("elemwise_div").kernel(DeviceType::kGPU, binary_gpu<math::Div>());
LOOM_REGISTER_OP("_maximum").kernel(DeviceType::kGPU, binary_gpu<math::Maximum>());
LOOM_REGISTER_OP("_minimum").kernel(DeviceType::kGPU, binary_gpu<math::Minimum>());
LOOM_REGISTER_OP("_power").kernel(DeviceType::kGPU, binary_gpu<math::Power>());
LOOM_REGISTER_OP("add_n").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  cuda::require_float32(a);
  return std::unique_ptr<Kernel>(std::make_unique<AddNGpuKernel>());
});

// The comparisons (_equal, ...; zero gradient): the same kernel over math::cmp functors.
template <class F>
void reg(const char* name) {
  register_op(std::string("_") + name).kernel(DeviceType::kGPU, binary_gpu<F>());
}
[[maybe_unused]] const bool kComparisons = [] {
  using namespace math::cmp;
  reg<Equal>("equal");
  reg<NotEqual>("not_equal");
  reg<Greater>("greater");
  reg<GreaterEqual>("greater_equal");
  reg<Lesser>("lesser");
  reg<LesserEqual>("lesser_equal");
  reg<LogicalAnd>("logical_and");
  reg<LogicalOr>("logical_or");
  reg<LogicalXor>("logical_xor");
  return true;
}();

}  // namespace
}  // namespace loom
