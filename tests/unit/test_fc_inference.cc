// FullyConnected in inference on weights cached in oneDNN's layout (ops/nn/fc_inference.h):
// against a naive double-precision product, against the matmul path
// (LOOM_FC_CACHED_WEIGHTS=0), after the weights change (the cache must see it), and in
// training calls (never cached). Batch 1 (one thread) and 16, with and without bias.
// Up to 4 rows run Loom's own matrix-vector loop, compared with the inner product
// (LOOM_FC_GEMV=0) too, and on weights that escaped (small ones read in place, bit for bit
// as packed; large ones through the matmul path).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "runtime/cpu/dnnl_util.h"
#include "runtime/executor.h"
#include "tests/unit/host_values.h"

namespace loom {
namespace {

using test_util::host;

void set(const NDArray& a, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(a.size()));
  for (auto& x : v) x = d(rng);
  a.copy_from_host(v.data(), a.nbytes());
}
// y = x·wᵀ + b in double.
std::vector<float> reference(const Executor& ex, int m, int k, int o, bool bias) {
  auto x = host(ex.arg_dict().at("data")), w = host(ex.arg_dict().at("fc_weight"));
  std::vector<float> b = bias ? host(ex.arg_dict().at("fc_bias")) : std::vector<float>(o, 0.f);
  std::vector<float> y(static_cast<size_t>(m) * o);
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < o; ++j) {
      double acc = b[j];
      for (int q = 0; q < k; ++q) acc += double(x[r * k + q]) * w[j * k + q];
      y[r * o + j] = static_cast<float>(acc);
    }
  return y;
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  // k <= 1024 products of values in [-1, 1] in float: well within 1e-4 relative to sqrt(k).
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], 1e-4f * (1.f + std::fabs(b[i])) * 32.f) << what << " at " << i;
}

class FcInference : public ::testing::TestWithParam<std::tuple<int, int, int, bool>> {};

TEST_P(FcInference, MatchesReferenceAndMatmulPath) {
  const auto [m, k, o, bias] = GetParam();
  SCOPED_TRACE("m" + std::to_string(m) + " k" + std::to_string(k) + " o" + std::to_string(o) +
               (bias ? " bias" : " no bias"));
  auto sym = Symbol::Op("FullyConnected", {Symbol::Variable("data")},
                        {{"num_hidden", std::to_string(o)}, {"no_bias", bias ? "False" : "True"}},
                        "fc");
  BindOptions opt;
  opt.default_req = Req::kNull;
  auto ex = Executor::simple_bind(sym, {{"data", Shape{m, k}}}, opt);
  int seed = 1;
  for (const auto& [name, a] : ex->arg_dict()) set(a, seed++);
  setenv("LOOM_FC_CACHED_WEIGHTS", "0", 1);
  auto plain = Executor::bind(sym, ex->arg_dict(), {}, ex->aux_dict(), opt);
  unsetenv("LOOM_FC_CACHED_WEIGHTS");
  setenv("LOOM_FC_GEMV", "0", 1);
  auto inner = Executor::bind(sym, ex->arg_dict(), {}, ex->aux_dict(), opt);
  unsetenv("LOOM_FC_GEMV");

  for (int call = 0; call < 2; ++call) {  // the second call reuses the cached weights
    ex->forward(false);
    plain->forward(false);
    inner->forward(false);
    const auto want = reference(*ex, m, k, o, bias);
    expect_near(host(ex->outputs()[0]), want, "cached, call " + std::to_string(call));
    expect_near(host(plain->outputs()[0]), want, "matmul, call " + std::to_string(call));
    expect_near(host(inner->outputs()[0]), want, "inner product, call " + std::to_string(call));
  }
  // New weights through NDArray's own write (a version bump): the cache must follow.
  set(ex->arg_dict().at("fc_weight"), 99);
  ex->forward(false);
  expect_near(host(ex->outputs()[0]), reference(*ex, m, k, o, bias), "after new weights");
  inner->forward(false);
  expect_near(host(inner->outputs()[0]), reference(*ex, m, k, o, bias), "inner, new weights");
  // Weights changed through a pointer that escaped (no version bump): never cached.
  float* w = ex->arg_dict().at("fc_weight").data<float>();
  for (int i = 0; i < k; ++i) w[i] += 0.5f;
  ex->forward(false);
  expect_near(host(ex->outputs()[0]), reference(*ex, m, k, o, bias), "escaped weights");
  // The matrix-vector loop reads escaped weights (up to 1 M) in place with the same
  // arithmetic as its packed copy: a module that trained (escaped weights) and one loaded
  // from its file agree bit for bit.
  if (m <= 4 && k * o <= (1 << 20)) {
    auto fresh = Executor::simple_bind(sym, {{"data", Shape{m, k}}}, opt);
    for (const auto& [name, a] : ex->arg_dict()) fresh->arg_dict().at(name).copy_from(a);
    fresh->forward(false);
    EXPECT_EQ(host(fresh->outputs()[0]), host(ex->outputs()[0])) << "escaped vs packed";
  }
  // Training calls run the matmul path.
  ex->forward(true);
  expect_near(host(ex->outputs()[0]), reference(*ex, m, k, o, bias), "training call");
}

INSTANTIATE_TEST_SUITE_P(Shapes, FcInference,
                         ::testing::Values(std::make_tuple(1, 512, 128, true),
                                           std::make_tuple(1, 1024, 1000, true),
                                           std::make_tuple(16, 256, 100, false),
                                           std::make_tuple(3, 40, 7, true),
                                           std::make_tuple(4, 2048, 1000, false),
                                           std::make_tuple(2, 33, 6, false),
                                           std::make_tuple(5, 64, 9, true)));

// The inference product is recorded with oneDNN's implementation (never its reference one).
TEST(FcInferenceImpl, RecordsAJitKernel) {
  auto sym = Symbol::Op("FullyConnected", {Symbol::Variable("data")}, {{"num_hidden", "64"}},
                        "fc_impl");
  BindOptions opt;
  opt.default_req = Req::kNull;
  auto ex = Executor::simple_bind(sym, {{"data", Shape{8, 96}}}, opt);
  bool found = false;
  for (const auto& line : dnnl_util::recorded_impls())
    if (line.find("FullyConnected (8, 96)->64") == 0) {
      found = true;
      EXPECT_NE(line.find("| infer "), std::string::npos) << line;
      EXPECT_EQ(line.find("| infer ref"), std::string::npos) << line;
    }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace loom
