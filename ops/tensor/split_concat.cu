// GPU kernels of Concat, SliceChannel, slice_axis, stack and _split_v2 (registered by
// concat.cc, slice_channel.cc, stack.cc and misc_ops.cc): the
// row views of split_concat.h, which the CPU kernels use, moved with cudaMemcpy2DAsync (any
// dtype) or, to add, a float32 kernel.
#include "ops/tensor/split_concat.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

// dst[r * ds + j] += src[r * ss + j] for r < rows, j < len.
__global__ void add_rows(const float* src, int64_t ss, float* dst, int64_t ds, int64_t rows,
                         int64_t len) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * len;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / len, j = i % len;
    dst[r * ds + j] += src[r * ss + j];
  }
}

/// Moves `rows` runs of `len` elements of `elem` bytes from src (row stride ss elements) to
/// dst (row stride ds), per req; adding is float32 only.
void move_rows(cudaStream_t s, const void* src, int64_t ss, void* dst, int64_t ds, int64_t rows,
               int64_t len, size_t elem, Req req) {
  if (req == Req::kNull || rows == 0 || len == 0) return;
  if (req == Req::kAdd) {
    add_rows<<<cuda::grid_size(rows * len), cuda::kBlockSize, 0, s>>>(
        static_cast<const float*>(src), ss, static_cast<float*>(dst), ds, rows, len);
    cuda::check_launch("add_rows");
    return;
  }
  cuda::check(cudaMemcpy2DAsync(dst, static_cast<size_t>(ds) * elem, src,
                                static_cast<size_t>(ss) * elem, static_cast<size_t>(len) * elem,
                                static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, s),
              "cudaMemcpy2DAsync");
}

// Adding needs float32; plain moves take any dtype.
size_t element_size(const KernelArgs& a) {
  for (DType t : a.in_types)
    if (t != a.in_types[0])
      throw Error("op " + a.attrs.op->name + " (node " + a.attrs.name +
                  "): the GPU kernel needs one dtype for all inputs");
  return dtype_size(a.in_types[0]);
}
void require_add_f32(Req r, DType t, const char* op) {
  if (r == Req::kAdd && t != DType::kFloat32)
    throw Error(std::string(op) + ": adding on the GPU supports float32 only, got " +
                dtype_name(t));
}

class ConcatGpuKernel final : public Kernel {
 public:
  explicit ConcatGpuKernel(const KernelArgs& a)
      : r_(tensor::concat_rows(a)), elem_(element_size(a)), t_(a.in_types[0]) {}
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    require_add_f32(req[0], t_, "Concat");
    cudaStream_t s = cuda::stream_of(ctx);
    char* y = static_cast<char*>(out[0].raw());
    int64_t at = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      move_rows(s, in[k].raw(), r_.chunk[k], y + at * static_cast<int64_t>(elem_), r_.row, r_.outer,
                r_.chunk[k], elem_, req[0]);
      at += r_.chunk[k];
    }
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    cudaStream_t s = cuda::stream_of(ctx);
    const char* g = static_cast<const char*>(og[0].raw());
    int64_t at = 0;
    for (size_t k = 0; k < ig.size(); ++k) {
      require_add_f32(req[k], t_, "Concat");
      if (req[k] != Req::kNull)
        move_rows(s, g + at * static_cast<int64_t>(elem_), r_.row, ig[k].raw(), r_.chunk[k],
                  r_.outer, r_.chunk[k], elem_, req[k]);
      at += r_.chunk[k];
    }
  }

 private:
  tensor::ConcatRows r_;
  size_t elem_;
  DType t_;
};

