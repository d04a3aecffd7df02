// The GPU executor's host-side rules, checked without a GPU: which predicated nodes read
// their predicate on the device, which executors record their calls as CUDA Graphs (and the
// one-line reason when not), the record/replay sequence of CaptureCache on a fake device,
// and the error a GPU bind gives on a machine without a CUDA device.
#include <gtest/gtest.h>

#include <cstdlib>

#include "graph/infer.h"
#include "graph/node.h"
#include "graph/step_builder.h"
#include "runtime/executor.h"
#include "runtime/imperative.h"
#include "runtime/step_capture.h"

namespace loom {
namespace {

TEST(StepCapture, PredicatePath) {
  EXPECT_EQ(predicate_path(DeviceType::kCPU, false, false), PredicatePath::kNone);
  EXPECT_EQ(predicate_path(DeviceType::kGPU, false, true), PredicatePath::kNone);
  // CPU kernels never read it themselves, even when they could.
  EXPECT_EQ(predicate_path(DeviceType::kCPU, true, true), PredicatePath::kHost);
  EXPECT_EQ(predicate_path(DeviceType::kGPU, true, false), PredicatePath::kHost);
  EXPECT_EQ(predicate_path(DeviceType::kGPU, true, true), PredicatePath::kDevice);
}

CaptureFacts gpu_step() {
  CaptureFacts f;
  f.device = DeviceType::kGPU;
  f.step_graph = true;
  return f;
}

TEST(StepCapture, DecisionRule) {
  CaptureFacts f = gpu_step();
  EXPECT_TRUE(decide_capture(f).record);  // on by default for GPU step graphs

  f.device = DeviceType::kCPU;
  CaptureDecision d = decide_capture(f);
  EXPECT_FALSE(d.record);
  EXPECT_NE(d.note.find("not a GPU executor"), std::string::npos) << d.note;

  f = gpu_step();
  f.step_graph = false;  // inference graphs: only on request
  d = decide_capture(f);
  EXPECT_FALSE(d.record);
  EXPECT_NE(d.note.find("not a step graph"), std::string::npos) << d.note;
  f.mode = CudaGraphMode::kOn;
  EXPECT_TRUE(decide_capture(f).record);
  f.mode = CudaGraphMode::kAuto;
  f.env = "1";
  EXPECT_TRUE(decide_capture(f).record);

  f = gpu_step();
  f.mode = CudaGraphMode::kOff;
  d = decide_capture(f);
  EXPECT_FALSE(d.record);
  EXPECT_NE(d.note.find("BindOptions::cuda_graph"), std::string::npos) << d.note;

  // The environment switch wins over the option, both ways.
  f = gpu_step();
  f.mode = CudaGraphMode::kOn;
  f.env = "0";
  d = decide_capture(f);
  EXPECT_FALSE(d.record);
  EXPECT_NE(d.note.find("LOOM_CUDA_GRAPH=0"), std::string::npos) << d.note;
  f.mode = CudaGraphMode::kOff;
  f.env = "1";
  EXPECT_TRUE(decide_capture(f).record);

  f.env = "yes";
  try {
    decide_capture(f);
    FAIL() << "LOOM_CUDA_GRAPH=yes must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LOOM_CUDA_GRAPH must be 0"), std::string::npos);
  }
}

TEST(StepCapture, BlockersNameTheNode) {
  CaptureFacts f = gpu_step();
  f.blockers = {"node 'py' (Custom) runs host code", "node 'd' (Dropout) reads host values",
                "node 'e' (Foo) reads its predicate on the host"};
  CaptureDecision d = decide_capture(f);
  EXPECT_FALSE(d.record);
  EXPECT_TRUE(d.blocked);
  EXPECT_NE(d.note.find("node 'py' (Custom) runs host code"), std::string::npos) << d.note;
  EXPECT_NE(d.note.find("and 2 more"), std::string::npos) << d.note;
  EXPECT_EQ(d.note.find('\n'), std::string::npos) << "one line";
  // An explicit request does not override a node that cannot be recorded.
  f.mode = CudaGraphMode::kOn;
  f.env = "1";
  EXPECT_FALSE(decide_capture(f).record);
  // Blockers only matter where recording was wanted: nothing to log on a CPU executor or
  // with recording switched off.
  f.env = "0";
  EXPECT_FALSE(decide_capture(f).blocked);
  f.env = "";
  f.device = DeviceType::kCPU;
  EXPECT_FALSE(decide_capture(f).blocked);
}

