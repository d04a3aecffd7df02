// Strided 1x1 convolutions in inference as a subsample and a stride-1 1x1 primitive
// (ops/nn/conv_subsample.h, LOOM_CONV_SUBSAMPLE_1X1): the subsample copy against direct
// indexing; graphs of a strided 1x1 Convolution with bias, BatchNorm, a residual sum with a
// second strided 1x1 (a projection shortcut) and ReLU/leaky, on plain arrays against a naive
// reference in double, and between 1x1 layers (channel-blocked activations where the block
// divides the channels) against the same arrays bound with the path off; odd and even map
// sizes, strides 2 and 3, batch 1 and 3. The implementation records show the path is taken.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ops/nn/conv_subsample.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/executor.h"
#include "tests/unit/host_values.h"

namespace loom {
namespace {

using test_util::host;
using test_util::set;

std::string S(int64_t v) { return std::to_string(v); }

TEST(ConvSubsample, CopiesEveryStrideRowAndColumn) {
  for (int block : {1, 8, 16})
    for (int64_t h : {1, 7})
      for (int64_t w : {5, 8})
        for (int64_t sh : {1, 2, 3})
          for (int64_t sw : {2, 3}) {
            const int64_t nb = 3, oh = (h - 1) / sh + 1, ow = (w - 1) / sw + 1;
            std::vector<float> x(static_cast<size_t>(nb * h * w * block));
            for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
            std::vector<float> y(static_cast<size_t>(nb * oh * ow * block), -1.f);
            nn::SubsampleConv1x1::subsample(x.data(), y.data(), nb, h, w, oh, ow, sh, sw, block);
            for (int64_t i = 0; i < nb; ++i)
              for (int64_t r = 0; r < oh; ++r)
                for (int64_t q = 0; q < ow; ++q)
                  for (int j = 0; j < block; ++j)
                    ASSERT_EQ(y[static_cast<size_t>(((i * oh + r) * ow + q) * block + j)],
                              x[static_cast<size_t>(((i * h + r * sh) * w + q * sw) * block + j)])
                        << "block " << block << " h" << h << " w" << w << " s" << sh << sw;
          }
}

Symbol conv(const Symbol& x, const std::string& name, int k, int stride, bool bias) {
  return Symbol::Op("Convolution", {x},
                    {{"kernel", "(1,1)"},
                     {"stride", "(" + S(stride) + "," + S(stride) + ")"},
                     {"num_filter", S(k)},
                     {"no_bias", bias ? "False" : "True"}},
                    name);
}
Symbol act(const Symbol& x, const std::string& type) {
  if (type == std::string("relu"))
    return Symbol::Op("Activation", {x}, {{"act_type", "relu"}}, "act");
  return Symbol::Op("LeakyReLU", {x}, {{"act_type", "leaky"}, {"slope", "0.1"}}, "act");
}
// act(BN(conv_a(x)) + conv_b(x)), both strided 1x1: a downsampling bottleneck's first layer
// and its projection shortcut in one.
Symbol block_net(const Symbol& x, int k, int stride, const std::string& type) {
  auto a = Symbol::Op("BatchNorm", {conv(x, "ca", k, stride, true)},
                      {{"fix_gamma", "False"}, {"eps", "1e-3"}}, "bn");
  return act(Symbol::Op("elemwise_add", {a, conv(x, "cb", k, stride, false)}, {}, "plus"), type);
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], 2e-4f * (1.f + std::fabs(b[i]))) << what << " at " << i;
}
// How many layers with input `in` recorded the path (with `what` in the post-op label).
size_t subsample_lines(const std::string& in, const std::string& what = "") {
  size_t n = 0;
  for (const auto& line : dnnl_util::recorded_impls())
    if (line.find(in) != std::string::npos && line.find("subsample_1x1") != std::string::npos &&
        line.find(what) != std::string::npos)
      ++n;
  return n;
}
void fill(Executor& ex) {
  int seed = 5;
  for (const auto& [name, a] : ex.arg_dict())
    set(a, name.find("gamma") != std::string::npos ? 0.5f : -0.5f, 0.5f, seed++);
  for (const auto& [name, a] : ex.aux_dict())
    set(a, name.find("var") != std::string::npos ? 0.5f : -0.5f,
        name.find("var") != std::string::npos ? 2.f : 0.5f, seed++);
}

