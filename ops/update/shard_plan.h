// The pieces of one rank's contiguous range of a concatenation of tensors (the sharded EMA's
// and sharded optimizer's index space, DESIGN.md "Sharded EMA"): host-side planning shared by
// the CPU kernels (ema.cc, shard.cc) and the GPU kernels (shard.cu) of the sharded ops.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ops/op.h"
#include "runtime/ndarray.h"

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

// ---- the sharded optimizer (shard.cc: the ops and CPU kernels; shard.cu: GPU kernels) ----

/// _loom_shard_reduce_scatter's, _loom_shard_norms' and _loom_shard_all_gather's parameters.
struct ShardParam {
  int num_tensors;
  int world_size;
};

/// Elements [src, src + len) of tensor `tensor` sit at position `dst` of a buffer.
using Piece = ShardSeg;

/// Where the T elements of n tensors go for this rank of `world`.
struct ShardLayout {
  int64_t total = 0, count = 0, lo = 0, hi = 0;
  int rank = 0, world = 1;
  std::vector<Piece> all;        ///< every rank's ranges, dst = position in the padded buffer
  std::vector<Piece> own;        ///< this rank's range, dst = position in its shard
  std::vector<int64_t> padding;  ///< padded positions that hold no element
};

inline ShardLayout make_layout(const std::vector<int64_t>& sizes, int world, int rank) {
  ShardLayout l;
  l.world = world;
  l.rank = rank;
  for (int64_t s : sizes) l.total += s;
  l.count = (l.total + world - 1) / world;
  for (int q = 0; q < world; ++q) {
    const int64_t lo = l.total * q / world, hi = l.total * (q + 1) / world;
    int64_t off = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t b = std::max(off, lo), e = std::min(off + sizes[i], hi);
      if (b < e) {
        l.all.push_back({i, b - off, q * l.count + (b - lo), e - b});
        if (q == rank) l.own.push_back({i, b - off, b - lo, e - b});
      }
      off += sizes[i];
    }
    for (int64_t p = hi - lo; p < l.count; ++p) l.padding.push_back(q * l.count + p);
    if (q == rank) l.lo = lo, l.hi = hi;
  }
  return l;
}


// ---- _loom_shard_update: the inner update op on views of the own range ----

enum class ScalarKind { kGroup, kShared, kTensor };

struct ShardUpdateParam {
  const OpDef* inner = nullptr;
  size_t n = 0;  ///< tensors
  int world = 1;
  size_t m = 0;                     ///< inner inputs
  size_t full = 0;                  ///< inner inputs shaped like the weight: weight, grad, states
  size_t groups_n = 1;              ///< num_groups
  std::vector<size_t> group;        ///< per tensor
  std::vector<ScalarKind> scalars;  ///< per inner scalar input [full, m)
  std::vector<std::string> state_names;  ///< inner names of inputs [2, full)
  std::vector<OpAttrs> attrs;            ///< per tensor (its wd)
};

/// A float32 view of `len` elements of `a` from element `at`.
inline NDArray view(const NDArray& a, int64_t at, int64_t len) {
  return NDArray(a.storage(), a.offset() + static_cast<size_t>(at) * sizeof(float), Shape{len},
                 DType::kFloat32);
}

/// Node input index of each inner scalar input's first source.
inline std::vector<size_t> scalar_starts(const ShardUpdateParam& p) {
  std::vector<size_t> s;
  size_t at = p.n + 1 + (p.full - 2);
  for (ScalarKind k : p.scalars) {
    s.push_back(at);
    at += k == ScalarKind::kGroup ? p.groups_n : 1;
  }
  s.push_back(at);
  return s;
}

/// The inner op's inputs and output for every own piece: the weight tensor's piece, the
/// piece's part of this rank's chunk of `flat` as gradient (and output), the states' shards,
/// the scalar inputs by kind. Views only (any device): the CPU and GPU kernels run the inner
/// op's kernel of their device on them.
struct PieceViews {
  std::vector<std::vector<NDArray>> in;
  std::vector<NDArray> out;
};

inline PieceViews piece_views(const ShardUpdateParam& p, const ShardLayout& l,
                              const std::vector<size_t>& starts, std::span<const NDArray> in,
                              const NDArray& out) {
  const size_t n = p.n, ns = p.full - 2;
  const int64_t base = l.rank * l.count;
  PieceViews pv;
  pv.in.resize(l.own.size());
  for (size_t s = 0; s < l.own.size(); ++s) {
    const Piece& pc = l.own[s];
    std::vector<NDArray>& v = pv.in[s];
    v.push_back(view(in[pc.tensor], pc.src, pc.len));
    v.push_back(view(in[n], base + pc.dst, pc.len));
    for (size_t j = 0; j < ns; ++j) v.push_back(view(in[n + 1 + j], pc.dst, pc.len));
    for (size_t k = 0; k < p.scalars.size(); ++k) {
      const NDArray& src =
          p.scalars[k] == ScalarKind::kGroup ? in[starts[k] + p.group[pc.tensor]] : in[starts[k]];
      v.push_back(p.scalars[k] == ScalarKind::kTensor
                      ? view(src, static_cast<int64_t>(pc.tensor), 1)
                      : src);
    }
    pv.out.push_back(view(out, base + pc.dst, pc.len));
  }
  return pv;
}

}  // namespace loom::update
