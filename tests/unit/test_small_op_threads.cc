// Small layers on one thread (runtime/cpu/thread_cap.h): the policy's thresholds and switch,
// the cap itself, and a MobileFaceNet-style network whose layers run on one thread (the
// default at batch 1) giving the every-thread result (LOOM_SERIAL_SMALL_OPS=0) within float
// rounding, with every layer forced onto one thread as well.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "runtime/cpu/thread_cap.h"
#include "runtime/executor.h"

namespace loom {
namespace {

TEST(SmallOpThreads, PolicyThresholdAndSwitch) {
  unsetenv("LOOM_SERIAL_US");
  unsetenv("LOOM_SERIAL_SMALL_OPS");
  // 1 MFLOP is a few microseconds on any core; 10 GFLOP is tens of milliseconds.
  EXPECT_EQ(dnnl_util::threads_for_work(1e6, 1e4), 1);
  EXPECT_EQ(dnnl_util::threads_for_work(1e10, 1e4), 0);
  EXPECT_FALSE(dnnl_util::parallel_worth(1e4));
  EXPECT_TRUE(dnnl_util::parallel_worth(1e9));
  setenv("LOOM_SERIAL_SMALL_OPS", "0", 1);
  EXPECT_EQ(dnnl_util::threads_for_work(1e6, 1e4), 0);
  EXPECT_TRUE(dnnl_util::parallel_worth(1e4));
  unsetenv("LOOM_SERIAL_SMALL_OPS");
  setenv("LOOM_SERIAL_US", "1e12", 1);
  EXPECT_EQ(dnnl_util::threads_for_work(1e10, 1e4), 1);
  setenv("LOOM_SERIAL_US", "fast", 1);
  EXPECT_THROW(dnnl_util::threads_for_work(1e6, 1e4), Error);
  unsetenv("LOOM_SERIAL_US");
}

TEST(SmallOpThreads, CapLimitsAndRestores) {
  const int before = omp_get_max_threads();
  {
    dnnl_util::ThreadCap cap(1);
    EXPECT_EQ(omp_get_max_threads(), 1);
    int team = 0;
#pragma omp parallel
    {
#pragma omp single
      team = omp_get_num_threads();
    }
    EXPECT_EQ(team, 1);
  }
  EXPECT_EQ(omp_get_max_threads(), before);
  {
    dnnl_util::ThreadCap none(0);
    EXPECT_EQ(omp_get_max_threads(), before);
  }
}

std::string S(int v) { return std::to_string(v); }
Symbol conv(const Symbol& x, const std::string& name, int filters, int k, int group, int stride) {
  return Symbol::Op("Convolution", {x},
                    {{"kernel", "(" + S(k) + "," + S(k) + ")"},
                     {"pad", "(" + S(k / 2) + "," + S(k / 2) + ")"},
                     {"stride", "(" + S(stride) + "," + S(stride) + ")"},
                     {"num_filter", S(filters)},
                     {"num_group", S(group)},
                     {"no_bias", "True"}},
                    name);
}
Symbol bn_prelu(const Symbol& x, const std::string& name) {
  auto b = Symbol::Op("BatchNorm", {x}, {{"fix_gamma", "False"}}, name + "_bn");
  return Symbol::Op("LeakyReLU", {b}, {{"act_type", "prelu"}}, name + "_prelu");
}

// Stem, depthwise, pointwise and a residual block: a few layers above and below the
// threshold at 32x32, batch 1.
Symbol net() {
  auto x = bn_prelu(conv(Symbol::Variable("data"), "stem", 64, 3, 1, 2), "stem");
  auto d = bn_prelu(conv(x, "dw", 64, 3, 64, 1), "dw");
  auto p = bn_prelu(conv(d, "pw", 128, 1, 1, 1), "pw");
  auto r = Symbol::Op("BatchNorm", {conv(p, "proj", 64, 1, 1, 1)}, {}, "proj_bn");
  auto s = Symbol::Op("elemwise_add", {r, x}, {}, "plus");
  return Symbol::Op("Pooling", {conv(s, "last", 256, 3, 1, 1)},
                    {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "avg"}}, "pool");
}

std::vector<float> run(const Symbol& sym, const char* serial_us, const char* small_ops) {
  if (serial_us) setenv("LOOM_SERIAL_US", serial_us, 1);
  if (small_ops) setenv("LOOM_SERIAL_SMALL_OPS", small_ops, 1);
  BindOptions o;
  o.default_req = Req::kNull;
  auto ex = Executor::simple_bind(sym, {{"data", Shape{1, 3, 64, 64}}}, o);
  unsetenv("LOOM_SERIAL_US");
  unsetenv("LOOM_SERIAL_SMALL_OPS");
  int seed = 1;
  auto fill = [&](const NDArray& a, float lo, float hi) {
    std::mt19937 rng(seed++);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(static_cast<size_t>(a.size()));
    for (auto& e : v) e = d(rng);
    a.copy_from_host(v.data(), a.nbytes());
  };
  for (const auto& [k, v] : ex->arg_dict()) {
    const bool scale = k.find("gamma") != std::string::npos;
    fill(v, scale ? 0.1f : -0.3f, scale ? 0.5f : 0.3f);
  }
  for (const auto& [k, v] : ex->aux_dict())
    fill(v, k.find("var") != std::string::npos ? 0.5f : -0.2f, 1.f);
  ex->forward(false);
  ex->forward(false);
  std::vector<float> out(static_cast<size_t>(ex->outputs()[0].size()));
  ex->outputs()[0].copy_to_host(out.data(), ex->outputs()[0].nbytes());
  return out;
}

TEST(SmallOpThreads, SerialLayersMatchParallel) {
  const Symbol sym = net();
  const auto parallel = run(sym, nullptr, "0");
  const auto policy = run(sym, nullptr, nullptr);
  const auto serial = run(sym, "1e12", nullptr);
  ASSERT_EQ(parallel.size(), policy.size());
  for (size_t i = 0; i < parallel.size(); ++i) {
    const float tol = 1e-4f * (1.f + std::fabs(parallel[i]));
    ASSERT_NEAR(policy[i], parallel[i], tol) << i;
    ASSERT_NEAR(serial[i], parallel[i], tol) << i;
  }
}

}  // namespace
}  // namespace loom
