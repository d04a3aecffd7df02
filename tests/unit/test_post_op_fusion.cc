// Inference post-op fusion (runtime/fusion.cc): a Convolution applies the BatchNorm, the
// residual add and the activation after it as one oneDNN primitive. Every case is checked
// against the same arrays bound with the fusions off (LOOM_FUSE_CONV_BN/SUM/ACT=0), in
// blocked and plain layouts, batch 1 and 3; PReLU (per channel and shared slope) in
// channel-blocked layouts against the plain layout, forward and backward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>

#include "runtime/cpu/dnnl_util.h"
#include "runtime/executor.h"
#include "tests/unit/host_values.h"

namespace loom {
namespace {

using test_util::host;
using test_util::set;

std::string S(int v) { return std::to_string(v); }

Symbol conv(const Symbol& x, const std::string& name, int filters, int k = 3, int group = 1) {
  return Symbol::Op("Convolution", {x},
                    {{"kernel", "(" + S(k) + "," + S(k) + ")"},
                     {"pad", "(" + S(k / 2) + "," + S(k / 2) + ")"},
                     {"num_filter", S(filters)},
                     {"num_group", S(group)},
                     {"no_bias", "True"}},
                    name);
}
Symbol bn(const Symbol& x, const std::string& name) {
  return Symbol::Op("BatchNorm", {x}, {{"fix_gamma", "False"}, {"eps", "2e-5"}}, name);
}
Symbol relu(const Symbol& x, const std::string& name) {
  return Symbol::Op("Activation", {x}, {{"act_type", "relu"}}, name);
}
Symbol prelu(const Symbol& x, const std::string& name, const Symbol* gamma = nullptr) {
  std::vector<Symbol> in{x};
  if (gamma) in.push_back(*gamma);
  return Symbol::Op("LeakyReLU", in, {{"act_type", "prelu"}}, name);
}
Symbol pool(const Symbol& x) {
  // Keeps the graph output's plain layout away from the blocked intermediates.
  return Symbol::Op("Pooling", {x},
                    {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "avg"}}, "pool");
}

// ResNet v1 basic block after a stem, so the shortcut is an intermediate:
// x = relu(bn(conv(data))); out = relu(bn(conv(relu(bn(conv(x))))) + x).
Symbol v1_block(int c) {
  auto x = relu(bn(conv(Symbol::Variable("data"), "stem", c), "stem_bn"), "stem_relu");
  auto b = relu(bn(conv(x, "c1", c), "bn1"), "relu1");
  b = bn(conv(b, "c2", c), "bn2");
  return pool(relu(Symbol::Op("elemwise_add", {b, x}, {}, "plus"), "relu_out"));
}

// MobileFaceNet-style: conv-BN-PReLU, depthwise conv-BN-PReLU (one shared slope),
// conv-BN + shortcut, conv-leaky.
Symbol mfn_block(int c) {
  auto x = prelu(bn(conv(Symbol::Variable("data"), "stem", c), "stem_bn"), "stem_prelu");
  auto shared = Symbol::Variable("dw_gamma");
  auto b = prelu(bn(conv(x, "dw", c, 3, c), "dw_bn"), "dw_prelu", &shared);
  b = bn(conv(b, "proj", c, 1), "proj_bn");
  auto s = Symbol::Op("elemwise_add", {b, x}, {}, "plus");
  auto l = Symbol::Op("LeakyReLU", {conv(s, "last", c, 1)},
                      {{"act_type", "leaky"}, {"slope", "0.1"}}, "leaky");
  return pool(l);
}

void init(Executor& ex, int seed) {
  for (const auto& [k, v] : ex.arg_dict()) {
    if (k.find("gamma") != std::string::npos)
      set(v, 0.05f, 0.5f, seed++);  // BatchNorm scales and PReLU slopes alike
    else if (k.find("weight") != std::string::npos)
      set(v, -0.3f, 0.3f, seed++);
    else
      set(v, -1.f, 1.f, seed++);
  }
  for (const auto& [k, v] : ex.aux_dict())
    set(v, k.find("var") != std::string::npos ? 0.5f : -0.5f,
        k.find("var") != std::string::npos ? 2.f : 0.5f, seed++);
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, const std::string& what,
                 float tol = 2e-4f) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], tol * (1.f + std::fabs(b[i]))) << what << " at " << i;
}

// The same arrays bound with the given switches off.
std::unique_ptr<Executor> bind_with_off(const Symbol& sym, const Executor& ex,
                                        const std::vector<const char*>& off) {
  for (auto* v : off) setenv(v, "0", 1);
  BindOptions o;
  o.default_req = Req::kNull;
  auto u = Executor::bind(sym, ex.arg_dict(), {}, ex.aux_dict(), o);
  for (auto* v : off) unsetenv(v);
  return u;
}

