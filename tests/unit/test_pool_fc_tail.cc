// A classifier's tail: pooling a channel-blocked map down to 1x1 (global average pooling, or
// a window covering the whole map), Flatten, FullyConnected. The 1x1 output is written
// without a reorder (LOOM_POOL_1X1_NO_REORDER=0 reorders it) and a few rows run Loom's
// matrix-vector loop (LOOM_FC_GEMV=0: oneDNN's inner product): outputs against a naive
// double-precision reference, and outputs and gradients against both switches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "runtime/executor.h"
#include "tests/unit/host_values.h"

namespace loom {
namespace {

using test_util::host;

// relu(data) (blocked: it feeds a pooling), pooled to 1x1, Flatten, FullyConnected.
Symbol tail(const std::string& pool_type, bool global) {
  auto r = Symbol::Op("Activation", {Symbol::Variable("data")}, {{"act_type", "relu"}}, "relu");
  Attrs pa{{"pool_type", pool_type}};
  if (global)
    pa.insert({{"global_pool", "True"}, {"kernel", "(1,1)"}});
  else
    pa.insert({{"kernel", "(5,5)"}, {"stride", "(1,1)"}});
  auto p = Symbol::Op("Pooling", {r}, pa, "pool");
  auto fc = Symbol::Op("FullyConnected", {Symbol::Op("Flatten", {p}, {}, "flat")},
                       {{"num_hidden", "10"}}, "fc");
  return Symbol::Op("MakeLoss", {fc}, {}, "loss");
}

struct TailRun {
  std::vector<float> infer;                // inference output
  std::vector<std::vector<float>> train;  // training output and gradients
};

TailRun run(const std::string& pool_type, bool global, int n, const char* env = nullptr) {
  if (env) setenv(env, "0", 1);
  auto ex = Executor::simple_bind(tail(pool_type, global), {{"data", Shape{n, 32, 5, 5}}});
  if (env) unsetenv(env);
  int seed = 1;
  for (const auto& [name, a] : ex->arg_dict()) {
    std::mt19937 rng(seed++);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    std::vector<float> v(static_cast<size_t>(a.size()));
    for (auto& x : v) x = d(rng);
    a.copy_from_host(v.data(), a.nbytes());
  }
  TailRun r;
  ex->forward(false);
  r.infer = host(ex->outputs()[0]);
  ex->forward(true);
  ex->backward();
  r.train.push_back(host(ex->outputs()[0]));
  for (const auto& g : ex->grad_arrays())
    if (!g.is_none()) r.train.push_back(host(g));
  // The naive reference of the inference output, appended last.
  auto x = host(ex->arg_dict().at("data")), w = host(ex->arg_dict().at("fc_weight")),
       b = host(ex->arg_dict().at("fc_bias"));
  std::vector<float> want;
  for (int i = 0; i < n; ++i) {
    std::vector<double> pooled(32);
    for (int c = 0; c < 32; ++c) {
      double acc = 0;  // relu: every value >= 0, so 0 starts a max too
      for (int p = 0; p < 25; ++p) {
        const double v = std::max(0.f, x[(i * 32 + c) * 25 + p]);
        acc = pool_type == "max" ? std::max(acc, v) : acc + v / 25;
      }
      pooled[c] = acc;
    }
    for (int j = 0; j < 10; ++j) {
      double y = b[j];
      for (int c = 0; c < 32; ++c) y += pooled[c] * w[j * 32 + c];
      want.push_back(static_cast<float>(y));
    }
  }
  r.train.push_back(want);
  return r;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5f * (1.f + std::fabs(want[i]))) << what << " at " << i;
}

TEST(PoolFcTail, MatchesReferenceAndPlainPaths) {
  for (const char* type : {"avg", "max"})
    for (bool global : {true, false})
      for (int n : {1, 3, 8}) {
        SCOPED_TRACE(std::string(type) + (global ? " global" : " 5x5") + " batch " +
                     std::to_string(n));
        const TailRun fast = run(type, global, n);
        expect_close(fast.infer, fast.train.back(), "inference vs reference");
        for (const char* env : {"LOOM_POOL_1X1_NO_REORDER", "LOOM_FC_GEMV"}) {
          const TailRun plain = run(type, global, n, env);
          expect_close(fast.infer, plain.infer, std::string(env) + "=0, inference");
          ASSERT_EQ(fast.train.size(), plain.train.size());
          for (size_t k = 0; k < fast.train.size(); ++k)
            expect_close(fast.train[k], plain.train[k],
                         std::string(env) + "=0, training array " + std::to_string(k));
        }
      }
}

}  // namespace
}  // namespace loom
