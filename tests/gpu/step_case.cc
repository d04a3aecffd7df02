#include "tests/gpu/step_case.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "graph/node.h"
#include "graph/step_builder.h"
#include "runtime/executor.h"

namespace loom {
namespace {

bool has_kernel(const std::string& op, DeviceType t) {
  const OpDef* d = find_op(op);
  return d && d->kernels.count(t);
}

// Ops of `sym` with no kernel for `t` (`_loom_gradients` needs none: the gradient pass
// replaces it), comma-separated.
std::string missing_kernels(const Symbol& sym, DeviceType t) {
  IndexedGraph g(sym.outputs());
  std::set<std::string> missing;
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = *g.node(i).node;
    if (!n.is_variable() && n.attrs.op->grad_mode != GradMode::kGraphGradient &&
        !n.attrs.op->kernels.count(t))
      missing.insert(n.attrs.op->name);
  }
  std::string list;
  for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
  return list;
}

Symbol step_graph(DeviceType t) {
  auto data = Symbol::Variable("data");
  auto fc = Symbol::Op("FullyConnected", {data}, {{"num_hidden", "3"}}, "fc");
  auto loss = Symbol::Op("LinearRegressionOutput", {fc, Symbol::Variable("label")}, {}, "out");
  OptimizerSpec opt;
  opt.name = "sgd";
  opt.learning_rate = 0.1;
  opt.momentum = 0.9;
  StepOptions so;
  so.accumulate = 2;
  EmaOptions ema;
  ema.decay = 0.8;
  so.ema = ema;
  // One bucket op per kind of update once it has a GPU kernel; one node per parameter until.
  so.bucket = has_kernel("_loom_bucket", t);
  return make_step(loss, opt, so);
}

NDArray random_array(const Shape& s, std::mt19937& rng) {
  NDArray a(s);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = nd(rng);
  return a;
}

struct Checker {
  int failures = 0;
  void fail(const std::string& msg) {
    ++failures;
    std::printf("FAIL step graph: %s\n", msg.c_str());
  }
  // Same tolerance as the op sweep: device libm, FMAs and summation order differ.
  void compare(const NDArray& dev, const NDArray& cpu, const std::string& what) {
    NDArray g = dev.copy(Device::cpu());
    for (int64_t i = 0; i < g.size(); ++i) {
      const double want = cpu.at(i), got = g.at(i);
      if (!(std::fabs(got - want) <= 2e-4 + 2e-4 * std::fabs(want))) {
        fail(what + " element " + std::to_string(i) + ": device " + std::to_string(got) +
             ", CPU " + std::to_string(want));
        return;
      }
    }
  }
};

}  // namespace

int run_step_graph_case(Device dev) {
  Checker c;
  const std::map<std::string, Shape> shapes = {{"data", Shape{4, 5}}, {"label", Shape{4, 3}}};
  const Symbol step = step_graph(dev.type);
  const std::string missing = missing_kernels(step, dev.type);
  if (!missing.empty()) {
    // tests/unit/test_gpu_registry.cc keeps the list of ops without a GPU kernel.
    std::printf("step graph on %s: not run: no %s kernel yet for %s\n", dev.str().c_str(),
                dev.type == DeviceType::kGPU ? "GPU" : "CPU", missing.c_str());
    return 0;
  }
  try {
    BindOptions cpu_opts;
    auto cpu = Executor::simple_bind(step, shapes, cpu_opts);
    BindOptions dev_opts;
    dev_opts.device = dev;
    dev_opts.fuse_chains = false;   // harness: the plain path against the chunked chains
    dev_opts.cuda_graph = CudaGraphMode::kAuto;  // on for a GPU step graph
    auto ex = Executor::simple_bind(step, shapes, dev_opts);
    std::mt19937 rng(7);
    for (const auto& [name, a] : cpu->arg_dict()) {
      if (name == "data" || name == "label") continue;
      a.copy_from(random_array(a.shape(), rng));
      ex->arg_dict().at(name).copy_from(a);
    }
    const int calls = 6;  // three real steps of k=2; calls 3.. replay the recording on a GPU
    for (int call = 0; call < calls; ++call) {
      std::map<std::string, NDArray> batch = {{"data", random_array(Shape{4, 5}, rng)},
                                              {"label", random_array(Shape{4, 3}, rng)}};
      cpu->forward(true, batch);
      ex->forward(true, batch);
      const std::string at = "call " + std::to_string(call) + ": ";
      for (const auto& [name, a] : cpu->arg_dict())
        c.compare(ex->arg_dict().at(name), a, at + name);
      for (const auto& [name, a] : cpu->aux_dict())
        c.compare(ex->aux_dict().at(name), a, at + name);
      for (size_t i = 0; i < cpu->outputs().size(); ++i)
        c.compare(ex->outputs()[i], cpu->outputs()[i], at + cpu->output_names()[i]);
    }
    const std::string status = ex->cuda_graph_status();
    if (dev.type == DeviceType::kGPU) {
      const std::string want = "1 recorded, " + std::to_string(calls - 2) + " replayed";
      if (!ex->records_cuda_graphs() || status.find(want) == std::string::npos)
        c.fail("expected the micro-step recorded once and replayed (" + want + "), got: " +
               status);
    }
    std::printf("step graph (accumulate 2, momentum SGD, EMA) on %s: %d calls, %d failures; %s\n",
                dev.str().c_str(), calls, c.failures, status.c_str());
  } catch (const std::exception& e) {
    c.fail(std::string("threw: ") + e.what());
  }
  return c.failures;
}

}  // namespace loom
