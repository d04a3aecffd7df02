// Conversions, error mapping and the Context class.
#include <cstring>

#include "common.h"
#include "runtime/device.h"

namespace loom::pyb {

PyRef::~PyRef() {
  if (!p_ || !Py_IsInitialized()) return;  // interpreter gone: leak rather than crash
  py::gil_scoped_acquire gil;
  Py_DECREF(p_);
}

std::string format_python_error(py::error_already_set& e) {
  try {
    py::object tb = py::module_::import("traceback");
    py::list lines = tb.attr("format_exception")(e.type(), e.value(), e.trace());
    std::string s;
    for (auto l : lines) s += py::cast<std::string>(l);
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  } catch (...) {
    return e.what();
  }
}

py::tuple shape_to_tuple(const Shape& s) {
  py::tuple t(static_cast<size_t>(s.ndim()));
  for (int i = 0; i < s.ndim(); ++i) t[static_cast<size_t>(i)] = py::int_(s[i]);
  return t;
}

Shape shape_from_py(py::handle h) {
  if (py::isinstance<py::int_>(h)) return Shape{py::cast<int64_t>(h)};
  if (h.is_none()) return Shape();
  std::vector<int64_t> d;
  for (auto v : h) d.push_back(py::cast<int64_t>(py::int_(py::reinterpret_borrow<py::object>(v))));
  return Shape(std::move(d));
}

py::dtype dtype_to_numpy(DType t) { return py::dtype(std::string(dtype_name(t))); }

py::object dtype_to_numpy_type(DType t) { return dtype_to_numpy(t).attr("type"); }

DType dtype_from_py(py::handle h, DType fallback) {
  if (h.is_none()) return fallback;
  if (py::isinstance<py::int_>(h)) return dtype_from_flag(py::cast<int>(h));
  if (py::isinstance<py::str>(h)) {
    const std::string name = py::cast<std::string>(h);
    try {
      return dtype_from_string(name);
    } catch (const ParamError&) {  // other NumPy spellings ('half', 'f8', 'i4'), as MXNet takes
      std::string np_name;
      try {
        np_name = py::cast<std::string>(py::dtype(name).attr("name"));
      } catch (const py::error_already_set&) {
        throw ParamError("unknown dtype '" + name + "'");
      }
      return dtype_from_string(np_name);
    }
  }
  py::dtype dt = py::dtype::from_args(py::reinterpret_borrow<py::object>(h));
  return dtype_from_string(py::cast<std::string>(dt.attr("name")));
}

NDArray ndarray_from_py(py::handle h, Device dev, DType dtype) {
  if (py::isinstance<NDArray>(h)) {
    NDArray a = py::cast<NDArray>(h);
    // Every CPU context (cpu(0), cpu(1), ... as MXNet's model-parallel group2ctx uses them)
    // is the one host memory: a CPU array serves any CPU device.
    const bool same_place = a.device() == dev ||
                            (a.device().type == DeviceType::kCPU && dev.type == DeviceType::kCPU);
    if ((dtype == DType::kUnknown || dtype == a.dtype()) && same_place) return a;
    throw Error("expected an array " +
                (dtype == DType::kUnknown ? std::string()
                                          : "of dtype " + std::string(dtype_name(dtype)) + " ") +
                "on " + dev.str() + ", got " + dtype_name(a.dtype()) + " on " + a.device().str());
  }
  if (dtype == DType::kUnknown) dtype = DType::kFloat32;
  py::array arr = py::array::ensure(py::reinterpret_borrow<py::object>(h));
  if (!arr)
    throw Error("cannot convert a " +
                std::string(py::str(py::type::handle_of(h).attr("__name__"))) + " to an NDArray");
  py::array c = py::module_::import("numpy").attr("ascontiguousarray")(arr, dtype_to_numpy(dtype));
  std::vector<int64_t> dims(c.shape(), c.shape() + c.ndim());
  if (dims.empty()) dims.push_back(1);  // legacy shapes: a scalar becomes (1,)
  NDArray out(Shape(dims), dtype, dev);
  out.copy_from_host(c.data(), out.nbytes());
  return out;
}

py::object ndarray_or_none(const NDArray& a) {
  if (a.is_none()) return py::none();
  return py::cast(a);
}

std::map<std::string, std::string> str_dict(py::handle d) {
  std::map<std::string, std::string> m;
  if (d.is_none()) return m;
  for (auto kv : py::reinterpret_borrow<py::dict>(d)) m[py::str(kv.first)] = py::str(kv.second);
  return m;
}

namespace {
// Exception classes, created once and never freed (the translator is a plain function).
PyObject* g_exc[11];
enum { kBase, kJson, kUnknownOp, kGraph, kShape, kParam, kBind, kFormat, kCustom, kMemory, kIndex };
// A kernel's out-of-range index (gather_nd, ...) says so first, as MXNet's IndexError does.
constexpr char kIndexErrorPrefix[] = "IndexError: ";

// Sets exception `type` with message `msg`, decoded leniently: Loom's own messages are valid
// UTF-8 (Error escapes them), but a third-party library's may not be, and a message must
// never turn into a UnicodeDecodeError.
void set_error(PyObject* type, const char* msg) {
  PyObject* text = PyUnicode_DecodeUTF8(msg, static_cast<Py_ssize_t>(std::strlen(msg)), "backslashreplace");
  if (!text) {
    PyErr_Clear();
    text = PyUnicode_FromString("(undecodable error message)");
  }
  PyErr_SetObject(type, text);
  Py_DECREF(text);
}
}  // namespace

void init_errors(py::module_& m) {
  const char* names[] = {"LoomError",  "JsonError", "UnknownOpError", "GraphError",   "ShapeError",
                         "ParamError", "BindError", "FormatError",    "CustomOpError", "OutOfMemoryError",
                         "IndexOutOfRangeError"};
  for (int i = 0; i < 11; ++i) {
    PyObject* base = i == 0 ? PyExc_RuntimeError : g_exc[kBase];
    PyObject* bases = nullptr;
    if (i == kMemory) bases = PyTuple_Pack(2, g_exc[kBase], PyExc_MemoryError);  // also a MemoryError
    if (i == kIndex) bases = PyTuple_Pack(2, g_exc[kBase], PyExc_IndexError);    // also an IndexError
    g_exc[i] = PyErr_NewException((std::string("loom.") + names[i]).c_str(), bases ? bases : base, nullptr);
    Py_XDECREF(bases);
    m.attr(names[i]) = py::reinterpret_borrow<py::object>(g_exc[i]);
  }
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const PythonCallbackError& e) {
      set_error(g_exc[kCustom], e.what());
    } catch (const JsonError& e) {
      set_error(g_exc[kJson], e.what());
    } catch (const UnknownOpError& e) {
      set_error(g_exc[kUnknownOp], e.what());
    } catch (const GraphError& e) {
      set_error(g_exc[kGraph], e.what());
    } catch (const ShapeError& e) {
      set_error(g_exc[kShape], e.what());
    } catch (const ParamError& e) {
      set_error(g_exc[kParam], e.what());
    } catch (const BindError& e) {
      set_error(g_exc[kBind], e.what());
    } catch (const FormatError& e) {
      set_error(g_exc[kFormat], e.what());
    } catch (const OutOfMemoryError& e) {
      set_error(g_exc[kMemory], e.what());
    } catch (const Error& e) {
      bool index = std::strncmp(e.what(), kIndexErrorPrefix, sizeof(kIndexErrorPrefix) - 1) == 0;
      set_error(g_exc[index ? kIndex : kBase], e.what());
    } catch (const std::bad_alloc&) {
      set_error(g_exc[kMemory], "out of memory (an allocation failed)");
    } catch (const py::builtin_exception&) {
      throw;  // pybind11's own (IndexError for iteration, KeyError, ...): meant for Python
    } catch (const py::error_already_set&) {
      throw;  // a Python exception passing through C++
    } catch (const std::exception& e) {
      // Not Loom's: a library (oneDNN, nlohmann::json, the standard library) failed under
      // Loom's call. Still a LoomError, with the library's message.
      set_error(g_exc[kBase], (std::string("internal error: ") + e.what()).c_str());
    }
  });
}

