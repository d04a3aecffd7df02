// Convolution -> BatchNorm(+ReLU) fusion in inference calls (LOOM_FUSE_CONV_BN): the
// convolution folds the BatchNorm into its weights and bias and writes the BatchNorm's
// output itself. Checked against the same graph bound with the fusion off: inference and
// training calls, fix_gamma, use_global_stats, channel counts no block divides, batch 1 and
// 3, and that later changes of gamma, moving statistics and weights are seen.
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
using test_util::set;

struct Cfg {
  int channels = 16;
  int batch = 1;
  int size = 8;
  bool fix_gamma = false;
  bool global_stats = false;
  bool bias = false;
};

std::string S(int v) { return std::to_string(v); }

// conv -> BN -> ReLU -> conv -> BN, + data, -> ReLU (a ResNet v1 basic block).
Symbol block(const Cfg& c) {
  auto conv = [&](const Symbol& x, const std::string& name) {
    return Symbol::Op("Convolution", {x},
                      {{"kernel", "(3,3)"},
                       {"pad", "(1,1)"},
                       {"num_filter", S(c.channels)},
                       {"no_bias", c.bias ? "False" : "True"}},
                      name);
  };
  auto bn = [&](const Symbol& x, const std::string& name) {
    return Symbol::Op("BatchNorm", {x},
                      {{"fix_gamma", c.fix_gamma ? "True" : "False"},
                       {"use_global_stats", c.global_stats ? "True" : "False"},
                       {"eps", "2e-5"}},
                      name);
  };
  auto relu = [](const Symbol& x, const std::string& name) {
    return Symbol::Op("Activation", {x}, {{"act_type", "relu"}}, name);
  };
  auto data = Symbol::Variable("data");
  auto b = relu(bn(conv(data, "conv1"), "bn1"), "relu1");
  b = bn(conv(b, "conv2"), "bn2");
  return relu(Symbol::Op("elemwise_add", {b, data}, {}, "plus"), "relu_out");
}


// Values: gamma, moving_var positive; weights scaled so activations stay O(1).
void init(Executor& ex, const Cfg& c, int seed) {
  for (const auto& [k, v] : ex.arg_dict()) {
    if (k.find("gamma") != std::string::npos)
      set(v, 0.5f, 2.f, seed++);
    else if (k.find("weight") != std::string::npos)
      set(v, -1.f / std::sqrt(9.f * c.channels), 1.f / std::sqrt(9.f * c.channels), seed++);
    else
      set(v, -1.f, 1.f, seed++);
  }
  for (const auto& [k, v] : ex.aux_dict())
    set(v, k.find("var") != std::string::npos ? 0.5f : -0.5f,
        k.find("var") != std::string::npos ? 2.f : 0.5f, seed++);
}

// An executor over the same arrays with the fusion off.
std::unique_ptr<Executor> unfused(const Symbol& sym, const Executor& ex) {
  setenv("LOOM_FUSE_CONV_BN", "0", 1);
  BindOptions o;
  o.default_req = Req::kNull;
  auto u = Executor::bind(sym, ex.arg_dict(), {}, ex.aux_dict(), o);
  unsetenv("LOOM_FUSE_CONV_BN");
  EXPECT_EQ(u->fused_affine_pairs(), 0u);
  return u;
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, const std::string& what,
                 float tol = 2e-4f) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tol * (1.f + std::fabs(b[i]))) << what << " at " << i;
}

void expect_same(const std::vector<float>& a, const std::vector<float>& b,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << what << " at " << i;
}

std::string name(const Cfg& c) {
  return "C" + S(c.channels) + " N" + S(c.batch) + " HW" + S(c.size) +
         (c.fix_gamma ? " fix_gamma" : "") + (c.global_stats ? " global_stats" : "") +
         (c.bias ? " bias" : "");
}

