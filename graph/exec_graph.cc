#include "graph/exec_graph.h"

#include <algorithm>
#include <set>

namespace loom {
namespace {

// What one gradient computation differentiates: `losses` seed it (their own backward
// needs no output gradient, or gets ones / a user head gradient), `wrt` are the entries
// to differentiate with respect to; only graph nodes below `node_limit` take part.
struct GradRequest {
  std::vector<uint32_t> losses;
  bool seed_ones = false;  // true: ones for losses that need an output gradient
  std::vector<uint32_t> wrt;
  uint32_t node_limit = 0;
};

class GradBuilder {
 public:
  GradBuilder(const IndexedGraph& g, ExecGraph& eg) : g_(g), eg_(eg) {}

  uint32_t new_entry(const Shape& s, DType t) {
    eg_.shapes.push_back(s);
    eg_.types.push_back(t);
    return static_cast<uint32_t>(eg_.shapes.size() - 1);
  }

  // A node writing a constant (`_zeros` / `_ones`) shaped like entry e.
  uint32_t constant_like(uint32_t e, const char* op) {
    Attrs d{{"shape", eg_.shapes[e].str()}, {"dtype", dtype_name(eg_.types[e])}};
    eg_.owned_attrs.push_back(make_op_attrs(get_op(op), op, d));
    ExecNode n;
    n.kind = ExecNode::Kind::kForward;
    n.attrs = &eg_.owned_attrs.back();
    n.out = {new_entry(eg_.shapes[e], eg_.types[e])};
    eg_.nodes.push_back(n);
    return n.out[0];
  }

  // Sum of gradient contributions (one entry passes through).
  uint32_t total(const std::vector<uint32_t>& parts, uint32_t like) {
    if (parts.empty()) return constant_like(like, "_zeros");
    if (parts.size() == 1) return parts[0];
    Attrs d{{"num_args", std::to_string(parts.size())}};
    eg_.owned_attrs.push_back(make_op_attrs(get_op("add_n"), "_grad_sum", d));
    ExecNode n;
    n.attrs = &eg_.owned_attrs.back();
    n.in = parts;
    n.out = {new_entry(eg_.shapes[like], eg_.types[like])};
    eg_.nodes.push_back(n);
    return n.out[0];
  }

  static bool passes_gradient(const Node& n) {
    return !n.is_variable() && n.attrs.op->grad_mode == GradMode::kKernel;
  }

