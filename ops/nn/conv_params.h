// The parameters of Convolution (and Convolution_v1, which parses with Convolution's schema)
// and Deconvolution, and Deconvolution's padding rule, shared by the CPU kernels
// (convolution.cc, deconvolution.cc) and the cuDNN kernels (conv_cudnn.cu). The schemas
// that fill these structs stay in the .cc files.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ops/infer.h"

namespace loom::nn {

/// Convolution's parameters after the schema's checks: stride, dilate and pad have one
/// entry per kernel dimension.
struct ConvParam {
  Shape kernel, stride, dilate, pad;
  int num_filter;
  int num_group;
  int64_t workspace;
  bool no_bias;
  std::optional<std::string> cudnn_tune;
  bool cudnn_off;
  std::optional<std::string> layout;
};

/// Deconvolution's parameters after the schema's checks (stride, dilate, pad, adj and
/// target_shape have one entry per kernel dimension; target_shape 0 = not given).
struct DeconvParam {
  Shape kernel, stride, dilate, pad, adj, target_shape;
  int num_filter;
  int num_group;
  int64_t workspace;
  bool no_bias;
  std::optional<std::string> cudnn_tune;
  bool cudnn_off;
  std::optional<std::string> layout;
};

inline bool deconv_has_target(const DeconvParam& p) {
  for (int i = 0; i < p.target_shape.ndim(); ++i)
    if (p.target_shape[i] != 0) return true;
  return false;
}

/// stride*(in-1) + dilated kernel along spatial dimension i: the output length before padding.
inline int64_t deconv_full_length(const DeconvParam& p, int i, int64_t in) {
  const char* what = "Deconvolution output size";
  const int64_t span = dim_add(dim_mul(p.kernel[i] - 1, p.dilate[i], what), 1, what);
  return dim_add(dim_mul(p.stride[i], in - 1, what), span, what);
}

/// Padding on each side for the known spatial sizes of `data` (MXNet's InferPad): with a
/// target_shape, total = stride*(in-1) + dilated kernel - target, adj = total % 2,
/// pad = (total + 1) / 2; otherwise pad and adj as given. The right side gets pad - adj
/// (negative when adj widens the output past the padding).
inline void deconv_pads(const DeconvParam& p, const Shape& data, std::vector<int64_t>& pad_l,
                        std::vector<int64_t>& pad_r) {
  const bool target = deconv_has_target(p);
  pad_l.clear();
  pad_r.clear();
  for (int i = 0; i < p.kernel.ndim(); ++i) {
    int64_t pad = p.pad[i], adj = p.adj[i];
    if (target) {
      const int64_t total = deconv_full_length(p, i, data[i + 2]) - p.target_shape[i];
      if (total < 0)
        throw ShapeError("target_shape " + p.target_shape.str() + " is too big for input " +
                         data.str());
      adj = total % 2;
      pad = (total + 1) / 2;
    }
    pad_l.push_back(pad);
    pad_r.push_back(pad - adj);
  }
}

}  // namespace loom::nn
