// Loom's own inference depthwise convolution (ops/nn/depthwise.h): the kernel against a naive
// convolution in double over kernel sizes, strides, paddings, dilations, odd and even block
// counts, both channel blocks (8 and 16) and every epilogue; and in graphs (Convolution with
// num_group = channels followed by BatchNorm, a residual add and PReLU/ReLU/leaky) against the
// same arrays bound with LOOM_CONV_OWN_DEPTHWISE=0 (oneDNN's kernel, PReLU as its own pass),
// where channel counts the block does not divide keep the plain layout and oneDNN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>

#include "ops/nn/depthwise.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/executor.h"
#include "tests/unit/host_values.h"

namespace loom {
namespace {

using test_util::host;
using test_util::set;

using nn::DepthwiseAct;
using nn::DepthwiseConv;
using nn::DepthwiseShape;

std::string S(int64_t v) { return std::to_string(v); }

// Index of (n, c, y, x) in a channel-blocked array of `c` channels and h x w maps.
int64_t blocked(const DepthwiseShape& s, int64_t n, int64_t c, int64_t y, int64_t x, int64_t h,
                int64_t w) {
  return (((n * (s.c / s.block) + c / s.block) * h + y) * w + x) * s.block + c % s.block;
}

// act(v) of channel c in double.
double activate(const DepthwiseAct& act, int64_t c, double v) {
  const double a = act.kind == DepthwiseAct::kPrelu   ? act.slope[c]
                   : act.kind == DepthwiseAct::kLeaky ? act.alpha
                                                      : 0.0;
  return act.kind != DepthwiseAct::kNone && v < 0 ? v * a : v;
}

// Naive depthwise convolution with the epilogue (and `pre` applied to each input read), in
// double, on blocked arrays.
std::vector<float> reference(const DepthwiseShape& s, const std::vector<float>& x,
                             const std::vector<float>& w, const std::vector<float>& scale,
                             const std::vector<float>& bias, std::vector<float> out, bool sum,
                             const DepthwiseAct& act, const DepthwiseAct& pre = {}) {
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t y = 0; y < s.oh; ++y)
        for (int64_t z = 0; z < s.ow; ++z) {
          double acc = 0;
          for (int64_t i = 0; i < s.kh; ++i)
            for (int64_t j = 0; j < s.kw; ++j) {
              const int64_t iy = y * s.sh - s.ph + i * s.dh, ix = z * s.sw - s.pw + j * s.dw;
              if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
              acc += activate(pre, c, x[blocked(s, n, c, iy, ix, s.h, s.w)]) *
                     w[(c * s.kh + i) * s.kw + j];
            }
          const int64_t o = blocked(s, n, c, y, z, s.oh, s.ow);
          out[o] =
              static_cast<float>(activate(act, c, acc * scale[c] + bias[c] + (sum ? out[o] : 0.0)));
        }
  return out;
}

TEST(DepthwiseKernel, MatchesNaiveConvolution) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto fill = [&](std::vector<float>& v) {
    for (auto& e : v) e = nd(rng);
  };
  int cases = 0;
  for (int block : {8, 16})
    for (int64_t c : {int64_t{block}, int64_t{3 * block}, int64_t{4 * block}})
      for (int64_t k : {1, 3, 5, 7})
        for (int64_t stride : {1, 2})
          for (int64_t pad : {0, 1, 3})
            for (int64_t dil : {1, 2})
              for (int64_t hw : {1, 6, 13}) {
                const int64_t span = (k - 1) * dil + 1, h = hw, w = hw + 3;
                if (h + 2 * pad < span) continue;
                DepthwiseShape s{2,    c,    h,      w,      (h + 2 * pad - span) / stride + 1,
                                 (w + 2 * pad - span) / stride + 1,
                                 k,    k,    stride, stride, pad,
                                 pad,  dil,  dil,    block};
                ASSERT_TRUE(nn::depthwise_supported(s));
                std::vector<float> x(static_cast<size_t>(s.n * c * h * w)),
                    wt(static_cast<size_t>(c * k * k)), scale(c), bias(c), slope(c), pslope(c),
                    out(static_cast<size_t>(s.n * c * s.oh * s.ow));
                fill(x), fill(wt), fill(scale), fill(bias), fill(slope), fill(pslope), fill(out);
                DepthwiseConv dw(s, (cases % 2) + 1);  // one thread and two in turn
                dw.pack_weights(wt.data(), scale);
                for (int kind = 0; kind < 4; ++kind)
                  for (bool sum : {false, true}) {
                    const DepthwiseAct act{static_cast<DepthwiseAct::Kind>(kind), 0.1f, slope};
                    // An activation of the input as it is read, every kind in turn.
                    const DepthwiseAct pre{
                        static_cast<DepthwiseAct::Kind>((kind + sum + cases) % 4), 0.2f, pslope};
                    auto want = reference(s, x, wt, scale, bias, out, sum, act, pre);
                    auto got = out;
                    dw.forward(x.data(), bias.data(), got.data(), sum, act, pre);
                    for (size_t i = 0; i < got.size(); ++i)
                      ASSERT_NEAR(got[i], want[i], 1e-4f * (1.f + std::fabs(want[i])))
                          << "block " << block << " c" << c << " k" << k << " s" << stride << " p"
                          << pad << " d" << dil << " " << h << "x" << w << " act " << kind
                          << " pre " << int{pre.kind} << " sum " << sum << " at " << i;
                    ++cases;
                  }
              }
  EXPECT_GT(cases, 1000);
}

