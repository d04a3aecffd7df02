// Where the overlapped gradient allreduce runs in a data-parallel step (make_step with
// DistOptions::overlap): the executor's order must start the first bucket's collective while
// backward still has layers to go, and wait only after the whole backward. Checked from the
// executor's step timer (each step's name, in run order) and the communicator's counters at
// the end of each step, on any world size (loom_dist_tests runs alone and under mpirun -np 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "graph/step_builder.h"
#include "runtime/dist/communicator.h"
#include "runtime/executor.h"

namespace loom {
namespace {

Symbol three_layers() {
  Symbol h = Symbol::Variable("data");
  h = Symbol::Op("FullyConnected", {h}, {{"num_hidden", "32"}}, "fc1");
  h = Symbol::Op("Activation", {h}, {{"act_type", "tanh"}}, "act1");
  h = Symbol::Op("FullyConnected", {h}, {{"num_hidden", "32"}}, "fc2");
  h = Symbol::Op("Activation", {h}, {{"act_type", "tanh"}}, "act2");
  h = Symbol::Op("FullyConnected", {h}, {{"num_hidden", "4"}}, "fc3");
  return Symbol::Op("SoftmaxOutput", {h}, {}, "softmax");
}

struct Ran {
  std::string name;
  uint64_t allreduces;  // started so far, at the end of this step
};

std::vector<Ran> run_once(bool overlap) {
  dist::Communicator& comm = dist::world();
  StepOptions so;
  // Buckets (reverse topological order): {fc3_bias}, {fc3_weight}, {fc2_bias, fc2_weight},
  // {fc1_bias, fc1_weight}: first_bucket_mb is 10 bytes, bucket_mb about 400.
  so.dist = DistOptions{.bucket_mb = 4e-4, .first_bucket_mb = 1e-5, .overlap = overlap};
  Symbol step = make_step(three_layers(), OptimizerSpec{.name = "sgd", .momentum = 0.9}, so);
  BindOptions o;
  o.default_req = Req::kNull;
  auto ex = Executor::simple_bind(step, {{"data", Shape{8, 16}}}, o);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const auto& [n, a] : ex->arg_dict())
    for (int64_t i = 0; i < a.size(); ++i)
      a.data<float>()[i] = n == "softmax_label" ? 1.f : nd(rng);
  std::vector<Ran> ran;
  const uint64_t base = comm.stats().allreduce;
  ex->set_step_timer([&](const std::string& name, const std::string&, double) {
    ran.push_back({name, comm.stats().allreduce - base});
  });
  ex->forward(true);
  return ran;
}

size_t position(const std::vector<Ran>& ran, const std::string& name) {
  for (size_t i = 0; i < ran.size(); ++i)
    if (ran[i].name == name) return i;
  ADD_FAILURE() << "no step named " << name;
  return ran.size();
}

TEST(DistOverlap, BucketsStartDuringBackwardAndAreAwaitedAfterIt) {
  auto ran = run_once(true);
  const size_t fc3_bwd = position(ran, "fc3_backward"), fc2_bwd = position(ran, "fc2_backward"),
               fc1_bwd = position(ran, "fc1_backward"), wait = position(ran, "step_allreduce_wait");
  ASSERT_LT(wait, ran.size());
  // fc3's gradients come first: its two buckets are started before fc2's backward runs ...
  EXPECT_EQ(ran[fc3_bwd].allreduces, 0u);
  EXPECT_EQ(ran[fc2_bwd - 1].allreduces, 2u) << ran[fc2_bwd - 1].name;
  // ... fc2's bucket before fc1's backward, fc1's (the last) after it.
  EXPECT_EQ(ran[fc1_bwd - 1].allreduces, 3u) << ran[fc1_bwd - 1].name;
  EXPECT_EQ(ran[fc1_bwd].allreduces, 3u);
  EXPECT_EQ(ran.back().allreduces, 4u);
  // The wait runs after every backward step and before the update.
  for (size_t i = 0; i < ran.size(); ++i)
    if (ran[i].name.size() > 9 && ran[i].name.rfind("_backward") == ran[i].name.size() - 9)
      EXPECT_LT(i, wait) << ran[i].name;
  EXPECT_GT(position(ran, "step_update"), wait);
}

TEST(DistOverlap, BlockingPathCommunicatesAfterBackward) {
  auto ran = run_once(false);
  const size_t fc1_bwd = position(ran, "fc1_backward");
  ASSERT_LT(fc1_bwd, ran.size());
  EXPECT_EQ(ran[fc1_bwd].allreduces, 0u);
  EXPECT_EQ(ran[position(ran, "step_allreduce")].allreduces, 4u);
}

}  // namespace
}  // namespace loom
