// Common-subexpression elimination: the bind-time pass MXNet runs unless
// MXNET_ELIMINATE_COMMON_EXPR=0 (and reports through Executor.get_optimized_symbol).
#pragma once

#include "graph/symbol.h"

namespace loom {

/// True when `n` may stand in for another node that computes the same function of the same
/// inputs: an operator node with inputs, whose op is deterministic and has no side effects.
/// Refused: variables and nodes without inputs; ops that update inputs in place (aux states,
/// `__inplace__`) or run under a predicate (`__pred__`); ops that draw random numbers (Dropout,
/// RNN, LeakyReLU rrelu, the `_image_random_*` family) or call user code (Custom); and
/// `_loom_gradients`, which the gradient pass expands.
bool cse_mergeable(const Node& n);

/// A copy of `sym` in which nodes that apply the same op with the same attributes (the whole
/// attribute dict, hidden keys included) to the same inputs and control dependencies are one
/// node, repeated until nothing more merges (a merged pair makes its readers equal). The
/// first node in topological order is kept, with its name. Outputs that end up on one
/// entry (or already were) are kept apart by a `_copy` node named `<node>_<k>_copy`, as
/// MXNet does, so every output is its own array. Variables are shared with `sym`; operator
/// nodes are new, so `sym` itself is unchanged.
Symbol eliminate_common_expr(const Symbol& sym);

}  // namespace loom