TEST(DepthwiseKernel, NoScaleNoBiasIsThePlainConvolution) {
  const DepthwiseShape s{1, 16, 5, 5, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 8};
  std::vector<float> x(400), w(144), out(400);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 5) * 0.25f;
  DepthwiseConv dw(s, 1);
  dw.pack_weights(w.data(), {});
  dw.forward(x.data(), nullptr, out.data(), false, {});
  const std::vector<float> ones(16, 1.f), zeros(16, 0.f);
  auto want = reference(s, x, w, ones, zeros, out, false, {});
  for (size_t i = 0; i < out.size(); ++i) ASSERT_FLOAT_EQ(out[i], want[i]) << i;
}

// forward_part in any number of parts (each with its own ring of activated input rows,
// starting anywhere in a block pair's rows) gives forward's result.
TEST(DepthwiseKernel, PartsWithInputActivationMatchTheWhole) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto [k, stride, dil] : {std::tuple{3, 1, 1}, {3, 2, 1}, {5, 1, 2}}) {
    const int64_t c = 40, h = 11, pad = (k - 1) * dil / 2, span = (k - 1) * dil + 1;
    const int64_t o = (h + 2 * pad - span) / stride + 1;
    const DepthwiseShape s{2, c, h, h, o, o, k, k, stride, stride, pad, pad, dil, dil, 8};
    std::vector<float> x(static_cast<size_t>(2 * c * h * h)), wt(static_cast<size_t>(c * k * k)),
        bias(c), slope(c), pslope(c);
    for (auto* v : {&x, &wt, &bias, &slope, &pslope})
      for (auto& e : *v) e = nd(rng);
    DepthwiseConv dw(s, 1);
    dw.pack_weights(wt.data(), {});
    const DepthwiseAct act{DepthwiseAct::kPrelu, 0.f, slope},
        pre{DepthwiseAct::kPrelu, 0.f, pslope};
    const std::vector<float> ones(c, 1.f);
    const auto want =
        reference(s, x, wt, ones, bias, std::vector<float>(static_cast<size_t>(2 * c * o * o)),
                  false, act, pre);
    for (int parts : {1, 2, 3, 7}) {
      std::vector<float> got(want.size(), -9.f);
      dw.set_bias(bias.data());
      for (int p = parts - 1; p >= 0; --p)
        dw.forward_part(x.data(), got.data(), false, act, p, parts, pre);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4f * (1.f + std::fabs(want[i])))
            << "k" << k << " s" << stride << " d" << dil << " parts " << parts << " at " << i;
    }
  }
}

// ---- In graphs ----

Symbol dwconv(const Symbol& x, const std::string& name, int c, int k, int stride, int pad) {
  return Symbol::Op("Convolution", {x},
                    {{"kernel", "(" + S(k) + "," + S(k) + ")"},
                     {"stride", "(" + S(stride) + "," + S(stride) + ")"},
                     {"pad", "(" + S(pad) + "," + S(pad) + ")"},
                     {"num_filter", S(c)},
                     {"num_group", S(c)}},
                    name);
}
Symbol conv1x1(const Symbol& x, const std::string& name, int c) {
  return Symbol::Op("Convolution", {x}, {{"kernel", "(1,1)"}, {"num_filter", S(c)}}, name);
}
Symbol bn(const Symbol& x, const std::string& name) {
  return Symbol::Op("BatchNorm", {x}, {{"fix_gamma", "False"}, {"eps", "2e-5"}}, name);
}
Symbol act(const Symbol& x, const std::string& name, const std::string& type) {
  if (type == "relu") return Symbol::Op("Activation", {x}, {{"act_type", "relu"}}, name);
  if (type == "leaky")
    return Symbol::Op("LeakyReLU", {x}, {{"act_type", "leaky"}, {"slope", "0.1"}}, name);
  return Symbol::Op("LeakyReLU", {x}, {{"act_type", "prelu"}}, name);
}

