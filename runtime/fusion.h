// The executor's bind-time fusion passes over the forward nodes: epilogue absorption
// (BatchNorm + ReLU) and inference post-ops (Convolution -> BatchNorm -> add -> activation as
// one oneDNN primitive). Internal to runtime/executor.cc.
#pragma once

#include <vector>

#include "graph/exec_graph.h"
#include "ops/op.h"

namespace loom {

/// What the passes see of a bind in progress: per exec node its kernel (forward nodes) and
/// layouts, per entry its array and whether it is user-visible (external) or a graph output.
struct FusionInput {
  const ExecGraph& eg;
  const std::vector<Kernel*>& kernel_of;
  const std::vector<NodeLayouts>& layouts;
  const std::vector<NDArray>& entries;
  const std::vector<bool>& external;
  const std::vector<bool>& pinned;
};

/// A producer's inference post-ops: it applies the next `n` steps (its consumers, in order)
/// itself. `affine`, `sum`, `act`: which consumer (0-based) is the BatchNorm, the residual
/// add and the activation, -1 for none (a BatchNorm's absorbed ReLU is `ops.act` with
/// act == -1).
struct PostOpPlan {
  PostOps ops;
  int n = 0;
  int affine = -1, sum = -1, act = -1;
  /// An activation node whose step the next step applies to its input (PostOps::pre).
  bool into_next = false;
};

/// Epilogue fusion: a forward node whose output 0 only a one-input node reads, in place, may
/// apply that node itself (Kernel::fuse_epilogue). Returns which nodes were absorbed.
/// LOOM_FUSE_EPILOGUE=0 turns it off.
std::vector<bool> fuse_epilogues(const FusionInput& in);

/// Post-op fusion, per exec node (n == 0: none). LOOM_FUSE_CONV_BN=0 leaves out BatchNorm,
/// LOOM_FUSE_CONV_SUM=0 the residual add, LOOM_FUSE_CONV_ACT=0 the activations (after and
/// before), LOOM_FUSE_PRE_ACT=0 the activations before a layer only.
std::vector<PostOpPlan> plan_post_ops(const FusionInput& in, const std::vector<bool>& absorbed);

}  // namespace loom
