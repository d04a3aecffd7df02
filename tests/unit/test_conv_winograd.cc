// Convolution picks oneDNN's Winograd kernels for large 3x3 stride-1 convolutions where the
// CPU has them; its outputs and gradients must match direct convolution
// (LOOM_CONV_WINOGRAD=0) to float rounding, with layout propagation on. Loom's own inference
// Winograd F(4x4, 3x3) (ops/nn/winograd.h) must match direct convolution with the fused
// BatchNorm, residual sum and activation, on partial tiles, after weight changes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "ops/nn/winograd.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/executor.h"
#include "tests/unit/host_values.h"

namespace loom {
namespace {

using test_util::host;
using test_util::set;

Symbol net() {
  auto data = Symbol::Variable("data");
  auto c1 = Symbol::Op("Convolution", {data},
                       {{"kernel", "(3,3)"},
                        {"pad", "(1,1)"},
                        {"num_filter", "32"},
                        {"no_bias", "True"}},  // BatchNorm makes a bias gradient exactly 0
                       "c1");
  auto bn = Symbol::Op("BatchNorm", {c1}, {{"fix_gamma", "False"}}, "bn");
  auto r = Symbol::Op("Activation", {bn}, {{"act_type", "relu"}}, "relu");
  auto c2 = Symbol::Op(
      "Convolution", {r},
      {{"kernel", "(3,3)"}, {"pad", "(1,1)"}, {"num_filter", "32"}, {"no_bias", "True"}}, "c2");
  return Symbol::Op("MakeLoss", {Symbol::Op("elemwise_add", {c2, r}, {}, "plus")}, {}, "loss");
}

struct Result {
  std::vector<std::vector<float>> arrays;
};

Result run(bool winograd) {
  if (!winograd) setenv("LOOM_CONV_WINOGRAD", "0", 1);
  auto ex = Executor::simple_bind(net(), {{"data", Shape{2, 16, 24, 24}}});
  unsetenv("LOOM_CONV_WINOGRAD");
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& [name, a] : ex->arg_dict()) {
    std::vector<float> v(static_cast<size_t>(a.size()));
    for (auto& x : v) x = name == "data" ? nd(rng) : 0.2f * nd(rng);
    if (name == "bn_gamma")
      for (auto& x : v) x = 1.f;
    a.copy_from_host(v.data(), a.nbytes());
  }
  ex->aux_dict().at("bn_moving_var").fill(1.0);
  ex->forward(true);
  ex->backward();
  Result r;
  auto add = [&](const NDArray& a) {
    std::vector<float> v(static_cast<size_t>(a.size()));
    a.copy_to_host(v.data(), a.nbytes());
    r.arrays.push_back(v);
  };
  for (const auto& o : ex->outputs()) add(o);
  for (const auto& g : ex->grad_arrays())
    if (!g.is_none()) add(g);
  ex->forward(false);
  add(ex->outputs()[0]);
  return r;
}

TEST(ConvWinograd, MatchesDirectConvolution) {
  Result direct = run(false), wino = run(true);
  bool used = false;
  for (const auto& line : dnnl_util::recorded_impls())
    used = used || (line.find("(2, 16, 24, 24)") != std::string::npos &&
                    line.find("wino") != std::string::npos);
  // Winograd runs exactly where oneDNN has it for this CPU (AVX-512 in oneDNN 2.x; with
  // ONEDNN_MAX_CPU_ISA=AVX2 or on an AVX2-only CPU it does not, and direct serves).
  EXPECT_EQ(used, dnnl_util::has_winograd())
      << "ISA " << dnnl_util::isa_name() << ": the 24x24 convolution "
      << (used ? "ran" : "did not run") << " Winograd kernels";
#if DNNL_VERSION_MAJOR == 2
  EXPECT_EQ(dnnl_util::has_winograd(), dnnl_util::isa_has_avx512()) << dnnl_util::isa_name();
#endif
  ASSERT_EQ(direct.arrays.size(), wino.arrays.size());
  for (size_t k = 0; k < direct.arrays.size(); ++k) {
    const auto &a = direct.arrays[k], &b = wino.arrays[k];
    ASSERT_EQ(a.size(), b.size());
    double scale = 0;
    for (float x : a) scale = std::max(scale, static_cast<double>(std::abs(x)));
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(b[i], a[i], 1e-4 * std::abs(a[i]) + 1e-5 * scale)
          << "array " << k << " element " << i;
  }
}

// ---- Loom's own inference Winograd ----

std::string S(int64_t v) { return std::to_string(v); }
Symbol conv(const Symbol& x, const std::string& name, int filters, int pad) {
  return Symbol::Op("Convolution", {x},
                    {{"kernel", "(3,3)"},
                     {"pad", "(" + S(pad) + "," + S(pad) + ")"},
                     {"num_filter", S(filters)},
                     {"no_bias", name == "c1" ? "False" : "True"}},
                    name);
}
Symbol bn(const Symbol& x, const std::string& name) {
  return Symbol::Op("BatchNorm", {x}, {{"fix_gamma", "False"}, {"eps", "2e-5"}}, name);
}
Symbol relu(const Symbol& x, const std::string& name) {
  return Symbol::Op("Activation", {x}, {{"act_type", "relu"}}, name);
}

// A stem (plain input, so not Winograd), then a ResNet v1 block whose two 3x3 layers run on
// channel-blocked data: c1 (32 -> 16, a bias, BatchNorm, ReLU), c2 (16 -> 32, BatchNorm, the
// residual sum, ReLU); then c3 (pad 0, a leaky ReLU), average pooling to a plain output.
Symbol own_net() {
  auto x = relu(bn(conv(Symbol::Variable("data"), "stem", 32, 1), "stem_bn"), "stem_relu");
  auto b = relu(bn(conv(x, "c1", 16, 1), "bn1"), "relu1");
  b = bn(conv(b, "c2", 32, 1), "bn2");
  auto y = relu(Symbol::Op("elemwise_add", {b, x}, {}, "plus"), "relu_out");
  auto l = Symbol::Op("LeakyReLU", {conv(y, "c3", 16, 0)},
                      {{"act_type", "leaky"}, {"slope", "0.1"}}, "leaky");
  return Symbol::Op("Pooling", {l},
                    {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "avg"}}, "pool");
}