class SliceChannelGpuKernel final : public Kernel {
 public:
  explicit SliceChannelGpuKernel(const KernelArgs& a) : elem_(element_size(a)), t_(a.in_types[0]) {
    const auto& p = a.attrs.param<tensor::SliceChannelParam>();
    s_ = tensor::split3(a.in_shapes[0], tensor::norm_axis(p.axis, a.in_shapes[0].ndim(), "axis"));
    piece_ = s_.dim / p.num_outputs * s_.inner;
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    const char* x = static_cast<const char*>(in[0].raw());
    for (size_t k = 0; k < out.size(); ++k) {
      require_add_f32(req[k], t_, "SliceChannel");
      move_rows(s, x + static_cast<int64_t>(k) * piece_ * static_cast<int64_t>(elem_),
                s_.dim * s_.inner, out[k].raw(), piece_, s_.outer, piece_, elem_, req[k]);
    }
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    require_add_f32(req[0], t_, "SliceChannel");
    cudaStream_t s = cuda::stream_of(ctx);
    char* dx = static_cast<char*>(ig[0].raw());
    const int64_t whole = s_.dim * s_.inner;
    for (size_t k = 0; k < og.size(); ++k) {
      char* dst = dx + static_cast<int64_t>(k) * piece_ * static_cast<int64_t>(elem_);
      if (og[k].is_none()) {  // an unused output contributes nothing
        if (req[0] != Req::kAdd && s_.outer > 0 && piece_ > 0)
          cuda::check(cudaMemset2DAsync(dst, static_cast<size_t>(whole) * elem_, 0,
                                        static_cast<size_t>(piece_) * elem_,
                                        static_cast<size_t>(s_.outer), s),
                      "cudaMemset2DAsync");
        continue;
      }
      move_rows(s, og[k].raw(), piece_, dst, whole, s_.outer, piece_, elem_, req[0]);
    }
  }

 private:
  size_t elem_;
  DType t_;
  tensor::Split3 s_;
  int64_t piece_ = 0;
};

class SliceAxisGpuKernel final : public Kernel {
 public:
  explicit SliceAxisGpuKernel(const KernelArgs& a) : elem_(element_size(a)), t_(a.in_types[0]) {
    auto [ax, b, e] = tensor::slice_range(a.attrs.param<tensor::SliceAxisParam>(), a.in_shapes[0]);
    s_ = tensor::split3(a.in_shapes[0], static_cast<int>(ax));
    begin_ = b * s_.inner;
    len_ = (e - b) * s_.inner;
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    require_add_f32(req[0], t_, "slice_axis");
    const char* x = static_cast<const char*>(in[0].raw());
    move_rows(cuda::stream_of(ctx), x + begin_ * static_cast<int64_t>(elem_), s_.dim * s_.inner,
              out[0].raw(), len_, s_.outer, len_, elem_, req[0]);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    require_add_f32(req[0], t_, "slice_axis");
    cudaStream_t s = cuda::stream_of(ctx);
    if (req[0] != Req::kAdd && ig[0].size() > 0)  // outside the slice the gradient is zero
      cuda::check(cudaMemsetAsync(ig[0].raw(), 0, ig[0].nbytes(), s), "cudaMemsetAsync");
    char* dx = static_cast<char*>(ig[0].raw());
    move_rows(s, og[0].raw(), len_, dx + begin_ * static_cast<int64_t>(elem_), s_.dim * s_.inner,
              s_.outer, len_, elem_, req[0]);
  }

 private:
  size_t elem_;
  DType t_;
  tensor::Split3 s_;
  int64_t begin_ = 0, len_ = 0;
};

LOOM_REGISTER_OP("Concat").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<ConcatGpuKernel>(a));
});
LOOM_REGISTER_OP("slice_axis").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<SliceAxisGpuKernel>(a));
});
LOOM_REGISTER_OP("SliceChannel").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<SliceChannelGpuKernel>(a));
});

