// The CUDA backend and GPU kernels, checked against the CPU kernels. GPU tests skip when no
// device is present; the no-device behaviour is checked on such machines (and in CPU-only
// builds, where gpu(0) has no backend at all).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ops/op.h"
#include "runtime/imperative.h"
#include "runtime/ndarray.h"

namespace loom {
namespace {

#define LOOM_SKIP_WITHOUT_GPU()                                                                   \
  do {                                                                                            \
    if (!device_available(DeviceType::kGPU)) GTEST_SKIP() << "no CUDA device: skipping GPU test"; \
  } while (0)

// ---- helpers ----

// "normal": N(0, 1); "positive": uniform in [0.5, 2]; away from the kinks of abs/relu.
NDArray random_host(const Shape& s, const std::string& kind, std::mt19937& rng) {
  NDArray a(s);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> pos(0.5f, 2.f);
  float* p = a.data<float>();
  for (int64_t i = 0; i < a.size(); ++i) {
    if (kind == "positive") {
      p[i] = pos(rng);
    } else {
      float v = normal(rng);
      p[i] = std::fabs(v) < 1e-3f ? 0.5f : v;
    }
  }
  return a;
}

std::vector<float> host_values(const NDArray& a) {
  std::vector<float> v(static_cast<size_t>(a.size()));
  a.copy_to_host(v.data(), v.size() * sizeof(float));
  return v;
}

// GPU and CPU results agree to float rounding (device and host libm differ by a few ulps, and
// the GPU fuses multiply-adds).
void expect_close(const NDArray& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), static_cast<int64_t>(want.size())) << what;
  std::vector<float> g = host_values(got);
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    float tol = 1e-5f + 1e-5f * std::fabs(want[i]);
    if (!(std::fabs(g[i] - want[i]) <= tol)) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", expected " << want[i];
      ++bad;
    }
  }
}
void expect_close(const NDArray& got, const NDArray& want, const std::string& what) {
  expect_close(got, host_values(want), what);
}

std::vector<NDArray> to_gpu(const std::vector<NDArray>& v) {
  std::vector<NDArray> out;
  for (const NDArray& a : v) out.push_back(a.copy(Device::gpu(0)));
  return out;
}

// ---- without a device ----