void init_context(py::module_& m) {
  py::class_<Device>(m, "Context", "A device: mx.cpu(), mx.gpu(i) or Context('gpu', 1).")
      .def(py::init([](py::object type, int id) {
             if (py::isinstance<Device>(type)) return py::cast<Device>(type);
             std::string t = py::str(type);
             if (t == "cpu" || t == "cpu_pinned" || t == "cpu_shared")
               return Device{DeviceType::kCPU, id};
             if (t == "gpu") return Device{DeviceType::kGPU, id};
             throw Error("unknown device type '" + t + "' (cpu or gpu)");
           }),
           py::arg("device_type"), py::arg("device_id") = 0)
      .def_property_readonly(
          "device_type", [](const Device& d) { return d.type == DeviceType::kCPU ? "cpu" : "gpu"; })
      .def_property_readonly("device_id", [](const Device& d) { return d.id; })
      .def_property_readonly("device_typeid",
                             [](const Device& d) { return static_cast<int>(d.type); })
      .def("__eq__",
           [](const Device& a, py::object b) {
             return py::isinstance<Device>(b) && a == py::cast<Device>(b);
           })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 1000 + d.id; })
      .def("__repr__", &Device::str)
      .def("__str__", &Device::str);
  m.def("check_device", [](const Device& d) { check_device(d); },
        "Raises LoomError when the context cannot be used here (no CUDA device, bad id).");
  m.def("num_gpus", [] {
    return device_available(DeviceType::kGPU) ? device_backend(DeviceType::kGPU).count() : 0;
  });
}

}  // namespace loom::pyb
