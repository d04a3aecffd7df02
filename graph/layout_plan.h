// Layout propagation: which intermediate entries may live in a channel-blocked layout.
#pragma once

#include <vector>

#include "graph/exec_graph.h"

namespace loom {

/// Chooses a physical layout per entry of `eg`: `blocked` for a 4-D float32 entry whose
/// channel count the block divides, when it is not `fixed_plain` (arguments, aux states,
/// gradients, head gradients, graph outputs), every node reading or writing it (forward and
/// backward) allows a blocked layout in that slot (OpDef::layout_rule), slots an op ties
/// together all qualify, and the tied set touches an op that prefers blocked data. Every
/// other entry is plain. `blocked == Layout::kPlain` makes everything plain.
std::vector<Layout> plan_layouts(const ExecGraph& eg, const std::vector<bool>& fixed_plain,
                                 Layout blocked);

/// Per exec node: the layouts its kernel sees. A forward node gets in/out and, when its
/// graph node has a backward node, in_grad/out_grad from there (kernels are shared by both);
/// backward nodes get empty entries.
std::vector<NodeLayouts> kernel_layouts(const ExecGraph& eg, const std::vector<Layout>& layouts);

}  // namespace loom
