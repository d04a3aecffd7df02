#include "graph/cse.h"

#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

#include "graph/exec_graph.h"

namespace loom {
namespace {

// Ops whose result is not a function of their inputs and attributes: they draw from the
// executor's generator or run user code. (No OpDef field says so yet; the list is the ops
// that read OpContext::rng, plus Custom.)
bool draws_or_calls_user_code(const OpAttrs& a) {
  const std::string& op = a.op->name;
  if (op == "Dropout" || op == "RNN" || op == "Custom") return true;
  if (op.rfind("_image_random_", 0) == 0) return true;
  auto it = a.dict.find("act_type");
  return op == "LeakyReLU" && it != a.dict.end() && it->second == "rrelu";
}

// What makes two nodes the same computation: op, attributes, inputs, control dependencies
// (inputs and dependencies as nodes of the new graph).
using Key = std::tuple<const OpDef*, Attrs, std::vector<std::pair<const Node*, uint32_t>>,
                       std::vector<const Node*>>;

}  // namespace

bool cse_mergeable(const Node& n) {
  if (n.is_variable() || n.inputs.empty()) return false;
  const OpAttrs& a = n.attrs;
  if (!op_aux(a).empty() || op_is_predicated(a) || a.dict.count(kInplaceAttr)) return false;
  if (a.op->grad_mode == GradMode::kGraphGradient) return false;
  return !draws_or_calls_user_code(a);
}

Symbol eliminate_common_expr(const Symbol& sym) {
  const IndexedGraph g(sym.outputs());
  // The shared pointers of the graph's nodes (IndexedGraph keeps raw ones).
  std::unordered_map<const Node*, NodePtr> owner;
  for (const NodeEntry& e : sym.outputs()) owner[e.node.get()] = e.node;
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = *g.node(i).node;
    for (const NodeEntry& e : n.inputs) owner[e.node.get()] = e.node;
    for (const NodePtr& d : n.control_deps) owner[d.get()] = d;
  }
  std::vector<NodePtr> now(g.num_nodes());  // node id -> its node in the new graph
  std::map<Key, NodePtr> seen;
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = *g.node(i).node;
    if (n.is_variable()) {
      now[i] = owner.at(&n);
      continue;
    }
    auto copy = std::make_shared<Node>();
    copy->attrs = n.attrs;
    Key key{n.attrs.op, n.attrs.dict, {}, {}};
    for (const NodeEntry& e : n.inputs) {
      const NodePtr& src = now[g.node_id(e.node.get())];
      copy->inputs.push_back(NodeEntry{src, e.index, e.version});
      std::get<2>(key).emplace_back(src.get(), e.index);
    }
    for (const NodePtr& d : n.control_deps) {
      const NodePtr& src = now[g.node_id(d.get())];
      copy->control_deps.push_back(src);
      std::get<3>(key).push_back(src.get());
    }
    if (!cse_mergeable(n)) {
      now[i] = copy;
      continue;
    }
    auto [it, fresh] = seen.emplace(std::move(key), copy);
    now[i] = it->second;
  }
  std::vector<NodeEntry> outs;
  std::map<std::pair<const Node*, uint32_t>, int> copies;  // output entry -> copies made
  for (const NodeEntry& e : sym.outputs()) {
    NodeEntry out{now[g.node_id(e.node.get())], e.index, e.version};
    auto [it, first] = copies.emplace(std::make_pair(out.node.get(), out.index), 0);
    if (!first) {
      const std::string name = out.node->name() + "_" + std::to_string(it->second++) + "_copy";
      out = Symbol::Op("_copy", {Symbol({out})}, {}, name).outputs()[0];
    }
    outs.push_back(out);
  }
  return Symbol(std::move(outs));
}

}  // namespace loom
