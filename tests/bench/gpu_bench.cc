// GPU benchmarks (ready for a device; this machine has none): the GPU side of the CPU
// benchmarks, each run eagerly and recorded as a CUDA Graph (BindOptions::cuda_graph):
//  - ResNet-18 and ResNet-50 (v1, 224x224, 1000 classes) inference, batch 1 and 32;
//  - a ResNet-18 training step graph (momentum SGD + EMA), batch 64;
//  - the update/EMA pass over ResNet-18's parameters (momentum SGD then the EMA of the new
//    weights, 11.7 M floats), as achieved memory bandwidth against the device's peak
//    (2 x memory clock x bus width, from the CUDA device attributes).
// Times are medians of synchronised calls after a warm-up. A model whose ops lack a GPU
// kernel says so and is skipped. Without a CUDA device the program prints one line and
// exits 0. MXNet 1.9.1's side of the inference figures: tests/bench/gpu_mxnet.py.
//
//   build/bin/loom_gpu_bench [--iters N]      (LOOM_BENCH=ON in a CUDA build)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "graph/step_builder.h"
#include "ops/op.h"
#include "runtime/device.h"
#include "runtime/executor.h"

namespace loom {
namespace {

const Device kGpu = Device::gpu(0);

Symbol conv_bn(const Symbol& x, int filters, int kernel, int stride, const std::string& name,
               bool relu) {
  const std::string k = std::to_string(kernel), s = std::to_string(stride),
                    p = std::to_string(kernel / 2);
  auto c = Symbol::Op("Convolution", {x},
                      {{"kernel", "(" + k + ", " + k + ")"}, {"stride", "(" + s + ", " + s + ")"},
                       {"pad", "(" + p + ", " + p + ")"}, {"num_filter", std::to_string(filters)},
                       {"no_bias", "True"}},
                      name + "_conv");
  auto b = Symbol::Op("BatchNorm", {c}, {{"fix_gamma", "False"}}, name + "_bn");
  return relu ? Symbol::Op("Activation", {b}, {{"act_type", "relu"}}, name + "_relu") : b;
}

/// ResNet v1 (Gluon's resnet18_v1 / resnet50_v1 layout) with a SoftmaxOutput head.
Symbol resnet(int depth) {
  const bool bottleneck = depth == 50;
  const std::vector<int> blocks = bottleneck ? std::vector<int>{3, 4, 6, 3}
                                             : std::vector<int>{2, 2, 2, 2};
  Symbol x = conv_bn(Symbol::Variable("data"), 64, 7, 2, "stem", true);
  x = Symbol::Op("Pooling", {x},
                 {{"pool_type", "max"}, {"kernel", "(3, 3)"}, {"stride", "(2, 2)"},
                  {"pad", "(1, 1)"}},
                 "stem_pool");
  int in_ch = 64;
  for (size_t st = 0; st < blocks.size(); ++st) {
    const int width = 64 << st, out_ch = bottleneck ? 4 * width : width;
    for (int b = 0; b < blocks[st]; ++b) {
      const int stride = b == 0 && st > 0 ? 2 : 1;
      const std::string n = "s" + std::to_string(st) + "b" + std::to_string(b);
      Symbol y = bottleneck ? conv_bn(conv_bn(conv_bn(x, width, 1, 1, n + "a", true), width, 3,
                                              stride, n + "b", true),
                                      out_ch, 1, 1, n + "c", false)
                            : conv_bn(conv_bn(x, width, 3, stride, n + "a", true), out_ch, 3, 1,
                                      n + "b", false);
      Symbol sc =
          stride != 1 || in_ch != out_ch ? conv_bn(x, out_ch, 1, stride, n + "d", false) : x;
      x = Symbol::Op("Activation", {Symbol::Op("elemwise_add", {y, sc}, {}, n + "_add")},
                     {{"act_type", "relu"}}, n + "_out");
      in_ch = out_ch;
    }
  }
  x = Symbol::Op("Pooling", {x},
                 {{"pool_type", "avg"}, {"global_pool", "True"}, {"kernel", "(1, 1)"}}, "gap");
  x = Symbol::Op("FullyConnected", {Symbol::Op("Flatten", {x}, {}, "flat")},
                 {{"num_hidden", "1000"}}, "fc");
  return Symbol::Op("SoftmaxOutput", {x}, {}, "softmax");
}

void randomize(Executor& ex) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 0.05f);
  for (const auto& [name, a] : ex.arg_dict()) {
    NDArray h(a.shape());
    for (int64_t i = 0; i < h.size(); ++i)
      h.data<float>()[i] = name.find("label") != std::string::npos ? float(i % 1000) : nd(rng);
    a.copy_from(h);
  }
  for (const auto& [name, a] : ex.aux_dict())
    if (name.find("moving_var") != std::string::npos) a.copy_from(NDArray::full(a.shape(), 1.0));
}

