// Inference of a strided 1x1 convolution (2-D, no padding or dilation, one group) as a
// spatial subsample followed by a stride-1 1x1 convolution over the subsampled map, as
// OpenVINO runs ResNet's downsampling 1x1 layers: every s-th row and column of the input is
// copied into scratch in the input's own layout (plain or channel-blocked), and oneDNN's
// stride-1 primitive, with the post-ops fused (BatchNorm folded into weights and bias, a
// residual sum, ReLU or leaky ReLU), reads it and writes Loom's output array in place.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ops/nn/weight_version.h"
#include "ops/op.h"
#include "runtime/cpu/dnnl_util.h"

namespace loom::nn {

/// The layer: input (n, c, h, w), output (n, k, oh, ow) with oh = (h-1)/sh + 1 and
/// ow = (w-1)/sw + 1, and the layouts of Loom's input and output arrays.
struct SubsampleShape {
  int64_t n, c, h, w, k, oh, ow, sh, sw;
  Layout in_layout, out_layout;
};

class SubsampleConv1x1 {
 public:
  /// Builds the stride-1 inference primitive with the post-ops `ops` asks for (sum; ReLU or
  /// leaky ReLU; not PReLU). Throws dnnl::error when oneDNN has nothing but its reference
  /// kernel for it.
  SubsampleConv1x1(const SubsampleShape& s, const PostOps& ops);
  /// oneDNN's implementation of the stride-1 primitive, e.g. "brg:avx512_core".
  const std::string& impl_info() const { return impl_; }
  /// Scratch a call needs: the subsampled input and the primitive's scratchpad.
  size_t workspace_bytes() const;
  /// One call: `weights` (k, c, 1, 1) plain, scaled per output channel by `scale` (empty:
  /// not), `bias` (k floats, the BatchNorm shift folded in; null: none), into `dst`, which
  /// holds the other operand when the post-ops have a sum. The weights in the primitive's
  /// layout are kept while the array provably has not changed (Storage::version) and the
  /// scale is the same.
  void forward(const float* x, const NDArray& weights, std::span<const float> scale,
               const float* bias, float* dst, void* workspace);

  /// Every s-th row and column of an (nb, h, w, block) array (a channel-blocked array with
  /// nb = n * blocks, or a plain one with block 1 and nb = n * c) into (nb, oh, ow, block).
  static void subsample(const float* x, float* y, int64_t nb, int64_t h, int64_t w, int64_t oh,
                        int64_t ow, int64_t sh, int64_t sw, int block);

 private:
  SubsampleShape s_;
  int block_ = 1;
  dnnl::primitive prim_;
  dnnl::memory::desc src_md_, scratch_md_;
  dnnl::memory src_, w_, bias_, dst_, scratch_;
  std::string impl_;
  WeightVersion cache_;  // what the weights in the primitive's layout (w_) came from
  dnnl::memory::desc w_plain_, w_chosen_;
  std::vector<float> zero_bias_;
};

}  // namespace loom::nn
