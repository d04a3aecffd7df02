// Loom's thread team (runtime/cpu/thread_team.h) and small convolutions split by output
// channels over it (ops/nn/conv_split.h): the team runs every part exactly once, rethrows,
// runs nested and concurrent calls serially; split layers (1x1 and 3x3, channel counts the
// parts divide unevenly, bias, folded BatchNorm, residual sum, ReLU, leaky, PReLU, batch 1 and
// 2) match a naive reference and the unsplit path (LOOM_TEAM_SPLIT=0), and so does a small
// MobileFaceNet-style network.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "host_values.h"
#include "ops/nn/conv_split.h"
#include "runtime/cpu/thread_cap.h"
#include "runtime/cpu/thread_team.h"
#include "runtime/executor.h"

namespace loom {
namespace {

// ---- The team ----

TEST(ThreadTeam, EveryPartRunsOnceOnManyRapidCalls) {
  cpu::ThreadTeam team(4, 40.0);
  EXPECT_EQ(team.size(), 4);
  for (int round = 0; round < 3000; ++round) {
    const int parts = 1 + round % 9;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(parts));
    team.run(parts, [&](int p) { hits[static_cast<size_t>(p)].fetch_add(1); });
    for (int p = 0; p < parts; ++p) ASSERT_EQ(hits[static_cast<size_t>(p)].load(), 1) << round;
  }
}

TEST(ThreadTeam, PartsRunConcurrently) {
  // Two parts that each wait for the other can only finish when they run at the same time.
  cpu::ThreadTeam team(2, 1000.0);
  std::atomic<int> arrived{0};
  team.run(2, [&](int) {
    arrived.fetch_add(1);
    while (arrived.load() < 2) std::this_thread::yield();
  });
  EXPECT_EQ(arrived.load(), 2);
}

// A worker that holds its part far longer than the caller's share took (a preempted one) is
// a stall. One alone changes nothing; a second within the stall window makes the next runs
// serial on the caller. The stalls here last 300 ms (far over 3x the caller's wait for the
// worker to start, even on a loaded machine) and the window is widened to 10 s.
TEST(ThreadTeam, SecondStallInAWindowMakesRunsSerial) {
  cpu::ThreadTeam team(2, 1000.0, /*stall_window_ms=*/10000);
  // Part 0 waits (up to 2 s) until part 1 has started elsewhere: true when they overlapped.
  auto overlapped = [&] {
    std::atomic<int> started{0};
    std::atomic<bool> met{false};
    team.run(2, [&](int p) {
      if (p == 1) {
        started.store(1);
        return;
      }
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (!started.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      met.store(started.load() != 0);
    });
    return met.load();
  };
  // The worker's part outlasts the caller's by far (the caller waits for it to start).
  auto stall = [&] {
    std::atomic<int> started{0};
    team.run(2, [&](int p) {
      if (p == 1) {
        started.store(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        return;
      }
      while (!started.load()) std::this_thread::yield();
    });
  };
  EXPECT_TRUE(overlapped());  // wakes the worker
  stall();
  EXPECT_EQ(team.stalls(), 1);
  EXPECT_TRUE(overlapped());  // a lone stall: still in parallel
  stall();
  EXPECT_EQ(team.stalls(), 2);
  EXPECT_FALSE(overlapped());  // serial now (for kStallBackoffMs)
}

TEST(ThreadTeam, ExceptionReachesCallerAndTeamStaysUsable) {
  cpu::ThreadTeam team(3, 40.0);
  std::atomic<int> ran{0};
  EXPECT_THROW(team.run(5,
                        [&](int p) {
                          ran.fetch_add(1);
                          if (p == 3) throw std::runtime_error("part 3");
                        }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 5);  // the other parts still ran
  std::atomic<int> sum{0};
  team.run(4, [&](int p) { sum.fetch_add(p); });
  EXPECT_EQ(sum.load(), 0 + 1 + 2 + 3);
}

TEST(ThreadTeam, OneThreadTeamRunsOnTheCaller) {
  cpu::ThreadTeam team(1, 40.0);
  const auto me = std::this_thread::get_id();
  std::vector<int> order;
  team.run(4, [&](int p) {
    EXPECT_EQ(std::this_thread::get_id(), me);
    order.push_back(p);
  });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(ThreadTeam, NestedRunsAreSerialInsideTheirPart) {
  cpu::ThreadTeam team(3, 40.0);
  std::vector<std::atomic<int>> hits(12);
  team.run(3, [&](int outer) {
    const auto me = std::this_thread::get_id();
    team.run(4, [&](int inner) {
      EXPECT_EQ(std::this_thread::get_id(), me);
      hits[static_cast<size_t>(outer * 4 + inner)].fetch_add(1);
    });
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadTeam, TwoCallerThreadsAtOnce) {
  cpu::ThreadTeam team(3, 40.0);
  auto caller = [&](int seed, long* total) {
    for (int round = 0; round < 1500; ++round) {
      std::atomic<long> sum{0};
      const int parts = 2 + (round + seed) % 5;
      team.run(parts, [&](int p) { sum.fetch_add(p + 1); });
      *total += sum.load() == parts * (parts + 1) / 2 ? 1 : 0;
    }
  };
  long a = 0, b = 0;
  std::thread t1(caller, 0, &a), t2(caller, 3, &b);
  t1.join();
  t2.join();
  EXPECT_EQ(a, 1500);
  EXPECT_EQ(b, 1500);
}

TEST(ThreadTeam, ParkedWorkersWakeForTheNextRun) {
  cpu::ThreadTeam team(2, 1e6);  // would spin for a second without park()
  std::atomic<int> sum{0};
  team.run(2, [&](int p) { sum.fetch_add(p + 1); });
  team.park();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  team.run(2, [&](int p) { sum.fetch_add(p + 1); });
  EXPECT_EQ(sum.load(), 6);
}

// The process-wide team is often first used inside a small layer's ThreadCap(1): it sizes
// itself by the count before the cap.
TEST(ThreadTeam, UncappedThreadCountSeenInsideACap) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  {
    dnnl_util::ThreadCap cap(1);
    EXPECT_EQ(omp_get_max_threads(), 1);
    EXPECT_EQ(dnnl_util::uncapped_max_threads(), 3);
    dnnl_util::ThreadCap inner(1);
    EXPECT_EQ(dnnl_util::uncapped_max_threads(), 3);
  }
  EXPECT_EQ(dnnl_util::uncapped_max_threads(), 3);
  omp_set_num_threads(before);
}

// ---- Split convolutions ----

std::string tsplit_s(int64_t v) { return std::to_string(v); }

// What the layer under test applies after the convolution.
struct TsplitCase {
  int64_t n, c, f, hw, k, stride;
  bool bias, bn, sum;
  std::string act;         // "", "relu", "leaky", "prelu"
  bool depthwise = false;  // one group per channel (f == c)
};

// data -> 1x1 stem (ReLU) -> the layer (conv [+BN] [+ res] [act]) -> 1x1 head: the layer's
// input, output and residual operand are internal arrays, so they take the blocked layouts.
Symbol tsplit_net(const TsplitCase& t) {
  auto data = Symbol::Variable("data");
  auto stem = Symbol::Op(
      "Activation",
      {Symbol::Op("Convolution", {data},
                  {{"kernel", "(1,1)"}, {"num_filter", tsplit_s(t.c)}, {"no_bias", "True"}},
                  "stem")},
      {{"act_type", "relu"}}, "stem_relu");
  const std::string k = tsplit_s(t.k), p = tsplit_s(t.k / 2), s = tsplit_s(t.stride);
  Symbol y = Symbol::Op("Convolution", {stem},
                        {{"kernel", "(" + k + "," + k + ")"},
                         {"pad", "(" + p + "," + p + ")"},
                         {"stride", "(" + s + "," + s + ")"},
                         {"num_filter", tsplit_s(t.f)},
                         {"num_group", tsplit_s(t.depthwise ? t.c : 1)},
                         {"no_bias", t.bias ? "False" : "True"}},
                        "layer");
  if (t.bn) y = Symbol::Op("BatchNorm", {y}, {{"fix_gamma", "False"}}, "layer_bn");
  if (t.sum) {
    auto r = Symbol::Op("Convolution", {stem},
                        {{"kernel", "(1,1)"},
                         {"stride", "(" + s + "," + s + ")"},
                         {"num_filter", tsplit_s(t.f)},
                         {"no_bias", "True"}},
                        "res");
    y = Symbol::Op("elemwise_add", {r, y}, {}, "plus");
  }
  if (t.act == "relu") y = Symbol::Op("Activation", {y}, {{"act_type", "relu"}}, "act");
  if (t.act == "leaky")
    y = Symbol::Op("LeakyReLU", {y}, {{"act_type", "leaky"}, {"slope", "0.1"}}, "act");
  if (t.act == "prelu") y = Symbol::Op("LeakyReLU", {y}, {{"act_type", "prelu"}}, "act");
  return Symbol::Op("Convolution", {y},
                    {{"kernel", "(1,1)"}, {"num_filter", "16"}, {"no_bias", "True"}}, "head");
}

// Naive NCHW convolution (pad k/2, no bias) in double; `depthwise`: output channel o reads
// input channel o only, weights (f, 1, k, k).
std::vector<double> tsplit_conv(const std::vector<double>& x, int64_t n, int64_t c, int64_t h,
                                int64_t w, const std::vector<float>& wt, int64_t f, int64_t k,
                                int64_t stride, int64_t* oh_out, bool depthwise = false) {
  const int64_t pad = k / 2, oh = (h + 2 * pad - k) / stride + 1,
                ow = (w + 2 * pad - k) / stride + 1;
  std::vector<double> y(static_cast<size_t>(n * f * oh * ow), 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < f; ++o)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q) {
          double acc = 0;
          for (int64_t i = depthwise ? o : 0; i < (depthwise ? o + 1 : c); ++i)
            for (int64_t u = 0; u < k; ++u)
              for (int64_t v = 0; v < k; ++v) {
                const int64_t yy = r * stride - pad + u, xx = q * stride - pad + v;
                if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                const int64_t wi = depthwise ? (o * k + u) * k + v : ((o * c + i) * k + u) * k + v;
                acc += x[static_cast<size_t>(((b * c + i) * h + yy) * w + xx)] *
                       wt[static_cast<size_t>(wi)];
              }
          y[static_cast<size_t>(((b * f + o) * oh + r) * ow + q)] = acc;
        }
  *oh_out = oh;
  return y;
}

struct TsplitRun {
  std::vector<float> out;
  std::map<std::string, std::vector<float>> values;  // every argument and aux array
  bool split = false;                                // a layer ran split
  size_t fused_act = 0;                              // activations applied as post-ops
};

TsplitRun tsplit_run(const Symbol& sym, const Shape& data, const char* split, int threads,
                     bool fuse_act = true) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  setenv("LOOM_TEAM_SPLIT", split, 1);
  const uint64_t calls_before = nn::split_conv_calls();
  BindOptions o;
  o.default_req = Req::kNull;
  if (!fuse_act) setenv("LOOM_FUSE_CONV_ACT", "0", 1);
  auto ex = Executor::simple_bind(sym, {{"data", data}}, o);
  unsetenv("LOOM_TEAM_SPLIT");
  unsetenv("LOOM_FUSE_CONV_ACT");
  TsplitRun r;
  int seed = 11;
  for (const auto& [name, a] : ex->arg_dict()) {
    const bool gamma = name.find("gamma") != std::string::npos;
    test_util::set(a, gamma ? 0.2f : -0.5f, gamma ? 0.9f : 0.5f, seed++);
    r.values[name] = test_util::host(a);
  }
  for (const auto& [name, a] : ex->aux_dict()) {
    const bool var = name.find("var") != std::string::npos;
    test_util::set(a, var ? 0.5f : -0.2f, var ? 1.5f : 0.2f, seed++);
    r.values[name] = test_util::host(a);
  }
  ex->forward(false);
  ex->forward(false);  // the second call reuses the reordered weights
  r.out = test_util::host(ex->outputs()[0]);
  r.split = nn::split_conv_calls() > calls_before;
  r.fused_act = ex->fused_activation_pairs();
  omp_set_num_threads(before);
  return r;
}

// The reference for tsplit_net, from the values the run used.
std::vector<double> tsplit_reference(const TsplitCase& t, TsplitRun& r) {
  auto& v = r.values;
  const int64_t h = t.hw, w = t.hw;
  std::vector<double> x(v["data"].begin(), v["data"].end());
  int64_t oh = 0;
  auto stem = tsplit_conv(x, t.n, 8, h, w, v["stem_weight"], t.c, 1, 1, &oh);
  for (auto& e : stem) e = std::max(e, 0.0);
  auto y =
      tsplit_conv(stem, t.n, t.c, h, w, v["layer_weight"], t.f, t.k, t.stride, &oh, t.depthwise);
  const int64_t hw = oh * oh;
  std::vector<double> res;
  if (t.sum) res = tsplit_conv(stem, t.n, t.c, h, w, v["res_weight"], t.f, 1, t.stride, &oh);
  for (int64_t b = 0; b < t.n; ++b)
    for (int64_t o = 0; o < t.f; ++o)
      for (int64_t i = 0; i < hw; ++i) {
        const size_t at = static_cast<size_t>((b * t.f + o) * hw + i), f = static_cast<size_t>(o);
        double e = y[at];
        if (t.bias) e += v["layer_bias"][f];
        if (t.bn)
          e = (e - v["layer_bn_moving_mean"][f]) / std::sqrt(v["layer_bn_moving_var"][f] + 1e-3) *
                  v["layer_bn_gamma"][f] +
              v["layer_bn_beta"][f];
        if (t.sum) e += res[at];
        if (t.act == "relu") e = std::max(e, 0.0);
        if (t.act == "leaky" && e < 0) e *= 0.1;
        if (t.act == "prelu" && e < 0) e *= v["act_gamma"][f];
        y[at] = e;
      }
  return tsplit_conv(y, t.n, t.f, oh, oh, v["head_weight"], 16, 1, 1, &oh);
}

// `split_known`: the layer runs split convolution primitives (not Loom's own depthwise kernel,
// which splits its rows instead and which PReLU layers take where their layouts allow).
void tsplit_check(const TsplitCase& t, int threads, bool fuse_act = true, bool split_known = true) {
  SCOPED_TRACE("n=" + tsplit_s(t.n) + " c=" + tsplit_s(t.c) + " f=" + tsplit_s(t.f) + " k=" +
               tsplit_s(t.k) + " stride=" + tsplit_s(t.stride) + " bias=" + tsplit_s(t.bias) +
               " bn=" + tsplit_s(t.bn) + " sum=" + tsplit_s(t.sum) + " act=" + t.act +
               " depthwise=" + tsplit_s(t.depthwise) + " threads=" + tsplit_s(threads));
  const Symbol sym = tsplit_net(t);
  const Shape data{t.n, 8, t.hw, t.hw};
  auto on = tsplit_run(sym, data, "1", threads, fuse_act);
  auto off = tsplit_run(sym, data, "0", threads, fuse_act);
  EXPECT_FALSE(off.split);
  // Every layer here is below the one-thread threshold and has channel-blocked arrays.
  if (split_known) {
    EXPECT_TRUE(on.split);
  }
  // The split layer applies its activation (PReLU as a pass over each part's output).
  if (fuse_act && !t.act.empty()) {
    EXPECT_GE(on.fused_act, 1u);
  }
  const auto ref = tsplit_reference(t, on);
  ASSERT_EQ(on.out.size(), ref.size());
  ASSERT_EQ(off.out.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    const double tol = 1e-4 * (1.0 + std::fabs(ref[i]));
    ASSERT_NEAR(on.out[i], ref[i], tol) << i;
    ASSERT_NEAR(on.out[i], off.out[i], tol) << i;
  }
}

TEST(TeamSplitConv, OneByOneLayersMatchReference) {
  for (int64_t f : {48, 80, 128, 520})
    for (int64_t n : {1, 2}) {
      tsplit_check({n, 32, f, 6, 1, 1, false, true, false, "prelu"}, 3);
      tsplit_check({n, 32, f, 6, 1, 1, true, false, true, "relu"}, 2);
    }
  tsplit_check({1, 64, 128, 7, 1, 1, false, true, true, ""}, 2);
  tsplit_check({1, 64, 80, 8, 1, 1, false, true, true, "prelu"}, 3);
  tsplit_check({2, 48, 48, 8, 1, 1, true, true, false, "leaky"}, 4);
}

// Layers above the one-thread threshold split too in inference while their estimated time
// is below LOOM_TEAM_SPLIT_US (=0: never).
TEST(TeamSplitConv, LayersBelowTheSplitThresholdSplit) {
  const TsplitCase t{1, 32, 80, 8, 1, 1, false, true, false, "prelu"};
  const Symbol sym = tsplit_net(t);
  setenv("LOOM_SERIAL_US", "0", 1);  // no layer capped at one thread
  auto band = tsplit_run(sym, {1, 8, 8, 8}, "1", 2);
  setenv("LOOM_TEAM_SPLIT_US", "0", 1);
  auto none = tsplit_run(sym, {1, 8, 8, 8}, "1", 2);
  unsetenv("LOOM_TEAM_SPLIT_US");
  unsetenv("LOOM_SERIAL_US");
  EXPECT_TRUE(band.split);
  EXPECT_FALSE(none.split);
  const auto ref = tsplit_reference(t, band);
  ASSERT_EQ(band.out.size(), ref.size());
  ASSERT_EQ(none.out.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(band.out[i], ref[i], 1e-4 * (1.0 + std::fabs(ref[i]))) << i;
    ASSERT_NEAR(none.out[i], band.out[i], 1e-4 * (1.0 + std::fabs(ref[i]))) << i;
  }
}

// The activation as its own pass (LeakyReLU's prelu loop over a blocked array of more than
// 64 K elements, split over the team too).
TEST(TeamSplitConv, UnfusedPreluPassMatchesReference) {
  tsplit_check({1, 32, 80, 36, 1, 1, false, true, false, "prelu"}, 3, false);
  tsplit_check({2, 16, 48, 30, 1, 1, true, false, false, "prelu"}, 2, false);
}

TEST(TeamSplitConv, ThreeByThreeLayersMatchReference) {
  for (int64_t n : {1, 2}) {
    tsplit_check({n, 16, 48, 6, 3, 1, true, true, true, "prelu"}, 2);
    tsplit_check({n, 16, 80, 12, 3, 2, false, true, false, "relu"}, 3);
  }
  tsplit_check({1, 32, 128, 5, 3, 1, false, false, false, ""}, 4);
}

// Depthwise layers with ReLU or no activation (oneDNN's depthwise kernel, one primitive per
// part on its own channels; PReLU takes Loom's own depthwise kernel, split by rows).
TEST(TeamSplitConv, DepthwiseLayersMatchReference) {
  for (int64_t n : {1, 2}) {
    tsplit_check({n, 48, 48, 9, 3, 1, false, true, false, "relu", true}, 2);
    tsplit_check({n, 80, 80, 10, 3, 2, true, true, true, "", true}, 3);
  }
  tsplit_check({1, 128, 128, 7, 3, 1, false, true, false, "prelu", true}, 2, true, false);
  tsplit_check({1, 272, 272, 7, 3, 1, false, true, false, "relu", true}, 4);
}

// A few MobileFaceNet-style blocks (stem, depthwise + PReLU, pointwise, linear projection with
// the residual sum) give the same output split and unsplit.
Symbol tsplit_mfn() {
  auto conv = [](const Symbol& x, const std::string& name, int f, int k, int g, int s) {
    return Symbol::Op("Convolution", {x},
                      {{"kernel", "(" + tsplit_s(k) + "," + tsplit_s(k) + ")"},
                       {"pad", "(" + tsplit_s(k / 2) + "," + tsplit_s(k / 2) + ")"},
                       {"stride", "(" + tsplit_s(s) + "," + tsplit_s(s) + ")"},
                       {"num_filter", tsplit_s(f)},
                       {"num_group", tsplit_s(g)},
                       {"no_bias", "True"}},
                      name);
  };
  auto bn = [](const Symbol& x, const std::string& name) {
    return Symbol::Op("BatchNorm", {x}, {{"fix_gamma", "False"}}, name + "_bn");
  };
  auto prelu = [](const Symbol& x, const std::string& name) {
    return Symbol::Op("LeakyReLU", {x}, {{"act_type", "prelu"}}, name + "_prelu");
  };
  Symbol x = prelu(bn(conv(Symbol::Variable("data"), "stem", 64, 3, 1, 2), "stem"), "stem");
  for (int b = 0; b < 3; ++b) {
    const std::string n = "b" + tsplit_s(b);
    auto e = prelu(bn(conv(x, n + "_sep", 128, 1, 1, 1), n + "_sep"), n + "_sep");
    auto d = prelu(bn(conv(e, n + "_dw", 128, 3, 128, 1), n + "_dw"), n + "_dw");
    auto p = bn(conv(d, n + "_proj", 64, 1, 1, 1), n + "_proj");
    x = Symbol::Op("elemwise_add", {p, x}, {}, n + "_plus");
  }
  return Symbol::Op("Pooling", {conv(x, "last", 96, 1, 1, 1)},
                    {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "avg"}}, "pool");
}

TEST(TeamSplitConv, SmallNetworkMatchesUnsplit) {
  const Symbol sym = tsplit_mfn();
  for (int64_t n : {1, 2}) {
    auto on = tsplit_run(sym, Shape{n, 3, 32, 32}, "1", 2);
    auto off = tsplit_run(sym, Shape{n, 3, 32, 32}, "0", 2);
    EXPECT_TRUE(on.split);
    EXPECT_FALSE(off.split);
    ASSERT_EQ(on.out.size(), off.out.size());
    double mag = 0;
    for (size_t i = 0; i < on.out.size(); ++i) {
      mag += std::fabs(off.out[i]);
      ASSERT_NEAR(on.out[i], off.out[i], 1e-4 * (1.0 + std::fabs(off.out[i]))) << i;
    }
    EXPECT_GT(mag, 0.0);  // not all zero
  }
}

}  // namespace
}  // namespace loom
