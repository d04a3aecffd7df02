// `loom run` (run.h).
#include "frontends/cli/run.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "frontends/cli/args.h"
#include "graph/infer.h"
#include "graph/json.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/npy.h"
#include "runtime/params_io.h"

namespace loom::cli {

const char* kRunUsage =
    "  loom run SYMBOL.json [--params FILE] --input NAME=FILE.npy ... [--output-dir DIR]\n"
    "           [--device cpu|gpu:N] [--plugin LIB.so ...]\n"
    "      Infers shapes from the inputs, runs inference on the device (default: cpu),\n"
    "      writes each output as <output name>.npy in DIR (default: .) and prints the\n"
    "      output shapes.\n";

namespace {

// Labels of loss heads (inputs whose gradient the op never writes) are not needed for
// inference: they get zeros when not given.
std::set<std::string> label_inputs(const Symbol& sym) {
  IndexedGraph g(sym.outputs());
  std::set<std::string> labels;
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = *g.node(i).node;
    if (n.is_variable() || !n.attrs.op->nograd_inputs) continue;
    for (int pos : n.attrs.op->nograd_inputs(n.attrs)) {
      const Node& src = *g.node(g.entry_node(g.node(i).inputs[static_cast<size_t>(pos)])).node;
      if (src.is_variable()) labels.insert(src.name());
    }
  }
  return labels;
}

}  // namespace

Device parse_device(const std::string& s) {
  const size_t colon = s.find(':');
  const std::string kind = s.substr(0, colon);
  int id = 0;
  if (colon != std::string::npos) {
    const std::string num = s.substr(colon + 1);
    size_t used = 0;
    try {
      id = std::stoi(num, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (num.empty() || used != num.size() || id < 0)
      throw UsageError("--device " + s + ": expected cpu, gpu or gpu:N (N >= 0)");
  }
  if (kind == "cpu") return Device::cpu();
  if (kind == "gpu") return Device::gpu(id);
  throw UsageError("--device " + s + ": expected cpu, gpu or gpu:N");
}

int cmd_run(const std::vector<std::string>& args) {
  std::string json, params_path, out_dir = ".";
  Device device = Device::cpu();
  std::map<std::string, NDArray> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      return args[++i];
    };
    if (a == "--params")
      params_path = value();
    else if (a == "--output-dir")
      out_dir = value();
    else if (a == "--device")
      device = parse_device(value());
    else if (a == "--input") {
      auto [name, file] = split_eq(value(), "--input");
      inputs[name] = load_npy(file);
    } else if (!a.empty() && a[0] == '-')
      throw UsageError("unknown option " + a);
    else if (json.empty())
      json = a;
    else
      throw UsageError("unexpected argument '" + a + "'");
  }
  if (json.empty()) throw UsageError("run needs a SYMBOL.json");
  check_device(device);  // "no CUDA device: gpu(0) is not available (...)" before any work
  Symbol sym = load_json_file(json);
  std::map<std::string, NDArray> arg_params, aux_params;
  if (!params_path.empty()) {
    NamedArrays loaded = load_params(params_path);
    auto ck = split_checkpoint(loaded, params_path);
    arg_params = ck.arg;
    aux_params = ck.aux;
  }
  auto arg_names = sym.list_arguments();
  auto aux_names = sym.list_auxiliary_states();
  // Unprefixed files (Gluon save_parameters style) put aux states among the "args".
  for (const auto& n : aux_names) {
    auto it = arg_params.find(n);
    if (it != arg_params.end() && !aux_params.count(n)) {
      aux_params[n] = it->second;
      arg_params.erase(it);
    }
  }
  std::map<std::string, Shape> shapes;
  for (const auto& [k, v] : inputs) shapes[k] = v.shape();
  for (const auto& [k, v] : arg_params)
    if (std::find(arg_names.begin(), arg_names.end(), k) != arg_names.end()) shapes[k] = v.shape();
  for (const auto& [k, v] : inputs)
    if (std::find(arg_names.begin(), arg_names.end(), k) == arg_names.end())
      throw BindError("--input " + k + ": the graph has no argument named '" + k + "'");
  auto labels = label_inputs(sym);
  std::vector<std::string> missing;
  for (const auto& n : arg_names)
    if (!inputs.count(n) && !arg_params.count(n) && !labels.count(n)) missing.push_back(n);
  for (const auto& n : aux_names)
    if (!aux_params.count(n)) missing.push_back(n);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
    if (!params_path.empty())
      throw BindError(params_path + ": no values for " + list +
                      " (neither --input nor in the params file)");
    std::cerr << "loom: note: no --params given; using zeros for " << list << "\n";
  }
  BindOptions opts;
  opts.default_req = Req::kNull;
  std::map<std::string, DType> types;
  for (const auto& [k, v] : inputs) types[k] = v.dtype();
  opts.type_dict = types;
  opts.device = device;
  auto ex = Executor::simple_bind(sym, shapes, opts);
  ex->copy_params_from(arg_params, aux_params);
  ex->forward(false, inputs);
  std::filesystem::create_directories(out_dir);
  for (size_t i = 0; i < ex->outputs().size(); ++i) {
    const std::string& name = ex->output_names()[i];
    std::string path = (std::filesystem::path(out_dir) / (name + ".npy")).string();
    save_npy(path, ex->outputs()[i].copy(Device::cpu()));
    std::cout << name << " " << ex->outputs()[i].shape().str() << " -> " << path << "\n";
  }
  return 0;
}

}  // namespace loom::cli
