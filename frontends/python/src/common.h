// Shared helpers of the loom._loom bindings: conversions between Loom values and Python
// objects, the error type for failures inside Python callbacks, and the per-file init hooks.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/ndarray.h"

namespace py = pybind11;

namespace loom::pyb {

/// An exception raised by Python code that Loom called (custom op callbacks). Carries the
/// formatted Python traceback; reaches Python as loom.LoomError's subclass CustomOpError.
class PythonCallbackError : public Error {
 public:
  using Error::Error;
};

/// Formats the caught Python exception (type, message, traceback) as text. GIL held.
std::string format_python_error(py::error_already_set& e);

/// A strong reference to a Python object that may be dropped without the GIL or after the
/// interpreter is gone (then it is leaked, never touched).
class PyRef {
 public:
  explicit PyRef(py::object o) : p_(o.release().ptr()) {}
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  ~PyRef();
  py::handle get() const { return p_; }

 private:
  PyObject* p_;
};

py::tuple shape_to_tuple(const Shape& s);
/// Accepts a tuple/list of ints, or an int.
Shape shape_from_py(py::handle h);
/// The numpy scalar type (np.float32, ...) for a dtype, as MXNet's NDArray.dtype returns.
py::object dtype_to_numpy_type(DType t);
py::dtype dtype_to_numpy(DType t);
/// Accepts None (-> fallback), numpy dtypes / scalar types, names and integer type flags.
DType dtype_from_py(py::handle h, DType fallback = DType::kFloat32);
/// An NDArray from an NDArray handle, or a new one copied from anything numpy accepts.
NDArray ndarray_from_py(py::handle h, Device dev = Device::cpu(), DType dtype = DType::kUnknown);
/// Python None for a none array, else the array.
py::object ndarray_or_none(const NDArray& a);
std::map<std::string, std::string> str_dict(py::handle d);

void init_errors(py::module_& m);
void init_context(py::module_& m);
void init_ndarray(py::module_& m);
void init_symbol(py::module_& m);
void init_executor(py::module_& m);
void init_registry(py::module_& m);
void init_imperative(py::module_& m);
void init_params(py::module_& m);
void init_custom_op(py::module_& m);
void init_step(py::module_& m);
void init_dist(py::module_& m);

}  // namespace loom::pyb