/// Median seconds of `iters` synchronised calls of `f` after `warmup` calls.
double median_seconds(const std::function<void()>& f, int iters, int warmup = 3) {
  DeviceBackend& gpu = device_backend(DeviceType::kGPU);
  for (int i = 0; i < warmup; ++i) f();
  gpu.synchronize(0);
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    gpu.synchronize(0);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

const char* mode_name(CudaGraphMode m) {
  return m == CudaGraphMode::kOff ? "eager" : "CUDA Graph";
}

void bench_inference(int depth, int batch, int iters) {
  for (CudaGraphMode mode : {CudaGraphMode::kOff, CudaGraphMode::kOn}) {
    const std::string what = "ResNet-" + std::to_string(depth) + " inference b" +
                             std::to_string(batch) + ", " + mode_name(mode);
    try {
      BindOptions o;
      o.device = kGpu;
      o.default_req = Req::kNull;
      o.cuda_graph = mode;
      auto ex = Executor::simple_bind(resnet(depth), {{"data", Shape{batch, 3, 224, 224}}}, o);
      randomize(*ex);
      const double s = median_seconds([&] { ex->forward(false); }, iters);
      std::printf("%-44s %9.3f ms  %9.1f img/s  (%s)\n", what.c_str(), s * 1e3, batch / s,
                  ex->cuda_graph_status().c_str());
    } catch (const std::exception& e) {
      std::printf("%-44s skipped: %s\n", what.c_str(), e.what());
    }
  }
}

bool has_gpu_kernel(const std::string& op) {
  return find_op(op) && find_op(op)->kernels.count(DeviceType::kGPU);
}

void bench_train_step(int iters) {
  OptimizerSpec opt;
  opt.learning_rate = 0.1;
  opt.momentum = 0.9;
  opt.wd = 1e-4;
  StepOptions so;
  so.ema = EmaOptions{};
  so.bucket = has_gpu_kernel("_loom_bucket");  // until the bucket op has its GPU kernel
  const Symbol step = make_step(resnet(18), opt, so);
  for (CudaGraphMode mode : {CudaGraphMode::kOff, CudaGraphMode::kAuto}) {
    const std::string what =
        std::string("ResNet-18 train step b64 (SGD+EMA), ") + mode_name(mode);
    try {
      BindOptions o;
      o.device = kGpu;
      o.default_req = Req::kNull;
      o.cuda_graph = mode;
      auto ex = Executor::simple_bind(step, {{"data", Shape{64, 3, 224, 224}}}, o);
      randomize(*ex);
      const double s = median_seconds([&] { ex->forward(true); }, iters);
      std::printf("%-44s %9.3f ms  %9.1f img/s  (%s)\n", what.c_str(), s * 1e3, 64 / s,
                  ex->cuda_graph_status().c_str());
    } catch (const std::exception& e) {
      std::printf("%-44s skipped: %s\n", what.c_str(), e.what());
    }
  }
}

/// Momentum SGD on every ResNet-18 parameter, then the EMA of the new weights: per element
/// the update reads w, g, mom and writes w, mom, the EMA reads ema, w and writes ema.
void bench_update_pass(int iters, double peak_gbs) {
  std::vector<Shape> shapes;
  {
    BindOptions o;  // the parameter shapes, from a CPU bind of batch 1
    o.default_req = Req::kNull;
    auto cpu = Executor::simple_bind(resnet(18), {{"data", Shape{1, 3, 224, 224}}}, o);
    for (const auto& [name, a] : cpu->arg_dict())
      if (name != "data" && name != "softmax_label") shapes.push_back(a.shape());
  }
  int64_t n = 0;
  std::map<std::string, Shape> bind;
  bind["t"] = Shape{1};
  std::vector<Symbol> heads;
  for (size_t i = 0; i < shapes.size(); ++i) {
    n += shapes[i].numel();
    const std::string p = "p" + std::to_string(i);
    for (const char* s : {"", "_grad", "_mom", "_ema"}) bind[p + s] = shapes[i];
    auto u = Symbol::Op("sgd_mom_update",
                        {Symbol::Variable(p), Symbol::Variable(p + "_grad"),
                         Symbol::Variable(p + "_mom")},
                        {{"lr", "0.01"}, {"momentum", "0.9"}, {"wd", i % 3 ? "0" : "0.0001"},
                         {"__inplace__", "(0,)"}});
    heads.push_back(Symbol::Op("_loom_ema_update",
                               {Symbol::Variable(p + "_ema"), u, Symbol::Variable("t")},
                               {{"decay", "0.999"}, {"__inplace__", "(0,)"}}));
  }
  for (CudaGraphMode mode : {CudaGraphMode::kOff, CudaGraphMode::kOn}) {
    const std::string what = std::string("update+EMA pass, ResNet-18 params, ") + mode_name(mode);
    try {
      BindOptions o;
      o.device = kGpu;
      o.default_req = Req::kNull;
      o.cuda_graph = mode;
      auto ex = Executor::simple_bind(Symbol::Group(heads), bind, o);
      for (const auto& [k, a] : ex->arg_dict())
        a.copy_from(NDArray::full(a.shape(), k == "t" ? 100.0 : 0.01));
      const double s = median_seconds([&] { ex->forward(true); }, iters);
      const double gbs = 8.0 * 4 * double(n) / s / 1e9;
      std::printf("%-44s %9.3f ms  %7.1f GB/s = %4.1f%% of peak %.0f GB/s (%lld floats, %zu "
                  "tensors)\n",
                  what.c_str(), s * 1e3, gbs, 100 * gbs / peak_gbs, peak_gbs,
                  static_cast<long long>(n), shapes.size());
    } catch (const std::exception& e) {
      std::printf("%-44s skipped: %s\n", what.c_str(), e.what());
    }
  }
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  using namespace loom;
  int iters = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--iters N]\n", argv[0]);
      return 2;
    }
  }
  try {
    check_device(kGpu);
  } catch (const std::exception& e) {
    std::printf("loom_gpu_bench: skipped: %s\n", e.what());
    return 0;
  }
  cudaDeviceProp prop{};
  int clock_khz = 0, bus_bits = 0;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0) != cudaSuccess) {
    std::printf("loom_gpu_bench: cannot read gpu(0)'s properties\n");
    return 1;
  }
  // Double data rate: two transfers per memory clock over the whole bus.
  const double peak_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
  std::printf("gpu(0): %s, %d SMs, %.1f GiB, peak memory bandwidth %.0f GB/s; %d iterations\n",
              prop.name, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0, peak_gbs,
              iters);
  for (int depth : {18, 50})
    for (int batch : {1, 32}) bench_inference(depth, batch, iters);
  bench_train_step(iters);
  bench_update_pass(iters, peak_gbs);
  return 0;
}
