// The flat execution graph: forward nodes, then the backward nodes the gradient pass adds,
// over integer entries; and the memory plan that maps entries to shared buffers.
#pragma once

#include <deque>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "graph/node.h"

namespace loom {

constexpr uint32_t kNoEntry = std::numeric_limits<uint32_t>::max();

/// One step of the plan.
struct ExecNode {
  enum class Kind { kForward, kBackward };
  Kind kind = Kind::kForward;
  const OpAttrs* attrs = nullptr;
  /// kForward nodes of the graph: their IndexedGraph node id (kNoEntry for nodes the
  /// gradient pass synthesised). kBackward: the graph node whose kernel computes it.
  uint32_t graph_node = kNoEntry;
  uint32_t forward_of = kNoEntry;
  /// kForward: the op's inputs. kBackward: out_grads (n_out), in_data (n_in), out_data
  /// (n_out); kNoEntry where the op's GradDeps say it is not needed.
  std::vector<uint32_t> in;
  /// kForward: all outputs. kBackward: one gradient per forward input (kNoEntry = none).
  std::vector<uint32_t> out;
  /// Output (i) may share the buffer of input (j): pairs (i, j). Backward nodes: input
  /// gradient i over output gradient j, as OpDef::backward_inplace allows.
  std::vector<std::pair<int, int>> inplace;
  /// Output (i) must be written into input (j)'s array (the node attribute `__inplace__`,
  /// MXNet's `out=weight`): pairs (i, j). The input's other readers run first.
  std::vector<std::pair<int, int>> alias;
  /// For predicated nodes (`__pred__`): the entry of the predicate; kNoEntry otherwise.
  /// `in` then excludes it.
  uint32_t pred = kNoEntry;
};

/// Forward graph plus gradient. Entry ids below `num_forward_entries` are the
/// IndexedGraph's entries.
struct ExecGraph {
  /// Nodes [0, num_forward_nodes) run in forward() (including the backward nodes of
  /// in-graph `_loom_gradients` nodes, for training-step graphs); the rest in backward().
  std::vector<ExecNode> nodes;
  size_t num_forward_nodes = 0;
  /// The graph's output entries (after in-graph gradients are resolved).
  std::vector<uint32_t> heads;
  std::vector<Shape> shapes;  ///< per entry
  std::vector<DType> types;   ///< per entry
  size_t num_forward_entries = 0;
  /// Per graph head: the entry the user's head gradient goes into, or kNoEntry when the
  /// head needs none (loss heads, BlockGrad, heads nothing differentiable depends on).
  std::vector<uint32_t> head_grad;
  /// Per argument variable (list_arguments order): the entry holding its final gradient, or
  /// kNoEntry when its grad_req is null.
  std::vector<uint32_t> arg_grad;
  /// Per argument: true when its gradient is identically zero (no path from any head).
  std::vector<bool> arg_grad_zero;
  /// Attributes of nodes the gradient pass synthesised (sums, zeros).
  std::deque<OpAttrs> owned_attrs;
};

/// Hidden node attribute: per output, the input whose array the output is written into
/// ("(0,)" = output 0 into input 0; -1 = its own buffer). The op must allow that pair in
/// place. Used for updates that mutate weights, accumulators and EMA shadows.
inline constexpr const char* kInplaceAttr = "__inplace__";

/// Builds the forward plan and, for arguments with `need_grad[i]` (list_arguments order),
/// the backward nodes: one backward node per differentiable op on a path to a needed
/// gradient, `add_n` nodes where gradients meet, `_zeros` nodes where an op needs a gradient
/// nothing provides.
ExecGraph build_exec_graph(const IndexedGraph& g, const std::vector<Shape>& shapes,
                           const std::vector<DType>& types, const std::vector<bool>& need_grad);

/// Memory plan: storage id per entry (kNoEntry for entries bound to external arrays or
/// unused) and the byte size of each storage block.
struct MemoryPlan {
  std::vector<uint32_t> storage;   ///< per entry
  std::vector<size_t> block_bytes; ///< per storage id
  size_t total_bytes = 0;
  size_t naive_bytes = 0;          ///< what one buffer per entry would have cost
};

/// Plans buffers for every entry not in `external` (aliased outputs share their input's
/// buffer): a buffer is reused once its last
/// reader has run (in plan order), and an op output takes over its input's buffer when the
/// op allows in-place and nothing later reads that input. Entries in `pinned` (graph
/// outputs) keep their own buffer.
MemoryPlan plan_memory(const ExecGraph& eg, const std::vector<bool>& external,
                       const std::vector<bool>& pinned);

}  // namespace loom
