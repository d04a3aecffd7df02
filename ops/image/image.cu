// GPU kernels of the image preprocessing ops over the CPU loops' index and value rules
// (ops/image/image_math.h): _image_to_tensor, _image_normalize, _image_crop, _image_resize
// (the four MXNet 1.9.1 runs on GPU) and _image_flip_left_right, _image_flip_top_bottom,
// _image_adjust_lighting. Images come as float32 or uint8 (the data pipeline's dtype);
// to_tensor writes float32, normalize takes float32. Gradients are float32 only. The flips
// gather through the workspace, since they may run in place.
#include <cstdint>
#include <type_traits>

#include "ops/float_tuple.h"
#include "ops/image/image_math.h"
#include "ops/vision/linear_map.cuh"

namespace loom {
namespace {

template <class T>
__device__ __forceinline__ void store(T* p, int add, T v) {
  *p = add ? static_cast<T>(*p + v) : v;
}

// Throws unless input 0 and output 0 have one of the dtypes the GPU kernel takes.
DType require_image_dtype(const KernelArgs& a, bool out_float32, bool allow_u8 = true) {
  const DType t = a.in_types[0];
  const bool ok = t == DType::kFloat32 || (allow_u8 && t == DType::kUint8);
  const DType o = a.out_types[0];
  if (!ok || o != (out_float32 ? DType::kFloat32 : t))
    throw Error("op " + a.attrs.op->name + " (node " + a.attrs.name + "): the GPU kernel takes " +
                (allow_u8 ? "float32 or uint8" : "float32") + " images, got " + dtype_name(t) +
                " -> " + dtype_name(o));
  return t;
}
// Gradients: float32 only.
void require_float_grad(const std::string& op, const std::string& node, DType t) {
  if (t != DType::kFloat32)
    throw Error("op " + op + " (node " + node + "): the GPU gradient takes float32 only, got " +
                dtype_name(t));
}

// ------------------------------------------------------------------ gathers
struct CropSrc {
  image::CropMap m;
  LOOM_HD int64_t operator()(int64_t o) const { return m.src(o); }
};
struct FlipSrc {
  int64_t H, W, C;
  bool lr;
  LOOM_HD int64_t operator()(int64_t o) const { return image::flip_src(o, H, W, C, lr); }
};

/// y[o] (=|+=) x[src(o)].
template <class T, class Src>
__global__ void gather_kernel(Src src, const T* x, T* y, int64_t n, int add) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x)
    store(y + o, add, x[src(o)]);
}
template <class T, class Src>
void launch_gather(const OpContext& ctx, Src src, const T* x, T* y, int64_t n, Req req,
                   const char* what) {
  if (req == Req::kNull || n == 0) return;
  gather_kernel<T><<<cuda::grid_size(n), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
      src, x, y, n, req == Req::kAdd);
  cuda::check_launch(what);
}
struct Identity {
  LOOM_HD int64_t operator()(int64_t o) const { return o; }
};

// dx[src(o)] += g[o] (src injective; dx zeroed first for req=write).
template <class Src>
__global__ void scatter_kernel(Src src, const float* g, float* dx, int64_t n) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x)
    dx[src(o)] += g[o];
}

class CropGpuKernel final : public Kernel {
 public:
  explicit CropGpuKernel(const KernelArgs& a) : t_(require_image_dtype(a, false)) {
    const Shape& s = a.in_shapes[0];
    const auto& p = a.attrs.param<image::CropParam>();
    const int nd = s.ndim();
    m_ = {s[nd - 3], s[nd - 2], s[nd - 1], p.x, p.y, p.width, p.height};
    op_ = a.attrs.op->name, node_ = a.attrs.name;
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (t_ == DType::kUint8)
      launch_gather(ctx, CropSrc{m_}, in[0].data<uint8_t>(), out[0].data<uint8_t>(), out[0].size(),
                    req[0], "image crop");
    else
      launch_gather(ctx, CropSrc{m_}, in[0].data<float>(), out[0].data<float>(), out[0].size(),
                    req[0], "image crop");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    require_float_grad(op_, node_, t_);
    cudaStream_t s = cuda::stream_of(ctx);
    if (req[0] != Req::kAdd)
      cuda::check(cudaMemsetAsync(ig[0].raw(), 0, ig[0].nbytes(), s), "image crop backward");
    const int64_t n = og[0].size();
    if (n == 0) return;
    scatter_kernel<<<cuda::grid_size(n), cuda::kBlockSize, 0, s>>>(CropSrc{m_}, og[0].data<float>(),
                                                                   ig[0].data<float>(), n);
    cuda::check_launch("image crop backward");
  }

 private:
  DType t_;
  image::CropMap m_{};
  std::string op_, node_;
};

