// .params files (mx.nd.save / mx.nd.load): (names, arrays) pairs; names empty for a list.
#include "common.h"
#include "runtime/params_io.h"

namespace loom::pyb {
namespace {

py::tuple to_py(const NamedArrays& p) {
  py::list arrays;
  for (const auto& a : p.arrays) arrays.append(ndarray_or_none(a));
  return py::make_tuple(py::cast(p.names), arrays);
}

NamedArrays from_py(py::list names, py::list arrays) {
  NamedArrays p;
  for (auto h : arrays)
    p.arrays.push_back(h.is_none() ? NDArray() : ndarray_from_py(h, Device::cpu()));
  for (auto h : names) p.names.push_back(py::cast<std::string>(h));
  if (!p.names.empty() && p.names.size() != p.arrays.size())
    throw Error("save: " + std::to_string(p.names.size()) + " names for " +
                std::to_string(p.arrays.size()) + " arrays");
  return p;
}

// np_shape: None -> Loom's own choice (kAuto), True/False -> MXNet's V3/V2 rule.
ShapeSemantics semantics(const py::object& np_shape) {
  if (np_shape.is_none()) return ShapeSemantics::kAuto;
  return np_shape.cast<bool>() ? ShapeSemantics::kNumpy : ShapeSemantics::kLegacy;
}

}  // namespace

void init_params(py::module_& m) {
  m.def("_load_params", [](const std::string& path, py::object np_shape) {
    const ShapeSemantics mode = semantics(np_shape);
    NamedArrays p;
    {
      py::gil_scoped_release nogil;
      p = load_params(path, mode);
    }
    return to_py(p);
  }, py::arg("path"), py::arg("np_shape") = py::none());
  m.def("_load_params_bytes", [](py::bytes b, py::object np_shape) {
    return to_py(load_params_from_bytes(std::string(b), "<buffer>", semantics(np_shape)));
  }, py::arg("bytes"), py::arg("np_shape") = py::none());
  m.def("_save_params", [](const std::string& path, py::list names, py::list arrays,
                           py::object np_shape) {
    const ShapeSemantics mode = semantics(np_shape);
    NamedArrays p = from_py(names, arrays);
    py::gil_scoped_release nogil;
    save_params(path, p, mode);
  }, py::arg("path"), py::arg("names"), py::arg("arrays"), py::arg("np_shape") = py::none());
  m.def("_save_params_bytes", [](py::list names, py::list arrays, py::object np_shape) {
    return py::bytes(save_params_to_bytes(from_py(names, arrays), semantics(np_shape)));
  }, py::arg("names"), py::arg("arrays"), py::arg("np_shape") = py::none());
}

}  // namespace loom::pyb
