// Loom's own inference depthwise convolution (one filter per channel, any kernel size, stride,
// padding and dilation) on channel-blocked activations (nChw8c / nChw16c), with the per-channel
// affine map of a folded BatchNorm, a bias, a residual sum and the activation (ReLU, leaky,
// PReLU with one slope per channel) applied in its output loop, and optionally an activation
// `pre` of the same kinds applied to the input as it is read:
//
//   dst[n, c, y, x] = act(sum_{i,j} pre(src[n, c, y*sh - ph + i*dh, x*sw - pw + j*dw]) * w[c, i, j]
//                         * scale[c] + bias'[c] [+ dst[n, c, y, x]])
//
// (padding reads 0 either way: pre(0) = 0 for every kind). With `pre`, each thread activates
// the input rows its output rows need into a ring of (kh - 1) * dh + 1 rows, once per row:
// the PReLU that MobileFaceNet puts after each 1x1 expansion (which oneDNN 2.6's 1x1 kernels
// cannot apply) then costs no pass over memory of its own.
//
// The loops run over channel blocks (a GCC vector of 8 or 16 floats), two blocks and four
// outputs of a row at once, the interior columns without bounds checks. It exists because
// oneDNN 2.6's JIT convolutions take no PReLU post-op: MobileFaceNet's depthwise layers each
// needed a second pass over their output (DESIGN.md, "Loom's own depthwise convolution").
// No dependency on the rest of Loom, so tests/bench/mobile_layers.cc compiles it by hand.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace loom::nn {

/// One depthwise 2-D layer: batch n, channels c (input = output, multiplier 1), input h x w,
/// output oh x ow, kernel kh x kw, stride, padding (top/left; the output size fixes the rest)
/// and dilation; `block` channels per block of both activation layouts (8 or 16).
struct DepthwiseShape {
  int64_t n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  int block;
  /// Multiply-adds of one call.
  double macs() const { return static_cast<double>(n * c * oh * ow * kh * kw); }
};

/// The element-wise epilogue after the affine map and sum.
struct DepthwiseAct {
  enum Kind : uint8_t { kNone, kRelu, kLeaky, kPrelu };
  Kind kind = kNone;
  float alpha = 0.f;             ///< kLeaky: the slope for x < 0
  std::span<const float> slope;  ///< kPrelu: one slope per channel
};

/// True when the kernel takes the shape (block 8 or 16 dividing c, positive sizes).
bool depthwise_supported(const DepthwiseShape& s);

class DepthwiseConv {
 public:
  /// `threads`: OpenMP threads of a call (1: no parallel region).
  DepthwiseConv(const DepthwiseShape& s, int threads);

  /// Repacks the weights `w`, (c, 1, kh, kw) row-major, scaled per channel by `scale`
  /// (empty: 1), for the calls that follow (the caller repacks when they change).
  void pack_weights(const float* w, std::span<const float> scale);

  /// dst = act(dwconv(src, packed weights) + bias [+ dst]) on the channel-blocked arrays;
  /// `bias` per channel (null: 0), added after the scale. `dst` must not overlap `src`.
  /// `pre`: the activation applied to src as it is read (kNone: none).
  void forward(const float* src, const float* bias, float* dst, bool sum, const DepthwiseAct& act,
               const DepthwiseAct& pre = {});

  /// forward() in parts for a caller's own threads: set_bias once, then forward_part for
  /// part = 0 .. parts - 1 (concurrently, any order), each computing its share of the output
  /// rows on the calling thread.
  void set_bias(const float* bias);
  void forward_part(const float* src, float* dst, bool sum, const DepthwiseAct& act, int part,
                    int parts, const DepthwiseAct& pre = {}) const;

  const DepthwiseShape& shape() const { return s_; }

 private:
  int64_t rows() const;  // (image, block pair, output row) triples
  void run_rows(const float* src, float* dst, bool sum, const DepthwiseAct& act,
                const DepthwiseAct& pre, int threads, int64_t t0, int64_t t1) const;

  DepthwiseShape s_;
  int threads_;
  int64_t x0_ = 0, x1_ = 0;  // output columns [x0_, x1_) read no padding
  std::vector<float> wp_;    // weights [c/block][kh][kw][block], scale folded in
  std::vector<float> bp_;    // bias per channel, zero for none
};

}  // namespace loom::nn
