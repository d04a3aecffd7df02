// The parts of a channel-split inference convolution and their run on the thread team.
#include "ops/nn/conv_split.h"

#include <algorithm>
#include <atomic>

#include "ops/nn/nn_util.h"
#include "runtime/cpu/thread_team.h"
#include "runtime/ndarray.h"

namespace loom::nn {

struct SplitConv::Part {
  int64_t f0 = 0, f1 = 0;  // output channels [f0, f1)
  dnnl::primitive prim;
  dnnl::memory::desc w_plain, w_chosen, scratch;
  dnnl::memory w;         // the reordered weights (kept between calls)
  size_t dst_offset = 0;  // floats from an image of Loom's output array to the part's piece
  size_t src_offset = 0;  // the same in the input (depthwise; 0: the part reads all of it)
  size_t scratch_offset = 0;
  PrimitiveArgs args;
};

namespace {

// y = x >= 0 ? x : slope[c] * x over `k` channels of one image of a channel-blocked array
// (k / block blocks of hw * block floats): the PReLU oneDNN's kernel could not fuse.
void split_prelu(float* y, int64_t k, int64_t hw, int block, const float* slope) {
  for (int64_t f = 0; f < k; f += block) {
    const float* a = slope + f;
    for (int64_t s = 0; s < hw; ++s, y += block)
#pragma omp simd
      for (int j = 0; j < block; ++j) y[j] = y[j] >= 0.f ? y[j] : a[j] * y[j];
  }
}

}  // namespace

namespace {
std::atomic<uint64_t> split_calls{0};
}  // namespace

bool team_split_enabled() { return !env_off("LOOM_TEAM_SPLIT"); }

uint64_t split_conv_calls() { return split_calls.load(std::memory_order_relaxed); }

SplitConv::SplitConv(const SplitConvShape& s, const PostOps& ops, int parts)
    : s_(s),
      prelu_(ops.act.kind == FusedActivation::kPrelu),
      prelu_arg_(DNNL_ARG_ATTR_MULTIPLE_POST_OP(ops.sum ? 1 : 0) | DNNL_ARG_WEIGHTS) {
  using namespace dnnl;
  const auto& eng = dnnl_util::engine();
  const int block = layout_block(s.out_layout);
  if (block < 2 || s.k % block) throw error(dnnl_unimplemented, "split convolution: plain output");
  const int64_t blocks = s.k / block;
  parts = static_cast<int>(std::min<int64_t>(parts, blocks));
  if (parts < 2) throw error(dnnl_unimplemented, "split convolution: fewer than two blocks");
  if (s.depthwise && (s.c != s.k || layout_block(s.in_layout) != block))
    throw error(dnnl_unimplemented, "split convolution: depthwise layouts differ");
  // Two attributes (a primitive_attr copy shares its object): `attr` with PReLU as a post-op,
  // `attr_own_prelu` without it.
  primitive_attr attr, attr_own_prelu;
  attr_own_prelu.set_scratchpad_mode(scratchpad_mode::user);
  attr_own_prelu.set_post_ops(make_post_ops(ops, /*with_prelu=*/false));
  attr.set_scratchpad_mode(scratchpad_mode::user);
  attr.set_post_ops(make_post_ops(ops, /*with_prelu=*/true));
  size_t scratch_at = 0;
  for (int p = 0; p < parts; ++p) {
    auto part = std::make_unique<Part>();
    // Balanced: the first (blocks % parts) ranges get one block more.
    const int64_t b0 = blocks * p / parts, b1 = blocks * (p + 1) / parts;
    part->f0 = b0 * block, part->f1 = b1 * block;
    const int64_t kp = part->f1 - part->f0;
    // The part's output: the contiguous piece at batch 1, a view of the full array otherwise.
    // One image at a time (oneDNN's kernels take no strided views): the part's channels of
    // image b are one contiguous piece of a blocked array.
    const auto dst = dnnl_util::layout_md({1, kp, s.oh, s.ow}, s.out_layout);
    part->dst_offset = static_cast<size_t>(part->f0 * s.oh * s.ow);
    // Ungrouped: all input channels. Depthwise: the part's own input channels, also one
    // contiguous piece of each image, and weights (kp groups, 1, 1, kh, kw).
    const int64_t cp = s.depthwise ? kp : s.c;
    const auto src = dnnl_util::layout_md({1, cp, s.h, s.w}, s.in_layout);
    part->src_offset = s.depthwise ? static_cast<size_t>(part->f0 * s.h * s.w) : 0;
    const memory::dims wdims =
        s.depthwise ? memory::dims{kp, 1, 1, s.kh, s.kw} : memory::dims{kp, s.c, s.kh, s.kw};
    part->w_plain = dnnl_util::plain_md(wdims);
    convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src,
                                dnnl_util::any_md(wdims), dnnl_util::plain_md({kp}), dst,
                                {s.sh, s.sw}, {s.dh - 1, s.dw - 1}, {s.ph, s.pw}, {s.ph, s.pw});
    // PReLU as a post-op where oneDNN's kernel takes it, else as a pass over the part's
    // output right after it (still in cache).
    convolution_forward::primitive_desc pd;
    bool built = false;
    if (prelu_ && !own_prelu_) {
      try {
        pd = convolution_forward::primitive_desc(d, attr, eng);
        built = std::string(pd.impl_info_str()).find("ref") == std::string::npos;
      } catch (const error&) {
      }
      own_prelu_ = !built;
    }
    if (!built)
      pd = convolution_forward::primitive_desc(d, own_prelu_ ? attr_own_prelu : attr, eng);
    const std::string impl = pd.impl_info_str();
    if (impl.find("ref") != std::string::npos)
      throw error(dnnl_unimplemented, "split convolution: reference kernel only");
    if (p == 0) impl_ = "split" + std::to_string(parts) + " " + impl;
    if (own_prelu_ && p > 0 && parts_[0]->args.has(prelu_arg_))
      throw error(dnnl_unimplemented, "split convolution: parts disagree on PReLU");
    part->prim = primitive(pd);
    part->w_chosen = pd.weights_desc();
    part->w = memory(part->w_chosen, eng);
    part->scratch = pd.scratchpad_desc();
    part->scratch_offset = scratch_at;
    scratch_at += align64(part->scratch.get_size());
    part->args.add(DNNL_ARG_SRC, src);
    part->args.add(DNNL_ARG_WEIGHTS, part->w_chosen);
    part->args.add(DNNL_ARG_BIAS, dnnl_util::plain_md({kp}));
    part->args.add(DNNL_ARG_DST, dst);
    if (prelu_ && !own_prelu_) part->args.add(prelu_arg_, dnnl_util::plain_md({1, kp, 1, 1}));
    part->args.add(DNNL_ARG_SCRATCHPAD, part->scratch);
    parts_.push_back(std::move(part));
  }
  zero_bias_.assign(static_cast<size_t>(s.k), 0.f);
}