// Winograd F(4x4, 3x3) rounds differently from direct convolution: relative errors of a
// few 1e-6 per transform stage; 2e-4 of the output's magnitude bounds three layers.
void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 0;
  for (float x : want) scale = std::max(scale, static_cast<double>(std::abs(x)));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-4 * scale) << what << " at " << i;
}

// WinogradConv alone against a naive convolution on channel-blocked arrays: bias, scale,
// residual sum and leaky activation, partial tiles, both channel blocks.
TEST(ConvWinograd, OwnKernelMatchesNaiveConvolution) {
  // Chunks of 5 tiles (the last one partial) against the whole batch at once.
  for (auto [block, chunk] :
       {std::pair{8, 0}, std::pair{16, 0}, std::pair{8, 5}, std::pair{16, 5}}) {
    nn::WinogradShape s{2, 16, 7, 9, 32, 7, 9, 1, 1, block};
    SCOPED_TRACE("block " + S(block) + " chunk " + S(chunk));
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    auto draw = [&](size_t n) {
      std::vector<float> v(n);
      for (auto& x : v) x = d(rng);
      return v;
    };
    const auto src = draw(s.n * s.c * s.h * s.w), w = draw(s.k * s.c * 9), bias = draw(s.k),
               scale = draw(s.k), old = draw(s.n * s.k * s.oh * s.ow);
    // Blocked index of (n, c, y, x) with `ch` channels.
    auto at = [&](int64_t ch, int64_t h, int64_t wd, int64_t n, int64_t c, int64_t y, int64_t x) {
      return (((n * (ch / block) + c / block) * h + y) * wd + x) * block + c % block;
    };
    std::vector<float> want(old.size());
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t k = 0; k < s.k; ++k)
        for (int64_t y = 0; y < s.oh; ++y)
          for (int64_t x = 0; x < s.ow; ++x) {
            double acc = 0;
            for (int64_t c = 0; c < s.c; ++c)
              for (int i = 0; i < 3; ++i)
                for (int j = 0; j < 3; ++j) {
                  const int64_t iy = y + i - 1, ix = x + j - 1;
                  if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                  acc += static_cast<double>(src[at(s.c, s.h, s.w, n, c, iy, ix)]) *
                         w[((k * s.c + c) * 3 + i) * 3 + j] * scale[k];
                }
            const size_t o = at(s.k, s.oh, s.ow, n, k, y, x);
            acc += bias[k] + old[o];
            want[o] = static_cast<float>(acc > 0 ? acc : 0.1 * acc);
          }
    nn::WinogradConv conv(s, chunk);
    EXPECT_EQ(conv.impl_info().find("_chunked") != std::string::npos, chunk > 0)
        << conv.impl_info();
    NDArray wa(Shape{s.k, s.c, 3, 3}, DType::kFloat32);
    wa.copy_from_host(w.data(), wa.nbytes());
    std::vector<float> ws(conv.workspace_bytes() / sizeof(float) + 16), got = old;
    FusedActivation act;
    act.kind = FusedActivation::kLeaky;
    act.alpha = 0.1f;
    conv.forward(src.data(), wa, scale, bias.data(), got.data(), true, act, ws.data());
    expect_close(got, want, "Winograd vs naive");
  }
}