// A map height no other bind of this process used, so the recorded lines name this one.
int64_t fresh_height() {
  static int64_t next = 17;
  return next++;
}

TEST(ConvSubsampleInGraph, MatchesNaiveReference) {
  for (auto [c, k, stride, batch, type] : {std::tuple{20, 12, 2, 1, "relu"},
                                           {32, 16, 2, 3, "leaky"},
                                           {7, 5, 3, 3, "relu"},
                                           {16, 24, 2, 1, "leaky"}}) {
    const int64_t h = fresh_height(), w = h % 2 ? h + 1 : h + 3;
    SCOPED_TRACE("C" + S(c) + " K" + S(k) + " s" + S(stride) + " N" + S(batch) + " " + type + " " +
                 S(h) + "x" + S(w));
    const Symbol sym = block_net(Symbol::Variable("data"), k, stride, type);
    BindOptions o;
    o.default_req = Req::kNull;
    setenv("LOOM_CONV_SUBSAMPLE_1X1", "1", 1);
    auto ex = Executor::simple_bind(sym, {{"data", Shape{batch, c, h, w}}}, o);
    unsetenv("LOOM_CONV_SUBSAMPLE_1X1");
    // Both layers take it, the one the add is fused into with the sum.
    const std::string in =
        "Convolution (" + S(batch) + ", " + S(c) + ", " + S(h) + ", " + S(w) + ")";
    EXPECT_EQ(ex->fused_sum_pairs(), 1u);
    EXPECT_GE(subsample_lines(in, "+sum"), 1u);
    EXPECT_GE(subsample_lines(in), 2u);
    fill(*ex);
    ex->forward(false);
    const auto x = host(ex->arg_dict().at("data")), wa = host(ex->arg_dict().at("ca_weight")),
               ba = host(ex->arg_dict().at("ca_bias")), wb = host(ex->arg_dict().at("cb_weight")),
               g = host(ex->arg_dict().at("bn_gamma")), be = host(ex->arg_dict().at("bn_beta")),
               mm = host(ex->aux_dict().at("bn_moving_mean")),
               mv = host(ex->aux_dict().at("bn_moving_var"));
    const int64_t oh = (h - 1) / stride + 1, ow = (w - 1) / stride + 1;
    std::vector<float> want(static_cast<size_t>(batch * k * oh * ow));
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t f = 0; f < k; ++f)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t z = 0; z < ow; ++z) {
            double sa = ba[f], sb = 0;
            for (int64_t ch = 0; ch < c; ++ch) {
              const double v = x[((n * c + ch) * h + y * stride) * w + z * stride];
              sa += v * wa[f * c + ch];
              sb += v * wb[f * c + ch];
            }
            double v = (sa - mm[f]) / std::sqrt(double{mv[f]} + 1e-3) * g[f] + be[f] + sb;
            if (v < 0) v *= type == std::string("relu") ? 0.0 : 0.1;
            want[((n * k + f) * oh + y) * ow + z] = static_cast<float>(v);
          }
    expect_near(host(ex->outputs()[0]), want, "reference");
    if (HasFatalFailure()) return;
  }
}