void check_against_unfused(const Symbol& sym, int c, int batch, size_t want_sum, size_t want_act) {
  SCOPED_TRACE("C" + S(c) + " N" + S(batch));
  BindOptions o;
  o.default_req = Req::kNull;
  auto ex = Executor::simple_bind(sym, {{"data", Shape{batch, c, 8, 8}}}, o);
  // Sums only where the output array has the convolution's layout (blocked: C = 16).
  if (c == 16) {
    EXPECT_EQ(ex->fused_sum_pairs(), want_sum);
  }
  EXPECT_GE(ex->fused_activation_pairs(), want_act);
  init(*ex, 5);
  auto all_off = bind_with_off(
      sym, *ex,
      {"LOOM_FUSE_CONV_BN", "LOOM_FUSE_CONV_SUM", "LOOM_FUSE_CONV_ACT", "LOOM_FUSE_EPILOGUE"});
  EXPECT_EQ(all_off->fused_affine_pairs() + all_off->fused_sum_pairs() +
                all_off->fused_activation_pairs(),
            0u);
  auto act_off = bind_with_off(sym, *ex, {"LOOM_FUSE_CONV_ACT"});
  EXPECT_EQ(act_off->fused_activation_pairs(), 0u);
  for (int call = 0; call < 2; ++call) {  // the second call runs on cached folded weights
    ex->forward(false);
    all_off->forward(false);
    act_off->forward(false);
    const auto want = host(all_off->outputs()[0]);
    expect_near(host(ex->outputs()[0]), want, "all fusions, call " + S(call));
    expect_near(host(act_off->outputs()[0]), want, "no activation post-ops, call " + S(call));
  }
  // Changed slopes, BatchNorm statistics and weights are seen.
  for (const auto& [k, v] : ex->arg_dict())
    if (k != "data") set(v, 0.05f, 0.4f, 11 + static_cast<int>(k.size()));
  ex->forward(false);
  all_off->forward(false);
  expect_near(host(ex->outputs()[0]), host(all_off->outputs()[0]), "after changes");
  // Training calls run the add unfused, and give the unfused graph's result.
  ex->forward(true);
  all_off->forward(true);
  expect_near(host(ex->outputs()[0]), host(all_off->outputs()[0]), "training call");
}

TEST(PostOpFusion, ConvBatchNormSumReluIsOnePrimitive) {
  for (int c : {16, 5})
    for (int batch : {1, 3}) {
      check_against_unfused(v1_block(c), c, batch, 1, c == 16 ? 1 : 0);
      if (HasFatalFailure()) return;
    }
}

TEST(PostOpFusion, MobileFaceNetStylePreluAndLeaky) {
  // The leaky ReLU after `last` is always an eltwise post-op; PReLU only where oneDNN's
  // kernels take a prelu post-op (not oneDNN 2.6's JIT convolutions: then it runs alone).
  for (int c : {16, 5})
    for (int batch : {1, 3}) {
      check_against_unfused(mfn_block(c), c, batch, 1, 1);
      if (HasFatalFailure()) return;
    }
}

// PReLU on channel-blocked data (between convolutions) equals the plain layout's, forward
// and backward (data and slope gradients), per-channel and shared slopes.
TEST(PostOpFusion, PreluInBlockedLayoutMatchesPlain) {
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "shared slope" : "per-channel slopes");
    auto g = Symbol::Variable("g");
    auto x = conv(Symbol::Variable("data"), "c0", 16);
    auto y = prelu(x, "p", shared ? &g : nullptr);
    auto sym = Symbol::Op("sum", {pool(conv(y, "c1", 16))}, {}, "loss");
    sym = Symbol::Op("MakeLoss", {sym}, {}, "ml");
    std::map<std::string, Shape> shapes{{"data", Shape{2, 16, 6, 6}}};
    if (shared) shapes["g"] = Shape{1};
    auto blocked = Executor::simple_bind(sym, shapes);
    setenv("LOOM_LAYOUT_PROPAGATION", "0", 1);
    auto plain = Executor::simple_bind(sym, shapes);
    unsetenv("LOOM_LAYOUT_PROPAGATION");
    int seed = 1;
    for (const auto& [k, v] : blocked->arg_dict()) {
      set(v, k == "p_gamma" || k == "g" ? 0.1f : -0.5f, 0.5f, seed++);
      plain->arg_dict().at(k).copy_from(v);
    }
    for (auto* ex : {blocked.get(), plain.get()}) {
      ex->forward(true);
      ex->backward();
    }
    expect_near(host(blocked->outputs()[0]), host(plain->outputs()[0]), "loss");
    for (const auto& [k, v] : plain->grad_dict())
      expect_near(host(blocked->grad_dict().at(k)), host(v), "gradient of " + k);
  }
}