// stem 1x1 -> dw (BN, activation) -> 1x1; and a second dw whose BN output is added to its
// input before the activation (the residual sum), then a pooling so the output is plain.
Symbol net(int c, int k, int stride, int pad, const std::string& type) {
  auto x = conv1x1(Symbol::Variable("data"), "stem", c);
  auto d = act(bn(dwconv(x, "dw1", c, k, stride, pad), "bn1"), "a1", type);
  auto p = conv1x1(d, "pw", c);
  auto r = bn(dwconv(p, "dw2", c, 3, 1, 1), "bn2");
  auto s = act(Symbol::Op("elemwise_add", {r, p}, {}, "plus"), "a2", type);
  return Symbol::Op("Pooling", {conv1x1(s, "last", c)},
                    {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "avg"}}, "pool");
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], 2e-4f * (1.f + std::fabs(b[i]))) << what << " at " << i;
}

// Arguments (slopes and BatchNorm scales positive) and BatchNorm statistics (variances
// positive) of a bound net.
void init_values(Executor& ex) {
  int seed = 3;
  for (const auto& [name, a] : ex.arg_dict())
    set(a, name.find("gamma") != std::string::npos ? 0.05f : -0.5f, 0.5f, seed++);
  for (const auto& [name, a] : ex.aux_dict())
    set(a, name.find("var") != std::string::npos ? 0.5f : -0.5f,
        name.find("var") != std::string::npos ? 2.f : 0.5f, seed++);
}

// How many depthwise layers of shape `in` recorded Loom's own kernel so far.
size_t own_depthwise_lines(const std::string& in) {
  size_t n = 0;
  for (const auto& line : dnnl_util::recorded_impls())
    if (line.find(in) != std::string::npos && line.find("own_depthwise") != std::string::npos) ++n;
  return n;
}

void check(int c, int k, int stride, int pad, const std::string& type, int batch, bool force) {
  SCOPED_TRACE("C" + S(c) + " k" + S(k) + " s" + S(stride) + " p" + S(pad) + " " + type + " N" +
               S(batch) + (force ? " forced" : ""));
  const Symbol sym = net(c, k, stride, pad, type);
  // A map size no other bind of this process used, so the recorded lines name this one.
  static int next_size = 9;
  const int hw = next_size++;
  const std::string in = "Convolution (" + S(batch) + ", " + S(c) + ", " + S(hw) + ", " + S(hw) +
                         ") w(" + S(c) + ", 1, " + S(k) + ", " + S(k) + ")";
  BindOptions o;
  o.default_req = Req::kNull;
  if (force) setenv("LOOM_CONV_OWN_DEPTHWISE", "1", 1);
  auto ex = Executor::simple_bind(sym, {{"data", Shape{batch, c, hw, hw}}}, o);
  unsetenv("LOOM_CONV_OWN_DEPTHWISE");
  // Used exactly where the activations are blocked (the block divides the channels) and the
  // chain ends in PReLU, or everywhere when forced.
  const int block = dnnl_util::preferred_channel_block();
  const bool want = c % block == 0 && (type == "prelu" || force);
  EXPECT_EQ(own_depthwise_lines(in) > 0, want) << "block " << block;
  init_values(*ex);
  setenv("LOOM_CONV_OWN_DEPTHWISE", "0", 1);
  auto plain = Executor::bind(sym, ex->arg_dict(), {}, ex->aux_dict(), o);
  unsetenv("LOOM_CONV_OWN_DEPTHWISE");
  for (int call = 0; call < 2; ++call) {  // the second call runs on the packed weights
    ex->forward(false);
    plain->forward(false);
    expect_near(host(ex->outputs()[0]), host(plain->outputs()[0]), "call " + S(call));
  }
  // Changed weights, BatchNorm statistics and slopes are seen.
  for (const auto& [name, a] : ex->arg_dict())
    if (name != "data") set(a, 0.05f, 0.4f, 17 + static_cast<int>(name.size()));
  set(ex->aux_dict().at("bn1_moving_mean"), -0.2f, 0.2f, 99);
  ex->forward(false);
  plain->forward(false);
  expect_near(host(ex->outputs()[0]), host(plain->outputs()[0]), "after changes");
}

TEST(DepthwiseInGraph, PreluChainsMatchOneDnn) {
  for (int c : {32, 48, 24})  // 24: blocked with nChw8c only
    for (auto [k, stride, pad] : {std::tuple{3, 1, 1}, {3, 2, 1}, {5, 1, 2}, {3, 2, 0}})
      for (int batch : {1, 2}) {
        check(c, k, stride, pad, "prelu", batch, false);
        if (HasFatalFailure()) return;
      }
}

