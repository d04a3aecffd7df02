// Imperative invocation of one op (the basis of mx.nd functions): ImperativeOp instances
// are cached by (op, attributes, input shapes, dtypes, device) so kernels such as oneDNN
// primitives are built once per configuration.
#include "runtime/imperative.h"

#include <mutex>
#include <unordered_map>

#include "common.h"
#include "ops/op.h"
#include "runtime/device.h"

namespace loom::pyb {
namespace {

struct CachedOp {
  explicit CachedOp(std::unique_ptr<ImperativeOp> o) : op(std::move(o)) {}
  std::unique_ptr<ImperativeOp> op;
  std::mutex mu;  // one call at a time per instance (kernels keep scratch state)
};

constexpr size_t kMaxCached = 2048;
std::mutex cache_mu;
std::unordered_map<std::string, std::shared_ptr<CachedOp>>& cache() {
  static auto* c = new std::unordered_map<std::string, std::shared_ptr<CachedOp>>;
  return *c;
}

std::shared_ptr<CachedOp> get_op_instance(const std::string& op, const Attrs& attrs,
                                          const std::vector<NDArray>& in, Device dev) {
  std::string key = op;
  key += '\x01';
  for (const auto& [k, v] : attrs) key += k + '=' + v + '\x02';
  std::vector<Shape> shapes;
  std::vector<DType> types;
  for (const auto& a : in) {
    shapes.push_back(a.shape());
    types.push_back(a.dtype());
    key += a.shape().str() + dtype_name(a.dtype()) + ';';
  }
  key += dev.str();
  {
    std::lock_guard<std::mutex> lk(cache_mu);
    auto it = cache().find(key);
    if (it != cache().end()) return it->second;
  }
  auto inst =
      std::make_shared<CachedOp>(std::make_unique<ImperativeOp>(op, attrs, shapes, types, dev));
  std::lock_guard<std::mutex> lk(cache_mu);
  if (cache().size() >= kMaxCached) cache().clear();
  cache()[key] = inst;
  return inst;
}

}  // namespace

void init_imperative(py::module_& m) {
  m.def(
      "_invoke",
      [](const std::string& op_name, py::list inputs, py::handle attrs_py, py::handle out_py,
         bool is_train, py::handle ctx) {
        const OpDef& def = get_op(op_name);
        Attrs attrs = str_dict(attrs_py);
        std::vector<NDArray> in;
        for (auto h : inputs) in.push_back(py::cast<NDArray>(h));
        bool has_num_args = false;
        for (const auto& p : def.param_info) has_num_args = has_num_args || p.name == "num_args";
        if (has_num_args && !attrs.count("num_args")) attrs["num_args"] = std::to_string(in.size());
        Device dev =
            !in.empty() ? in[0].device() : (ctx.is_none() ? Device::cpu() : py::cast<Device>(ctx));
        check_device(dev);  // a GPU context without a device: one clear error
        std::vector<NDArray> outs;
        std::shared_ptr<CachedOp> inst;
        {
          py::gil_scoped_release nogil;  // a Custom op's Prop may run Python: re-acquired there
          inst = get_op_instance(def.name, attrs, in, dev);
        }
        ImperativeOp& op = *inst->op;
        size_t n_out = op.out_shapes().size();
        size_t n_vis = static_cast<size_t>(op_num_visible(op.attrs()));
        std::vector<NDArray> given;
        if (!out_py.is_none()) {
          if (py::isinstance<NDArray>(out_py))
            given.push_back(py::cast<NDArray>(out_py));
          else
            for (auto h : out_py) given.push_back(py::cast<NDArray>(h));
        }
        for (size_t i = 0; i < n_out; ++i) {
          if (i < given.size()) {
            if (given[i].shape() != op.out_shapes()[i])
              throw ShapeError("op " + def.name + ": out array " + std::to_string(i) +
                               " has shape " + given[i].shape().str() + ", expected " +
                               op.out_shapes()[i].str());
            outs.push_back(given[i]);
          } else {
            outs.emplace_back(op.out_shapes()[i], op.out_types()[i], dev);
          }
        }
        {
          py::gil_scoped_release nogil;
          std::lock_guard<std::mutex> lk(inst->mu);
          op.forward(in, outs, std::vector<Req>(n_out, Req::kWrite), is_train);
        }
        py::list res;
        for (size_t i = 0; i < n_vis; ++i) res.append(outs[i]);
        return res;
      },
      py::arg("op"), py::arg("inputs"), py::arg("attrs"), py::arg("out") = py::none(),
      py::arg("is_train") = false, py::arg("ctx") = py::none());
  m.def("_clear_op_cache", [] {
    std::lock_guard<std::mutex> lk(cache_mu);
    cache().clear();
  });
  m.def(
      "seed", [](uint64_t s) { seed(s); }, py::arg("seed_state"));
}

}  // namespace loom::pyb