// A 3x3 layer on a map too small for the forward's Winograd runs its inference post-op
// primitive on oneDNN's Winograd kernels where the CPU has them (LOOM_CONV_WINOGRAD_INFER=0:
// direct), with the unfused direct result within float rounding.
TEST(PostOpFusion, SmallMapsUseWinograd2x3InInference) {
  auto x = relu(bn(conv(Symbol::Variable("data"), "w23", 48), "w23_bn"), "w23_relu");
  auto sym = pool(x);
  // Batch 1: the 2x3 kernel; batch 16 (where oneDNN offers 4x3 tiles): direct.
  for (auto [batch, hw, wanted] : {std::tuple{1, 6, true}, std::tuple{16, 7, false}})
    for (bool on : {true, false}) {
      SCOPED_TRACE(std::string(on ? "on, batch " : "LOOM_CONV_WINOGRAD_INFER=0, batch ") +
                   std::to_string(batch));
      if (!on) setenv("LOOM_CONV_WINOGRAD_INFER", "0", 1);
      BindOptions o;
      o.default_req = Req::kNull;
      auto ex = Executor::simple_bind(sym, {{"data", Shape{batch, 48, hw, hw}}}, o);
      unsetenv("LOOM_CONV_WINOGRAD_INFER");
      EXPECT_EQ(ex->fused_affine_pairs(), 1u);
      // The latest line recorded for this layer's post-op primitive (the record keeps 256).
      const std::string desc = "Convolution " + Shape{batch, 48, hw, hw}.str() + " w(48, 48, 3, 3)";
      std::string line;
      for (const auto& l : dnnl_util::recorded_impls())
        if (l.find(desc) == 0 && l.find("+affine+relu") != std::string::npos) line = l;
      ASSERT_FALSE(line.empty()) << desc;
      EXPECT_EQ(line.find("wino") != std::string::npos, wanted && on && dnnl_util::has_winograd())
          << line;
      init(*ex, 3);
      auto ref = bind_with_off(sym, *ex, {"LOOM_FUSE_CONV_BN", "LOOM_FUSE_EPILOGUE"});
      ex->forward(false);
      ref->forward(false);
      expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "inference", 1e-3f);
    }
}

// Weight-bound layers (7x7 maps, 128 channels, batch 1) run their inference primitive on
// oneDNN's brgemm kernels in the activation layout they prefer where oneDNN has them
// (AVX-512), with reorders from and to Loom's layout, the residual sum included;
// LOOM_CONV_OWN_LAYOUT=0 keeps Loom's layouts. Both equal the unfused graph. (Winograd 2x3,
// which small 3x3 layers would take first, is off.)
TEST(PostOpFusion, WeightBoundLayersUseTheirOwnLayout) {
  const int c = 128;
  auto x = relu(bn(conv(Symbol::Variable("data"), "wb0", c), "wb0_bn"), "wb0_relu");
  auto b = relu(bn(conv(x, "wb1", c), "wb1_bn"), "wb1_relu");
  b = bn(conv(b, "wb2", c), "wb2_bn");
  auto sym = pool(relu(Symbol::Op("elemwise_add", {b, x}, {}, "plus"), "out_relu"));
  const Shape data{1, c, 7, 7};
  for (bool on : {true, false}) {
    SCOPED_TRACE(on ? "default" : "LOOM_CONV_OWN_LAYOUT=0");
    if (!on) setenv("LOOM_CONV_OWN_LAYOUT", "0", 1);
    setenv("LOOM_CONV_WINOGRAD_INFER", "0", 1);
    BindOptions o;
    o.default_req = Req::kNull;
    auto ex = Executor::simple_bind(sym, {{"data", data}}, o);
    unsetenv("LOOM_CONV_OWN_LAYOUT");
    unsetenv("LOOM_CONV_WINOGRAD_INFER");
    EXPECT_EQ(ex->fused_affine_pairs(), 3u);
    EXPECT_EQ(ex->fused_sum_pairs(), 1u);
    const std::string desc = "Convolution " + data.str() + " w(128, 128, 3, 3)";
    std::string sum_line;
    for (const auto& l : dnnl_util::recorded_impls())
      if (l.find(desc) == 0 && l.find("+affine+sum+relu") != std::string::npos) sum_line = l;
    ASSERT_FALSE(sum_line.empty()) << desc;
    // oneDNN 2.6 has brgemm convolutions for AVX-512 only; a later oneDNN may have more.
    if (on && dnnl_util::isa_has_avx512()) {
      EXPECT_NE(sum_line.find("brg"), std::string::npos) << sum_line;
    }
    if (!on) {
      EXPECT_EQ(sum_line.find("brg"), std::string::npos) << sum_line;
    }
    init(*ex, 7);
    auto ref = bind_with_off(sym, *ex, {"LOOM_FUSE_CONV_BN", "LOOM_FUSE_CONV_SUM",
                                        "LOOM_FUSE_CONV_ACT", "LOOM_FUSE_EPILOGUE"});
    for (int call = 0; call < 2; ++call) {
      ex->forward(false);
      ref->forward(false);
      expect_near(host(ex->outputs()[0]), host(ref->outputs()[0]), "call " + S(call), 1e-3f);
    }
  }
}

}  // namespace
}  // namespace loom
