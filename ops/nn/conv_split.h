// Inference of a small convolution (one the one-thread policy of runtime/cpu/thread_cap.h
// would run on one thread) split by output channels over Loom's thread team
// (runtime/cpu/thread_team.h): the output channel blocks are divided into one contiguous
// range per team thread, each range gets its own one-thread oneDNN primitive (its slice of
// the weights, folded BatchNorm scale and bias, PReLU slopes) reading the whole input and
// writing a view of Loom's output array (with a residual sum, that view holds the other
// operand), and the team runs the parts at once. A part's channel-block range of one image
// is one contiguous piece of a blocked array, so a part runs its batch-1 primitive image by
// image.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ops/nn/dnnl_args.h"
#include "ops/nn/weight_version.h"
#include "ops/op.h"
#include "runtime/cpu/dnnl_util.h"

namespace loom::nn {

/// A 2-D convolution on Loom's arrays: input (n, c, h, w) in `in_layout`, output
/// (n, k, oh, ow) in `out_layout` (channel-blocked), weights (k, c, kh, kw) plain; or, with
/// `depthwise`, one group per channel (k == c, weights (k, 1, kh, kw), both layouts blocked
/// alike): a part then reads only its own channels.
struct SplitConvShape {
  int64_t n, c, h, w, k, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  Layout in_layout, out_layout;
  bool depthwise = false;
};

class SplitConv {
 public:
  /// Builds one one-thread inference primitive per part with the post-ops `ops` (sum; ReLU,
  /// leaky or PReLU) over `parts` balanced channel-block ranges (fewer when there are fewer
  /// blocks). Call with the OpenMP thread count capped at 1. Throws dnnl::error when oneDNN
  /// has only its reference kernel for a part or rejects the views.
  SplitConv(const SplitConvShape& s, const PostOps& ops, int parts);
  ~SplitConv();

  /// Parts the output channels are split into.
  int parts() const { return static_cast<int>(parts_.size()); }
  /// "split<parts> <oneDNN implementation>".
  const std::string& impl_info() const { return impl_; }
  /// Scratch a call needs (every part's scratchpad).
  size_t workspace_bytes() const;
  /// One call, as SubsampleConv1x1::forward: `weights` (k, c, kh, kw) plain, scaled per output
  /// channel by `scale` (empty: not), `bias` (k floats, the BatchNorm shift folded in; null:
  /// none), `slope` (k PReLU slopes when the post-ops end in PReLU), into `dst`. The weights
  /// in the primitives' layout are kept while the array provably has not changed.
  void forward(const float* src, const NDArray& weights, std::span<const float> scale,
               const float* bias, std::span<const float> slope, float* dst, void* workspace);

 private:
  struct Part;
  SplitConvShape s_;
  bool prelu_ = false;
  bool own_prelu_ = false;  // PReLU as a pass after each part (oneDNN's kernel has none)
  int prelu_arg_ = 0;
  std::vector<std::unique_ptr<Part>> parts_;
  std::string impl_;
  WeightVersion cache_;  // the weights the parts hold reordered
  std::vector<float> zero_bias_;
};

/// Calls of SplitConv::forward in this process (tests check which path ran).
uint64_t split_conv_calls();

/// True when Convolution layers the one-thread policy caps may run split over the team
/// (LOOM_TEAM_SPLIT=0: never). Read at bind.
bool team_split_enabled();

}  // namespace loom::nn
