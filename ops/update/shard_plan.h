// The pieces of one rank's contiguous range of a concatenation of tensors (the sharded EMA's
// and sharded optimizer's index space, DESIGN.md "Sharded EMA"): host-side planning shared by
// the CPU kernel of _loom_ema_shard_update (ema.cc) and its GPU kernel (shard.cu).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::update {

/// _loom_ema_shard_update's parameters (schema in ema.cc; one type for the CPU and GPU
/// kernels, which both read them from the node's attrs).
struct EmaShardParam {
  int num_tensors;
  int world_size;
  double decay;
  std::string schedule, init;
  double tau, gamma, power, min_decay;
  int64_t update_after_step, start_step;
};

/// A piece of tensor `tensor` inside the range: its elements [src, src+len) are the range's
/// (shard's) elements [dst, dst+len).
struct ShardSeg {
  size_t tensor;
  int64_t src, dst, len;
};

/// Rank r of w owns [floor(r*T/w), floor((r+1)*T/w)) of the T = sum(sizes) elements.
struct ShardRange {
  int64_t lo, hi;
  std::vector<ShardSeg> segs;  ///< in range order; tensor = position in `sizes` + first
};

inline ShardRange shard_range(const std::vector<int64_t>& sizes, int rank, int world,
                              size_t first = 0) {
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  const int64_t w = world, r = rank;
  ShardRange out{total * r / w, total * (r + 1) / w, {}};
  int64_t off = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t b = std::max(off, out.lo), e = std::min(off + sizes[i], out.hi);
    if (b < e) out.segs.push_back({i + first, b - off, b - out.lo, e - b});
    off += sizes[i];
  }
  return out;
}

}  // namespace loom::update
