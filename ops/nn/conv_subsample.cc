// The subsample copy and the stride-1 primitive of a strided 1x1 inference layer. The
// primitive is built on Loom's own activation layouts, so the copy is the only extra pass
// and a residual sum is accumulated in Loom's output array in place.
#include "ops/nn/conv_subsample.h"

#include <algorithm>
#include <unordered_map>

#include "ops/nn/dnnl_args.h"
#include "runtime/ndarray.h"

namespace loom::nn {

namespace {
size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }
}  // namespace

SubsampleConv1x1::SubsampleConv1x1(const SubsampleShape& s, const PostOps& ops)
    : s_(s), block_(layout_block(s.in_layout)) {
  using namespace dnnl;
  const auto& eng = dnnl_util::engine();
  src_md_ = dnnl_util::layout_md({s.n, s.c, s.oh, s.ow}, s.in_layout);
  const auto dst = dnnl_util::layout_md({s.n, s.k, s.oh, s.ow}, s.out_layout);
  w_plain_ = dnnl_util::plain_md({s.k, s.c, 1, 1});
  const auto bias = dnnl_util::plain_md({s.k});
  primitive_attr attr;
  attr.set_scratchpad_mode(scratchpad_mode::user);
  if (ops.act.kind == FusedActivation::kPrelu)
    throw error(dnnl_unimplemented, "subsampled 1x1 convolution: no PReLU");
  attr.set_post_ops(make_post_ops(ops, /*with_prelu=*/false));
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src_md_,
                              dnnl_util::any_md({s.k, s.c, 1, 1}), bias, dst, {1, 1}, {0, 0},
                              {0, 0}, {0, 0});
  convolution_forward::primitive_desc pd(d, attr, eng);
  impl_ = pd.impl_info_str();
  if (impl_.find("ref") != std::string::npos)
    throw error(dnnl_unimplemented, "subsampled 1x1 convolution: reference kernel only");
  prim_ = primitive(pd);
  w_chosen_ = pd.weights_desc();
  scratch_md_ = pd.scratchpad_desc();
  src_ = memory(src_md_, eng, DNNL_MEMORY_NONE);
  w_ = memory(w_chosen_, eng);
  bias_ = memory(bias, eng, DNNL_MEMORY_NONE);
  dst_ = memory(dst, eng, DNNL_MEMORY_NONE);
  if (scratch_md_.get_size()) scratch_ = memory(scratch_md_, eng, DNNL_MEMORY_NONE);
  zero_bias_.assign(static_cast<size_t>(s.k), 0.f);
}

size_t SubsampleConv1x1::workspace_bytes() const {
  return align64(src_md_.get_size()) + align64(scratch_md_.get_size());
}

void SubsampleConv1x1::subsample(const float* x, float* y, int64_t nb, int64_t h, int64_t w,
                                 int64_t oh, int64_t ow, int64_t sh, int64_t sw, int block) {
#pragma omp parallel for collapse(2)
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t r = 0; r < oh; ++r) {
      const float* src = x + (i * h + r * sh) * w * block;
      float* dst = y + (i * oh + r) * ow * block;
      if (block == 16) {
        for (int64_t q = 0; q < ow; ++q)
#pragma omp simd
          for (int j = 0; j < 16; ++j) dst[q * 16 + j] = src[q * sw * 16 + j];
      } else if (block == 8) {
        for (int64_t q = 0; q < ow; ++q)
#pragma omp simd
          for (int j = 0; j < 8; ++j) dst[q * 8 + j] = src[q * sw * 8 + j];
      } else {
        for (int64_t q = 0; q < ow; ++q)
          for (int j = 0; j < block; ++j) dst[q * block + j] = src[q * sw * block + j];
      }
    }
}

void SubsampleConv1x1::forward(const float* x, const NDArray& weights, std::span<const float> scale,
                               const float* bias, float* dst, void* workspace) {
  if (!cache_.matches(weights, scale)) {
    // Scaled in a temporary: kept, it would be one more copy of the weights in memory.
    const size_t per = static_cast<size_t>(s_.c), nf = static_cast<size_t>(s_.k);
    const float* w = weights.cdata<float>();
    std::vector<float> folded(nf * per);
    for (size_t f = 0; f < nf; ++f) {
      const float sc = scale.empty() ? 1.f : scale[f];
      for (size_t k = 0; k < per; ++k) folded[f * per + k] = w[f * per + k] * sc;
    }
    dnnl::memory plain(w_plain_, dnnl_util::engine(), folded.data());
    dnnl_util::execute(dnnl::reorder(plain, w_), {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, w_}});
    cache_.remember(weights, scale);
  }
  auto* ws = static_cast<char*>(workspace);
  float* sub = reinterpret_cast<float*>(ws);
  const int64_t nb = s_.n * (block_ > 1 ? (s_.c + block_ - 1) / block_ : s_.c);
  subsample(x, sub, nb, s_.h, s_.w, s_.oh, s_.ow, s_.sh, s_.sw, block_);
  src_.set_data_handle(sub);
  bias_.set_data_handle(const_cast<float*>(bias ? bias : zero_bias_.data()));
  dst_.set_data_handle(dst);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_BIAS, bias_}, {DNNL_ARG_DST, dst_}};
  if (scratch_md_.get_size()) {
    scratch_.set_data_handle(ws + align64(src_md_.get_size()));
    args[DNNL_ARG_SCRATCHPAD] = scratch_;
  }
  dnnl_util::execute(prim_, args);
}

}  // namespace loom::nn
