// Every GPU kernel of an op that make_step runs under a predicate reads that predicate on the
// device (Kernel::device_predicate(), runtime/cuda/predicate.cuh). One that does not still
// gives right answers, but on the host path: a copy and a wait per call, and its executor is
// never recorded as a CUDA Graph. The kernels are constructed from the ops' sweep samples
// without a device; a kernel whose constructor needs the device is reported, not failed.
// Known exceptions stand on a list with the reason, and the test fails when one of them gains
// a device predicate, so the list only shrinks.
#include <gtest/gtest.h>

#include <set>

#include "graph/node.h"
#include "graph/step_builder.h"
#include "runtime/imperative.h"

namespace loom {
namespace {

Symbol loss() {
  auto data = Symbol::Variable("data");
  auto fc = Symbol::Op("FullyConnected", {data}, {{"num_hidden", "3"}}, "fc");
  return Symbol::Op("LinearRegressionOutput", {fc, Symbol::Variable("label")}, {}, "out");
}

// Ops of the predicated nodes of make_step's graphs over its optimizers and options.
std::set<std::string> predicated_ops() {
  std::set<std::string> ops;
  for (const char* name : {"sgd", "nag", "adam", "adamw", "rmsprop", "lamb"})
    for (bool bucket : {false, true})
      for (double momentum : {0.0, 0.9}) {
        OptimizerSpec opt;
        opt.name = name;
        opt.momentum = momentum;
        StepOptions so;
        so.accumulate = 2;
        so.ema = EmaOptions{};
        so.bucket = bucket;
        Symbol step = make_step(loss(), opt, so);
        IndexedGraph g(step.outputs());
        for (uint32_t i = 0; i < g.num_nodes(); ++i) {
          const Node& n = *g.node(i).node;
          if (!n.is_variable() && n.attrs.dict.count("__pred__")) ops.insert(n.attrs.op->name);
        }
      }
  return ops;
}

// Predicated ops whose GPU kernels read the predicate on the host. Empty: LAMB's per-tensor
// norms are predicated `norm` nodes whose GPU kernel reads the predicate on the device, so a
// LAMB step is recorded too (test_step_capture.cc, LambStepGraphIsCapturable).
const std::set<std::string> kHostPredicate = {};

TEST(GpuPredicates, PredicatedOpsReadTheirPredicateOnTheDevice) {
  const std::set<std::string> ops = predicated_ops();
  // make_step predicates at least the update, the real-step counter and the EMA.
  EXPECT_TRUE(ops.count("_loom_counter")) << "make_step no longer predicates its counter?";
  EXPECT_TRUE(ops.count("sgd_mom_update") || ops.count("_loom_bucket"));
  EXPECT_TRUE(ops.count("_loom_ema_update") || ops.count("_loom_bucket"));
  EXPECT_TRUE(ops.count("norm")) << "LAMB's per-tensor norms are switched by `last`";
  std::set<std::string> checked;
  std::string unchecked;
  for (const std::string& name : ops) {
    const OpDef* def = find_op(name);
    ASSERT_NE(def, nullptr) << name;
    auto gpu = def->kernels.find(DeviceType::kGPU);
    if (gpu == def->kernels.end() || def->samples.empty()) continue;  // no GPU kernel yet
    const OpSample& s = def->samples.front();
    ImperativeOp cpu(name, s.attrs, s.in_shapes);
    const std::vector<DType> in_types(cpu.in_shapes().size(), DType::kFloat32);
    KernelArgs ka{cpu.attrs(), cpu.in_shapes(), cpu.out_shapes(), in_types, cpu.out_types(),
                  Device::gpu(0)};
    std::unique_ptr<Kernel> k;
    try {
      k = gpu->second(ka);
    } catch (const Error& e) {  // the constructor needed the device
      unchecked += " " + name;
      continue;
    }
    checked.insert(name);
    if (kHostPredicate.count(name)) {
      EXPECT_FALSE(k->device_predicate()) << name << " now reads its predicate on the device: "
                                          << "take it off kHostPredicate";
      continue;
    }
    EXPECT_TRUE(k->device_predicate())
        << name << ": its GPU kernel runs under make_step's predicates but does not declare "
        << "device_predicate() (see runtime/cuda/predicate.cuh)";
    EXPECT_TRUE(k->capturable()) << name;
  }
#ifdef LOOM_HAVE_CUDA
  EXPECT_GE(checked.size(), 3u) << "GPU kernels constructed without a device";
  EXPECT_TRUE(checked.count("norm")) << "norm's GPU kernel needs no device to be constructed";
#endif
  if (!unchecked.empty())
    std::printf("not constructible without a device:%s\n", unchecked.c_str());
}

}  // namespace
}  // namespace loom
