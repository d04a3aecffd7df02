// The GPU executor's host-side rules, checked without a GPU: which predicated nodes read
// their predicate on the device, which executors record their calls as CUDA Graphs (and the
// one-line reason when not), the record/replay sequence of CaptureCache on a fake device,
// and the error a GPU bind gives on a machine without a CUDA device.
#include <gtest/gtest.h>

#include <cstdlib>

#include "graph/step_builder.h"
#include "runtime/executor.h"
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