// A device whose "graphs" keep the recorded work and run it on launch; recording itself
// runs nothing, as with CUDA stream capture.
struct FakeGraph : DeviceGraph {
  std::function<void()> work;
  int* launches;
  void launch() override {
    ++*launches;
    work();
  }
};
struct FakeDevice : DeviceBackend {
  bool fail = false;
  int captures = 0, launches = 0;
  void* alloc(int, size_t) override { return nullptr; }
  void free(int, void*, size_t) override {}
  void zero(int, void*, size_t) override {}
  void copy(int, void*, const void*, size_t, bool, bool) override {}
  void synchronize(int) override {}
  int count() override { return 1; }
  std::unique_ptr<DeviceGraph> capture(int, const std::function<void()>& work,
                                       std::string* why) override {
    ++captures;
    if (fail) {
      *why = "operation not permitted when stream is capturing";
      return nullptr;
    }
    auto g = std::make_unique<FakeGraph>();
    g->work = work;
    g->launches = &launches;
    return g;
  }
};

TEST(StepCapture, CacheWarmsUpRecordsThenReplays) {
  FakeDevice dev;
  CaptureCache cache;
  int calls = 0;
  auto call = [&] { ++calls; };
  cache.run(1, dev, 0, call);  // warm-up: eager
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(dev.captures, 0);
  cache.run(1, dev, 0, call);  // recorded (nothing runs) and launched once
  EXPECT_EQ(dev.captures, 1);
  EXPECT_EQ(dev.launches, 1);
  EXPECT_EQ(calls, 2);
  for (int i = 0; i < 3; ++i) cache.run(1, dev, 0, call);
  EXPECT_EQ(dev.captures, 1) << "recorded once";
  EXPECT_EQ(dev.launches, 4);
  EXPECT_EQ(calls, 5) << "every call did its work exactly once";
  EXPECT_EQ(cache.recordings(), 1u);
  EXPECT_EQ(cache.replays(), 3u);
  // Another key (backward, or is_train=false) has its own warm-up and recording.
  cache.run(0, dev, 0, call);
  EXPECT_EQ(dev.captures, 1);
  cache.run(0, dev, 0, call);
  EXPECT_EQ(dev.captures, 2);
  EXPECT_EQ(calls, 7);
  // clear() forgets the recordings: warm-up again, then a new recording.
  cache.clear();
  cache.run(1, dev, 0, call);
  EXPECT_EQ(dev.captures, 2);
  cache.run(1, dev, 0, call);
  EXPECT_EQ(dev.captures, 3);
  EXPECT_EQ(calls, 9);
}

TEST(StepCapture, FailedRecordingRunsEagerlyFromThenOn) {
  FakeDevice dev;
  dev.fail = true;
  CaptureCache cache;
  int calls = 0;
  for (int i = 0; i < 4; ++i) cache.run(3, dev, 0, [&] { ++calls; });
  EXPECT_EQ(calls, 4) << "the failed call still ran, eagerly";
  EXPECT_EQ(dev.captures, 1) << "no second attempt";
  EXPECT_EQ(dev.launches, 0);
  EXPECT_NE(cache.failure().find("operation not permitted"), std::string::npos)
      << cache.failure();
}

// A step graph (accumulation k=2, momentum SGD, EMA) as the GPU sweep runs it.
Symbol step_graph() {
  auto data = Symbol::Variable("data");
  auto fc = Symbol::Op("FullyConnected", {data}, {{"num_hidden", "3"}}, "fc");
  auto loss = Symbol::Op("LinearRegressionOutput", {fc, Symbol::Variable("label")}, {}, "out");
  OptimizerSpec opt;
  opt.name = "sgd";
  opt.momentum = 0.9;
  StepOptions so;
  so.accumulate = 2;
  so.ema = EmaOptions{};
  return make_step(loss, opt, so);
}

TEST(StepCapture, CpuExecutorsNeverRecord) {
  BindOptions o;
  o.cuda_graph = CudaGraphMode::kOn;
  auto ex = Executor::simple_bind(step_graph(), {{"data", Shape{4, 5}}, {"label", Shape{4, 3}}},
                                  o);
  EXPECT_FALSE(ex->records_cuda_graphs());
  EXPECT_NE(ex->cuda_graph_status().find("not a GPU executor"), std::string::npos);
  ex->forward(true);  // the host predicate path still runs
}

