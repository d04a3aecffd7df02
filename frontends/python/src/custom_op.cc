// The Python custom-op bridge: C++ CustomOpProp / CustomOp subclasses that call a Python
// CustomOpProp / CustomOp object (loom.operator), so Python ops run through the same
// `Custom` graph op as C++ ones. Every call into Python takes the GIL for its duration;
// a Python exception becomes PythonCallbackError carrying the formatted traceback.
#include "ops/custom/custom_op.h"

#include "common.h"

namespace loom::pyb {
namespace {

template <class F>
auto call_python(const std::string& what, F&& f) {
  py::gil_scoped_acquire gil;
  try {
    return f();
  } catch (py::error_already_set& e) {
    throw PythonCallbackError(what + " raised an exception:\n" + format_python_error(e));
  } catch (const py::cast_error& e) {
    throw PythonCallbackError(what + " returned a value of the wrong type: " + e.what());
  }
}

std::vector<std::string> str_list(py::handle h, const std::string& what) {
  std::vector<std::string> v;
  for (auto x : h) v.push_back(py::cast<std::string>(x));
  (void)what;
  return v;
}

py::list arrays(const std::vector<NDArray>& v) {
  py::list l;
  for (const auto& a : v) l.append(py::cast(a));  // none arrays stay empty NDArrays
  return l;
}

py::list reqs(const std::vector<Req>& v) {
  py::list l;
  for (Req r : v) l.append(req_name(r));
  return l;
}

// Host staging of a custom op's device arrays: Python code runs on the host (NumPy, and
// imperative ops that may have no GPU kernel), so on a GPU executor it sees host copies of
// every array; what it may write (outputs, input gradients, aux states) is copied back
// afterwards. The copies to the host wait for the device; the executor does not record such
// graphs as CUDA Graphs (CustomKernel is not capturable). On the CPU the arrays pass as they are.
struct Staged {
  std::vector<NDArray> host;
  explicit Staged(const std::vector<NDArray>& v) {
    for (const NDArray& a : v) {
      const bool on_host = a.is_none() || a.device().type == DeviceType::kCPU;
      host.push_back(on_host ? a : a.copy(Device::cpu()));
    }
  }
  // Copies the host arrays back into `dev` (the arrays the executor passed).
  void write_back(const std::vector<NDArray>& dev) const {
    for (size_t i = 0; i < dev.size(); ++i)
      if (!dev[i].is_none() && dev[i].device().type != DeviceType::kCPU) dev[i].copy_from(host[i]);
  }
};

class PyOp : public CustomOp {
 public:
  PyOp(py::object op, std::string op_type) : op_(std::move(op)), type_(std::move(op_type)) {}
  void forward(bool is_train, const std::vector<Req>& req, const std::vector<NDArray>& in_data,
               const std::vector<NDArray>& out_data, const std::vector<NDArray>& aux) override {
    // Outputs are staged with their old values: req may be "add".
    Staged in(in_data), out(out_data), st(aux);
    call_python("custom op '" + type_ + "' forward", [&] {
      op_.get().attr("forward")(is_train, reqs(req), arrays(in.host), arrays(out.host),
                                arrays(st.host));
    });
    out.write_back(out_data);
    st.write_back(aux);
  }
  void backward(const std::vector<Req>& req, const std::vector<NDArray>& out_grad,
                const std::vector<NDArray>& in_data, const std::vector<NDArray>& out_data,
                const std::vector<NDArray>& in_grad, const std::vector<NDArray>& aux) override {
    Staged og(out_grad), id(in_data), od(out_data), ig(in_grad), st(aux);
    call_python("custom op '" + type_ + "' backward", [&] {
      op_.get().attr("backward")(reqs(req), arrays(og.host), arrays(id.host), arrays(od.host),
                                 arrays(ig.host), arrays(st.host));
    });
    ig.write_back(in_grad);
    st.write_back(aux);
  }

 private:
  PyRef op_;
  std::string type_;
};

class PyProp : public CustomOpProp {
 public:
  PyProp(py::object prop, std::string op_type, bool need_top_grad)
      : CustomOpProp(need_top_grad), prop_(std::move(prop)), type_(std::move(op_type)) {}

  std::vector<std::string> list_arguments() override { return names("list_arguments"); }
  std::vector<std::string> list_outputs() override { return names("list_outputs"); }
  std::vector<std::string> list_auxiliary_states() override {
    return names("list_auxiliary_states");
  }

