// Loom's own inference Winograd F(4x4, 3x3) convolution for 3x3 stride-1 layers on
// channel-blocked activations (nChw8c / nChw16c). oneDNN 2.6 has f32 Winograd kernels only
// for AVX-512; this one runs wherever oneDNN's batched matmul does (AVX2 included):
//
//   V[p][t][c] = (B^T d B)[p]      input transform of every 6x6 input tile t, channel c
//   M[p]       = V[p] . U[p]       36 products (T x C) . (C x K), one batched oneDNN matmul
//   y          = A^T M A           output transform (4x4 outputs per tile) with the fused
//                                  bias, residual sum and activation
//
// U[p] = (G g G^T)[p] holds the weights, scaled per output channel (a folded BatchNorm),
// transformed once per weight version. Multiplies per output drop from 9 to 36/16 = 2.25
// per input channel; the transforms and 4x the weight bytes are the price, so the caller
// keeps it for layers with enough tiles (convolution.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ops/nn/dnnl_args.h"
#include "ops/nn/weight_version.h"
#include "ops/op.h"
#include "runtime/cpu/dnnl_util.h"

namespace loom::nn {

/// One 3x3 stride-1 undilated convolution layer: batch n, input channels c, input h x w,
/// output channels k, output oh x ow, zero padding; `block` channels per block of both
/// activation layouts (8 or 16; c and k must be multiples of it).
struct WinogradShape {
  int64_t n, c, h, w, k, oh, ow, pad_h, pad_w;
  int block;
  /// The data gradient of a forward layer: the weights passed to forward() are the forward
  /// layer's, (c, k, 3, 3) here, used transposed and rotated by 180 degrees (pad = 2 - the
  /// forward pad).
  bool data_grad = false;
  /// Tiles of 4x4 outputs over the whole batch.
  int64_t tiles() const { return n * ((oh + 3) / 4) * ((ow + 3) / 4); }
  /// Bytes of the transformed weights (36 x c x k floats).
  int64_t weight_bytes() const { return 36 * c * k * 4; }
};

class WinogradConv {
 public:
  /// Builds the batched matmul (throws dnnl::error when oneDNN refuses) under the caller's
  /// OpenMP thread count. Large batches run in chunks of tiles, one thread per chunk (about
  /// 4 MB of transformed data each; LOOM_CONV_WINOGRAD_CHUNKS=0: the whole batch at once);
  /// `chunk_tiles` >= 0 sets the chunk instead (0: whole; tests).
  /// `cache_weights` = false (training, where the weights change every step): no transformed
  /// weights are kept between calls; they go into the workspace, so layers share the memory.
  explicit WinogradConv(const WinogradShape& s, int64_t chunk_tiles = -1,
                        bool cache_weights = true);

  /// Scratch for the transformed input and products, and the matmul's scratchpad.
  size_t workspace_bytes() const;
  /// The matmul implementation oneDNN chose (e.g. "brg:avx512_core", "gemm:jit").
  const std::string& impl_info() const { return impl_; }

  /// dst = act(conv(src, w * scale) + bias [+ dst]) on the channel-blocked arrays; `w` is
  /// (k, c, 3, 3) row-major, `scale` per output channel (empty: 1), `bias` per output channel
  /// (null: 0). The transformed weights are kept while `weights` provably has not changed
  /// (unescaped storage, same write version and scale), as for cached weight reorders.
  void forward(const float* src, const NDArray& weights, std::span<const float> scale,
               const float* bias, float* dst, bool sum, const FusedActivation& act,
               void* workspace);

 private:
  void transform_weights(const float* w, std::span<const float> scale, float* u) const;
  size_t per_thread_bytes() const;
  // Transformed weights in the matmul's layout: the cache, or workspace after the threads'
  // slices when weights are not cached.
  void* weights_for_call(const NDArray& weights, std::span<const float> scale, char* ws);

  WinogradShape s_;
  int64_t tiles_ = 0;
  int64_t chunk_ = 0;  // tiles per chunk (0: the whole batch at once)
  int threads_ = 1;    // OpenMP threads at construction (chunked: one scratch slice each)
  dnnl::memory::desc v_md_, u_md_, m_md_, u_plain_md_, sp_md_;
  std::optional<dnnl::primitive> matmul_;
  std::vector<PrimitiveArgs> args_;  // the matmul's memory arguments, one set per thread
  dnnl_util::LayoutBridge u_bridge_;
  std::string impl_;
  bool cache_weights_ = true;
  struct Cache {
    WeightVersion from;
    NDArray buffer;  // U in the matmul's weight layout
  } cache_;
};

/// The weight gradient of a 3x3 stride-1 layer by Winograd F(3x3, 4x4), the transposed
/// algorithm of the forward's: per 4x4 tile of the output gradient and its 6x6 input patch,
///
///   V[p][t][c] = (B^T d B)[p]     the forward's input transform
///   Y[p][t][k] = (A dy A^T)[p]    the output gradient expanded to 6x6 (A = the forward's
///                                 output transform, transposed)
///   M[p]       = sum_t V[p]^T Y[p] 36 products (C x T) . (T x K), one batched oneDNN matmul
///                                 per chunk of tiles, accumulated
///   dw         = G^T M G          per (k, c): 3x3 from 6x6
///
/// 36 multiplies per tile and channel pair instead of 144. `s` is the forward layer's shape.
class WinogradWeightGrad {
 public:
  explicit WinogradWeightGrad(const WinogradShape& s);
  size_t workspace_bytes() const;
  const std::string& impl_info() const { return impl_; }
  /// dw (k, c, 3, 3) row-major = [dw +] the gradient, from the channel-blocked forward input
  /// `src` and output gradient `diff_dst`.
  void compute(const float* src, const float* diff_dst, float* dw, bool add, void* workspace);

 private:
  WinogradShape s_;
  int64_t tiles_ = 0, chunk_ = 0;
  dnnl::memory::desc v_md_, y_md_, m_md_, sp_md_;
  std::optional<dnnl::primitive> matmul_;
  PrimitiveArgs args_;
  std::string impl_;
};

}  // namespace loom::nn