// The CaptureFacts a GPU bind of `step` would gather, from each predicated node's GPU kernel
// constructed on its own attributes and shapes without a device (the executor's rule in
// Executor::plan_capture). Kernels whose constructor needs the device are counted in
// `unchecked`; ops without a GPU kernel (a build without CUDA) in `no_kernel`.
CaptureFacts gpu_facts(const Symbol& step, const std::map<std::string, Shape>& shapes,
                       int* unchecked, int* no_kernel) {
  IndexedGraph g(step.outputs());
  const std::vector<Shape> es = infer_shapes(g, shapes);
  const std::vector<DType> et = infer_types(g, {});
  CaptureFacts f;
  f.device = DeviceType::kGPU;
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = *g.node(i).node;
    if (n.is_variable() || !n.attrs.dict.count("__pred__")) continue;
    f.step_graph = true;
    const std::string& op = n.attrs.op->name;
    auto gpu = n.attrs.op->kernels.find(DeviceType::kGPU);
    if (gpu == n.attrs.op->kernels.end()) {
      ++*no_kernel;
      continue;
    }
    Attrs attrs;
    for (const auto& [k, v] : n.attrs.dict)
      if (k.rfind("__", 0) != 0) attrs[k] = v;
    std::vector<Shape> in;
    std::vector<DType> in_types;
    const auto& inputs = g.node(i).inputs;
    for (size_t j = 0; j + 1 < inputs.size(); ++j) {  // the last input is the predicate
      in.push_back(es[inputs[j]]);
      in_types.push_back(et[inputs[j]]);
    }
    const std::string who = "node '" + n.attrs.name + "' (" + op + ")";
    try {
      ImperativeOp cpu(op, attrs, in);
      KernelArgs ka{cpu.attrs(), cpu.in_shapes(), cpu.out_shapes(), in_types, cpu.out_types(),
                    Device::gpu(0)};
      auto k = gpu->second(ka);
      if (!k->capturable())
        f.blockers.push_back(who + " runs host code or reads host values per call");
      else if (predicate_path(DeviceType::kGPU, true, k->device_predicate()) ==
               PredicatePath::kHost)
        f.blockers.push_back(who + " reads its predicate on the host (no device predicate)");
    } catch (const Error&) {
      ++*unchecked;
    }
  }
  return f;
}

// LAMB's step (bucketed or not, accumulation 2, EMA) is recorded as one CUDA Graph: its
// per-tensor norms are `norm` nodes switched by the last-micro-step predicate like the two
// phases, and every predicated node, the norms included, reads its predicate on the device.
TEST(StepCapture, LambStepGraphIsCapturable) {
  for (bool bucket : {false, true}) {
    auto data = Symbol::Variable("data");
    auto fc = Symbol::Op("FullyConnected", {data}, {{"num_hidden", "3"}}, "fc");
    auto loss = Symbol::Op("LinearRegressionOutput", {fc, Symbol::Variable("label")}, {}, "out");
    OptimizerSpec opt;
    opt.name = "lamb";
    StepOptions so;
    so.accumulate = 2;
    so.ema = EmaOptions{};
    so.bucket = bucket;
    const Symbol step = make_step(loss, opt, so);
    IndexedGraph g(step.outputs());
    int norms = 0, phase2 = 0;
    for (uint32_t i = 0; i < g.num_nodes(); ++i) {
      const Node& n = *g.node(i).node;
      if (n.is_variable()) continue;
      const std::string& op = n.attrs.op->name;
      EXPECT_TRUE(op != "square" && op != "sum" && op != "sqrt") << n.attrs.name;
      if (op == "norm") {
        ++norms;
        EXPECT_TRUE(n.attrs.dict.count("__pred__")) << n.attrs.name << " is not predicated";
      }
      if (n.attrs.name.find("lamb") != std::string::npos || op == "lamb_update_phase2") ++phase2;
    }
    EXPECT_EQ(norms, 2 * 2) << "two parameters, two norms each, one node per norm";
    EXPECT_GT(phase2, 0);
    int unchecked = 0, no_kernel = 0;
    const CaptureFacts f =
        gpu_facts(step, {{"data", Shape{4, 5}}, {"label", Shape{4, 3}}}, &unchecked, &no_kernel);
    EXPECT_TRUE(f.step_graph);
    const CaptureDecision d = decide_capture(f);
    EXPECT_TRUE(d.record) << "bucket=" << bucket << ": " << d.note;
#ifdef LOOM_HAVE_CUDA
    EXPECT_EQ(no_kernel, 0);
    EXPECT_EQ(unchecked, 0) << "predicated GPU kernels constructed without a device";
#endif
  }
}

TEST(StepCapture, GpuBindWithoutDeviceNamesTheDevice) {
  if (device_available(DeviceType::kGPU)) GTEST_SKIP() << "a CUDA device is present";
  BindOptions o;
  o.device = Device::gpu(0);
  try {
    Executor::simple_bind(step_graph(), {{"data", Shape{4, 5}}, {"label", Shape{4, 3}}}, o);
    FAIL() << "binding on gpu(0) without a device must throw";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find("no CUDA device: gpu(0) is not available ("), 0u) << msg;
#ifdef LOOM_HAVE_CUDA
    EXPECT_NE(msg.find("cudaGetDeviceCount"), std::string::npos) << msg;
#endif
  }
  EXPECT_THROW(check_device(Device::gpu(1)), Error);
  EXPECT_NO_THROW(check_device(Device::cpu()));
}

}  // namespace
}  // namespace loom