// Flips (through the workspace: they may run in place) and the lighting offset (element by
// element). Their gradient is the head gradient copied, as MXNet's.
class AugGpuKernel final : public Kernel {
 public:
  enum Kind { kFlipLR, kFlipTB, kLighting };
  AugGpuKernel(const KernelArgs& a, Kind k) : kind_(k), t_(require_image_dtype(a, false)) {
    const Shape& s = a.in_shapes[0];
    H_ = s[0], W_ = s[1], C_ = s[2];
    n_ = s.numel();
    if (k == kLighting) image::lighting_pca(parse_double_tuple_checked(a), pca_);
    op_ = a.attrs.op->name, node_ = a.attrs.name;
  }
  size_t workspace_bytes() const override {
    return kind_ == kLighting ? 0 : static_cast<size_t>(n_) * dtype_size(t_);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull || n_ == 0) return;
    if (t_ == DType::kUint8)
      run<uint8_t>(ctx, in[0].data<uint8_t>(), out[0].data<uint8_t>(), req[0]);
    else
      run<float>(ctx, in[0].data<float>(), out[0].data<float>(), req[0]);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    require_float_grad(op_, node_, t_);
    launch_gather(ctx, Identity{}, og[0].data<float>(), ig[0].data<float>(), n_, req[0],
                  "image augmentation backward");
  }

 private:
  static std::vector<double> parse_double_tuple_checked(const KernelArgs& a);
  template <class T>
  void run(const OpContext& ctx, const T* x, T* y, Req req);

  Kind kind_;
  DType t_;
  int64_t H_ = 1, W_ = 1, C_ = 1, n_ = 0;
  float pca_[3] = {0, 0, 0};
  std::string op_, node_;
};

struct Lighting {
  int64_t C;
  float pca[3];
};
template <class T>
__global__ void lighting_kernel(Lighting l, const T* x, T* y, int64_t n, int add) {
  constexpr bool u8 = sizeof(T) == 1;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = image::lighting_value(static_cast<float>(x[i]), i % l.C, l.C, l.pca, u8);
    store(y + i, add, static_cast<T>(v));
  }
}

std::vector<double> AugGpuKernel::parse_double_tuple_checked(const KernelArgs& a) {
  const auto al = parse_double_tuple(a.attrs.param<image::LightingParam>().alpha, "alpha");
  if (al.size() != 3)
    throw ParamError("node '" + a.attrs.name + "' (op " + a.attrs.op->name +
                     "): alpha must have 3 entries (R, G, B), got " + std::to_string(al.size()));
  return al;
}

template <class T>
void AugGpuKernel::run(const OpContext& ctx, const T* x, T* y, Req req) {
  if (kind_ == kLighting) {
    Lighting l{C_, {pca_[0], pca_[1], pca_[2]}};
    lighting_kernel<T><<<cuda::grid_size(n_), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        l, x, y, n_, req == Req::kAdd);
    cuda::check_launch("image adjust_lighting");
    return;
  }
  T* tmp = static_cast<T*>(ctx.workspace);
  launch_gather(ctx, FlipSrc{H_, W_, C_, kind_ == kFlipLR}, x, tmp, n_, Req::kWrite, "image flip");
  launch_gather(ctx, Identity{}, static_cast<const T*>(tmp), y, n_, req, "image flip");
}

// ------------------------------------------------------------------ element maps
/// y[o] (=|+=) at(o) for every output element o (to_tensor, resize).
template <class Out, class At>
__global__ void image_map_kernel(At at, Out* y, int64_t n, int add) {
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < n;
       o += int64_t(gridDim.x) * blockDim.x)
    store(y + o, add, static_cast<Out>(at(o)));
}
/// Runs image_map_kernel over `out` with At<T>{geom, x}, T the image's element type `t`
/// (uint8 or float32) read from `in`; the output's type is float32 when OutFloat, else T.
template <template <class> class At, bool OutFloat, class Geom>
void launch_image_map(const OpContext& ctx, DType t, const Geom& geom, const NDArray& in, Req req,
                      const NDArray& out, const char* what) {
  const int64_t n = out.size();
  if (req == Req::kNull || n == 0) return;
  auto launch = [&](auto* x) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(x)>>;
    using Out = std::conditional_t<OutFloat, float, T>;
    image_map_kernel<<<cuda::grid_size(n), cuda::kBlockSize, 0, cuda::stream_of(ctx)>>>(
        At<T>{geom, x}, out.data<Out>(), n, req == Req::kAdd);
  };
  if (t == DType::kUint8)
    launch(in.data<uint8_t>());
  else
    launch(in.data<float>());
  cuda::check_launch(what);
}

// ------------------------------------------------------------------ to_tensor, normalize
struct ToTensorGeom {
  int64_t hw, c;
};
template <class T>
struct ToTensorAt {
  ToTensorGeom g;
  const T* x;
  LOOM_HD float operator()(int64_t o) const {
    return static_cast<float>(x[image::to_tensor_src(o, g.hw, g.c)]) / 255.f;
  }
};
struct ToTensorGrad {
  const float* g;
  int64_t hw, c;
  LOOM_HD float operator()(int64_t i) const {
    return g[image::to_tensor_grad_src(i, hw, c)] / 255.f;
  }
};