void check_block(const Cfg& c) {
  SCOPED_TRACE(name(c));
  Symbol sym = block(c);
  BindOptions o;
  o.default_req = Req::kNull;
  auto ex = Executor::simple_bind(sym, {{"data", Shape{c.batch, c.channels, c.size, c.size}}}, o);
  EXPECT_EQ(ex->fused_affine_pairs(), 2u);
  init(*ex, c, 7);
  auto ref = unfused(sym, *ex);
  for (int call = 0; call < 2; ++call) {  // the second call runs on cached folded weights
    ex->forward(false);
    ref->forward(false);
    expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "inference " + S(call));
  }
  // A training call normalises with batch statistics: the separate BatchNorm runs, exactly
  // (with use_global_stats it is the moving-statistics affine map again, fused).
  ex->forward(true);
  ref->forward(true);
  if (c.global_stats)
    expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "training forward");
  else
    expect_same(host(ex->outputs()[0]), host(ref->outputs()[0]), "training forward");
  // Changes of gamma, beta, moving statistics and weights between inference calls.
  auto args = ex->arg_dict();
  auto aux = ex->aux_dict();
  set(args.at("bn2_gamma"), 0.2f, 3.f, 101);
  set(aux.at("bn1_moving_var"), 0.1f, 4.f, 102);
  ex->forward(false);
  ref->forward(false);
  expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "after gamma / moving_var");
  set(args.at("bn1_beta"), -2.f, 2.f, 103);
  set(aux.at("bn2_moving_mean"), -1.f, 1.f, 104);
  set(args.at("conv2_weight"), -0.1f, 0.1f, 105);
  ex->forward(false);
  ref->forward(false);
  expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "after beta / mean / weight");
  // Writes through raw pointers: the BatchNorm values are read every call; escaped weights
  // are not cached (scaled on every call).
  aux.at("bn2_moving_var").data<float>()[0] = 3.f;
  args.at("bn1_gamma").data<float>()[c.channels - 1] = 0.25f;
  ex->forward(false);
  ref->forward(false);
  expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "after raw BN writes");
  args.at("conv1_weight").data<float>()[0] = 0.5f;
  ex->forward(false);
  ref->forward(false);
  expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "after raw weight write");
}

TEST(ConvFusion, ResidualBlockMatchesUnfused) {
  for (int channels : {16, 5, 24})
    for (int batch : {1, 3})
      for (bool fix_gamma : {false, true}) {
        Cfg c;
        c.channels = channels;
        c.batch = batch;
        c.fix_gamma = fix_gamma;
        check_block(c);
        if (HasFatalFailure()) return;
      }
}

TEST(ConvFusion, GlobalStatsBiasAndWinograd) {
  for (bool global_stats : {true, false})
    for (bool bias : {true, false}) {
      Cfg c;
      c.channels = 16;
      c.size = 28;  // 784 output positions: Winograd
      c.global_stats = global_stats;
      c.bias = bias;
      check_block(c);
      if (HasFatalFailure()) return;
    }
  Cfg c;
  c.channels = 5;
  c.batch = 3;
  c.size = 14;
  c.global_stats = true;
  c.fix_gamma = true;
  check_block(c);
}

