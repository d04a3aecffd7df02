// Shape and dtype inference passes over an IndexedGraph.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/node.h"

namespace loom {

/// Per-entry shapes (index = entry id). Known variable shapes come from `known` (by name),
/// then from the variables' `__shape__` hints (0 = unknown dim). Ops infer forward and
/// backward (weights from data, labels from predictions) until nothing changes.
/// With `partial` false, any shape left unknown throws ShapeError naming the variables
/// (or node outputs) that could not be inferred; conflicts always throw, naming node, op,
/// input, expected and actual shapes.
std::vector<Shape> infer_shapes(const IndexedGraph& g, const std::map<std::string, Shape>& known,
                                bool partial = false);

/// Per-entry dtypes; variables from `known`, then `__dtype__`, default float32 for
/// variables nothing constrains. With `partial`, nothing is defaulted: what the graph does
/// not decide stays DType::kUnknown (MXNet's infer_type_partial).
std::vector<DType> infer_types(const IndexedGraph& g, const std::map<std::string, DType>& known,
                               bool partial = false);

}  // namespace loom