class ToTensorGpuKernel final : public Kernel {
 public:
  explicit ToTensorGpuKernel(const KernelArgs& a) : t_(require_image_dtype(a, true)) {
    const Shape& s = a.in_shapes[0];
    hw_ = s[s.ndim() - 3] * s[s.ndim() - 2];
    c_ = s[s.ndim() - 1];
    op_ = a.attrs.op->name, node_ = a.attrs.name;
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    launch_image_map<ToTensorAt, true>(ctx, t_, ToTensorGeom{hw_, c_}, in[0], req[0], out[0],
                                       "image to_tensor");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    require_float_grad(op_, node_, t_);
    vision::launch_map_index(ctx, ToTensorGrad{og[0].data<float>(), hw_, c_}, ig[0], req[0],
                             ig[0].size(), "image to_tensor backward");
  }

 private:
  DType t_;
  int64_t hw_ = 1, c_ = 1;
  std::string op_, node_;
};

struct NormalizeAt {
  image::NormalizeMath m;
  const float* x;
  bool forward;
  LOOM_HD float operator()(int64_t i) const {
    return forward ? m.forward(x[i], i) : m.backward(x[i], i);
  }
};

class NormalizeGpuKernel final : public Kernel {
 public:
  explicit NormalizeGpuKernel(const KernelArgs& a)
      : m_(image::normalize_math(a.attrs, a.in_shapes[0])) {
    require_image_dtype(a, true, false);
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    vision::launch_map_index(ctx, NormalizeAt{m_, in[0].data<float>(), true}, out[0], req[0],
                             out[0].size(), "image normalize");
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    vision::launch_map_index(ctx, NormalizeAt{m_, og[0].data<float>(), false}, ig[0], req[0],
                             ig[0].size(), "image normalize backward");
  }

 private:
  image::NormalizeMath m_;
};

// ------------------------------------------------------------------ resize
struct ResizeGeom {
  int64_t H, W, C, h, w;
  bool nearest;
};
template <class T>
struct ResizeAt {
  ResizeGeom g;
  const T* x;
  LOOM_HD T operator()(int64_t o) const {
    const int64_t c = o % g.C, q = o / g.C, j = q % g.w, r = q / g.w, i = r % g.h, b = r / g.h;
    int64_t y0, y1, x0, x1;
    float fy, fx;
    image::resize_axis(i, g.H, g.h, g.nearest, &y0, &y1, &fy);
    image::resize_axis(j, g.W, g.w, g.nearest, &x0, &x1, &fx);
    auto at = [&](int64_t yy, int64_t xx) {
      return static_cast<double>(x[((b * g.H + yy) * g.W + xx) * g.C + c]);
    };
    const double v = image::resize_value(at, fy, fx, y0, y1, x0, x1);
    return static_cast<T>(sizeof(T) == 1 ? image::resize_u8(v) : v);
  }
};

class ImageResizeGpuKernel final : public Kernel {
 public:
  explicit ImageResizeGpuKernel(const KernelArgs& a) : t_(require_image_dtype(a, false)) {
    const Shape &s = a.in_shapes[0], &o = a.out_shapes[0];
    const int nd = s.ndim();
    g_ = {s[nd - 3], s[nd - 2], s[nd - 1],
          o[nd - 3], o[nd - 2], a.attrs.param<image::ResizeParam>().interp == 0};
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    launch_image_map<ResizeAt, false>(ctx, t_, g_, in[0], req[0], out[0], "image resize");
  }

 private:
  DType t_;
  ResizeGeom g_{};
};

template <AugGpuKernel::Kind K>
std::unique_ptr<Kernel> aug_gpu(const KernelArgs& a) {
  return std::make_unique<AugGpuKernel>(a, K);
}

LOOM_REGISTER_OP("_image_crop").kernel(DeviceType::kGPU, vision::gpu_factory<CropGpuKernel>());
LOOM_REGISTER_OP("_image_flip_left_right").kernel(DeviceType::kGPU, aug_gpu<AugGpuKernel::kFlipLR>);
LOOM_REGISTER_OP("_image_flip_top_bottom").kernel(DeviceType::kGPU, aug_gpu<AugGpuKernel::kFlipTB>);
LOOM_REGISTER_OP("_image_adjust_lighting")
    .kernel(DeviceType::kGPU, aug_gpu<AugGpuKernel::kLighting>);
LOOM_REGISTER_OP("_image_to_tensor")
    .kernel(DeviceType::kGPU, vision::gpu_factory<ToTensorGpuKernel>());
LOOM_REGISTER_OP("_image_normalize")
    .kernel(DeviceType::kGPU, vision::gpu_factory<NormalizeGpuKernel>());
LOOM_REGISTER_OP("_image_resize")
    .kernel(DeviceType::kGPU, vision::gpu_factory<ImageResizeGpuKernel>());

}  // namespace
}  // namespace loom