// A training step (forward + backward, which updates the moving statistics) in an executor
// sharing the arrays, between inference calls of the fused one: the statistics change and
// the fused inference afterwards sees them; the training executor itself fuses nothing (its
// backward reads the convolution outputs) and matches the unfused training result.
TEST(ConvFusion, TrainingStepInBetween) {
  Cfg c;
  c.channels = 24;
  c.batch = 3;
  Symbol sym = block(c);
  BindOptions o;
  o.default_req = Req::kNull;
  auto ex = Executor::simple_bind(sym, {{"data", Shape{c.batch, c.channels, c.size, c.size}}}, o);
  ASSERT_EQ(ex->fused_affine_pairs(), 2u);
  init(*ex, c, 11);
  auto ref = unfused(sym, *ex);
  ex->forward(false);
  ref->forward(false);
  expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "before training");

  std::map<std::string, NDArray> grads;
  for (const auto& [k, v] : ex->arg_dict())
    if (k != "data") grads[k] = NDArray::zeros(v.shape());
  BindOptions to;
  to.default_req = Req::kWrite;
  auto train = Executor::bind(sym, ex->arg_dict(), grads, ex->aux_dict(), to);
  EXPECT_EQ(train->fused_affine_pairs(), 0u);
  // The unfused training result from copies of the arrays.
  std::map<std::string, NDArray> args2, aux2, grads2;
  for (const auto& [k, v] : ex->arg_dict()) args2[k] = v.copy();
  for (const auto& [k, v] : ex->aux_dict()) aux2[k] = v.copy();
  for (const auto& [k, v] : grads) grads2[k] = NDArray::zeros(v.shape());
  setenv("LOOM_FUSE_CONV_BN", "0", 1);
  auto train_ref = Executor::bind(sym, args2, grads2, aux2, to);
  unsetenv("LOOM_FUSE_CONV_BN");

  auto mv_before = host(ex->aux_dict().at("bn2_moving_var"));
  auto head = NDArray::zeros(train->outputs()[0].shape());
  head.fill(1.0);
  train->forward(true);
  train->backward({head});
  train_ref->forward(true);
  train_ref->backward({head});
  expect_same(host(train->outputs()[0]), host(train_ref->outputs()[0]), "training output");
  auto mv_after = host(ex->aux_dict().at("bn2_moving_var"));
  expect_same(mv_after, host(aux2.at("bn2_moving_var")), "moving var update");
  bool changed = false;
  for (size_t i = 0; i < mv_after.size(); ++i) changed = changed || mv_after[i] != mv_before[i];
  EXPECT_TRUE(changed) << "training did not update the moving statistics";

  ex->forward(false);
  ref->forward(false);
  expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "after training");
  // And a training forward of the inference executor itself is the unfused one.
  ex->forward(true);
  ref->forward(true);
  expect_same(host(ex->outputs()[0]), host(ref->outputs()[0]), "training forward");
  ex->forward(false);
  ref->forward(false);
  expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "inference again");
}

// Output 0 a graph output, or read by a second node: no fusion.
TEST(ConvFusion, OnlyWhenTheConvOutputIsPrivate) {
  auto data = Symbol::Variable("data");
  auto cv = Symbol::Op("Convolution", {data},
                       {{"kernel", "(3,3)"}, {"pad", "(1,1)"}, {"num_filter", "8"}}, "conv");
  auto bn = Symbol::Op("BatchNorm", {cv}, {{"fix_gamma", "False"}}, "bn");
  BindOptions o;
  o.default_req = Req::kNull;
  auto two = Executor::simple_bind(Symbol::Group({bn, cv}), {{"data", Shape{1, 8, 6, 6}}}, o);
  EXPECT_EQ(two->fused_affine_pairs(), 0u);
  auto sum = Symbol::Op("elemwise_add", {bn, cv}, {}, "plus");
  auto shared = Executor::simple_bind(sum, {{"data", Shape{1, 8, 6, 6}}}, o);
  EXPECT_EQ(shared->fused_affine_pairs(), 0u);
  auto one = Executor::simple_bind(bn, {{"data", Shape{1, 8, 6, 6}}}, o);
  EXPECT_EQ(one->fused_affine_pairs(), 1u);
}