  CustomShapes infer_shape(const std::vector<Shape>& in) override {
    return call_python(where("infer_shape"), [&] {
      py::list shapes;
      for (const auto& s : in) shapes.append(py::list(shape_to_tuple(s)));
      py::object r = prop_.get().attr("infer_shape")(shapes);
      auto parts = parts_of(r, "infer_shape");
      CustomShapes cs;
      std::vector<Shape>* dst[3] = {&cs.args, &cs.outs, &cs.aux};
      for (size_t k = 0; k < parts.size(); ++k)
        for (auto s : parts[k]) dst[k]->push_back(shape_from_py(s));
      return cs;
    });
  }

  CustomTypes infer_type(const std::vector<DType>& in) override {
    return call_python(where("infer_type"), [&] {
      py::list types;
      for (DType t : in)
        types.append(dtype_to_numpy_type(t == DType::kUnknown ? DType::kFloat32 : t));
      py::object r = prop_.get().attr("infer_type")(types);
      auto parts = parts_of(r, "infer_type");
      CustomTypes ct;
      std::vector<DType>* dst[3] = {&ct.args, &ct.outs, &ct.aux};
      for (size_t k = 0; k < parts.size(); ++k)
        for (auto t : parts[k]) dst[k]->push_back(dtype_from_py(t));
      return ct;
    });
  }

  std::vector<int> declare_backward_dependency(const std::vector<int>& out_grad,
                                               const std::vector<int>& in_data,
                                               const std::vector<int>& out_data) override {
    return call_python(where("declare_backward_dependency"), [&] {
      py::object r = prop_.get().attr("declare_backward_dependency")(out_grad, in_data, out_data);
      std::vector<int> v;
      for (auto x : r) v.push_back(py::cast<int>(x));
      return v;
    });
  }

  std::unique_ptr<CustomOp> create_operator(Device ctx, const std::vector<Shape>& in_shapes,
                                            const std::vector<DType>& in_dtypes) override {
    return call_python(where("create_operator"), [&]() -> std::unique_ptr<CustomOp> {
      py::list shapes, types;
      for (const auto& s : in_shapes) shapes.append(py::list(shape_to_tuple(s)));
      for (DType t : in_dtypes) types.append(static_cast<int>(t));
      py::object op = prop_.get().attr("create_operator")(py::cast(ctx), shapes, types);
      if (op.is_none()) throw Error(where("create_operator") + " returned None");
      return std::make_unique<PyOp>(std::move(op), type_);
    });
  }

 private:
  std::string where(const std::string& fn) const { return "custom op '" + type_ + "' " + fn; }

  std::vector<std::string> names(const char* fn) {
    return call_python(where(fn), [&] { return str_list(prop_.get().attr(fn)(), fn); });
  }

  // 2 or 3 lists (args, outs[, aux]).
  std::vector<py::list> parts_of(py::object r, const char* fn) {
    if (!py::isinstance<py::tuple>(r) && !py::isinstance<py::list>(r))
      throw ShapeError(where(fn) + " must return 2 or 3 lists, got a " +
                       std::string(py::str(py::type::handle_of(r).attr("__name__"))));
    py::sequence seq = r;
    if (seq.size() != 2 && seq.size() != 3)
      throw ShapeError(where(fn) + " must return 2 or 3 lists (arguments, outputs[, aux]), got " +
                       std::to_string(seq.size()));
    std::vector<py::list> parts;
    for (auto p : seq) parts.push_back(py::list(p));
    return parts;
  }

  PyRef prop_;
  std::string type_;
};

}  // namespace

void init_custom_op(py::module_& m) {
  m.def(
      "_register_custom_op",
      [](const std::string& op_type, py::object prop_cls) {
        auto cls = std::make_shared<PyRef>(prop_cls);
        register_custom_op(
            op_type,
            [cls, op_type](
                const std::map<std::string, std::string>& kw) -> std::shared_ptr<CustomOpProp> {
              return call_python(
                  "custom op '" + op_type + "' CustomOpProp constructor",
                  [&]() -> std::shared_ptr<CustomOpProp> {
                    py::dict kwargs;
                    for (const auto& [k, v] : kw) kwargs[py::str(k)] = py::str(v);
                    py::object prop = cls->get()(**kwargs);
                    bool ntg = py::bool_(py::getattr(prop, "need_top_grad_", py::bool_(true)));
                    return std::make_shared<PyProp>(std::move(prop), op_type, ntg);
                  });
            });
      },
      py::arg("op_type"), py::arg("prop_cls"));
  m.def("_custom_op_registered", &custom_op_registered);
  m.def("_custom_op_types", &custom_op_types);
  m.def("load_plugin", &load_plugin, py::arg("path"),
        "Loads a shared library whose static initialisers register C++ custom ops.");
}

}  // namespace loom::pyb