  // Returns, per `wrt` entry, its gradient entry; `zero[i]` says no path reached it.
  // Without seed_ones, losses needing an output gradient get user head-gradient entries
  // recorded in eg.head_grad (indexed like req.losses).
  std::vector<uint32_t> run(const GradRequest& req, std::vector<bool>* zero) {
    size_t ne = g_.num_entries();
    std::vector<bool> dep(ne, false);
    for (auto e : req.wrt) dep[e] = true;
    for (uint32_t nid = 0; nid < req.node_limit; ++nid) {
      const auto& in = g_.node(nid);
      if (!passes_gradient(*in.node)) continue;
      bool any = false;
      for (auto e : in.inputs) any = any || dep[e];
      for (uint32_t k = 0; k < in.node->num_outputs(); ++k)
        dep[g_.entry_id(nid, k)] = dep[g_.entry_id(nid, k)] || any;
    }
    std::vector<std::vector<uint32_t>> grads(ne);
    if (!req.seed_ones) eg_.head_grad.assign(req.losses.size(), kNoEntry);
    for (uint32_t nid = req.node_limit; nid-- > 0;) {
      const auto& in = g_.node(nid);
      const Node& n = *in.node;
      if (!passes_gradient(n)) continue;
      uint32_t first = g_.entry_id(nid, 0);
      if (!dep[first]) continue;
      GradDeps deps = op_grad_deps(n.attrs);
      uint32_t nout = n.num_outputs();
      if (deps.out_grad) {
        // Loss entries that need an output gradient get ones or a user head gradient.
        for (size_t h = 0; h < req.losses.size(); ++h) {
          uint32_t e = req.losses[h];
          if (e < first || e >= first + nout) continue;
          if (req.seed_ones) {
            grads[e].push_back(constant_like(e, "_ones"));
          } else if (eg_.head_grad[h] == kNoEntry) {
            eg_.head_grad[h] = new_entry(eg_.shapes[e], eg_.types[e]);
            grads[e].push_back(eg_.head_grad[h]);
          }
        }
        bool any = false;
        for (uint32_t k = 0; k < nout; ++k) any = any || !grads[first + k].empty();
        if (!any) continue;  // nothing flows into this node
      } else {
        // A loss head: it takes part only if one of its outputs is a requested loss.
        bool is_loss = false;
        for (auto e : req.losses) is_loss = is_loss || (e >= first && e < first + nout);
        bool fed = false;
        for (uint32_t k = 0; k < nout; ++k) fed = fed || !grads[first + k].empty();
        if (!is_loss && !fed) continue;
      }
      ExecNode b;
      b.kind = ExecNode::Kind::kBackward;
      b.attrs = &n.attrs;
      b.forward_of = nid;
      for (uint32_t k = 0; k < nout; ++k)
        b.in.push_back(deps.out_grad ? total(grads[first + k], first + k) : kNoEntry);
      size_t n_kernel_in = op_kernel_inputs(n.attrs);
      for (size_t k = 0; k < n_kernel_in; ++k) b.in.push_back(deps.in_data ? in.inputs[k] : kNoEntry);
      for (uint32_t k = 0; k < nout; ++k)
        b.in.push_back(deps.out_data && (deps.out_data_mask >> k & 1u) ? first + k : kNoEntry);
      std::set<int> skip;
      for (int a : op_aux(n.attrs)) skip.insert(a);
      if (n.attrs.op->nograd_inputs)
        for (int a : n.attrs.op->nograd_inputs(n.attrs)) skip.insert(a);
      for (size_t k = 0; k < n_kernel_in; ++k) {
        uint32_t src = in.inputs[k];
        if (skip.count(static_cast<int>(k)) || !dep[src]) {
          b.out.push_back(kNoEntry);
          continue;
        }
        uint32_t ge = new_entry(eg_.shapes[src], eg_.types[src]);
        b.out.push_back(ge);
        grads[src].push_back(ge);
      }
      for (auto [j, i] : n.attrs.op->backward_inplace)
        if (static_cast<size_t>(i) < b.out.size() && static_cast<uint32_t>(j) < nout &&
            b.out[static_cast<size_t>(i)] != kNoEntry && b.in[static_cast<size_t>(j)] != kNoEntry)
          b.inplace.emplace_back(i, j);
      eg_.nodes.push_back(std::move(b));
    }
    std::vector<uint32_t> out;
    if (zero) zero->clear();
    for (auto e : req.wrt) {
      if (zero) zero->push_back(grads[e].empty());
      out.push_back(total(grads[e], e));
    }
    return out;
  }

