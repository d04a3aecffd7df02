#include "tests/gpu/bucket_case.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/imperative.h"

namespace loom {
namespace {

struct Config {
  std::string op;
  Attrs attrs;
  std::vector<std::string> kinds;  ///< per inner input: "w" full-size normal, "pos" full-size
                                   ///< positive, "zero" full-size zeros, "s:<v>" a (1,) value
};

const std::vector<Shape> kTensorShapes = {{3, 4}, {1}, {5}, {1031}};

std::vector<Config> configs() {
  return {
      {"sgd_update", {{"lr", "0.1"}}, {"w", "w"}},
      {"sgd_mom_update", {{"lr", "0.1"}, {"momentum", "0.9"}}, {"w", "w", "w"}},
      {"nag_mom_update", {{"lr", "0.1"}, {"momentum", "0.9"}, {"clip_gradient", "0.5"}},
       {"w", "w", "w"}},
      {"adam_update", {{"lr", "0.01"}, {"lr_input", "True"}}, {"w", "w", "w", "pos", "s:0.02"}},
      {"adamw_update", {{"lr", "0.01"}, {"eta", "0.5"}}, {"w", "w", "w", "pos"}},
      {"rmsprop_update", {{"lr", "0.01"}}, {"w", "w", "pos"}},
      {"rmspropalex_update", {{"lr", "0.01"}}, {"w", "w", "pos", "zero", "w"}},
      {"lamb_update_phase1", {{"t", "3"}, {"wd", "0.01"}}, {"w", "w", "w", "pos"}},
      {"lamb_update_phase2", {{"lr", "0.1"}, {"lower_bound", "0.5"}}, {"w", "w", "s:0.8", "s:1.3"}},
      {"_loom_accumulate", {{"scale", "0.5"}}, {"w", "w", "s:0"}},
      {"_loom_ema_update", {{"decay", "0.9"}, {"init", "zero_debias"}}, {"w", "w", "s:4", "s:0.3"}},
  };
}

NDArray make(const Shape& full, const std::string& kind, std::mt19937& rng) {
  const bool scalar = kind.rfind("s:", 0) == 0;
  NDArray a(scalar ? Shape{1} : full);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int64_t i = 0; i < a.size(); ++i)
    a.data<float>()[i] = scalar ? std::stof(kind.substr(2))
                         : kind == "pos"  ? 0.5f + std::fabs(nd(rng))
                         : kind == "zero" ? 0.f
                                          : nd(rng);
  return a;
}

// Runs the bucket on `dev` (inputs copied there), returns inputs (states change) then outputs
// on the CPU.
std::vector<NDArray> run(const Attrs& attrs, const std::vector<NDArray>& in, Device dev,
                         const char* multi) {
  setenv("LOOM_CUDA_BUCKET_MULTI", multi, 1);
  std::vector<Shape> shapes;
  std::vector<NDArray> din;
  for (const NDArray& a : in) {
    shapes.push_back(a.shape());
    din.push_back(a.copy(dev));
  }
  ImperativeOp op("_loom_bucket", attrs, shapes, {}, dev);
  std::vector<NDArray> out = op.forward(din, true);
  unsetenv("LOOM_CUDA_BUCKET_MULTI");
  std::vector<NDArray> res;
  for (const NDArray& a : din) res.push_back(a.copy(Device::cpu()));
  for (const NDArray& a : out) res.push_back(a.copy(Device::cpu()));
  return res;
}

int compare(const std::vector<NDArray>& a, const std::vector<NDArray>& b, double tol,
            const std::string& what) {
  for (size_t k = 0; k < a.size(); ++k)
    for (int64_t i = 0; i < a[k].size(); ++i) {
      const double x = a[k].at(i), y = b[k].at(i);
      if (!(std::fabs(x - y) <= tol + tol * std::fabs(y))) {
        std::printf("FAIL bucket %s: array %zu element %lld: %g vs %g\n", what.c_str(), k,
                    static_cast<long long>(i), x, y);
        return 1;
      }
    }
  return 0;
}

}  // namespace

int run_bucket_case(Device dev) {
  int failures = 0, cases = 0;
  std::mt19937 rng(14);
  for (const Config& c : configs()) {
    Attrs attrs = c.attrs;
    attrs["op"] = c.op;
    attrs["num_tensors"] = std::to_string(kTensorShapes.size());
    if (c.op.find("_update") != std::string::npos && c.op != "_loom_ema_update" &&
        c.op != "lamb_update_phase2")
      attrs["wds"] = "(0.1, 0, 0.01, 0.2)";
    std::vector<NDArray> in;
    for (const Shape& s : kTensorShapes)
      for (const std::string& k : c.kinds) in.push_back(make(s, k, rng));
    try {
      const auto cpu = run(attrs, in, Device::cpu(), "1");
      const auto multi = run(attrs, in, dev, "1");
      const auto per_tensor = run(attrs, in, dev, "0");
      failures += compare(multi, per_tensor, 1e-6, c.op + ": multi-tensor vs per-tensor");
      failures += compare(multi, cpu, 2e-4, c.op + ": device vs CPU");
      ++cases;
    } catch (const std::exception& e) {
      std::printf("FAIL bucket %s: threw: %s\n", c.op.c_str(), e.what());
      ++failures;
    }
  }
  std::printf("bucket case%s: %d inner ops, %d failures\n",
              dev.type == DeviceType::kCPU ? " (CPU on both sides)" : "", cases, failures);
  return failures;
}

}  // namespace loom