// stack: input k is rows of `inner` elements landing every n*inner elements of the output.
class StackGpuKernel final : public Kernel {
 public:
  explicit StackGpuKernel(const KernelArgs& a) : elem_(element_size(a)), t_(a.in_types[0]) {
    std::tie(outer_, inner_) = tensor::stack_rows(
        a.attrs.param<tensor::StackParam>(), a.in_shapes[0],
        "op stack (node " + a.attrs.name + "): axis");
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    require_add_f32(req[0], t_, "stack");
    cudaStream_t s = cuda::stream_of(ctx);
    char* y = static_cast<char*>(out[0].raw());
    const int64_t n = static_cast<int64_t>(in.size());
    for (int64_t k = 0; k < n; ++k)
      move_rows(s, in[static_cast<size_t>(k)].raw(), inner_,
                y + k * inner_ * static_cast<int64_t>(elem_), n * inner_, outer_, inner_, elem_,
                req[0]);
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    cudaStream_t s = cuda::stream_of(ctx);
    const char* g = static_cast<const char*>(og[0].raw());
    const int64_t n = static_cast<int64_t>(ig.size());
    for (int64_t k = 0; k < n; ++k) {
      const Req r = req[static_cast<size_t>(k)];
      require_add_f32(r, t_, "stack");
      if (r != Req::kNull)
        move_rows(s, g + k * inner_ * static_cast<int64_t>(elem_), n * inner_,
                  ig[static_cast<size_t>(k)].raw(), inner_, outer_, inner_, elem_, r);
    }
  }

 private:
  size_t elem_;
  DType t_;
  int64_t outer_ = 1, inner_ = 1;
};

LOOM_REGISTER_OP("stack").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<StackGpuKernel>(a));
});

// _split_v2: piece k is rows [b_k, b_{k+1}) of the axis, split_bounds of split_concat.h (the
// CPU kernel's). The gradient writes every piece back; with write, rows before the first
// piece (indices not starting at 0) and pieces without a head gradient get 0.
class SplitV2GpuKernel final : public Kernel {
 public:
  explicit SplitV2GpuKernel(const KernelArgs& a) : elem_(element_size(a)), t_(a.in_types[0]) {
    const Shape& s = a.in_shapes[0];
    const int ax = tensor::norm_axis(a.attrs.param<tensor::SplitV2Param>().axis, s.ndim(),
                                     "op _split_v2 (node " + a.attrs.name + "): axis");
    bounds_ = tensor::split_bounds(a.attrs, s[ax]);
    dim_ = s[ax];
    for (int d = 0; d < ax; ++d) outer_ *= s[d];
    for (int d = ax + 1; d < s.ndim(); ++d) inner_ *= s[d];
  }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    cudaStream_t s = cuda::stream_of(ctx);
    const char* x = static_cast<const char*>(in[0].raw());
    for (size_t k = 0; k < out.size(); ++k) {
      require_add_f32(req[k], t_, "_split_v2");
      const int64_t len = (bounds_[k + 1] - bounds_[k]) * inner_;
      move_rows(s, x + bounds_[k] * inner_ * static_cast<int64_t>(elem_), dim_ * inner_,
                out[k].raw(), len, outer_, len, elem_, req[k]);
    }
  }
  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    require_add_f32(req[0], t_, "_split_v2");
    cudaStream_t s = cuda::stream_of(ctx);
    char* dx = static_cast<char*>(ig[0].raw());
    const size_t pitch = static_cast<size_t>(dim_ * inner_) * elem_;
    auto zero = [&](int64_t from, int64_t len) {  // rows [from, from + len) of the axis
      if (req[0] == Req::kAdd || len == 0 || outer_ == 0) return;
      cuda::check(cudaMemset2DAsync(dx + from * inner_ * static_cast<int64_t>(elem_), pitch, 0,
                                    static_cast<size_t>(len * inner_) * elem_,
                                    static_cast<size_t>(outer_), s),
                  "cudaMemset2DAsync");
    };
    zero(0, bounds_[0]);
    for (size_t k = 0; k < og.size(); ++k) {
      const int64_t len = bounds_[k + 1] - bounds_[k];
      if (og[k].is_none()) {
        zero(bounds_[k], len);
        continue;
      }
      move_rows(s, og[k].raw(), len * inner_, dx + bounds_[k] * inner_ * static_cast<int64_t>(elem_),
                dim_ * inner_, outer_, len * inner_, elem_, req[0]);
    }
  }

 private:
  size_t elem_;
  DType t_;
  std::vector<int64_t> bounds_;
  int64_t outer_ = 1, inner_ = 1, dim_ = 1;
};

LOOM_REGISTER_OP("_split_v2").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<SplitV2GpuKernel>(a));
});

}  // namespace
}  // namespace loom
