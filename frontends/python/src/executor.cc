// Executor: simple_bind / bind and forward / backward with the GIL released (so Python
// custom ops can re-acquire it from inside the engine). List/dict normalisation of
// arguments is done in loom/executor.py; this layer takes dicts.
#include "runtime/executor.h"

#include <chrono>
#include <memory>
#include <tuple>

#include "common.h"

namespace loom::pyb {
namespace {

BindOptions options(py::handle ctx, const std::string& default_req, py::handle reqs,
                    py::handle type_dict) {
  BindOptions o;
  if (!ctx.is_none()) o.device = py::cast<Device>(ctx);
  // A GPU context on a machine without one: one clear error before any array is converted.
  check_device(o.device);
  o.default_req = req_from_string(default_req);
  for (const auto& [k, v] : str_dict(reqs)) o.grad_req[k] = req_from_string(v);
  if (!type_dict.is_none())
    for (auto kv : py::reinterpret_borrow<py::dict>(type_dict))
      o.type_dict[py::cast<std::string>(kv.first)] = dtype_from_py(kv.second);
  return o;
}

std::map<std::string, NDArray> array_dict(py::handle d, Device dev) {
  std::map<std::string, NDArray> m;
  if (d.is_none()) return m;
  for (auto kv : py::reinterpret_borrow<py::dict>(d)) {
    if (kv.second.is_none()) continue;
    m[py::cast<std::string>(kv.first)] = ndarray_from_py(kv.second, dev);
  }
  return m;
}

py::list array_list(const std::vector<NDArray>& v) {
  py::list l;
  for (const auto& a : v) l.append(ndarray_or_none(a));
  return l;
}

// One kernel call seen by the step timer: node(s), op(s), start and duration in seconds on
// the steady clock (CLOCK_MONOTONIC, the clock of Python's time.perf_counter).
using OpEvent = std::tuple<std::string, std::string, double, double>;
struct OpTrace {
  std::shared_ptr<std::vector<OpEvent>> events;
};

}  // namespace

void init_executor(py::module_& m) {
  py::class_<OpTrace>(m, "_OpTrace")
      .def("take", [](OpTrace& t) {
        std::vector<OpEvent> out;
        out.swap(*t.events);
        return out;
      });
  py::class_<Executor>(m, "_Executor")
      .def_static("simple_bind",
                  [](const Symbol& sym, py::handle ctx, py::dict shapes,
                     const std::string& default_req, py::handle reqs, py::handle type_dict) {
                    std::map<std::string, Shape> s;
                    for (auto kv : shapes)
                      s[py::cast<std::string>(kv.first)] = shape_from_py(kv.second);
                    BindOptions o = options(ctx, default_req, reqs, type_dict);
                    py::gil_scoped_release nogil;
                    return Executor::simple_bind(sym, s, o);
                  })
      .def_static("bind",
                  [](const Symbol& sym, py::handle ctx, py::handle args, py::handle args_grad,
                     const std::string& default_req, py::handle reqs, py::handle aux,
                     py::handle outputs) {
                    BindOptions o = options(ctx, default_req, reqs, py::none());
                    auto a = array_dict(args, o.device), g = array_dict(args_grad, o.device),
                         x = array_dict(aux, o.device);
                    if (!outputs.is_none())
                      for (auto out : outputs)
                        o.outputs.push_back(out.is_none() ? NDArray()
                                                          : ndarray_from_py(out, o.device));
                    py::gil_scoped_release nogil;
                    return Executor::bind(sym, a, g, x, o);
                  },
                  py::arg("sym"), py::arg("ctx"), py::arg("args"), py::arg("args_grad"),
                  py::arg("default_req"), py::arg("reqs"), py::arg("aux"),
                  py::arg("outputs") = py::none())
      .def("forward",
           [](Executor& e, bool is_train, py::dict inputs) {
             std::map<std::string, NDArray> in;
             for (auto kv : inputs) {
               auto name = py::cast<std::string>(kv.first);
               DType dt = DType::kUnknown;
               const auto& names = e.arg_names();
               for (size_t i = 0; i < names.size(); ++i)
                 if (names[i] == name) dt = e.arg_arrays()[i].dtype();
               if (py::isinstance<NDArray>(kv.second)) dt = DType::kUnknown;
               in[name] = ndarray_from_py(kv.second,
                                          py::isinstance<NDArray>(kv.second)
                                              ? py::cast<NDArray>(kv.second).device()
                                              : Device::cpu(),
                                          dt);
             }
             py::gil_scoped_release nogil;
             e.forward(is_train, in);
           })
      .def("backward",
           [](Executor& e, py::list head_grads) {
             std::vector<NDArray> hg;
             for (auto h : head_grads)
               hg.push_back(h.is_none() ? NDArray() : ndarray_from_py(h, Device::cpu()));
             py::gil_scoped_release nogil;
             e.backward(hg);
           })
      .def("copy_params_from",
           [](Executor& e, py::handle arg, py::handle aux, bool allow_extra) {
             auto a = array_dict(arg, Device::cpu()), x = array_dict(aux, Device::cpu());
             py::gil_scoped_release nogil;
             e.copy_params_from(a, x, allow_extra);
           })
      .def_property_readonly("outputs", [](const Executor& e) { return array_list(e.outputs()); })
      .def_property_readonly("arg_arrays",
                             [](const Executor& e) { return array_list(e.arg_arrays()); })
      .def_property_readonly("grad_arrays",
                             [](const Executor& e) { return array_list(e.grad_arrays()); })
      .def_property_readonly("aux_arrays",
                             [](const Executor& e) { return array_list(e.aux_arrays()); })
      .def_property_readonly("arg_names", &Executor::arg_names)
      .def_property_readonly("aux_names", &Executor::aux_names)
      .def_property_readonly("output_names", &Executor::output_names)
      .def_property_readonly("grad_reqs",
                             [](const Executor& e) {
                               std::vector<std::string> v;
                               for (Req r : e.grad_reqs()) v.push_back(req_name(r));
                               return v;
                             })
      .def("set_backward_monitor",
           [](Executor& e, py::object fn) {
             if (fn.is_none()) {
               e.set_backward_monitor({});
               return;
             }
             // backward runs without the GIL; the callback takes it back.
             std::shared_ptr<py::object> held(new py::object(std::move(fn)), [](py::object* p) {
               py::gil_scoped_acquire gil;
               delete p;
             });
             e.set_backward_monitor([held](const std::string& name, const NDArray& a) {
               py::gil_scoped_acquire gil;
               (*held)(name, a);
             });
           })
      // mx.profiler: buffers every kernel call's time in C++ while the pass runs without the
      // GIL (the executor runs eagerly while a timer is set). Returns the buffer, or None
      // when `on` is false (timer removed).
      .def("_trace_ops",
           [](Executor& e, bool on) -> py::object {
             if (!on) {
               e.set_step_timer({});
               return py::none();
             }
             OpTrace trace{std::make_shared<std::vector<OpEvent>>()};
             e.set_step_timer([events = trace.events](const std::string& node,
                                                      const std::string& op, double sec) {
               const double now = std::chrono::duration<double>(
                                      std::chrono::steady_clock::now().time_since_epoch())
                                      .count();
               events->emplace_back(node, op, now - sec, sec);
             });
             return py::cast(std::move(trace));
           })
      .def("needs_head_grad", &Executor::needs_head_grad)
      .def_property_readonly("symbol", &Executor::symbol)
      .def_property_readonly("optimized_symbol", &Executor::optimized_symbol)
      .def_property_readonly("planned_bytes", &Executor::planned_bytes)
      .def_property_readonly("cuda_graph_status", &Executor::cuda_graph_status)
      .def_property_readonly("inference_chunk", &Executor::inference_chunk)
      .def_property_readonly("inference_chunk_note", &Executor::inference_chunk_note);
}

}  // namespace loom::pyb
