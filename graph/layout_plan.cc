#include "graph/layout_plan.h"

#include <numeric>

namespace loom {
namespace {

// Calls f(kind, index, entry) for every tensor slot of exec node n that has an entry. A
// backward node's in_data/out_data are its forward node's kIn/kOut entries.
template <class F>
void for_each_slot(const ExecNode& n, F&& f) {
  if (n.kind == ExecNode::Kind::kForward) {
    for (size_t i = 0; i < n.in.size(); ++i) f(LayoutSlot::kIn, i, n.in[i]);
    for (size_t i = 0; i < n.out.size(); ++i) f(LayoutSlot::kOut, i, n.out[i]);
    return;
  }
  size_t nin = n.out.size(), nout = (n.in.size() - nin) / 2;
  for (size_t j = 0; j < nout; ++j) f(LayoutSlot::kOutGrad, j, n.in[j]);
  for (size_t i = 0; i < nin; ++i) f(LayoutSlot::kIn, i, n.in[nout + i]);
  for (size_t j = 0; j < nout; ++j) f(LayoutSlot::kOut, j, n.in[nout + nin + j]);
  for (size_t i = 0; i < nin; ++i) f(LayoutSlot::kInGrad, i, n.out[i]);
}

struct UnionFind {
  std::vector<uint32_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0u); }
  uint32_t find(uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(uint32_t a, uint32_t b) { parent[find(a)] = find(b); }
};

}  // namespace

std::vector<Layout> plan_layouts(const ExecGraph& eg, const std::vector<bool>& fixed_plain,
                                 Layout blocked) {
  size_t ne = eg.shapes.size();
  std::vector<Layout> out(ne, Layout::kPlain);
  if (blocked == Layout::kPlain) return out;
  const int64_t block = layout_block(blocked);
  std::vector<bool> ok(ne), native(ne, false);
  for (size_t e = 0; e < ne; ++e) {
    const Shape& s = eg.shapes[e];
    ok[e] = !fixed_plain[e] && eg.types[e] == DType::kFloat32 && s.ndim() == 4 && s.known() &&
            s.numel() > 0 && s[1] % block == 0;
  }
  // A kernel object serves its forward node and one backward node; a graph node with several
  // backward nodes (in-graph and outer gradients) keeps its gradient slots plain.
  std::vector<int> n_backward;
  for (const auto& n : eg.nodes)
    if (n.kind == ExecNode::Kind::kBackward) {
      if (n.forward_of >= n_backward.size()) n_backward.resize(n.forward_of + 1, 0);
      ++n_backward[n.forward_of];
    }
  // Input shapes of graph nodes, for the rules of their backward nodes.
  std::vector<const ExecNode*> forward_node;
  for (const auto& n : eg.nodes)
    if (n.kind == ExecNode::Kind::kForward && n.graph_node != kNoEntry) {
      if (n.graph_node >= forward_node.size()) forward_node.resize(n.graph_node + 1, nullptr);
      forward_node[n.graph_node] = &n;
    }
  UnionFind uf(ne);
  for (const auto& n : eg.nodes) {
    if (!n.attrs) continue;
    if (n.pred != kNoEntry) ok[n.pred] = false;
    const OpDef& op = *n.attrs->op;
    const ExecNode* fwd = &n;
    if (n.kind == ExecNode::Kind::kBackward)
      fwd = n.forward_of < forward_node.size() ? forward_node[n.forward_of] : nullptr;
    LayoutRule rule;
    if (op.layout_rule && fwd) {
      std::vector<Shape> in_shapes;
      for (auto e : fwd->in) in_shapes.push_back(e == kNoEntry ? Shape() : eg.shapes[e]);
      rule = op.layout_rule(*n.attrs, in_shapes);
    }
    bool shared_kernel = n.kind == ExecNode::Kind::kBackward && n_backward[n.forward_of] > 1;
    // group index per slot, -1 = must stay plain
    auto group_of = [&](LayoutSlot::Kind k, size_t i) {
      bool grad = k == LayoutSlot::kInGrad || k == LayoutSlot::kOutGrad;
      if (grad && shared_kernel) return -1;
      for (size_t g = 0; g < rule.groups.size(); ++g)
        for (const auto& s : rule.groups[g])
          if (s.kind == k && static_cast<size_t>(s.index) == i) return static_cast<int>(g);
      return -1;
    };
    std::vector<uint32_t> first(rule.groups.size(), kNoEntry);
    for_each_slot(n, [&](LayoutSlot::Kind k, size_t i, uint32_t e) {
      if (e == kNoEntry) return;
      int g = group_of(k, i);
      if (g < 0) {
        ok[e] = false;
        return;
      }
      if (rule.prefers_blocked) native[e] = true;
      auto& f = first[static_cast<size_t>(g)];
      if (f == kNoEntry)
        f = e;
      else
        uf.unite(e, f);
    });
  }
  std::vector<bool> class_ok(ne, true), class_native(ne, false);
  for (uint32_t e = 0; e < ne; ++e) {
    uint32_t r = uf.find(e);
    class_ok[r] = class_ok[r] && ok[e];
    class_native[r] = class_native[r] || native[e];
  }
  for (uint32_t e = 0; e < ne; ++e) {
    uint32_t r = uf.find(e);
    if (class_ok[r] && class_native[r]) out[e] = blocked;
  }
  return out;
}

std::vector<NodeLayouts> kernel_layouts(const ExecGraph& eg, const std::vector<Layout>& layouts) {
  std::vector<NodeLayouts> res(eg.nodes.size());
  auto of = [&](uint32_t e) { return e == kNoEntry ? Layout::kPlain : layouts[e]; };
  std::vector<size_t> index_of_graph_node;
  for (size_t i = 0; i < eg.nodes.size(); ++i) {
    const ExecNode& n = eg.nodes[i];
    if (!n.attrs || n.kind != ExecNode::Kind::kForward) continue;
    for (auto e : n.in) res[i].in.push_back(of(e));
    for (auto e : n.out) res[i].out.push_back(of(e));
    if (n.graph_node != kNoEntry) {
      if (n.graph_node >= index_of_graph_node.size())
        index_of_graph_node.resize(n.graph_node + 1, SIZE_MAX);
      index_of_graph_node[n.graph_node] = i;
    }
  }
  for (const ExecNode& n : eg.nodes) {
    if (!n.attrs || n.kind != ExecNode::Kind::kBackward) continue;
    if (n.forward_of >= index_of_graph_node.size() || index_of_graph_node[n.forward_of] == SIZE_MAX)
      continue;
    NodeLayouts& nl = res[index_of_graph_node[n.forward_of]];
    nl.in_grad.assign(n.out.size(), Layout::kPlain);
    nl.out_grad.assign((n.in.size() - n.out.size()) / 2, Layout::kPlain);
    for_each_slot(n, [&](LayoutSlot::Kind k, size_t i, uint32_t e) {
      if (k == LayoutSlot::kInGrad) nl.in_grad[i] = of(e);
      if (k == LayoutSlot::kOutGrad) nl.out_grad[i] = of(e);
    });
  }
  return res;
}

}  // namespace loom