TEST(DepthwiseInGraph, OtherActivationsStayWithOneDnnUnlessForced) {
  for (const char* type : {"relu", "leaky"})
    for (bool force : {false, true}) {
      check(32, 3, 1, 1, type, 1, force);
      check(32, 3, 2, 1, type, 2, force);
      if (HasFatalFailure()) return;
    }
}

// An activation computing a depthwise layer's input in place that nothing before it takes
// (PReLU after a 1x1 layer oneDNN runs; any kind after a pooling) is applied by Loom's
// depthwise kernel as it reads its input (PostOps::pre), with the layer's own BatchNorm and
// PReLU after it: the same result as with LOOM_FUSE_PRE_ACT=0 and with every fusion off.
Symbol pre_net(int c, int k, int stride, const std::string& type, bool after_pool) {
  auto x = conv1x1(Symbol::Variable("data"), "stem", c);
  if (after_pool)
    x = Symbol::Op(
        "Pooling", {x},
        {{"kernel", "(3,3)"}, {"stride", "(1,1)"}, {"pad", "(1,1)"}, {"pool_type", "max"}}, "mp");
  else
    x = bn(x, "bn0");
  auto d = act(bn(dwconv(act(x, "a0", type), "dw", c, k, stride, k / 2), "bn1"), "a1", "prelu");
  return Symbol::Op("Pooling", {conv1x1(d, "last", c)},
                    {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "avg"}}, "pool");
}

TEST(DepthwiseInGraph, InputActivationIsAppliedByTheKernel) {
  const int block = dnnl_util::preferred_channel_block();
  BindOptions o;
  o.default_req = Req::kNull;
  auto bind_with = [&](const Symbol& sym, const Executor* like, std::vector<const char*> off) {
    setenv("LOOM_TEAM_SPLIT", "0", 1);  // else the split 1x1 layer applies the PReLU itself
    for (auto* v : off) setenv(v, "0", 1);
    auto e = like ? Executor::bind(sym, like->arg_dict(), {}, like->aux_dict(), o)
                  : Executor::simple_bind(sym, {{"data", Shape{2, 2 * block, 13, 13}}}, o);
    for (auto* v : off) unsetenv(v);
    unsetenv("LOOM_TEAM_SPLIT");
    return e;
  };
  for (const char* type : {"prelu", "leaky", "relu"})
    for (bool after_pool : {false, true})
      for (auto [k, stride] : {std::pair{3, 1}, {3, 2}, {5, 1}}) {
        if (!after_pool && std::string(type) != "prelu") continue;  // oneDNN fuses those
        SCOPED_TRACE(std::string(type) + (after_pool ? " after pool" : " after BN") + " k" + S(k) +
                     " s" + S(stride));
        const Symbol sym = pre_net(2 * block, k, stride, type, after_pool);
        auto ex = bind_with(sym, nullptr, {});
        EXPECT_EQ(ex->fused_pre_activations(), 1u);
        init_values(*ex);
        auto no_pre = bind_with(sym, ex.get(), {"LOOM_FUSE_PRE_ACT"});
        EXPECT_EQ(no_pre->fused_pre_activations(), 0u);
        auto none = bind_with(sym, ex.get(),
                              {"LOOM_FUSE_CONV_BN", "LOOM_FUSE_CONV_SUM", "LOOM_FUSE_CONV_ACT",
                               "LOOM_FUSE_EPILOGUE"});
        EXPECT_EQ(none->fused_pre_activations(), 0u);
        for (int call = 0; call < 2; ++call) {
          for (auto* e : {ex.get(), no_pre.get(), none.get()}) e->forward(false);
          const auto want = host(none->outputs()[0]);
          expect_near(host(ex->outputs()[0]), want, "call " + S(call));
          expect_near(host(no_pre->outputs()[0]), want, "no pre, call " + S(call));
        }
        // Changed slopes are seen; a training call runs the activation as its own step.
        if (ex->arg_dict().count("a0_gamma")) set(ex->arg_dict().at("a0_gamma"), 0.1f, 0.3f, 41);
        set(ex->arg_dict().at("a1_gamma"), 0.1f, 0.3f, 42);
        for (bool train : {false, true}) {
          ex->forward(train);
          none->forward(train);
          expect_near(host(ex->outputs()[0]), host(none->outputs()[0]),
                      train ? "training call" : "after changes");
        }
        if (HasFatalFailure()) return;
      }
}

}  // namespace
}  // namespace loom
