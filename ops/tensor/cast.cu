// GPU kernels of Cast (cast.cc) and amp_cast, amp_multicast (amp.cc): one grid-stride
// conversion kernel per (source, destination) dtype over the per-element rule of
// ops/tensor/cast_math.h, which tests check against the CPU kernels' convert_value; req=add
// accumulates in the destination type as on the CPU. Same-dtype writes are copies. The
// gradients are the CPU kernels': the output gradient cast back to the input's dtype (an
// unused amp output gives a zero gradient).
#include <string>

#include "ops/tensor/cast_math.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

using castm::F16;

template <class Fn>
void dispatch_device_dtype(DType t, Fn&& fn, const std::string& what) {
  switch (t) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kFloat16: return fn(F16{});
    case DType::kUint8: return fn(uint8_t{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt8: return fn(int8_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kBool: return fn(bool{});
    default: break;
  }
  throw Error(what + ": the GPU kernel does not support dtype " +
              (t == DType::kUnknown ? std::string("unknown") : std::string(dtype_name(t))));
}

template <class D, class S>
__global__ void cast_kernel(const S* s, D* d, int64_t n, int add) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const D v = castm::cast_value<D>(s[i]);
    d[i] = add ? castm::add_value<D>(d[i], v) : v;
  }
}

/// dst (with req) = src converted element-wise, on the context's stream.
void cast_req(const OpContext& ctx, const NDArray& src, const NDArray& dst, Req req,
              const std::string& what) {
  if (req == Req::kNull || src.size() == 0) return;
  cudaStream_t s = cuda::stream_of(ctx);
  if (src.dtype() == dst.dtype() && req != Req::kAdd) {
    if (src.raw() != dst.raw())
      cuda::check(cudaMemcpyAsync(dst.raw(), src.raw(), static_cast<size_t>(src.nbytes()),
                                  cudaMemcpyDeviceToDevice, s),
                  "cast copy");
    return;
  }
  const int64_t n = src.size();
  dispatch_device_dtype(src.dtype(), [&](auto st) {
    dispatch_device_dtype(dst.dtype(), [&](auto dt) {
      using S = decltype(st);
      using D = decltype(dt);
      cast_kernel<D, S><<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(
          static_cast<const S*>(src.raw()), static_cast<D*>(dst.raw()), n,
          req == Req::kAdd ? 1 : 0);
      cuda::check_launch("cast_kernel");
    }, what);
  }, what);
}

std::string label(const KernelArgs& a) {
  return "op " + a.attrs.op->name + " (node " + a.attrs.name + ")";
}

/// Output i = input i converted to output i's dtype; the gradient converts back.
class CastGpuKernel final : public Kernel {
 public:
  explicit CastGpuKernel(const KernelArgs& a) : what_(label(a)) {
    for (DType t : a.in_types) dispatch_device_dtype(t, [](auto) {}, what_);
    for (DType t : a.out_types) dispatch_device_dtype(t, [](auto) {}, what_);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    for (size_t i = 0; i < out.size(); ++i) cast_req(ctx, in[i], out[i], req[i], what_);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    for (size_t i = 0; i < ig.size(); ++i) {
      if (req[i] == Req::kNull) continue;
      if (og[i].is_none()) {  // an unused output contributes nothing
        if (req[i] != Req::kAdd)
          cuda::check(cudaMemsetAsync(ig[i].raw(), 0, static_cast<size_t>(ig[i].nbytes()),
                                      cuda::stream_of(ctx)),
                      "cast gradient zero");
        continue;
      }
      cast_req(ctx, og[i], ig[i], req[i], what_);
    }
  }

 private:
  std::string what_;
};

KernelFactory make_cast() {
  return [](const KernelArgs& a) -> std::unique_ptr<Kernel> {
    return std::make_unique<CastGpuKernel>(a);
  };
}

LOOM_REGISTER_OP("Cast").kernel(DeviceType::kGPU, make_cast());
LOOM_REGISTER_OP("amp_cast").kernel(DeviceType::kGPU, make_cast());
LOOM_REGISTER_OP("amp_multicast").kernel(DeviceType::kGPU, make_cast());

}  // namespace
}  // namespace loom
