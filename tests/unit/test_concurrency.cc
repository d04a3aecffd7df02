// Several executors bound from one symbol, sharing read-only weight and aux arrays, run
// inference from several threads at once and give exactly the results they give one after
// another: kernels keep per-executor state (primitives, workspace, cached weight reorders
// and folded BatchNorm weights) and only read the shared arrays. Runs in the sanitizer
// build too.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "runtime/executor.h"
#include "tests/unit/host_values.h"

namespace loom {
namespace {

using test_util::host;

// Convolution -> BatchNorm -> ReLU (fused in inference), a residual add (fused into the
// second convolution), pooling, FullyConnected, softmax.
Symbol net() {
  auto data = Symbol::Variable("data");
  auto conv = [](Symbol x, const char* name) {
    return Symbol::Op("Convolution", {x},
                      {{"kernel", "(3,3)"}, {"pad", "(1,1)"}, {"num_filter", "16"}}, name);
  };
  auto c1 = conv(data, "c1");
  auto bn = Symbol::Op("BatchNorm", {c1}, {{"fix_gamma", "False"}}, "bn");
  auto r = Symbol::Op("Activation", {bn}, {{"act_type", "relu"}}, "relu");
  auto sum = Symbol::Op("elemwise_add", {conv(r, "c2"), r}, {}, "plus");
  auto pool = Symbol::Op("Pooling", {sum}, {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "avg"}},
                         "pool");
  auto fc = Symbol::Op("FullyConnected", {pool}, {{"num_hidden", "10"}}, "fc");
  return Symbol::Op("softmax", {fc}, {}, "prob");
}

TEST(Concurrency, ExecutorsSharingWeightsMatchSequentialRuns) {
  constexpr int kExecutors = 4, kInputs = 6, kRounds = 3;
  const Shape in_shape{2, 8, 16, 16};
  Symbol sym = net();
  // Weights and aux states: made by one simple_bind, filled once, then shared read-only.
  auto proto = Executor::simple_bind(sym, {{"data", in_shape}});
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto fill = [&](const NDArray& a, float scale, float shift) {
    std::vector<float> v(static_cast<size_t>(a.size()));
    for (auto& x : v) x = shift + scale * nd(rng);
    a.copy_from_host(v.data(), a.nbytes());
  };
  std::map<std::string, NDArray> args = proto->arg_dict(), aux = proto->aux_dict();
  for (auto& [name, a] : args) fill(a, 0.2f, 0.f);
  for (auto& [name, a] : aux) fill(a, 0.1f, name == "bn_moving_var" ? 1.f : 0.f);
  std::vector<NDArray> inputs;
  for (int i = 0; i < kInputs; ++i) {
    inputs.emplace_back(in_shape);
    fill(inputs.back(), 1.f, 0.f);
  }

  std::vector<std::unique_ptr<Executor>> exes;
  for (int k = 0; k < kExecutors; ++k) {
    auto own = args;
    own["data"] = NDArray(in_shape);
    exes.push_back(Executor::bind(sym, own, {}, aux));
  }
  // Sequential reference: input i through executor 0.
  std::vector<std::vector<float>> want;
  for (const auto& x : inputs) {
    exes[0]->forward(false, {{"data", x}});
    want.push_back(host(exes[0]->outputs()[0]));
  }
  // The reference is not trivial: rows are distributions and differ between inputs.
  ASSERT_NE(want[0], want[1]);

  // Every executor runs every input, rounds times, all at once; each output must equal the
  // sequential one bit for bit (same kernels, same arrays, no shared scratch).
  std::vector<std::vector<std::string>> failures(kExecutors);
  std::vector<std::thread> threads;
  for (int k = 0; k < kExecutors; ++k)
    threads.emplace_back([&, k] {
      for (int round = 0; round < kRounds; ++round)
        for (int j = 0; j < kInputs; ++j) {
          int i = (j + k) % kInputs;  // executors work on different inputs at any moment
          exes[static_cast<size_t>(k)]->forward(false, {{"data", inputs[static_cast<size_t>(i)]}});
          if (host(exes[static_cast<size_t>(k)]->outputs()[0]) != want[static_cast<size_t>(i)])
            failures[static_cast<size_t>(k)].push_back("executor " + std::to_string(k) + " input " +
                                                       std::to_string(i) + " round " +
                                                       std::to_string(round));
        }
    });
  for (auto& t : threads) t.join();
  for (const auto& f : failures)
    for (const auto& msg : f) ADD_FAILURE() << msg << " differs from the sequential run";
  // The shared weights were only read.
  for (const auto& [name, a] : exes[0]->arg_dict())
    if (name != "data") {
      EXPECT_EQ(host(a), host(args.at(name))) << name;
    }
}

// Binding from several threads at once (each bind draws a seed from the process-wide
// generator) must not race either.
TEST(Concurrency, ConcurrentBindsAndRuns) {
  Symbol sym = net();
  std::vector<std::vector<float>> out(4);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      auto ex = Executor::simple_bind(sym, {{"data", Shape{1, 8, 8, 8}}});
      for (auto& [name, a] : ex->arg_dict()) a.fill(name == "data" ? 1.0 : 0.05);
      ex->aux_dict().at("bn_moving_var").fill(1.0);
      ex->forward(false);
      out[static_cast<size_t>(k)] = host(ex->outputs()[0]);
    });
  for (auto& t : threads) t.join();
  for (int k = 1; k < 4; ++k) EXPECT_EQ(out[static_cast<size_t>(k)], out[0]);
  // Ten classes with equal weights: a uniform distribution.
  for (float p : out[0]) EXPECT_NEAR(p, 0.1f, 1e-6);
}

}  // namespace
}  // namespace loom
