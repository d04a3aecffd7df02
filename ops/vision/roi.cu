// GPU kernels of the ROI operators: _contrib_ROIAlign, _contrib_RROIAlign,
// _contrib_DeformablePSROIPooling, _contrib_PSROIPooling (linear maps of ops/vision/roi_math.h, the
// CPU loops' own per-output arithmetic) and ROIPooling (roi_math.h's bin maximum and its index).
// One thread per output; data gradients are added atomically where bins overlap (not
// bit-reproducible from run to run); the rois get a zero gradient, as on the CPU. float32 data and
// rois.
#include "ops/vision/linear_map.cuh"
#include "ops/vision/roi_math.h"

namespace loom {
namespace {

using vision::launch_linear_backward;
using vision::launch_linear_forward;
using vision::zero_req;

template <class Map>
class RoiMapGpuKernel final : public Kernel {
 public:
  RoiMapGpuKernel(const KernelArgs& a, Map m, const char* what) : m_(m), what_(what) {
    cuda::require_float32(a);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    launch_linear_forward(m_, ctx, in[0].data<float>(), in[1].data<float>(), out[0], req[0], what_);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (ig.size() > 1) zero_req(ctx, ig[1], req[1], what_);
    launch_linear_backward(m_, ctx, og[0].data<float>(), in[1].data<float>(), ig[0], req[0], what_);
  }

 private:
  Map m_;
  const char* what_;
};

std::unique_ptr<Kernel> roi_align_gpu(const KernelArgs& a) {
  const auto& p = a.attrs.param<vision::ROIAlignParam>();
  const Shape &d = a.in_shapes[0], &o = a.out_shapes[0];
  const vision::ROIAlignMap m{d[0],
                              d[1],
                              d[2],
                              d[3],
                              o[0],
                              o[1],
                              o[2],
                              o[3],
                              p.spatial_scale,
                              p.sample_ratio,
                              p.position_sensitive,
                              p.aligned};
  return std::make_unique<RoiMapGpuKernel<vision::ROIAlignMap>>(a, m, "ROIAlign");
}
std::unique_ptr<Kernel> rroi_align_gpu(const KernelArgs& a) {
  const auto& p = a.attrs.param<vision::RROIAlignParam>();
  const Shape &d = a.in_shapes[0], &o = a.out_shapes[0];
  const vision::RROIAlignMap m{
      d[0], d[1], d[2], d[3], o[0], o[2], o[3], p.spatial_scale, p.sampling_ratio};
  return std::make_unique<RoiMapGpuKernel<vision::RROIAlignMap>>(a, m, "RROIAlign");
}
std::unique_ptr<Kernel> psroi_gpu(const KernelArgs& a) {
  const auto& p = a.attrs.param<vision::PSROIParam>();
  const Shape &d = a.in_shapes[0], &o = a.out_shapes[0];
  const vision::PSROIMap m{d[0], d[1], d[2], d[3], o[0], o[1], o[2], p.group_size, p.spatial_scale};
  return std::make_unique<RoiMapGpuKernel<vision::PSROIMap>>(a, m, "PSROIPooling");
}

// ------------------------------------------------------------------ ROIPooling
__global__ void roi_pool_forward(vision::ROIPoolMath m, const float* x, const float* rois, float* y,
                                 int32_t* idx, int write_y, int add) {
  const int64_t n = m.outputs();
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x) {
    int32_t k;
    const float v = m.at(x, rois, o, &k);
    if (write_y) math::assign_req(y + o, add, v);
    if (idx) idx[o] = k;
  }
}
__global__ void roi_pool_backward(const float* g, const int32_t* idx, float* dx, int64_t n) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x)
    if (idx[o] >= 0) atomicAdd(dx + idx[o], g[o]);
}

class ROIPoolGpuKernel final : public Kernel {
 public:
  explicit ROIPoolGpuKernel(const KernelArgs& a) {
    for (size_t i = 0; i < 2; ++i)
      if (a.in_types[i] != DType::kFloat32)
        throw Error("op ROIPooling (node " + a.attrs.name +
                    "): the GPU kernel supports float32 only, got " + dtype_name(a.in_types[i]) +
                    " for input " + std::to_string(i));
    if (a.out_types[0] != DType::kFloat32)
      throw Error("op ROIPooling (node " + a.attrs.name +
                  "): the GPU kernel supports float32 only, got " + dtype_name(a.out_types[0]) +
                  " for output 0");
    const auto& p = a.attrs.param<vision::ROIPoolParam>();
    const Shape& d = a.in_shapes[0];
    m_ = {d[0],           d[1], d[2], d[3], a.in_shapes[1][0], p.pooled_size[0], p.pooled_size[1],
          p.spatial_scale};
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const bool want_idx = out.size() > 1 && req[1] != Req::kNull;
    if ((req[0] == Req::kNull && !want_idx) || m_.outputs() == 0) return;
    cudaStream_t s = cuda::stream_of(ctx);
    roi_pool_forward<<<cuda::grid_size(m_.outputs()), cuda::kBlockSize, 0, s>>>(
        m_, in[0].data<float>(), in[1].data<float>(),
        req[0] == Req::kNull ? nullptr : out[0].data<float>(),
        want_idx ? out[1].data<int32_t>() : nullptr, req[0] != Req::kNull, req[0] == Req::kAdd);
    cuda::check_launch("ROIPooling forward");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray> od, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (ig.size() > 1) zero_req(ctx, ig[1], req[1], "ROIPooling");
    if (req[0] == Req::kNull) return;
    cudaStream_t s = cuda::stream_of(ctx);
    if (req[0] != Req::kAdd)
      cuda::check(cudaMemsetAsync(ig[0].raw(), 0, ig[0].nbytes(), s), "ROIPooling backward");
    if (m_.outputs() == 0) return;
    roi_pool_backward<<<cuda::grid_size(m_.outputs()), cuda::kBlockSize, 0, s>>>(
        og[0].data<float>(), od[1].data<int32_t>(), ig[0].data<float>(), m_.outputs());
    cuda::check_launch("ROIPooling backward");
  }

