#include "ops/op.h"

#include <algorithm>
#include <mutex>

namespace loom {
namespace {
struct Registry {
  std::map<std::string, std::unique_ptr<OpDef>> ops;
  std::map<std::string, OpDef*> by_alias;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: used during static init/exit
  return *r;
}
}  // namespace

void Kernel::backward(const OpContext&, std::span<const NDArray>, std::span<const NDArray>,
                      std::span<const NDArray>, std::span<const Req>,
                      std::span<const NDArray>) {
  throw Error("this operator has no backward");
}

LayoutRule elementwise_layout_rule(int n_in, int n_out) {
  std::vector<LayoutSlot> g;
  for (int i = 0; i < n_in; ++i) g.push_back({LayoutSlot::kIn, i}), g.push_back({LayoutSlot::kInGrad, i});
  for (int i = 0; i < n_out; ++i) g.push_back({LayoutSlot::kOut, i}), g.push_back({LayoutSlot::kOutGrad, i});
  return LayoutRule{{g}, false};
}

OpDef& register_op(const std::string& name) {
  auto& r = registry();
  auto it = r.ops.find(name);
  if (it != r.ops.end()) return *it->second;
  auto def = std::make_unique<OpDef>();
  def->name = name;
  OpDef& ref = *def;
  r.ops.emplace(name, std::move(def));
  return ref;
}

OpDef& OpDef::alias(std::string a) {
  registry().by_alias[a] = this;
  aliases.push_back(std::move(a));
  return *this;
}

const OpDef* find_op(const std::string& name) {
  auto& r = registry();
  auto it = r.ops.find(name);
  if (it != r.ops.end()) return it->second.get();
  auto jt = r.by_alias.find(name);
  return jt == r.by_alias.end() ? nullptr : jt->second;
}

const OpDef& get_op(const std::string& name, const std::string& where) {
  const OpDef* op = find_op(name);
  if (!op)
    throw UnknownOpError("unknown operator " + name + (where.empty() ? "" : " in " + where));
  return *op;
}

std::vector<const OpDef*> all_ops() {
  std::vector<const OpDef*> v;
  for (auto& [n, d] : registry().ops) v.push_back(d.get());
  return v;
}

OpDef& OpDef::inputs(std::vector<std::string> names) {
  list_inputs = [names](const OpAttrs&) { return names; };
  return *this;
}
OpDef& OpDef::outputs(std::vector<std::string> names) {
  list_outputs = [names](const OpAttrs&) { return names; };
  return *this;
}
OpDef& OpDef::aux(std::vector<int> positions) {
  mutate_inputs = [positions](const OpAttrs&) { return positions; };
  return *this;
}
OpDef& OpDef::deps(GradDeps d) {
  grad_deps = [d](const OpAttrs&) { return d; };
  return *this;
}
OpDef& OpDef::no_grad(std::vector<int> in) {
  nograd_inputs = [in](const OpAttrs&) { return in; };
  return *this;
}
OpDef& OpDef::inplace_pairs(std::vector<std::pair<int, int>> pairs) {
  inplace = [pairs](const OpAttrs&) { return pairs; };
  return *this;
}

OpAttrs make_op_attrs(const OpDef& op, const std::string& node_name, Attrs dict) {
  OpAttrs a;
  a.op = &op;
  a.name = node_name;
  a.dict = std::move(dict);
  if (op.parse) {
    try {
      a.parsed = op.parse(a.dict);
    } catch (const ParamError& e) {
      throw ParamError("node '" + node_name + "' (op " + op.name + "): " + e.what());
    }
  }
  return a;
}

bool op_is_predicated(const OpAttrs& a) {
  auto it = a.dict.find(kPredAttr);
  return it != a.dict.end() && it->second != "0" && it->second != "False" && it->second != "false";
}

std::vector<std::string> op_inputs(const OpAttrs& a) {
  auto v = a.op->list_inputs ? a.op->list_inputs(a) : std::vector<std::string>{"data"};
  if (op_is_predicated(a)) v.push_back("pred");
  return v;
}

size_t op_kernel_inputs(const OpAttrs& a) {
  return op_inputs(a).size() - (op_is_predicated(a) ? 1 : 0);
}
std::vector<std::string> op_outputs(const OpAttrs& a) {
  return a.op->list_outputs ? a.op->list_outputs(a) : std::vector<std::string>{"output"};
}
int op_num_visible(const OpAttrs& a) {
  return a.op->num_visible_outputs ? a.op->num_visible_outputs(a)
                                   : static_cast<int>(op_outputs(a).size());
}
std::vector<int> op_aux(const OpAttrs& a) {
  return a.op->mutate_inputs ? a.op->mutate_inputs(a) : std::vector<int>{};
}
GradDeps op_grad_deps(const OpAttrs& a) {
  return a.op->grad_deps ? a.op->grad_deps(a) : GradDeps{};
}

}  // namespace loom