// Two pre-activation (ResNet v2) units: BN -> ReLU -> conv -> BN -> ReLU -> conv, plus a
// 1x1 shortcut conv in the first, then the residual adds and a final BN -> ReLU. Each add's
// later operand is a convolution that can add itself onto the earlier operand's buffer.
Symbol v2_units(int channels) {
  auto conv = [&](const Symbol& x, const std::string& name, int k) {
    return Symbol::Op("Convolution", {x},
                      {{"kernel", "(" + S(k) + "," + S(k) + ")"},
                       {"pad", "(" + S(k / 2) + "," + S(k / 2) + ")"},
                       {"num_filter", S(channels)},
                       {"no_bias", "True"}},
                      name);
  };
  auto bnrelu = [&](const Symbol& x, const std::string& name) {
    auto b = Symbol::Op("BatchNorm", {x}, {{"fix_gamma", "False"}, {"eps", "2e-5"}}, name + "_bn");
    return Symbol::Op("Activation", {b}, {{"act_type", "relu"}}, name + "_relu");
  };
  auto data = Symbol::Variable("data");
  auto r1 = bnrelu(data, "u1a");
  auto b = conv(bnrelu(conv(r1, "u1_conv1", 3), "u1b"), "u1_conv2", 3);
  auto plus0 = Symbol::Op("elemwise_add", {b, conv(r1, "u1_sc", 1)}, {}, "plus0");
  b = conv(bnrelu(conv(bnrelu(plus0, "u2a"), "u2_conv1", 3), "u2b"), "u2_conv2", 3);
  auto plus1 = Symbol::Op("elemwise_add", {b, plus0}, {}, "plus1");
  // Pooling keeps the graph output's plain layout away from the blocked intermediates.
  return Symbol::Op("Pooling", {bnrelu(plus1, "out")},
                    {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "avg"}}, "pool");
}

TEST(ConvFusion, ResidualSumIntoTheOtherOperand) {
  for (int channels : {16, 5})
    for (int batch : {1, 3})
      for (int size : {8, 28}) {
        SCOPED_TRACE("C" + S(channels) + " N" + S(batch) + " HW" + S(size));
        Symbol sym = v2_units(channels);
        BindOptions o;
        o.default_req = Req::kNull;
        auto ex = Executor::simple_bind(sym, {{"data", Shape{batch, channels, size, size}}}, o);
        // Only where the output array has the convolution's layout (channel-blocked here).
        if (channels == 16) {
          EXPECT_EQ(ex->fused_sum_pairs(), 2u);
        }
        EXPECT_EQ(ex->fused_affine_pairs(), 2u);
        Cfg c;
        c.channels = channels;
        init(*ex, c, 3);
        setenv("LOOM_FUSE_CONV_SUM", "0", 1);
        auto ref = unfused(sym, *ex);
        unsetenv("LOOM_FUSE_CONV_SUM");
        EXPECT_EQ(ref->fused_sum_pairs(), 0u);
        for (int call = 0; call < 2; ++call) {
          ex->forward(false);
          ref->forward(false);
          expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "inference " + S(call));
        }
        ex->forward(true);
        ref->forward(true);
        expect_same(host(ex->outputs()[0]), host(ref->outputs()[0]), "training forward");
        set(ex->arg_dict().at("u2_conv2_weight"), -0.2f, 0.2f, 9);
        ex->forward(false);
        ref->forward(false);
        expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "after weight change");
        if (HasFatalFailure()) return;
      }
}

// add(conv(x), x): the other operand is the convolution's own input: no sum fusion.
TEST(ConvFusion, NoSumOverTheConvolutionInput) {
  auto data = Symbol::Variable("data");
  auto r = Symbol::Op("Activation", {data}, {{"act_type", "relu"}}, "r");
  auto cv = Symbol::Op("Convolution", {r},
                       {{"kernel", "(3,3)"}, {"pad", "(1,1)"}, {"num_filter", "8"}}, "conv");
  auto sum = Symbol::Op("elemwise_add", {cv, r}, {}, "plus");
  auto out = Symbol::Op("Activation", {sum}, {{"act_type", "relu"}}, "out");
  BindOptions o;
  o.default_req = Req::kNull;
  auto ex = Executor::simple_bind(out, {{"data", Shape{1, 8, 6, 6}}}, o);
  EXPECT_EQ(ex->fused_sum_pairs(), 0u);
}

}  // namespace
}  // namespace loom
