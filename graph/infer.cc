#include "graph/infer.h"

#include "ops/infer.h"

namespace loom {
namespace {

template <class T, class Merge, class Run>
bool sweep(const IndexedGraph& g, std::vector<T>& ent, Merge merge, Run run) {
  bool changed = false;
  for (uint32_t nid = 0; nid < g.num_nodes(); ++nid) {
    const auto& in = g.node(nid);
    const Node& n = *in.node;
    if (n.is_variable()) continue;
    std::vector<T> ins, outs;
    for (auto e : in.inputs) ins.push_back(ent[e]);
    uint32_t first = g.entry_id(nid, 0);
    for (uint32_t k = 0; k < n.num_outputs(); ++k) outs.push_back(ent[first + k]);
    run(n.attrs, ins, outs);
    for (size_t k = 0; k < ins.size(); ++k) {
      T before = ent[in.inputs[k]];
      merge(ent[in.inputs[k]], ins[k],
            "node '" + n.name() + "' (op " + n.attrs.op->name + "): " +
                input_label(n.attrs, k));
      changed = changed || !(before == ent[in.inputs[k]]);
    }
    for (uint32_t k = 0; k < n.num_outputs(); ++k) {
      T before = ent[first + k];
      merge(ent[first + k], outs[k],
            "node '" + n.name() + "' (op " + n.attrs.op->name + "): output " + std::to_string(k));
      changed = changed || !(before == ent[first + k]);
    }
  }
  return changed;
}

}  // namespace

std::vector<Shape> infer_shapes(const IndexedGraph& g, const std::map<std::string, Shape>& known,
                                bool partial) {
  std::vector<Shape> ent(g.num_entries());
  for (auto v : g.variables()) {
    const Node& n = *g.node(v).node;
    auto it = known.find(n.name());
    Shape s;
    if (it != known.end()) {
      s = it->second;
      check_shape_fits(s, "variable '" + n.name() + "' (given shape)");
    }
    auto h = n.attrs.dict.find("__shape__");
    if (h != n.attrs.dict.end()) {
      Shape hint;
      try {
        hint = parse_shape(h->second);
      } catch (const ParamError& e) {
        throw ShapeError("variable '" + n.name() + "': bad __shape__ '" + h->second + "'");
      }
      check_shape_fits(hint, "variable '" + n.name() + "' (its __shape__ attribute)");
      merge_shape(s, hint, "variable '" + n.name() + "' (given shape vs its __shape__ attribute)");
    }
    ent[g.entry_id(v, 0)] = s;
  }
  for (int iter = 0; iter < 16; ++iter)
    if (!sweep(g, ent, merge_shape, run_infer_shape)) break;
  if (!partial) {
    std::string missing;
    for (auto v : g.variables())
      if (!ent[g.entry_id(v, 0)].known())
        missing += (missing.empty() ? "'" : ", '") + g.node(v).node->name() + "'";
    if (!missing.empty())
      throw ShapeError("cannot infer the shape of " + missing +
                       "; give it (or the data shape it depends on) explicitly");
    for (uint32_t nid = 0; nid < g.num_nodes(); ++nid) {
      const Node& n = *g.node(nid).node;
      for (uint32_t k = 0; k < n.num_outputs(); ++k)
        if (!ent[g.entry_id(nid, k)].known())
          throw ShapeError("cannot infer the shape of output " + std::to_string(k) +
                           " of node '" + n.name() + "' (op " + n.attrs.op->name + ")");
    }
  }
  return ent;
}

std::vector<DType> infer_types(const IndexedGraph& g, const std::map<std::string, DType>& known,
                               bool partial) {
  std::vector<DType> ent(g.num_entries(), DType::kUnknown);
  for (auto v : g.variables()) {
    const Node& n = *g.node(v).node;
    auto it = known.find(n.name());
    if (it != known.end()) {
      ent[g.entry_id(v, 0)] = it->second;
      continue;
    }
    auto h = n.attrs.dict.find("__dtype__");
    if (h != n.attrs.dict.end()) ent[g.entry_id(v, 0)] = dtype_from_string(h->second);
  }
  for (int iter = 0; iter < 16; ++iter)
    if (!sweep(g, ent, merge_type, run_infer_type)) break;
  if (partial) return ent;
  // Whatever nothing constrains is float32 (MXNet's default); propagate once more.
  for (auto v : g.variables())
    if (ent[g.entry_id(v, 0)] == DType::kUnknown) ent[g.entry_id(v, 0)] = DType::kFloat32;
  for (int iter = 0; iter < 16; ++iter)
    if (!sweep(g, ent, merge_type, run_infer_type)) break;
  for (auto& t : ent)
    if (t == DType::kUnknown) t = DType::kFloat32;
  return ent;
}

}  // namespace loom