// Between 1x1 layers, so the activations have the executor's (blocked) layout.
TEST(ConvSubsampleInGraph, MatchesPathOffBetweenLayers) {
  for (auto [c, k, stride, batch, type] : {std::tuple{32, 48, 2, 1, "relu"},
                                           {32, 16, 2, 3, "leaky"},
                                           {24, 40, 2, 3, "relu"},
                                           {20, 12, 3, 1, "leaky"}}) {
    const int64_t h = fresh_height(), w = h + 2;
    SCOPED_TRACE("C" + S(c) + " K" + S(k) + " s" + S(stride) + " N" + S(batch) + " " + type + " " +
                 S(h) + "x" + S(w));
    auto x = Symbol::Op("Activation", {conv(Symbol::Variable("data"), "pre", c, 1, true)},
                        {{"act_type", "relu"}}, "pre_relu");
    const Symbol sym =
        Symbol::Op("Pooling", {conv(block_net(x, k, stride, type), "post", 16, 1, true)},
                   {{"kernel", "(1,1)"}, {"global_pool", "True"}, {"pool_type", "avg"}}, "pool");
    BindOptions o;
    o.default_req = Req::kNull;
    setenv("LOOM_CONV_SUBSAMPLE_1X1", "1", 1);
    auto ex = Executor::simple_bind(sym, {{"data", Shape{batch, 8, h, w}}}, o);
    unsetenv("LOOM_CONV_SUBSAMPLE_1X1");
    EXPECT_GT(
        subsample_lines("Convolution (" + S(batch) + ", " + S(c) + ", " + S(h) + ", " + S(w) + ")"),
        0u);
    fill(*ex);
    setenv("LOOM_CONV_SUBSAMPLE_1X1", "0", 1);
    auto plain = Executor::bind(sym, ex->arg_dict(), {}, ex->aux_dict(), o);
    unsetenv("LOOM_CONV_SUBSAMPLE_1X1");
    for (int call = 0; call < 2; ++call) {  // the second call on the cached weights
      ex->forward(false);
      plain->forward(false);
      expect_near(host(ex->outputs()[0]), host(plain->outputs()[0]), "call " + S(call));
    }
    // Changed weights and BatchNorm statistics are seen.
    set(ex->arg_dict().at("ca_weight"), -0.3f, 0.3f, 41);
    set(ex->arg_dict().at("cb_weight"), -0.3f, 0.3f, 42);
    set(ex->aux_dict().at("bn_moving_mean"), -0.2f, 0.2f, 43);
    ex->forward(false);
    plain->forward(false);
    expect_near(host(ex->outputs()[0]), host(plain->outputs()[0]), "after changes");
    if (HasFatalFailure()) return;
  }
}

// By default the path replaces only oneDNN's strided brgemm 1x1 kernels (weight-heavy layers
// with AVX-512, where Convolution runs its own activation layout): no strided 1x1 layer
// records a brgemm kernel, and the results match the path off.
TEST(ConvSubsampleInGraph, DefaultReplacesStridedBrgemm) {
  for (int batch : {1, 3}) {
    const int64_t h = 5 + batch, w = 6;
    SCOPED_TRACE("N" + S(batch));
    auto x = Symbol::Op("Activation", {conv(Symbol::Variable("data"), "pre", 256, 1, true)},
                        {{"act_type", "relu"}}, "pre_relu");
    const Symbol sym = conv(block_net(x, 512, 2, "relu"), "post", 16, 1, true);
    BindOptions o;
    o.default_req = Req::kNull;
    unsetenv("LOOM_CONV_SUBSAMPLE_1X1");
    auto ex = Executor::simple_bind(sym, {{"data", Shape{batch, 8, h, w}}}, o);
    const auto lines = dnnl_util::recorded_impls();
    const std::string in = "Convolution (" + S(batch) + ", 256, " + S(h) + ", " + S(w) + ")";
    for (size_t i = lines.size() - std::min(lines.size(), size_t{16}); i < lines.size(); ++i)
      if (lines[i].find(in) != std::string::npos && lines[i].find("+") != std::string::npos) {
        EXPECT_EQ(lines[i].find("brg"), std::string::npos) << lines[i];
      }
    fill(*ex);
    setenv("LOOM_CONV_SUBSAMPLE_1X1", "0", 1);
    auto plain = Executor::bind(sym, ex->arg_dict(), {}, ex->aux_dict(), o);
    unsetenv("LOOM_CONV_SUBSAMPLE_1X1");
    ex->forward(false);
    plain->forward(false);
    expect_near(host(ex->outputs()[0]), host(plain->outputs()[0]), "default vs off");
  }
}

}  // namespace
}  // namespace loom
