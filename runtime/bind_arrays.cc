#include "runtime/bind_arrays.h"

#include <algorithm>

#include "runtime/device.h"

namespace loom {

std::vector<NDArray> flat_arrays(const std::vector<Shape>& shapes, DType t, Device dev,
                                 size_t index) {
  const size_t esz = dtype_size(t);
  std::vector<size_t> off;
  size_t bytes = 0;
  for (const Shape& s : shapes) {
    off.push_back(bytes);
    bytes += (static_cast<size_t>(s.numel()) * esz + 63) / 64 * 64;
  }
  const size_t skew = (index * 320) % 4096;
  NDArray flat = NDArray::zeros(Shape{static_cast<int64_t>((bytes + skew) / esz)}, t, dev);
  std::vector<NDArray> v;
  for (size_t k = 0; k < shapes.size(); ++k)
    v.emplace_back(flat.storage(), flat.offset() + skew + off[k], shapes[k], t);
  return v;
}

std::map<uint32_t, NDArray> bucket_views(const IndexedGraph& g, const ExecGraph& eg, Device dev) {
  std::map<uint32_t, NDArray> views;
  size_t buckets = 0;
  for (const ExecNode& n : eg.nodes) {
    if (n.kind != ExecNode::Kind::kForward || !n.attrs || !n.attrs->op->contiguous_inputs) continue;
    for (const auto& group : n.attrs->op->contiguous_inputs(*n.attrs)) {
      std::vector<uint32_t> es;
      bool ok = group.size() > 1;
      for (int i : group) {
        uint32_t e = n.in.at(static_cast<size_t>(i));
        ok = ok && e < eg.num_forward_entries && g.node(g.entry_node(e)).node->is_variable() &&
             !views.count(e) && std::find(es.begin(), es.end(), e) == es.end() &&
             eg.types[e] == eg.types[n.in[static_cast<size_t>(group[0])]];
        es.push_back(e);
      }
      if (!ok) continue;
      std::vector<Shape> shapes;
      for (uint32_t e : es) shapes.push_back(eg.shapes[e]);
      auto arrays = flat_arrays(shapes, eg.types[es[0]], dev, ++buckets);
      for (size_t k = 0; k < es.size(); ++k) views[es[k]] = arrays[k];
    }
  }
  return views;
}

std::string entry_owner(const IndexedGraph& g, const ExecGraph& eg, uint32_t e) {
  if (e < eg.num_forward_entries) {
    const auto* n = g.node(g.entry_node(e)).node;
    if (n->is_variable()) return "variable '" + n->name() + "'";
  }
  for (const ExecNode& n : eg.nodes) {
    if (!n.attrs || std::find(n.out.begin(), n.out.end(), e) == n.out.end()) continue;
    std::string who = "node '" + n.attrs->name + "' (" + n.attrs->op->name + ")";
    return n.kind == ExecNode::Kind::kBackward ? "the gradient pass of " + who : who;
  }
  return "entry " + std::to_string(e);
}

void check_fits(const IndexedGraph& g, const ExecGraph& eg, Device dev, uint64_t bytes,
                uint32_t largest, const char* what) {
  uint64_t avail = device_backend(dev.type).available_memory(dev.id);
  if (bytes <= avail) return;
  const uint64_t big = static_cast<uint64_t>(eg.shapes[largest].bytes(eg.types[largest]));
  std::string owner = entry_owner(g, eg, largest);
  if (owner.rfind("variable", 0) != 0) owner = "the output of " + owner;
  throw OutOfMemoryError("bind: " + std::string(what) + " need " + format_bytes(bytes) + " but " +
                         dev.str() + " has " + format_bytes(avail) + " available; the largest is " +
                         owner + ", shape " + eg.shapes[largest].str() + " " +
                         dtype_name(eg.types[largest]) + ", " + format_bytes(big));
}

}  // namespace loom