SplitConv::~SplitConv() = default;

size_t SplitConv::workspace_bytes() const {
  size_t total = 0;
  for (const auto& p : parts_) total += align64(p->scratch.get_size());
  return total;
}

void SplitConv::forward(const float* src, const NDArray& weights, std::span<const float> scale,
                        const float* bias, std::span<const float> slope, float* dst,
                        void* workspace) {
  if (!cache_.matches(weights, scale)) {
    const size_t per = static_cast<size_t>((s_.depthwise ? 1 : s_.c) * s_.kh * s_.kw);
    const float* w = weights.cdata<float>();
    // The scaled weights one part at a time, in a buffer freed at once (kept, they would
    // add a copy of every split layer's weights to the peak memory: ResNet-50 b1 +18 MB).
    for (auto& p : parts_) {
      const size_t f0 = static_cast<size_t>(p->f0), f1 = static_cast<size_t>(p->f1);
      std::vector<float> folded((f1 - f0) * per);
      for (size_t f = f0; f < f1; ++f) {
        const float sc = scale.empty() ? 1.f : scale[f];
        for (size_t k = 0; k < per; ++k) folded[(f - f0) * per + k] = w[f * per + k] * sc;
      }
      dnnl::memory plain(p->w_plain, dnnl_util::engine(), folded.data());
      dnnl_util::execute(dnnl::reorder(plain, p->w), {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, p->w}});
    }
    cache_.remember(weights, scale);
  }
  const float* b = bias ? bias : zero_bias_.data();
  char* ws = static_cast<char*>(workspace);
  // Floats per image (channels padded to whole blocks in a blocked input).
  const int64_t in_block = layout_block(s_.in_layout);
  const int64_t src_image = (s_.c + in_block - 1) / in_block * in_block * s_.h * s_.w;
  const int64_t dst_image = s_.k * s_.oh * s_.ow;
  auto run_part = [&](int i) {
    Part& p = *parts_[static_cast<size_t>(i)];
    for (int64_t img = 0; img < s_.n; ++img) {
      float* y = dst + img * dst_image + p.dst_offset;
      p.args.set(DNNL_ARG_SRC, src + img * src_image + p.src_offset);
      p.args.set(DNNL_ARG_WEIGHTS, p.w.get_data_handle());
      p.args.set(DNNL_ARG_BIAS, b + p.f0);
      p.args.set(DNNL_ARG_DST, y);
      if (prelu_ && !own_prelu_) p.args.set(prelu_arg_, slope.data() + p.f0);
      if (p.scratch.get_size()) p.args.set(DNNL_ARG_SCRATCHPAD, ws + p.scratch_offset);
      p.args.execute(p.prim);
      if (own_prelu_)
        split_prelu(y, p.f1 - p.f0, s_.oh * s_.ow, layout_block(s_.out_layout),
                    slope.data() + p.f0);
    }
  };
  split_calls.fetch_add(1, std::memory_order_relaxed);
  cpu::ThreadTeam::global().run(parts(), run_part);
}

}  // namespace loom::nn
