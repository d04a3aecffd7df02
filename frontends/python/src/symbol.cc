// Symbol: construction (variables, ops, groups), queries, attributes, JSON, inference.
#include "common.h"
#include "graph/infer.h"
#include "graph/json.h"

namespace loom::pyb {
namespace {

Symbol create_op(const std::string& op, py::list inputs, py::handle attrs, const std::string& name,
                 py::handle named) {
  std::vector<Symbol> in;
  for (auto h : inputs) in.push_back(py::cast<Symbol>(h));
  std::vector<std::pair<std::string, Symbol>> nm;
  if (!named.is_none())
    for (auto kv : py::reinterpret_borrow<py::dict>(named))
      nm.emplace_back(py::cast<std::string>(kv.first), py::cast<Symbol>(kv.second));
  Attrs a = str_dict(attrs);
  // Ops may call back into Python (custom op Props); no GIL games needed here since the
  // bridge acquires it re-entrantly.
  return Symbol::Op(op, in, a, name, nm);
}

// (arg_shapes, out_shapes, aux_shapes, complete) with per-entry inference results.
py::tuple infer_shape(const Symbol& sym, py::handle known_py, bool partial) {
  std::map<std::string, Shape> known;
  for (auto kv : py::reinterpret_borrow<py::dict>(known_py))
    known[py::cast<std::string>(kv.first)] = shape_from_py(kv.second);
  IndexedGraph g(sym.outputs());
  for (const auto& [name, s] : known) {
    bool found = false;
    for (auto v : g.variables()) found = found || g.node(v).node->name() == name;
    if (!found) throw ShapeError("infer_shape: '" + name + "' is not an input of this symbol");
  }
  auto ent = infer_shapes(g, known, /*partial=*/true);
  bool complete = true;
  py::list args, outs, aux;
  auto add = [&](py::list& l, uint32_t e) {
    complete = complete && ent[e].known();
    l.append(shape_to_tuple(ent[e]));
  };
  for (auto n : g.arguments()) add(args, g.entry_id(n, 0));
  for (auto e : g.heads()) add(outs, e);
  for (auto n : g.aux_states()) add(aux, g.entry_id(n, 0));
  (void)partial;
  return py::make_tuple(args, outs, aux, complete);
}

py::tuple infer_type(const Symbol& sym, py::handle known_py, bool partial) {
  std::map<std::string, DType> known;
  for (auto kv : py::reinterpret_borrow<py::dict>(known_py))
    known[py::cast<std::string>(kv.first)] = dtype_from_py(kv.second);
  IndexedGraph g(sym.outputs());
  auto ent = infer_types(g, known, partial);
  auto conv = [&](uint32_t e) -> py::object {
    return ent[e] == DType::kUnknown ? py::none() : dtype_to_numpy_type(ent[e]);
  };
  py::list args, outs, aux;
  for (auto n : g.arguments()) args.append(conv(g.entry_id(n, 0)));
  for (auto e : g.heads()) outs.append(conv(e));
  for (auto n : g.aux_states()) aux.append(conv(g.entry_id(n, 0)));
  return py::make_tuple(args, outs, aux);
}

}  // namespace

void init_symbol(py::module_& m) {
  py::class_<Symbol>(m, "Symbol", "A symbolic expression: one or more outputs of a graph.")
      .def_static("_variable",
                  [](const std::string& name, py::handle attrs) {
                    return Symbol::Variable(name, str_dict(attrs));
                  })
      .def_static("_create", &create_op, py::arg("op"), py::arg("inputs"), py::arg("attrs"),
                  py::arg("name"), py::arg("named") = py::none())
      .def_static("_group",
                  [](py::list syms) {
                    std::vector<Symbol> v;
                    for (auto h : syms) v.push_back(py::cast<Symbol>(h));
                    return Symbol::Group(v);
                  })
      .def_property_readonly("_num_outputs", &Symbol::num_outputs)
      .def("_output", [](const Symbol& s, size_t i) { return s[i]; })
      .def("_output_named", [](const Symbol& s, const std::string& n) { return s[n]; })
      .def_property_readonly("name",
                             [](const Symbol& s) -> py::object {
                               if (s.num_outputs() != 1) return py::none();
                               return py::str(s.name());
                             })
      .def("list_arguments", &Symbol::list_arguments)
      .def("list_outputs", &Symbol::list_outputs)
      .def("list_auxiliary_states", &Symbol::list_auxiliary_states)
      .def("list_inputs", &Symbol::list_inputs)
      .def("get_internals", &Symbol::get_internals)
      .def("get_children",
           [](const Symbol& s) -> py::object {
             if (s.num_outputs() != 1 || s.outputs()[0].node->is_variable()) return py::none();
             return py::cast(s.get_children());
           })
      .def("attr",
           [](const Symbol& s, const std::string& key) -> py::object {
             if (s.num_outputs() != 1) return py::none();
             auto v = s.attr(key);
             if (!v) return py::none();
             return py::str(*v);
           })
      .def("_set_attr",
           [](const Symbol& s, const std::string& k, const std::string& v) {
             if (s.num_outputs() != 1)
               throw GraphError("cannot set an attribute on a group of symbols");
             s.set_attr(k, v);
           })
      .def("_node_attrs",
           [](const Symbol& s) {
             if (s.num_outputs() != 1) return Attrs{};
             return s.outputs()[0].node->attrs.dict;
           })
      .def("attr_dict", &Symbol::attr_dict)
      .def("_tojson", &Symbol::tojson)
      .def("_save", &Symbol::save, py::arg("fname"))
      .def("_same_graph",
           [](const Symbol& a, const Symbol& b) {
             if (a.num_outputs() != b.num_outputs()) return false;
             for (size_t i = 0; i < a.num_outputs(); ++i)
               if (a.outputs()[i].node != b.outputs()[i].node ||
                   a.outputs()[i].index != b.outputs()[i].index)
                 return false;
             return true;
           })
      .def("_infer_shape", &infer_shape, py::arg("known"), py::arg("partial") = false)
      .def("_infer_type", &infer_type, py::arg("known"), py::arg("partial") = false);

  m.def(
      "load", [](const std::string& path) { return load_json_file(path); }, py::arg("fname"));
  m.def(
      "load_json", [](const std::string& text) { return load_json(text); }, py::arg("json_str"));
  m.def("_reset_auto_names", &reset_auto_names);
}

}  // namespace loom::pyb