TEST(CudaBackend, NoDeviceGivesErrorNotCrash) {
  if (device_available(DeviceType::kGPU)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(device_available(DeviceType::kGPU));
  try {
    NDArray a(Shape{2, 3}, DType::kFloat32, Device::gpu(0));
    FAIL() << "allocating on gpu(0) without a device must throw";
  } catch (const Error& e) {
    std::string msg = e.what();
#ifdef LOOM_HAVE_CUDA
    EXPECT_NE(msg.find("no CUDA device: gpu(0) is not available"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gpu(0)"), std::string::npos) << msg;
#else
    EXPECT_NE(msg.find("no CUDA support"), std::string::npos) << msg;
#endif
  }
  // Copying a CPU array to the GPU fails the same way, as does running an op there.
  NDArray host = NDArray::zeros(Shape{4});
  EXPECT_THROW(host.copy(Device::gpu(0)), Error);
}

TEST(CudaBackend, NoDeviceOpOnGpuThrows) {
  if (device_available(DeviceType::kGPU)) GTEST_SKIP() << "a CUDA device is present";
#ifdef LOOM_HAVE_CUDA
  ImperativeOp op("_copy", {}, {Shape{2, 3}}, {}, Device::gpu(0));
  NDArray x = NDArray::zeros(Shape{2, 3});
  EXPECT_THROW(op.forward({x}), Error);
#else
  GTEST_SKIP() << "CPU-only build: ops have no GPU kernels";
#endif
}

// ---- GPU kernels: which ops have one, and against what they are checked ----

struct GpuCase {
  std::string op;
  Attrs attrs;
  std::vector<std::string> kinds;  // one per input
};

std::vector<GpuCase> gpu_cases() {
  std::vector<GpuCase> v;
  for (const char* op : {"exp", "square", "abs", "negative", "relu", "sigmoid", "tanh", "softsign",
                         "expm1", "sign", "floor", "ceil", "round", "_copy", "BlockGrad"})
    v.push_back({op, {}, {"normal"}});
  for (const char* op : {"log", "sqrt", "rsqrt", "reciprocal", "log1p"})
    v.push_back({op, {}, {"positive"}});
  for (const char* op : {"elemwise_add", "elemwise_sub", "elemwise_mul", "_maximum", "_minimum"})
    v.push_back({op, {}, {"normal", "normal"}});
  v.push_back({"elemwise_div", {}, {"normal", "positive"}});
  v.push_back({"_power", {}, {"positive", "normal"}});
  v.push_back({"_plus_scalar", {{"scalar", "1.5"}}, {"normal"}});
  v.push_back({"_minus_scalar", {{"scalar", "1.5"}}, {"normal"}});
  v.push_back({"_rminus_scalar", {{"scalar", "-0.25"}}, {"normal"}});
  v.push_back({"_mul_scalar", {{"scalar", "-2.5"}}, {"normal"}});
  v.push_back({"_div_scalar", {{"scalar", "4"}}, {"normal"}});
  v.push_back({"_rdiv_scalar", {{"scalar", "2"}}, {"positive"}});
  v.push_back({"_power_scalar", {{"scalar", "2.5"}}, {"positive"}});
  v.push_back({"_rpower_scalar", {{"scalar", "1.5"}}, {"normal"}});
  v.push_back({"_maximum_scalar", {{"scalar", "0.2"}}, {"normal"}});
  v.push_back({"_minimum_scalar", {{"scalar", "0.2"}}, {"normal"}});
  return v;
}

// In a CUDA build every op above has a GPU kernel and a CPU twin of the same name (a typo
// on either side would register a half op). Runs without a device.
TEST(CudaOps, EveryGpuOpHasCpuKernel) {
#ifndef LOOM_HAVE_CUDA
  GTEST_SKIP() << "CPU-only build";
#else
  for (const GpuCase& c : gpu_cases()) {
    const OpDef* op = find_op(c.op);
    ASSERT_NE(op, nullptr) << c.op;
    EXPECT_TRUE(op->kernels.count(DeviceType::kGPU)) << c.op << " has no GPU kernel";
    EXPECT_TRUE(op->kernels.count(DeviceType::kCPU)) << c.op << " has no CPU kernel";
    EXPECT_EQ(op_inputs(make_op_attrs(*op, c.op, c.attrs)).size(), c.kinds.size()) << c.op;
  }
#endif
}

// Forward (write and add) and backward (write, add, and null for the second operand) on
// gpu(0) equal the CPU kernel's results; add mode equals the old value plus write mode.
void check_against_cpu(const GpuCase& c) {
  SCOPED_TRACE("op " + c.op);
  std::mt19937 rng(7);
  const Shape shape{3, 257};  // not a multiple of the block size
  const size_t nin = c.kinds.size();
  std::vector<Shape> shapes(nin, shape);
  ImperativeOp cpu(c.op, c.attrs, shapes);
  ImperativeOp gpu(c.op, c.attrs, shapes, {}, Device::gpu(0));

  std::vector<NDArray> in_c;
  for (const std::string& k : c.kinds) in_c.push_back(random_host(shape, k, rng));
  std::vector<NDArray> in_g = to_gpu(in_c);

  std::vector<NDArray> y_c = cpu.forward(in_c);
  std::vector<NDArray> y_g = gpu.forward(in_g);
  expect_close(y_g[0], y_c[0], "forward");

  NDArray base = random_host(shape, "normal", rng);
  NDArray acc_c = base.copy(), acc_g = base.copy(Device::gpu(0));
  cpu.forward(in_c, {acc_c}, {Req::kAdd});
  gpu.forward(in_g, {acc_g}, {Req::kAdd});
  expect_close(acc_g, acc_c, "forward req=add");

  NDArray og_c = random_host(shape, "normal", rng);
  NDArray og_g = og_c.copy(Device::gpu(0));
  std::vector<NDArray> ig_c, ig_g;
  for (size_t i = 0; i < nin; ++i) {
    ig_c.emplace_back(shape);
    ig_g.emplace_back(shape, DType::kFloat32, Device::gpu(0));
  }
  std::vector<Req> write(nin, Req::kWrite), add(nin, Req::kAdd);
  cpu.backward({og_c}, in_c, y_c, write, ig_c);
  gpu.backward({og_g}, in_g, y_g, write, ig_g);
  for (size_t i = 0; i < nin; ++i)
    expect_close(ig_g[i], ig_c[i], "backward input " + std::to_string(i));

  std::vector<NDArray> old_c, acc_ig_c, acc_ig_g;
  for (size_t i = 0; i < nin; ++i) {
    old_c.push_back(random_host(shape, "normal", rng));
    acc_ig_c.push_back(old_c[i].copy());
    acc_ig_g.push_back(old_c[i].copy(Device::gpu(0)));
  }
  cpu.backward({og_c}, in_c, y_c, add, acc_ig_c);
  gpu.backward({og_g}, in_g, y_g, add, acc_ig_g);
  for (size_t i = 0; i < nin; ++i) {
    std::string what = "backward req=add input " + std::to_string(i);
    expect_close(acc_ig_g[i], acc_ig_c[i], what);
    std::vector<float> want = host_values(ig_c[i]);
    for (size_t j = 0; j < want.size(); ++j) want[j] += old_c[i].data<float>()[j];
    expect_close(acc_ig_g[i], want, what + " vs old + write");
  }

  if (nin == 2) {  // req null leaves the second gradient untouched
    NDArray keep = old_c[1].copy(Device::gpu(0));
    NDArray ga(shape, DType::kFloat32, Device::gpu(0));
    gpu.backward({og_g}, in_g, y_g, {Req::kWrite, Req::kNull}, {ga, keep});
    expect_close(ga, ig_c[0], "backward input 0 with input 1 null");
    expect_close(keep, old_c[1], "backward req=null input 1");
  }
}

TEST(GpuOps, MatchCpu) {
  LOOM_SKIP_WITHOUT_GPU();
  for (const GpuCase& c : gpu_cases()) check_against_cpu(c);
}

// Ops whose backward needs no arrays at all get a none output gradient: dx = 0 (or kept, in
// add mode).
TEST(GpuOps, ZeroGradientWithoutOutGrad) {
  LOOM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  const Shape shape{4, 33};
  ImperativeOp gpu("floor", {}, {shape}, {}, Device::gpu(0));
  NDArray old = random_host(shape, "normal", rng);
  NDArray dx = old.copy(Device::gpu(0));
  gpu.backward({NDArray()}, {NDArray()}, {NDArray()}, {Req::kWrite}, {dx});
  expect_close(dx, std::vector<float>(static_cast<size_t>(old.size()), 0.f), "write");
  NDArray acc = old.copy(Device::gpu(0));
  gpu.backward({NDArray()}, {NDArray()}, {NDArray()}, {Req::kAdd}, {acc});
  expect_close(acc, old, "add");
}

// A missing `scalar` attribute means the op's declared default (1.0).
TEST(GpuOps, ScalarDefault) {
  LOOM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  NDArray x = random_host(Shape{10}, "normal", rng);
  ImperativeOp gpu("_plus_scalar", {}, {x.shape()}, {}, Device::gpu(0));
  NDArray y = gpu.forward({x.copy(Device::gpu(0))})[0];
  std::vector<float> want(10);
  for (int i = 0; i < 10; ++i) want[i] = x.data<float>()[i] + 1.f;
  expect_close(y, want, "_plus_scalar without scalar");
}

TEST(GpuOps, ForwardInPlace) {
  LOOM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  NDArray x = random_host(Shape{1000}, "normal", rng);
  ImperativeOp cpu("tanh", {}, {x.shape()});
  ImperativeOp gpu("tanh", {}, {x.shape()}, {}, Device::gpu(0));
  NDArray want = cpu.forward({x})[0];
  NDArray xg = x.copy(Device::gpu(0));
  gpu.forward({xg}, {xg}, {Req::kInplace});
  expect_close(xg, want, "tanh in place");
}

TEST(GpuOps, LargeArray) {  // several thousand blocks
  LOOM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  NDArray a = random_host(Shape{1 << 21}, "normal", rng);
  ImperativeOp gpu("_mul_scalar", {{"scalar", "3"}}, {a.shape()}, {}, Device::gpu(0));
  NDArray y = gpu.forward({a.copy(Device::gpu(0))})[0];
  std::vector<float> want(static_cast<size_t>(a.size()));
  for (size_t i = 0; i < want.size(); ++i) want[i] = 3.f * a.data<float>()[i];
  expect_close(y, want, "_mul_scalar over 2M elements");
}

// ---- backend ----

TEST(CudaBackend, CopyRoundTrip) {
  LOOM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  NDArray h = random_host(Shape{5, 7}, "normal", rng);
  NDArray g1 = h.copy(Device::gpu(0));
  EXPECT_EQ(g1.device(), Device::gpu(0));
  NDArray g2 = g1.copy();  // device to device
  NDArray back = g2.copy(Device::cpu());
  for (int64_t i = 0; i < h.size(); ++i) EXPECT_EQ(back.at(i), h.at(i)) << i;

  g2.zero();
  for (float v : host_values(g2)) EXPECT_EQ(v, 0.f);
  NDArray f = NDArray::full(Shape{3}, 2.5, DType::kFloat32, Device::gpu(0));
  for (float v : host_values(f)) EXPECT_EQ(v, 2.5f);
  EXPECT_EQ(f.at(1), 2.5);

  // A view copied to the host reads its own rows only.
  NDArray rows = g1.slice(2, 4).copy(Device::cpu());
  for (int64_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows.at(i), h.at(2 * 7 + i));
  EXPECT_NE(device_backend(DeviceType::kGPU).stream(0), nullptr);
  device_backend(DeviceType::kGPU).synchronize(0);
}

TEST(CudaBackend, AllocatorReusesFreedBlocks) {
  LOOM_SKIP_WITHOUT_GPU();
  void* first;
  {
    NDArray a(Shape{1000}, DType::kFloat32, Device::gpu(0));  // 4000 B: the 4 KiB class
    first = a.raw();
  }
  NDArray b(Shape{975}, DType::kFloat32, Device::gpu(0));  // 3900 B: same class
  EXPECT_EQ(b.raw(), first);
  NDArray c(Shape{975}, DType::kFloat32, Device::gpu(0));  // pool empty again: fresh block
  EXPECT_NE(c.raw(), first);
}

TEST(CudaBackend, BadDeviceIdThrows) {
  LOOM_SKIP_WITHOUT_GPU();
  int n = device_backend(DeviceType::kGPU).count();
  EXPECT_THROW(NDArray(Shape{4}, DType::kFloat32, Device::gpu(n)), Error);
}

}  // namespace
}  // namespace loom