 private:
  const IndexedGraph& g_;
  ExecGraph& eg_;
};

}  // namespace

namespace {

// Parses `__inplace__` and checks each pair against the op's allowed in-place pairs.
std::vector<std::pair<int, int>> parse_alias(const OpAttrs& a, size_t n_in, size_t n_out) {
  auto it = a.dict.find(kInplaceAttr);
  if (it == a.dict.end()) return {};
  Shape idx;
  try {
    idx = parse_shape(it->second);
  } catch (const ParamError&) {
    throw GraphError("node '" + a.name + "': bad " + kInplaceAttr + " '" + it->second + "'");
  }
  std::vector<std::pair<int, int>> allowed;
  if (a.op->inplace) allowed = a.op->inplace(a);
  std::vector<std::pair<int, int>> out;
  for (int o = 0; o < idx.ndim() && static_cast<size_t>(o) < n_out; ++o) {
    int i = static_cast<int>(idx[o]);
    if (i < 0) continue;
    if (static_cast<size_t>(i) >= n_in ||
        std::find(allowed.begin(), allowed.end(), std::make_pair(i, o)) == allowed.end())
      throw GraphError("node '" + a.name + "' (op " + a.op->name + "): output " +
                       std::to_string(o) + " cannot be written in place into input " +
                       std::to_string(i));
    out.emplace_back(o, i);
  }
  return out;
}

// Orders forward nodes so that a node writing into an input's array runs after every other
// reader of that array's old value, and backward nodes of in-graph gradients after what
// they read (stable: otherwise the original order is kept).
void order_nodes(ExecGraph& eg, size_t n) {
  std::vector<std::vector<uint32_t>> readers(eg.shapes.size());
  std::vector<int> writer(eg.shapes.size(), -1);
  bool any = false;
  for (size_t i = 0; i < n; ++i) {
    for (auto e : eg.nodes[i].in)
      if (e != kNoEntry) readers[e].push_back(static_cast<uint32_t>(i));
    if (eg.nodes[i].pred != kNoEntry) readers[eg.nodes[i].pred].push_back(static_cast<uint32_t>(i));
    for (auto [o, in] : eg.nodes[i].alias) {
      uint32_t e = eg.nodes[i].in[static_cast<size_t>(in)];
      if (writer[e] >= 0)
        throw GraphError("nodes '" + eg.nodes[static_cast<size_t>(writer[e])].attrs->name + "' and '" +
                         eg.nodes[i].attrs->name + "' both write in place into the same array");
      writer[e] = static_cast<int>(i);
      any = true;
    }
  }
  // Graph nodes alone are already in topological order; only in-place writers and the
  // nodes in-graph gradients appended need sorting.
  bool appended = false;
  for (size_t i = 0; i < n; ++i) appended = appended || eg.nodes[i].graph_node == kNoEntry ||
                                            eg.nodes[i].kind == ExecNode::Kind::kBackward;
  // Prologue nodes (OpDef::prologue) run before every other node.
  std::vector<size_t> prologue;
  for (size_t i = 0; i < n; ++i)
    if (eg.nodes[i].attrs && eg.nodes[i].attrs->op->prologue) prologue.push_back(i);
  if (!any && !appended && prologue.empty()) return;
  // Edges: producer -> consumer, and other reader -> in-place writer.
  std::vector<std::vector<uint32_t>> next(n);
  std::vector<int> indeg(n, 0);
  std::vector<int> producer(eg.shapes.size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (auto e : eg.nodes[i].out)
      if (e != kNoEntry) producer[e] = static_cast<int>(i);
  auto edge = [&](size_t a, size_t b) {
    next[a].push_back(static_cast<uint32_t>(b));
    ++indeg[b];
  };
  for (size_t i = 0; i < n; ++i) {
    std::vector<uint32_t> ins = eg.nodes[i].in;
    if (eg.nodes[i].pred != kNoEntry) ins.push_back(eg.nodes[i].pred);
    for (auto e : ins)
      if (e != kNoEntry && producer[e] >= 0) edge(static_cast<size_t>(producer[e]), i);
  }
  for (size_t p : prologue)
    for (size_t i = 0; i < n; ++i)
      if (eg.nodes[i].attrs && !eg.nodes[i].attrs->op->prologue) edge(p, i);
  for (size_t e = 0; e < writer.size(); ++e) {
    if (writer[e] < 0) continue;
    for (auto r : readers[e])
      if (static_cast<int>(r) != writer[e]) edge(r, static_cast<size_t>(writer[e]));
  }
  std::set<uint32_t> ready;
  for (size_t i = 0; i < n; ++i)
    if (!indeg[i]) ready.insert(static_cast<uint32_t>(i));
  std::vector<ExecNode> ordered;
  while (!ready.empty()) {
    uint32_t i = *ready.begin();
    ready.erase(ready.begin());
    ordered.push_back(eg.nodes[i]);
    for (auto j : next[i])
      if (--indeg[j] == 0) ready.insert(j);
  }
  if (ordered.size() != n)
    throw GraphError("in-place writes form a cycle: a node reads an array's old value after "
                     "depending on the node that overwrites it");
  std::copy(ordered.begin(), ordered.end(), eg.nodes.begin());
}

}  // namespace

ExecGraph build_exec_graph(const IndexedGraph& g, const std::vector<Shape>& shapes,
                           const std::vector<DType>& types, const std::vector<bool>& need_grad) {
  ExecGraph eg;
  eg.shapes = shapes;
  eg.types = types;
  eg.num_forward_entries = g.num_entries();
  std::vector<uint32_t> gradient_nodes;
  for (uint32_t nid = 0; nid < g.num_nodes(); ++nid) {
    const auto& in = g.node(nid);
    ExecNode n;
    n.kind = ExecNode::Kind::kForward;
    n.graph_node = nid;
    if (!in.node->is_variable() && in.node->attrs.op->grad_mode == GradMode::kGraphGradient) {
      gradient_nodes.push_back(nid);  // resolved below; the node itself runs nothing
    } else if (!in.node->is_variable()) {
      n.attrs = &in.node->attrs;
      n.in = in.inputs;
      if (op_is_predicated(*n.attrs)) {
        n.pred = n.in.back();
        n.in.pop_back();
      }
      for (uint32_t k = 0; k < in.node->num_outputs(); ++k) n.out.push_back(g.entry_id(nid, k));
      if (n.attrs->op->inplace) {
        for (auto [i, o] : n.attrs->op->inplace(*n.attrs)) n.inplace.emplace_back(o, i);
      }
      n.alias = parse_alias(*n.attrs, n.in.size(), n.out.size());
    }
    eg.nodes.push_back(std::move(n));  // variables stay as empty placeholders (no attrs)
  }
  // In-graph gradients (training-step graphs): each `_loom_gradients(losses..., wrt...)`
  // node becomes the backward nodes of the graph below it; its outputs are the gradients.
  std::vector<uint32_t> remap(eg.shapes.size());
  for (size_t e = 0; e < remap.size(); ++e) remap[e] = static_cast<uint32_t>(e);
  for (uint32_t nid : gradient_nodes) {
    const auto& in = g.node(nid);
    size_t n_wrt = in.node->num_outputs();
    GradRequest req;
    req.seed_ones = true;
    req.node_limit = nid;
    req.losses.assign(in.inputs.begin(), in.inputs.end() - static_cast<long>(n_wrt));
    req.wrt.assign(in.inputs.end() - static_cast<long>(n_wrt), in.inputs.end());
    for (auto& e : req.losses) e = remap[e];
    for (auto& e : req.wrt) e = remap[e];
    auto grads = GradBuilder(g, eg).run(req, nullptr);
    for (size_t k = 0; k < n_wrt; ++k) remap[g.entry_id(nid, static_cast<uint32_t>(k))] = grads[k];
  }
  if (!gradient_nodes.empty()) {
    for (auto& n : eg.nodes) {
      for (auto& e : n.in)
        if (e != kNoEntry && e < remap.size()) e = remap[e];
      if (n.pred != kNoEntry) n.pred = remap[n.pred];
    }
  }
  for (auto h : g.heads()) eg.heads.push_back(remap[h]);
  eg.num_forward_nodes = eg.nodes.size();
  order_nodes(eg, eg.num_forward_nodes);
  bool any = false;
  for (bool b : need_grad) any = any || b;
  if (any) {
    GradRequest req;
    req.losses = eg.heads;
    req.node_limit = static_cast<uint32_t>(g.num_nodes());
    auto args = g.arguments();
    std::vector<size_t> which;
    for (size_t i = 0; i < args.size(); ++i)
      if (need_grad[i]) req.wrt.push_back(g.entry_id(args[i], 0)), which.push_back(i);
    std::vector<bool> zero;
    auto grads = GradBuilder(g, eg).run(req, &zero);
    eg.arg_grad.assign(args.size(), kNoEntry);
    eg.arg_grad_zero.assign(args.size(), false);
    for (size_t k = 0; k < which.size(); ++k) {
      eg.arg_grad[which[k]] = grads[k];
      eg.arg_grad_zero[which[k]] = zero[k];
    }
  } else {
    eg.head_grad.assign(eg.heads.size(), kNoEntry);
  }
  return eg;
}




// A free block is reused for an entry of at least 1/kMaxReuseFactor of its size.
constexpr size_t kMaxReuseFactor = 2;
MemoryPlan plan_memory(const ExecGraph& eg, const std::vector<bool>& external,
                       const std::vector<bool>& pinned) {
  size_t ne = eg.shapes.size();
  MemoryPlan plan;
  plan.storage.assign(ne, kNoEntry);
  std::vector<int> readers(ne, 0);
  for (const auto& n : eg.nodes) {
    for (auto e : n.in)
      if (e != kNoEntry) ++readers[e];
    if (n.pred != kNoEntry) ++readers[n.pred];
  }
  auto bytes_of = [&](uint32_t e) {
    return static_cast<size_t>(eg.shapes[e].numel()) * dtype_size(eg.types[e]);
  };
  std::multimap<size_t, uint32_t> free_blocks;  // bytes -> storage id
  std::vector<int> block_users;                  // live entries per block
  auto release = [&](uint32_t e) {
    uint32_t s = plan.storage[e];
    if (s == kNoEntry || pinned[e]) return;
    if (--block_users[s] == 0) free_blocks.emplace(plan.block_bytes[s], s);
  };
  // Plan position at which each entry was written: of two inputs a forward node may overwrite,
  // it takes the older one, so the newer one's producer can accumulate into that buffer
  // directly (a convolution's sum post-op for a residual add).
  std::vector<size_t> born(ne, 0);
  size_t pos = 0;
  for (const auto& n : eg.nodes) {
    if (!n.attrs) continue;
    ++pos;
    for (auto e : n.out)
      if (e != kNoEntry) born[e] = pos;
    std::vector<std::pair<int, int>> inplace = n.inplace;
    if (n.kind == ExecNode::Kind::kForward)
      std::stable_sort(inplace.begin(), inplace.end(), [&](auto x, auto y) {
        auto bx = static_cast<size_t>(x.second) < n.in.size() && n.in[x.second] != kNoEntry
                      ? born[n.in[x.second]]
                      : 0;
        auto by = static_cast<size_t>(y.second) < n.in.size() && n.in[y.second] != kNoEntry
                      ? born[n.in[y.second]]
                      : 0;
        return bx < by;
      });
    for (size_t k = 0; k < n.out.size(); ++k) {
      uint32_t e = n.out[k];
      if (e == kNoEntry || external[e] || plan.storage[e] != kNoEntry) continue;
      size_t b = bytes_of(e);
      plan.naive_bytes += b;
      bool aliased = false;
      for (auto [o, i] : n.alias) {
        if (static_cast<size_t>(o) != k) continue;
        uint32_t s = plan.storage[n.in[static_cast<size_t>(i)]];
        if (s != kNoEntry) {
          plan.storage[e] = s;
          ++block_users[s];
        }
        aliased = true;
      }
      if (aliased) continue;
      // In place: take over an input buffer whose last reader is this node.
      bool done = false;
      for (auto [o, i] : inplace) {
        if (static_cast<size_t>(o) != k || static_cast<size_t>(i) >= n.in.size()) continue;
        uint32_t src = n.in[static_cast<size_t>(i)];
        if (src == kNoEntry || external[src] || pinned[src] || pinned[e]) continue;
        uint32_t s = plan.storage[src];
        if (s == kNoEntry || readers[src] != 1 || block_users[s] != 1) continue;
        if (bytes_of(src) != b) continue;
        plan.storage[e] = s;
        ++block_users[s];
        done = true;
        break;
      }
      if (done) continue;
      auto it = pinned[e] ? free_blocks.end() : free_blocks.lower_bound(b);
      if (it != free_blocks.end() && it->first <= kMaxReuseFactor * b + 4096) {
        plan.storage[e] = it->second;
        free_blocks.erase(it);
      } else {
        plan.storage[e] = static_cast<uint32_t>(plan.block_bytes.size());
        plan.block_bytes.push_back(b);
        block_users.push_back(0);
      }
      ++block_users[plan.storage[e]];
    }
    for (auto e : n.in)
      if (e != kNoEntry && --readers[e] == 0) release(e);
    if (n.pred != kNoEntry && --readers[n.pred] == 0) release(n.pred);
    // Outputs nobody reads are free right away (hidden outputs, unused gradients).
    for (auto e : n.out)
      if (e != kNoEntry && readers[e] == 0) release(e);
  }
  for (auto b : plan.block_bytes) plan.total_bytes += b;
  return plan;
}

}  // namespace loom