size_t own_winograd_layers() {
  size_t n = 0;
  for (const auto& line : dnnl_util::recorded_impls())
    n += line.find("winograd_4x3:") != std::string::npos;
  return n;
}

TEST(ConvWinograd, OwnWinogradMatchesDirectConvolution) {
  // 12x12: whole tiles; 13x11: partial tiles on both axes, and c3 (pad 0) on 11x9.
  for (auto [batch, h, w] : {std::tuple{1, 12, 12}, std::tuple{2, 13, 11}}) {
    SCOPED_TRACE("N" + S(batch) + " " + S(h) + "x" + S(w));
    BindOptions o;
    o.default_req = Req::kNull;
    const size_t before = own_winograd_layers();
    setenv("LOOM_CONV_OWN_WINOGRAD", "1", 1);
    auto ex = Executor::simple_bind(own_net(), {{"data", Shape{batch, 3, h, w}}}, o);
    // The plain path: direct convolutions with the same post-ops (oneDNN's Winograd off too).
    setenv("LOOM_CONV_OWN_WINOGRAD", "0", 1);
    setenv("LOOM_CONV_WINOGRAD", "0", 1);
    setenv("LOOM_CONV_WINOGRAD_INFER", "0", 1);
    auto ref = Executor::bind(own_net(), ex->arg_dict(), {}, ex->aux_dict(), o);
    const size_t after_ref = own_winograd_layers();
    unsetenv("LOOM_CONV_OWN_WINOGRAD");
    unsetenv("LOOM_CONV_WINOGRAD");
    unsetenv("LOOM_CONV_WINOGRAD_INFER");
    // c1, c2 and c3 take it when forced (the stem's input is plain); never with =0.
    EXPECT_EQ(after_ref - before, 3u) << "Winograd layers recorded by the forced bind";
    EXPECT_EQ(ex->fused_sum_pairs(), 1u);
    int seed = 7;
    for (const auto& [k, v] : ex->arg_dict())
      set(v, k.find("gamma") != std::string::npos ? 0.3f : -0.5f,
          k.find("gamma") != std::string::npos ? 1.5f : 0.5f, seed++);
    for (const auto& [k, v] : ex->aux_dict())
      set(v, k.find("var") != std::string::npos ? 0.5f : -0.3f,
          k.find("var") != std::string::npos ? 2.f : 0.3f, seed++);
    for (int call = 0; call < 2; ++call) {  // the second call reuses the transformed weights
      ex->forward(false);
      ref->forward(false);
      expect_close(host(ex->outputs()[0]), host(ref->outputs()[0]), "call " + S(call));
    }
    // New weights and BatchNorm statistics are seen (the transformed weights are redone).
    set(ex->arg_dict().at("c2_weight"), -0.2f, 0.6f, 99);
    set(ex->aux_dict().at("bn1_moving_var"), 0.1f, 0.4f, 98);
    ex->forward(false);
    ref->forward(false);
    expect_close(host(ex->outputs()[0]), host(ref->outputs()[0]), "after new weights");
  }
}

}  // namespace
}  // namespace loom
