#include "runtime/fusion.h"

#include "runtime/base.h"

namespace loom {
namespace {

/// Who reads which entry, forward and backward (a predicate counts as a read).
struct Readers {
  std::vector<int> count;
  std::vector<size_t> last;
  explicit Readers(const ExecGraph& eg) : count(eg.shapes.size(), 0), last(eg.shapes.size(), 0) {
    for (size_t i = 0; i < eg.nodes.size(); ++i) {
      const ExecNode& n = eg.nodes[i];
      for (auto e : n.in)
        if (e != kNoEntry) ++count[e], last[e] = i;
      if (n.pred != kNoEntry) ++count[n.pred];
    }
  }
};

/// The forward node j that alone reads node i's output 0 (internal, not a graph output), both
/// unpredicated, not writing into an input array, not absorbed; `adjacent`: no other step
/// runs between them. Returns j, or 0.
size_t sole_reader(const FusionInput& in, const Readers& r, const std::vector<bool>& absorbed,
                   size_t i, bool adjacent) {
  const ExecGraph& eg = in.eg;
  const ExecNode& n = eg.nodes[i];
  if (!n.attrs || n.kind != ExecNode::Kind::kForward || !in.kernel_of[i] || absorbed[i] ||
      n.out.empty() || n.pred != kNoEntry || !n.alias.empty())
    return 0;
  const uint32_t e = n.out[0];
  if (e == kNoEntry || in.external[e] || in.pinned[e] || r.count[e] != 1) return 0;
  const size_t j = r.last[e];
  if (j <= i || j >= eg.num_forward_nodes) return 0;
  const ExecNode& m = eg.nodes[j];
  if (m.kind != ExecNode::Kind::kForward || !m.attrs || !in.kernel_of[j] || absorbed[j] ||
      m.out.empty() || m.pred != kNoEntry || !m.alias.empty())
    return 0;
  for (size_t k = i + 1; adjacent && k < j; ++k)
    if (eg.nodes[k].attrs && !absorbed[k]) return 0;
  return j;
}

/// True when `a` shares bytes with an input of node n (a buffer n's inputs may free).
bool overlaps_input(const FusionInput& in, const NDArray& a, const ExecNode& n) {
  for (auto e : n.in)
    if (e != kNoEntry && a.overlaps(in.entries[e])) return true;
  return false;
}

/// The bound arrays of node n's inputs.
std::vector<NDArray> input_arrays(const FusionInput& in, const ExecNode& n) {
  std::vector<NDArray> v;
  for (auto e : n.in) v.push_back(e == kNoEntry ? NDArray() : in.entries[e]);
  return v;
}

// An activation node that no producer took as a post-op (PReLU after oneDNN 2.6's 1x1
// convolutions, which cannot apply it) and that computes, in place, input 0 of the next step
// and nothing else: that step may apply it as it reads its input (PostOps::pre), on top of
// its own post-ops. In place, so the layer finds the activation's input where it would have
// read its output.
void plan_pre_activations(const FusionInput& in, const Readers& r,
                          const std::vector<bool>& absorbed, const std::vector<bool>& taken,
                          std::vector<PostOpPlan>& plans) {
  const ExecGraph& eg = in.eg;
  for (size_t a = 0; a < eg.num_forward_nodes; ++a) {
    if (taken[a] || plans[a].n > 0) continue;
    const ExecNode& an = eg.nodes[a];
    if (!an.attrs || an.in.empty() || an.out.size() != 1) continue;
    const size_t j = sole_reader(in, r, absorbed, a, true);
    if (!j || taken[j]) continue;
    const ExecNode& m = eg.nodes[j];
    const uint32_t x = an.in[0], y = an.out[0];
    if (m.in.empty() || m.in[0] != y || x == kNoEntry || in.entries[y].is_none() ||
        !in.entries[y].same_memory(in.entries[x]))
      continue;
    FusedActivation act;
    if (!in.kernel_of[a]->fused_activation(input_arrays(in, an), &act) ||
        act.kind == FusedActivation::kNone)
      continue;
    PostOps ops = plans[j].ops;
    ops.pre = act;
    ops.pre.slope = {};
    if (in.kernel_of[j]->fuse_post_ops(ops)) {
      plans[j].ops.pre = ops.pre;
      plans[a].into_next = true;
    } else if (plans[j].n > 0) {
      in.kernel_of[j]->fuse_post_ops(plans[j].ops);  // as it was
    }
  }
}

}  // namespace

std::vector<bool> fuse_epilogues(const FusionInput& in) {
  const ExecGraph& eg = in.eg;
  std::vector<bool> absorbed(eg.nodes.size(), false);
  if (env_off("LOOM_FUSE_EPILOGUE")) return absorbed;
  Readers r(eg);
  for (size_t i = 0; i < eg.num_forward_nodes; ++i) {
    const size_t j = sole_reader(in, r, absorbed, i, false);
    if (!j) continue;
    const ExecNode& m = eg.nodes[j];
    if (m.in.size() != 1 || m.out.size() != 1) continue;
    const uint32_t e = eg.nodes[i].out[0], o = m.out[0];
    if (in.external[o] || in.entries[o].is_none() || !in.entries[o].same_memory(in.entries[e]))
      continue;
    // (n may itself compute in place over its input, BatchNorm in inference: the epilogue is
    // applied element by element as it writes, which keeps in-place sound.)
    if (in.kernel_of[i]->fuse_epilogue(*m.attrs)) absorbed[j] = true;
  }
  return absorbed;
}

// Per producer, the longest chain [BatchNorm] [elemwise_add] [activation] of adjacent sole
// readers it accepts as post-ops; shorter prefixes are offered when it refuses. Only then:
// the intermediate outputs are left unwritten, so nothing else (no backward) may read them;
// the last consumer's output 0 (the destination) has the producer's output layout, is not a
// user's array and does not overlap the producer's inputs (its block may be one they free).
// A sum needs the add's output to have taken the other operand's buffer (computed before:
// no step runs in between), and an activation after it to run in place there.
std::vector<PostOpPlan> plan_post_ops(const FusionInput& in, const std::vector<bool>& absorbed) {
  const ExecGraph& eg = in.eg;
  std::vector<PostOpPlan> plans(eg.nodes.size());
  const bool use_affine = !env_off("LOOM_FUSE_CONV_BN"), use_sum = !env_off("LOOM_FUSE_CONV_SUM"),
             use_act = !env_off("LOOM_FUSE_CONV_ACT");
  if (!use_affine && !use_sum && !use_act) return plans;
  Readers r(eg);
  std::vector<bool> taken(eg.nodes.size(), false);  // consumers a producer applies
  for (size_t i = 0; i < eg.num_forward_nodes; ++i) {
    if (!sole_reader(in, r, absorbed, i, true)) continue;
    const ExecNode& n = eg.nodes[i];
    const Layout out_layout = in.layouts[i].get(LayoutSlot::kOut, 0);
    std::vector<size_t> chain;
    std::vector<PostOpPlan> steps;  // the plan after each consumer
    PostOpPlan p;
    size_t cur = i;
    bool relu_absorbed = false, closed = false;
    auto next = [&]() -> size_t {
      if (closed) return 0;
      const size_t j = sole_reader(in, r, absorbed, cur, true);
      if (!j || in.layouts[j].get(LayoutSlot::kOut, 0) != out_layout) return 0;
      return j;
    };
    // A per-channel affine map (BatchNorm), possibly with its absorbed ReLU.
    if (size_t j = next(); j && use_affine) {
      const ExecNode& m = eg.nodes[j];
      bool relu = false;
      if (!m.in.empty() && m.in[0] == eg.nodes[cur].out[0] &&
          in.kernel_of[j]->channel_affine_capable(&relu)) {
        p.ops.affine = true;
        p.affine = static_cast<int>(chain.size());
        if (relu) p.ops.act.kind = FusedActivation::kRelu, relu_absorbed = closed = true;
        chain.push_back(j), steps.push_back(p), cur = j;
      }
    }
    // A residual add whose output took the other operand's buffer.
    if (size_t j = next(); j && use_sum) {
      const ExecNode& m = eg.nodes[j];
      const uint32_t e = eg.nodes[cur].out[0];
      if (m.in.size() == 2 && m.in[0] != m.in[1] && m.out.size() == 1 &&
          in.kernel_of[j]->is_binary_sum()) {
        const uint32_t other = m.in[0] == e ? m.in[1] : m.in[0], o = m.out[0];
        const auto& A = in.entries;
        if (other != kNoEntry && o != kNoEntry && !in.external[o] && !A[o].is_none() &&
            A[o].same_memory(A[other]) && A[o].nbytes() == A[e].nbytes() &&
            !A[o].same_memory(A[e])) {
          p.ops.sum = true;
          p.sum = static_cast<int>(chain.size());
          chain.push_back(j), steps.push_back(p), cur = j;
        }
      }
    }
    // An element-wise activation (in place after a sum).
    if (size_t j = next(); j && use_act && !relu_absorbed) {
      const ExecNode& m = eg.nodes[j];
      FusedActivation act;
      const uint32_t e = eg.nodes[cur].out[0], o = m.out[0];
      bool in_place =
          o != kNoEntry && !in.entries[o].is_none() && in.entries[o].same_memory(in.entries[e]);
      if (!m.in.empty() && m.in[0] == e && m.out.size() == 1 && (in_place || !p.ops.sum) &&
          in.kernel_of[j]->fused_activation(input_arrays(in, m), &act) &&
          act.kind != FusedActivation::kNone) {
        p.ops.act = act;
        p.ops.act.slope = {};
        p.act = static_cast<int>(chain.size());
        chain.push_back(j), steps.push_back(p), cur = j;
      }
    }
    // The longest prefix the producer takes.
    for (size_t k = chain.size(); k > 0; --k) {
      PostOpPlan cand = steps[k - 1];
      const uint32_t o = eg.nodes[chain[k - 1]].out[0];
      if (o == kNoEntry || in.external[o] || in.entries[o].is_none()) continue;
      if (overlaps_input(in, in.entries[o], n)) continue;
      if (!in.kernel_of[i]->fuse_post_ops(cand.ops)) continue;
      cand.n = static_cast<int>(k);
      plans[i] = cand;
      for (size_t c = 0; c < k; ++c) taken[chain[c]] = true;
      break;
    }
  }
  if (use_act && !env_off("LOOM_FUSE_PRE_ACT")) plan_pre_activations(in, r, absorbed, taken, plans);
  return plans;
}

}  // namespace loom