 private:
  vision::ROIPoolMath m_{};
};

// ------------------------------------------------------------------ DeformablePSROIPooling
// One thread per output: the mean of its samples (vision::DPSMath, the CPU's) and the sample
// count (hidden output top_count); backward re-counts, then adds each sample's data and
// trans gradients atomically.
__global__ void dps_forward(vision::DPSMath m, const float* x, const float* rois, const float* tr,
                            float* y, float* cnt, int add_y, int add_c) {
  const int64_t n = m.outputs();
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x) {
    float sum = 0.f, c = 0.f;
    m.samples(o, x, rois, tr, [&](int64_t, float v, float, float, float, float, int64_t) {
      sum += v;
      c += 1.f;
    });
    if (y) math::assign_req(y + o, add_y, c > 0 ? sum / c : sum);
    if (cnt) math::assign_req(cnt + o, add_c, c);
  }
}
__global__ void dps_backward(vision::DPSMath m, const float* x, const float* rois, const float* tr,
                             const float* g, float* dx, float* dtr) {
  const int64_t n = m.outputs();
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x) {
    float c = 0.f;
    m.samples(o, x, rois, tr,
              [&](int64_t, float, float, float, float, float, int64_t) { c += 1.f; });
    if (c == 0.f) continue;
    const float gv = g[o] / c;
    m.samples(o, x, rois, tr,
              [&](int64_t base, float, float h, float w, float dvy, float dvx, int64_t ti) {
                m.sample_grad(base, h, w, dvy, dvx, ti, gv, [&](int k, int64_t i, float v) {
                  if (k == 0 && dx) atomicAdd(dx + i, v);
                  if (k == 1 && dtr) atomicAdd(dtr + i, v);
                });
              });
  }
}

class DPSGpuKernel final : public Kernel {
 public:
  explicit DPSGpuKernel(const KernelArgs& a) {
    cuda::require_float32(a);
    const auto& p = a.attrs.param<vision::DPSParam>();
    m_ = vision::dps_math(p, a.in_shapes, a.out_shapes[0]);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const bool want_c = out.size() > 1 && req[1] != Req::kNull;
    if ((req[0] == Req::kNull && !want_c) || m_.outputs() == 0) return;
    dps_forward<<<cuda::grid_size(m_.outputs()), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        m_, in[0].data<float>(), in[1].data<float>(), m_.no_trans ? nullptr : in[2].data<float>(),
        req[0] == Req::kNull ? nullptr : out[0].data<float>(),
        want_c ? out[1].data<float>() : nullptr, req[0] == Req::kAdd,
        want_c && req[1] == Req::kAdd);
    cuda::check_launch("DeformablePSROIPooling forward");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    zero_req(ctx, ig[1], req[1], "DeformablePSROIPooling");
    cudaStream_t s = cuda::stream_of(ctx);
    auto prep = [&](size_t k) -> float* {
      if (k >= ig.size() || req[k] == Req::kNull || ig[k].is_none()) return nullptr;
      if (req[k] != Req::kAdd)
        cuda::check(cudaMemsetAsync(ig[k].raw(), 0, ig[k].nbytes(), s), "DeformablePSROIPooling");
      return ig[k].data<float>();
    };
    float* dx = prep(0);
    float* dtr = m_.no_trans ? nullptr : prep(2);
    if ((!dx && !dtr) || m_.outputs() == 0) return;
    dps_backward<<<cuda::grid_size(m_.outputs()), cuda::kBlockSize, 0, s>>>(
        m_, in[0].data<float>(), in[1].data<float>(), m_.no_trans ? nullptr : in[2].data<float>(),
        og[0].data<float>(), dx, dtr);
    cuda::check_launch("DeformablePSROIPooling backward");
  }

 private:
  vision::DPSMath m_{};
};

LOOM_REGISTER_OP("_contrib_ROIAlign").kernel(DeviceType::kGPU, roi_align_gpu);
LOOM_REGISTER_OP("_contrib_RROIAlign").kernel(DeviceType::kGPU, rroi_align_gpu);
LOOM_REGISTER_OP("_contrib_PSROIPooling").kernel(DeviceType::kGPU, psroi_gpu);
LOOM_REGISTER_OP("_contrib_DeformablePSROIPooling")
    .kernel(DeviceType::kGPU, vision::gpu_factory<DPSGpuKernel>());
LOOM_REGISTER_OP("ROIPooling").kernel(DeviceType::kGPU, vision::gpu_factory<ROIPoolGpuKernel>());

}  // namespace
}  // namespace loom
