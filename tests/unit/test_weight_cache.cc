// Convolution keeps its reordered weights between inference calls only while the weight
// array provably has not changed (Storage::version / escaped); every write path must show.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "runtime/executor.h"
#include "tests/unit/host_values.h"

namespace loom {
namespace {

using test_util::host;

Symbol conv_net() {
  auto data = Symbol::Variable("data");
  auto c = Symbol::Op("Convolution", {data},
                      {{"kernel", "(3,3)"}, {"pad", "(1,1)"}, {"num_filter", "32"}}, "conv");
  return Symbol::Op("Activation", {c}, {{"act_type", "relu"}}, "relu");
}

void set(const NDArray& a, float scale, int seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(static_cast<size_t>(a.size()));
  for (auto& x : v) x = nd(rng);
  a.copy_from_host(v.data(), a.nbytes());
}

// Output of a fresh executor on the same argument values (nothing cached).
std::vector<float> reference(const Executor& ex) {
  BindOptions o;
  o.default_req = Req::kNull;
  std::map<std::string, NDArray> args;
  for (const auto& [k, v] : ex.arg_dict()) args[k] = v.copy();
  auto fresh = Executor::bind(conv_net(), args, {}, {}, o);
  fresh->forward(false);
  return host(fresh->outputs()[0]);
}

void expect_eq(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_FLOAT_EQ(a[i], b[i]) << what << " at " << i;
}

TEST(WeightCache, EveryWriteToTheWeightsIsSeen) {
  BindOptions o;
  o.default_req = Req::kNull;
  auto ex = Executor::simple_bind(conv_net(), {{"data", Shape{1, 16, 8, 8}}}, o);
  NDArray w = ex->arg_dict().at("conv_weight");
  set(ex->arg_dict().at("data"), 1.f, 1);
  set(w, 0.2f, 2);
  ex->forward(false);
  expect_eq(host(ex->outputs()[0]), reference(*ex), "first call");
  ex->forward(false);  // served from the cache
  expect_eq(host(ex->outputs()[0]), reference(*ex), "cached");
  EXPECT_FALSE(w.storage()->escaped());
  set(w, 0.2f, 3);  // copy_from_host
  ex->forward(false);
  expect_eq(host(ex->outputs()[0]), reference(*ex), "after copy_from_host");
  w.fill(0.01);
  ex->forward(false);
  expect_eq(host(ex->outputs()[0]), reference(*ex), "after fill");
  NDArray other(w.shape());
  set(other, 0.3f, 4);
  w.copy_from(other);
  ex->forward(false);
  expect_eq(host(ex->outputs()[0]), reference(*ex), "after copy_from");
  // A view of the same storage writes the same bytes.
  w.reshape(Shape{w.size()}).zero();
  ex->forward(false);
  expect_eq(host(ex->outputs()[0]), reference(*ex), "after zero through a view");
  // A raw pointer held across calls: the storage is escaped, nothing is cached any more.
  float* p = w.data<float>();
  EXPECT_TRUE(w.storage()->escaped());
  ex->forward(false);
  p[0] = 5.f;
  p[17] = -3.f;
  ex->forward(false);
  expect_eq(host(ex->outputs()[0]), reference(*ex), "after writes through a held pointer");
}

TEST(WeightCache, TrainingForwardAndUpdatesNeverUseStaleWeights) {
  auto ex = Executor::simple_bind(conv_net(), {{"data", Shape{2, 16, 6, 6}}});
  set(ex->arg_dict().at("data"), 1.f, 5);
  set(ex->arg_dict().at("conv_weight"), 0.2f, 6);
  ex->forward(false);
  auto before = host(ex->outputs()[0]);
  // Executor::forward with new inputs (copy_from) and a weight written by a kernel.
  ex->forward(true,
              {{"conv_weight", NDArray::full(ex->arg_dict().at("conv_weight").shape(), 0.05)}});
  ex->forward(false);
  auto after = host(ex->outputs()[0]);
  expect_eq(after, reference(*ex), "after forward with inputs");
  EXPECT_NE(before, after);
}

}  // namespace
}  // namespace loom
