// make_step (graph/step_builder.h): k micro-batches of b equal one optimizer step on k*b for
// sgd, momentum, adam, adamw (with an LR schedule); state and EMA move only on real steps;
// Adam's bias correction and LR schedules count real steps; EMA equals its closed form;
// LAMB against its closed form, its norms only on the last micro-step; JSON round trip;
// bit-for-bit checkpoint resume; evaluation with EMA weights.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <random>

#include "graph/json.h"
#include "graph/step_builder.h"
#include "runtime/dist/communicator.h"
#include "runtime/imperative.h"
#include "runtime/npy.h"
#include "tests/unit/op_reference.h"

namespace loom {
namespace {

double get(const Attrs& d, const char* k, double def) {
  auto it = d.find(k);
  return it == d.end() ? def : parse_float(it->second);
}
std::string gets(const Attrs& d, const char* k, const char* def) {
  auto it = d.find(k);
  return it == d.end() ? def : it->second;
}

/// MXNet 1.9's stateful lr_scheduler classes called at num_update = 1..T (as an optimizer
/// does once per update), then lr_mult and Adam's bias correction as MXNet's Adam applies them.
double mx_lr(const Attrs& a, int64_t T) {
  const std::string type = gets(a, "scheduler", "constant");
  const double lr = get(a, "lr", 0), factor = get(a, "factor", 1), stop = get(a, "stop_factor_lr", 1e-8);
  const double fin = get(a, "final_lr", 0), pwr = get(a, "pwr", 2);
  const int64_t step = static_cast<int64_t>(get(a, "step", 1)), maxu = static_cast<int64_t>(get(a, "max_update", 0));
  const int64_t warm = static_cast<int64_t>(get(a, "warmup_steps", 0));
  const double wbegin = get(a, "warmup_begin_lr", 0), wfinal = get(a, "warmup_final_lr", -1);
  Shape steps = a.count("steps") ? parse_shape(a.at("steps")) : Shape{};
  double base = lr, val = lr;
  int64_t count = 0;
  int cur = 0;
  for (int64_t n = T == 0 ? 0 : 1; n <= T; ++n) {
    if (n < warm) {
      val = gets(a, "warmup_mode", "linear") == "constant"
                ? wbegin
                : wbegin + ((wfinal < 0 ? lr : wfinal) - wbegin) * double(n) / double(warm);
      continue;
    }
    if (type == "factor") {
      while (n > count + step) {
        count += step;
        base *= factor;
        if (base < stop) base = stop;
      }
    } else if (type == "multifactor") {
      while (cur < steps.ndim() && n > steps[cur]) {
        ++cur;
        base *= factor;
      }
    } else if (type == "cosine" && n <= maxu) {
      base = fin + (lr - fin) * (1 + std::cos(M_PI * double(n - warm) / double(maxu - warm))) / 2;
    } else if (type == "poly" && n <= maxu) {
      base = fin + (lr - fin) * std::pow(1 - double(n - warm) / double(maxu - warm), pwr);
    }
    val = base;
  }
  val *= get(a, "scale", 1);
  if (gets(a, "bias_correction", "none") == "adam") {
    const double t = double(T);
    val *= std::sqrt(1. - std::pow(get(a, "beta2", 0.999), t)) / (1. - std::pow(get(a, "beta1", 0.9), t));
  }
  return val;
}

LOOM_OP_REFERENCE("_loom_lr", [](const test::RefCall& c) {
  NDArray y(c.out_shapes[0]);
  y.data<float>()[0] = static_cast<float>(mx_lr(c.attrs.dict, std::llround(c.in[0].at(0))));
  return std::vector<NDArray>{y};
});

LOOM_OP_REFERENCE("_loom_after", [](const test::RefCall& c) { return std::vector<NDArray>{c.in[0].copy()}; });
// World size 1 (the sweep's process): the sum over ranks is the input itself, times scale.
LOOM_OP_REFERENCE("_loom_allreduce", [](const test::RefCall& c) {
  std::vector<NDArray> out;
  for (const NDArray& x : c.in) {
    NDArray y = x.copy();
    for (int64_t i = 0; i < y.size(); ++i)
      y.data<float>()[i] = static_cast<float>(x.at(i) * get(c.attrs.dict, "scale", 1));
    out.push_back(y);
  }
  return out;
});
// World size 1: the shard is the whole concatenation of the weights, d from the sweep's
// schedules (constant, tf) written out from ops/update/ema.cc's header.
LOOM_OP_REFERENCE("_loom_ema_shard_update", [](const test::RefCall& c) {
  const auto n = static_cast<size_t>(get(c.attrs.dict, "num_tensors", 1));
  const double t = c.in[n + 1].at(0), decay = get(c.attrs.dict, "decay", 0.999);
  const bool copy = gets(c.attrs.dict, "init", "copy") == "copy";
  double d = gets(c.attrs.dict, "schedule", "constant") == "tf"
                 ? std::min(decay, (1 + t) / (10 + t)) : decay;
  if (copy && t <= 1) d = 0;
  NDArray y(c.out_shapes[0]);
  int64_t j = 0;
  for (size_t k = 1; k <= n; ++k)
    for (int64_t i = 0; i < c.in[k].size(); ++i, ++j)
      y.data<float>()[j] = static_cast<float>(d * c.in[0].at(j) + (1 - d) * c.in[k].at(i));
  return std::vector<NDArray>{y};
});
LOOM_OP_REFERENCE("_loom_broadcast_once", [](const test::RefCall& c) {
  NDArray y(c.out_shapes[0]);
  y.data<float>()[0] = 1.f;
  return std::vector<NDArray>{y};
});

Symbol mlp(bool bn = false) {
  auto data = Symbol::Variable("data");
  auto h = Symbol::Op("FullyConnected", {data}, {{"num_hidden", "8"}}, "fc1");
  if (bn) h = Symbol::Op("BatchNorm", {h}, {{"fix_gamma", "False"}}, "bn");
  h = Symbol::Op("Activation", {h}, {{"act_type", "tanh"}}, "act");
  h = Symbol::Op("FullyConnected", {h}, {{"num_hidden", "3"}}, "fc2");
  return Symbol::Op("SoftmaxOutput", {h}, {}, "softmax");
}
const std::vector<std::string> kParams = {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"};

struct Data {
  NDArray x, y;
};
Data make_data(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  Data d{NDArray(Shape{n, 5}), NDArray(Shape{n})};
  for (int64_t i = 0; i < d.x.size(); ++i) d.x.data<float>()[i] = nd(rng);
  for (int i = 0; i < n; ++i) d.y.data<float>()[i] = static_cast<float>(rng() % 3);
  return d;
}
std::map<std::string, NDArray> batch(const Data& d, int lo, int hi) {
  return {{"data", d.x.slice(lo, hi)}, {"softmax_label", d.y.slice(lo, hi)}};
}
void init_params(Executor& ex, const std::vector<std::string>& names = kParams) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.f, 0.5f);
  for (const auto& p : names) {
    NDArray w = ex.arg_dict().at(p);
    for (int64_t i = 0; i < w.size(); ++i) w.data<float>()[i] = nd(rng);
  }
}
std::unique_ptr<Executor> bind_step(const Symbol& s, int b) {
  BindOptions o;
  o.default_req = Req::kNull;
  return Executor::simple_bind(s, {{"data", Shape{b, 5}}}, o);
}
std::vector<float> values(const NDArray& a) { return std::vector<float>(a.data<float>(), a.data<float>() + a.size()); }
/// Every argument and aux state of an executor, by name.
std::map<std::string, std::vector<float>> snapshot(const Executor& e) {
  std::map<std::string, std::vector<float>> m;
  for (const auto& [n, a] : e.arg_dict()) m[n] = values(a);
  for (const auto& [n, a] : e.aux_dict()) m[n] = values(a);
  return m;
}

struct Case {
  std::string opt;
  double momentum;
  Attrs sched;  // _loom_lr-style attrs for the reference (empty: constant)
};

class Accumulation : public ::testing::TestWithParam<Case> {};

TEST_P(Accumulation, MicroStepsEqualOneBigBatchStep) {
  const Case& c = GetParam();
  const int k = 3, b = 4, steps = 3;
  const double lr = 0.05, wd = 0.01;
  Data data = make_data(k * b * steps, 7);
  OptimizerSpec opt;
  opt.name = c.opt;
  opt.learning_rate = lr;
  opt.wd = wd;
  opt.momentum = c.momentum;
  opt.rescale_grad = 1.0 / b;  // grad_mean: the mean of k micro-batch sums, per sample
  if (!c.sched.empty()) {
    opt.lr_scheduler.type = c.sched.at("scheduler");
    opt.lr_scheduler.step = static_cast<int64_t>(get(c.sched, "step", 1));
    opt.lr_scheduler.factor = get(c.sched, "factor", 1);
  }
  StepOptions so;
  so.accumulate = k;
  so.ema = EmaOptions{.decay = 0.9};
  auto micro = bind_step(make_step(mlp(), opt, so), b);
  init_params(*micro);
  auto big = Executor::simple_bind(mlp(), {{"data", Shape{k * b, 5}}},
                                   BindOptions{Device::cpu(), Req::kWrite,
                                               {{"data", Req::kNull}, {"softmax_label", Req::kNull}}});
  init_params(*big);
  std::map<std::string, std::vector<NDArray>> states;
  for (int s = 0; s < steps; ++s) {
    for (int m = 0; m < k; ++m) {
      auto before = snapshot(*micro);
      micro->forward(true, batch(data, (s * k + m) * b, (s * k + m + 1) * b));
      if (m == k - 1) continue;
      for (const auto& [n, v] : snapshot(*micro)) {  // only accumulators and the micro counter move
        if (n.ends_with("_acc") || n == "step_micro" || n == "data" || n == "softmax_label") continue;
        ASSERT_EQ(v, before[n]) << n << " changed on non-last micro-step " << m << " of step " << s;
      }
    }
    big->forward(true, batch(data, s * k * b, (s + 1) * k * b));
    big->backward();
    Attrs la = c.sched;
    la["lr"] = format_float(lr);
    const bool adam = c.opt == "adam" || c.opt == "adamw";
    if (adam) la["bias_correction"] = "adam";
    const double lr_t = mx_lr(la, s + 1);  // real step s+1: bias correction counts real steps
    for (const auto& p : kParams) {
      NDArray w = big->arg_dict().at(p), g = big->grad_dict().at(p);
      const double pwd = p.ends_with("_weight") ? wd : 0.0;  // MXNet's default wd_mult
      Attrs a{{"lr", format_float(lr_t)}, {"wd", format_float(pwd)},
              {"rescale_grad", format_float(1.0 / (k * b))}};
      std::string op = "sgd_update";
      std::vector<NDArray> in = {w, g};
      auto& st = states[p];
      if (c.opt == "sgd" && c.momentum != 0) {
        op = "sgd_mom_update";
        a["momentum"] = format_float(c.momentum);
        if (st.empty()) st = {NDArray(w.shape())};
      } else if (adam) {
        op = c.opt == "adam" ? "adam_update" : "adamw_update";
        if (c.opt == "adamw") {
          a["lr"] = "1";
          a["eta"] = format_float(lr_t);
        }
        if (st.empty()) st = {NDArray(w.shape()), NDArray(w.shape())};
      }
      for (auto& x : st) in.push_back(x);
      if (s == 0)
        for (auto& x : st) x.fill(0);
      std::vector<Shape> shapes;
      for (auto& x : in) shapes.push_back(x.shape());
      ImperativeOp(op, a, shapes).forward(in, {w}, {Req::kWrite});
    }
    for (const auto& p : kParams) {
      NDArray got = micro->arg_dict().at(p), want = big->arg_dict().at(p);
      for (int64_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got.at(i), want.at(i), 2e-5) << p << "[" << i << "] after real step " << s;
    }
  }
  EXPECT_EQ(micro->aux_dict().at("step_micro").at(0), k * steps);
  EXPECT_EQ(micro->aux_dict().at("step_real").at(0), steps);
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, Accumulation,
    ::testing::Values(Case{"sgd", 0, {}}, Case{"sgd", 0.9, {}}, Case{"adam", 0, {}},
                      Case{"adamw", 0, {}},
                      Case{"sgd", 0.9, {{"scheduler", "factor"}, {"step", "1"}, {"factor", "0.5"}}},
                      Case{"adam", 0, {{"scheduler", "factor"}, {"step", "2"}, {"factor", "0.1"}}}),
    [](const auto& info) {
      return info.param.opt + (info.param.momentum != 0 ? "_mom" : "") +
             (info.param.sched.empty() ? "" : "_factor");
    });

// LAMB's per-tensor norm is one `norm` node (L2 in one pass); on the CPU it gives
// square -> sum -> sqrt's value to float rounding, both within rounding of the norm in double.
TEST(StepBuilder, LambNormEqualsSquareSumSqrt) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (const Shape& s : {Shape{1}, Shape{7, 13}, Shape{3, 4, 50}}) {
    NDArray x(s);
    double ref = 0;
    for (int64_t i = 0; i < x.size(); ++i) {
      const float v = nd(rng) * (i % 7 == 0 ? 100.f : 1.f);  // mixed magnitudes
      x.data<float>()[i] = v;
      ref += static_cast<double>(v) * v;
    }
    ref = std::sqrt(ref);
    const double norm = ImperativeOp("norm", {}, {s}).forward({x})[0].at(0);
    NDArray sq = ImperativeOp("square", {}, {s}).forward({x})[0];
    NDArray sum = ImperativeOp("sum", {}, {s}).forward({sq})[0];
    const double chain = ImperativeOp("sqrt", {}, {sum.shape()}).forward({sum})[0].at(0);
    EXPECT_NEAR(norm, ref, 6e-8 * ref) << s.str();
    EXPECT_NEAR(chain, ref, 1e-6 * ref) << s.str();  // float sums: rounding per addition
    EXPECT_NEAR(norm, chain, 1e-6 * ref) << s.str();
  }
}

// LAMB (MXNet 1.9.1's optimizer.LAMB: lamb_update_phase1, r1 = weight.norm(), r2 = g.norm(),
// lamb_update_phase2) over k micro-batches equals the closed form in double on the whole batch,
// bucketed or not; the norm nodes, switched by the last-micro-step predicate, run only on the
// last micro-step (the step timer reports every node that ran).
TEST(StepBuilder, LambMicroStepsEqualReferenceAndSkipNorms) {
  const int k = 3, b = 4, steps = 3;
  const double lr = 0.05, wd = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-6;
  Data data = make_data(k * b * steps, 11);
  for (bool bucket : {true, false}) {
    OptimizerSpec opt{.name = "lamb", .learning_rate = lr, .wd = wd, .rescale_grad = 1.0 / b};
    StepOptions so{.accumulate = k, .bucket = bucket};
    auto micro = bind_step(make_step(mlp(), opt, so), b);
    init_params(*micro);
    const BindOptions bo{Device::cpu(), Req::kWrite,
                         {{"data", Req::kNull}, {"softmax_label", Req::kNull}}};
    auto big = Executor::simple_bind(mlp(), {{"data", Shape{k * b, 5}}}, bo);
    init_params(*big);
    std::vector<std::string> ran;  // names of the nodes that ran in one call
    micro->set_step_timer([&](const std::string& name, const std::string&, double) {
      for (size_t a = 0, e; a <= name.size(); a = e + 1) {
        e = std::min(name.find('+', a), name.size());
        ran.push_back(name.substr(a, e - a));
      }
    });
    auto count_ran = [&](const std::string& part) {
      return std::count_if(ran.begin(), ran.end(),
                           [&](const std::string& n) { return n.find(part) != std::string::npos; });
    };
    std::map<std::string, std::vector<double>> w, m, v;  // the reference, in double
    for (const auto& p : kParams) {
      for (float x : values(big->arg_dict().at(p))) w[p].push_back(x);
      m[p].assign(w[p].size(), 0.0);
      v[p].assign(w[p].size(), 0.0);
    }
    for (int s = 0; s < steps; ++s) {
      for (int mi = 0; mi < k; ++mi) {
        ran.clear();
        micro->forward(true, batch(data, (s * k + mi) * b, (s * k + mi + 1) * b));
        const long want = mi == k - 1 ? static_cast<long>(2 * kParams.size()) : 0;
        EXPECT_EQ(count_ran("_lamb_r"), want) << "norm nodes run on micro-step " << mi;
        EXPECT_EQ(count_ran("_lamb_r1"), want / 2) << "micro-step " << mi;
        EXPECT_GT(count_ran("step_micro"), 0) << "the timer sees the counter";
      }
      for (const auto& p : kParams) {  // the whole batch's gradient at the reference weights
        NDArray a = big->arg_dict().at(p);
        for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = static_cast<float>(w[p][i]);
      }
      big->forward(true, batch(data, s * k * b, (s + 1) * k * b));
      big->backward();
      const double t = s + 1;
      for (const auto& p : kParams) {
        const std::vector<float> g = values(big->grad_dict().at(p));
        const double pwd = p.ends_with("_weight") ? wd : 0.0;
        std::vector<double> d(g.size());
        double r1 = 0, r2 = 0;
        for (size_t i = 0; i < g.size(); ++i) {
          const double gi = g[i] / double(k * b);
          m[p][i] = b1 * m[p][i] + (1 - b1) * gi;
          v[p][i] = b2 * v[p][i] + (1 - b2) * gi * gi;
          const double mh = m[p][i] / (1 - std::pow(b1, t)), vh = v[p][i] / (1 - std::pow(b2, t));
          d[i] = mh / (std::sqrt(vh) + eps) + pwd * w[p][i];
          r1 += w[p][i] * w[p][i];
          r2 += d[i] * d[i];
        }
        r1 = std::sqrt(r1);
        r2 = std::sqrt(r2);
        const double ratio = r1 == 0 || r2 == 0 ? 1.0 : r1 / r2;
        for (size_t i = 0; i < g.size(); ++i) w[p][i] -= lr * ratio * d[i];
      }
      for (const auto& p : kParams) {
        const std::vector<float> got = values(micro->arg_dict().at(p));
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_NEAR(got[i], w[p][i], 2e-5)
              << p << "[" << i << "] bucket=" << bucket << " after real step " << s;
      }
    }
    EXPECT_EQ(micro->aux_dict().at("step_real").at(0), steps);
  }
}

/// EMA after each real step against e_t = d_t e_{t-1} + (1 - d_t) w_t in double.
void check_ema(const std::string& schedule, const std::string& init, bool bn) {
  const int k = 2, b = 4, steps = 5;
  Data data = make_data(k * b * steps, 3);
  OptimizerSpec opt{.name = "sgd", .learning_rate = 0.1, .momentum = 0.9};
  StepOptions so{.accumulate = k, .ema = EmaOptions{.decay = 0.8, .schedule = schedule, .init = init,
                                                     .include_aux = bn}};
  auto ex = bind_step(make_step(mlp(bn), opt, so), b);
  init_params(*ex);
  if (bn) {
    ex->arg_dict().at("bn_gamma").fill(1);
    ex->aux_dict().at("bn_moving_var").fill(1);
  }
  std::vector<std::string> names = kParams;
  if (bn) names.insert(names.end(), {"bn_gamma", "bn_beta", "bn_moving_mean", "bn_moving_var"});
  std::map<std::string, std::vector<double>> ref;
  double norm = 0;
  for (int s = 1; s <= steps; ++s) {
    for (int m = 0; m < k; ++m) ex->forward(true, batch(data, ((s - 1) * k + m) * b, ((s - 1) * k + m + 1) * b));
    double d;
    const double t = s;
    if (init == "copy" && t <= 1) d = 0;
    else if (schedule == "tf") d = std::min(0.8, (1 + t) / (10 + t));
    else d = 0.8;
    norm = d == 0 ? 1 : d * norm + (1 - d);
    for (const auto& n : names) {
      auto live = values(ex->arg_dict().count(n) ? ex->arg_dict().at(n) : ex->aux_dict().at(n));
      auto& e = ref[n];
      e.resize(live.size(), 0.0);
      for (size_t i = 0; i < live.size(); ++i) e[i] = d * e[i] + (1 - d) * live[i];
      auto got = values(ex->aux_dict().at(n + "_ema"));
      for (size_t i = 0; i < live.size(); ++i)
        ASSERT_NEAR(got[i], e[i], 1e-5) << std::setprecision(9) << live[i] << " " << n << "[" << i << "] " << schedule << "/" << init << " step " << s;
      if (init == "zero_debias") {
        EXPECT_NEAR(ex->aux_dict().at(n + "_ema_norm").at(0), norm, 1e-6) << std::setprecision(9) << norm;
        NDArray ev = ema_params(*ex).arg.count(n) ? ema_params(*ex).arg.at(n) : ema_params(*ex).aux.at(n);
        for (size_t i = 0; i < live.size(); ++i) {
          if (s == 1) {  // optax: the debiased value at t=1 is w_1 (to rounding of (om*w)/om)
            ASSERT_NEAR(ev.at(static_cast<int64_t>(i)), live[i], 2.4e-7 * std::abs(live[i]));
          }
          ASSERT_NEAR(ev.at(static_cast<int64_t>(i)), e[i] / norm, 1e-5);
        }
      }
    }
  }
}

TEST(StepBuilder, EmaConstantCopy) { check_ema("constant", "copy", false); }
TEST(StepBuilder, EmaTfZeroDebias) { check_ema("tf", "zero_debias", false); }
TEST(StepBuilder, EmaIncludesBatchNormStats) { check_ema("tf", "copy", true); }

TEST(StepBuilder, StateNamesAndClassification) {
  OptimizerSpec opt{.name = "adam"};
  StepOptions so{.accumulate = 2, .ema = EmaOptions{.init = "zero_debias"}};
  Symbol step = make_step(mlp(), opt, so);
  auto kinds = classify_step_inputs(step);
  EXPECT_EQ(kinds.at("fc1_weight"), StepState::kParam);
  EXPECT_EQ(kinds.at("fc1_weight_mean"), StepState::kOpt);
  EXPECT_EQ(kinds.at("fc1_weight_var"), StepState::kOpt);
  EXPECT_EQ(kinds.at("fc1_weight_acc"), StepState::kAcc);
  EXPECT_EQ(kinds.at("fc1_weight_ema"), StepState::kEma);
  EXPECT_EQ(kinds.at("fc1_weight_ema_norm"), StepState::kEma);
  EXPECT_EQ(kinds.at("step_micro"), StepState::kCounter);
  EXPECT_EQ(kinds.at("step_real"), StepState::kCounter);
  EXPECT_EQ(kinds.at("data"), StepState::kInput);
  EXPECT_EQ(step.list_outputs()[0], "softmax_output");
  EXPECT_THROW(make_step(mlp(), OptimizerSpec{.name = "adagrad"}, {}), Error);
  for (const char* o : {"nag", "rmsprop", "lamb"}) {  // the other optimizers build and run
    OptimizerSpec x{.name = o, .momentum = 0.9};
    auto ex = bind_step(make_step(mlp(), x, so), 4);
    init_params(*ex);
    Data d = make_data(8, 1);
    auto w0 = values(ex->arg_dict().at("fc1_weight"));
    ex->forward(true, batch(d, 0, 4));
    ex->forward(true, batch(d, 4, 8));
    auto w1 = values(ex->arg_dict().at("fc1_weight"));
    EXPECT_NE(w0, w1) << o;
    for (float v : w1) ASSERT_TRUE(std::isfinite(v)) << o;
  }
}

TEST(StepBuilder, JsonRoundTripRunsIdentically) {
  OptimizerSpec opt{.name = "adam", .learning_rate = 0.01};
  opt.lr_scheduler.type = "cosine";
  opt.lr_scheduler.max_update = 5;
  opt.lr_scheduler.warmup_steps = 1;
  StepOptions so{.accumulate = 2, .ema = EmaOptions{.schedule = "tf", .init = "zero_debias"}};
  Symbol step = make_step(mlp(), opt, so);
  Symbol back = load_json(step.tojson(), "step.json");
  EXPECT_EQ(back.tojson(), step.tojson());
  auto a = bind_step(step, 4), c = bind_step(back, 4);
  init_params(*a);
  init_params(*c);
  Data d = make_data(24, 2);
  for (int m = 0; m < 6; ++m) {
    a->forward(true, batch(d, m * 4, m * 4 + 4));
    c->forward(true, batch(d, m * 4, m * 4 + 4));
  }
  EXPECT_EQ(snapshot(*a), snapshot(*c));
}

TEST(StepBuilder, CheckpointResumeIsBitForBit) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("loom_step_ckpt_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  OptimizerSpec opt{.name = "adam", .learning_rate = 0.01};
  StepOptions so{.accumulate = 3, .ema = EmaOptions{.schedule = "tf", .init = "zero_debias", .include_aux = true}};
  Symbol step = make_step(mlp(true), opt, so);
  Data d = make_data(4 * 20, 5);
  auto run = [&](Executor& e, int from, int to) {
    for (int m = from; m < to; ++m) e.forward(true, batch(d, m * 4, m * 4 + 4));
  };
  auto full = bind_step(step, 4);
  init_params(*full, {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "bn_gamma", "bn_beta"});
  auto first = bind_step(step, 4);
  init_params(*first, {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "bn_gamma", "bn_beta"});
  run(*full, 0, 20);
  run(*first, 0, 7);  // mid-accumulation: step 7 of 3-step cycles
  std::string path = (dir / "state.params").string();
  save_training_state(path, *first);
  auto names = load_params(path).names;
  for (const char* n : {"arg:fc1_weight", "aux:bn_moving_mean", "opt:fc1_weight_mean", "acc:fc1_weight_acc",
                        "ema:fc1_weight_ema", "ema:bn_moving_var_ema", "step:step_real"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  auto resumed = bind_step(step, 4);
  load_training_state(path, *resumed);
  run(*resumed, 7, 20);
  EXPECT_EQ(snapshot(*resumed), snapshot(*full));
  // A truncated checkpoint is rejected with a clear error; the file it was cut from is intact.
  std::string bytes = read_file_bytes(path);
  write_file_atomic((dir / "cut.params").string(), bytes.substr(0, bytes.size() / 2));
  auto other = bind_step(step, 4);
  EXPECT_THROW(load_training_state((dir / "cut.params").string(), *other), FormatError);
  EXPECT_EQ(read_file_bytes(path), bytes);
  // Wrong graph: a missing state is named.
  auto sgd = bind_step(make_step(mlp(true), OptimizerSpec{.name = "sgd", .momentum = 0.9}, so), 4);
  EXPECT_THROW(load_training_state(path, *sgd), FormatError);
  fs::remove_all(dir);
}

TEST(StepBuilder, EvaluatesWithEmaWeights) {
  for (const char* init : {"copy", "zero_debias"}) {
    OptimizerSpec opt{.name = "sgd", .learning_rate = 0.1};
    StepOptions so{.accumulate = 2, .ema = EmaOptions{.decay = 0.5, .init = init, .include_aux = true}};
    auto ex = bind_step(make_step(mlp(true), opt, so), 4);
    init_params(*ex, {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "bn_gamma"});
    Data d = make_data(16, 9);
    for (int m = 0; m < 4; ++m) ex->forward(true, batch(d, m * 4, m * 4 + 4));
    auto before = snapshot(*ex);
    auto eval = bind_ema(mlp(true), *ex, {{"data", Shape{4, 5}}});
    eval->forward(false, batch(d, 0, 4));
    auto ema_out = values(eval->outputs()[0]);
    // Reference: a plain executor given the EMA values by copy.
    EmaParams ep = ema_params(*ex);
    for (auto* m : {&ep.arg, &ep.aux})
      for (auto& [n, a] : *m) a = a.copy();  // init=copy hands out the shadows themselves
    auto ref = Executor::simple_bind(mlp(true), {{"data", Shape{4, 5}}}, BindOptions{.default_req = Req::kNull});
    ref->copy_params_from(ep.arg, ep.aux);
    ref->forward(false, batch(d, 0, 4));
    EXPECT_EQ(values(ref->outputs()[0]), ema_out) << init;
    {
      EmaSwap swap(*ex);  // live weights now hold the EMA values
      EXPECT_EQ(values(ex->arg_dict().at("fc1_weight")), values(ep.arg.at("fc1_weight"))) << init;
      EXPECT_EQ(values(ex->aux_dict().at("bn_moving_mean")), values(ep.aux.at("bn_moving_mean"))) << init;
    }
    EXPECT_EQ(snapshot(*ex), before) << init << ": swap back restores every array bit for bit";
  }
}

// Data-parallel steps in a job of one rank (no launcher): the allreduce and broadcast nodes are
// in the graph (and its JSON), the result is exactly the plain step's, and communication
// happens on real steps only, one collective per bucket. The 2-rank equality with one process
// on the concatenated batch is tests/dist/dist_train.py.
TEST(StepBuilder, DataParallelWorldOfOneEqualsThePlainStep) {
  dist::Communicator& comm = dist::init();
  ASSERT_EQ(comm.size(), 1);
  const int k = 3, b = 4, steps = 2;
  Data d = make_data(k * b * steps, 3);
  for (const char* name : {"sgd", "adam", "lamb"})
    for (bool bucket : {true, false}) {
      OptimizerSpec opt{.name = name, .learning_rate = 0.05, .wd = 0.01, .momentum = 0.9};
      StepOptions so{.accumulate = k, .ema = EmaOptions{.decay = 0.9}, .bucket = bucket};
      auto plain = bind_step(make_step(mlp(), opt, so), b);
      // A tiny first bucket: the reversed parameters split as {fc2_bias, fc2_weight}, {fc1_*}.
      so.dist = DistOptions{.first_bucket_mb = 1e-4};
      Symbol step = make_step(mlp(), opt, so);
      const std::string json = step.tojson();
      EXPECT_NE(json.find("_loom_allreduce"), std::string::npos);
      EXPECT_NE(json.find("_loom_broadcast_once"), std::string::npos);
      auto dp = bind_step(load_json(json, "dp.json"), b);
      init_params(*plain);
      init_params(*dp);
      comm.reset_stats();
      for (int m = 0; m < k * steps; ++m) {
        plain->forward(true, batch(d, m * b, (m + 1) * b));
        dp->forward(true, batch(d, m * b, (m + 1) * b));
        ASSERT_EQ(snapshot(*plain), snapshot(*dp)) << name << " bucket=" << bucket << " micro-step " << m;
        // Buckets are one collective each over the flat accumulators; without buckets each
        // accumulator is its own array, except with overlap (the default), whose plan node
        // lays the accumulators out flat whatever `bucket` says.
        const uint64_t real = static_cast<uint64_t>((m + 1) / k);
        EXPECT_EQ(comm.stats().allreduce, real * (bucket || so.dist->overlap ? 2 : 4))
            << name << " micro-step " << m;
      }
      EXPECT_EQ(comm.stats().broadcast, 0u) << "world size 1: nothing to broadcast";
    }
}

// Sharded EMA in a job of one rank: one shard of all T trained elements instead of a shadow
// per parameter, and exactly the unsharded step's weights, EMA (ema_params), checkpoint
// content (training_state, under the unsharded names) and EmaSwap values. The 2-rank case is
// tests/dist/dist_shard_ema.py.
TEST(StepBuilder, ShardedEmaWorldOfOneEqualsUnsharded) {
  ASSERT_EQ(dist::init().size(), 1);
  const int k = 2, b = 4, steps = 3;
  Data d = make_data(k * b * steps, 8);
  for (const char* init : {"copy", "zero_debias"}) {
    OptimizerSpec opt{.name = "adam", .learning_rate = 0.05, .wd = 0.01};
    StepOptions so{.accumulate = k, .ema = EmaOptions{.decay = 0.9, .schedule = "tf", .init = init},
                   .dist = DistOptions{}};
    auto whole = bind_step(make_step(mlp(), opt, so), b);
    so.dist->shard_ema = true;
    auto sharded = bind_step(load_json(make_step(mlp(), opt, so).tojson(), "shard.json"), b);
    int64_t total = 0;
    for (const auto& p : kParams) total += sharded->arg_dict().at(p).size();
    const auto aux = sharded->aux_dict();
    ASSERT_EQ(aux.count("step_ema_shard"), 1u) << init;
    EXPECT_EQ(aux.at("step_ema_shard").shape(), Shape{total}) << init;
    EXPECT_EQ(aux.count("fc1_weight_ema"), 0u) << init;
    init_params(*whole);
    init_params(*sharded);
    for (int m = 0; m < k * steps; ++m) {
      whole->forward(true, batch(d, m * b, (m + 1) * b));
      sharded->forward(true, batch(d, m * b, (m + 1) * b));
      for (const auto& p : kParams)
        ASSERT_EQ(values(sharded->arg_dict().at(p)), values(whole->arg_dict().at(p))) << init << m;
      EmaParams want = ema_params(*whole), got = ema_params(*sharded);
      ASSERT_EQ(got.arg.size(), kParams.size());
      for (const auto& p : kParams)
        ASSERT_EQ(values(got.arg.at(p)), values(want.arg.at(p))) << init << " " << p << " " << m;
    }
    NamedArrays ts = training_state(*sharded), tw = training_state(*whole);
    std::map<std::string, std::vector<float>> a, w;
    for (size_t i = 0; i < ts.size(); ++i) a[ts.names[i]] = values(ts.arrays[i]);
    for (size_t i = 0; i < tw.size(); ++i) w[tw.names[i]] = values(tw.arrays[i]);
    EXPECT_EQ(a, w) << init << ": the same checkpoint content";
    {
      EmaSwap swap(*sharded);
      EmaParams want = ema_params(*whole);
      for (const auto& p : kParams)
        EXPECT_EQ(values(sharded->arg_dict().at(p)), values(want.arg.at(p))) << init << " " << p;
    }
    for (const auto& p : kParams)
      EXPECT_EQ(values(sharded->arg_dict().at(p)), values(whole->arg_dict().at(p))) << init;
    // Loading the unsharded state into the sharded step restores its shard.
    auto fresh = bind_step(make_step(mlp(), opt, so), b);
    set_training_state(tw, *fresh);
    EXPECT_EQ(values(fresh->aux_dict().at("step_ema_shard")), values(aux.at("step_ema_shard")))
        << init;
  }
}

TEST(StepBuilder, DataParallelErrors) {
  OptimizerSpec opt{.name = "sgd", .momentum = 0.9};
  StepOptions so{.accumulate = 2, .dist = DistOptions{.world_size = 2}};
  try {
    bind_step(make_step(mlp(), opt, so), 4);
    ADD_FAILURE() << "bound a 2-rank step in a job of 1";
  } catch (const dist::DistError& e) {
    EXPECT_NE(std::string(e.what()).find("built for 2 ranks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0 of 1"), std::string::npos) << e.what();
  }
  // Sharded optimizer state over 2 ranks in a job of 1: refused at bind, naming the rank.
  so.dist = DistOptions{.shard_optimizer = true, .world_size = 2};
  try {
    bind_step(make_step(mlp(), opt, so), 4);
    ADD_FAILURE() << "bound a step sharded over 2 ranks in a job of 1";
  } catch (const dist::DistError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 of 1"), std::string::npos) << e.what();
  }
  StepOptions update_only{.gradient_suffix = "_grad", .dist = DistOptions{}};
  EXPECT_THROW(make_step(mlp(), opt, update_only), Error);
}

TEST(StepBuilder, RunsFromTheCli) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("loom_step_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Symbol step = make_step(mlp(), OptimizerSpec{.name = "sgd", .momentum = 0.9}, StepOptions{.accumulate = 2});
  step.save((dir / "step.json").string());
  Data d = make_data(4, 1);
  save_npy((dir / "x.npy").string(), d.x);
  save_npy((dir / "y.npy").string(), d.y);
  std::string cmd = std::string(LOOM_CLI) + " run " + (dir / "step.json").string() + " --input data=" +
                    (dir / "x.npy").string() + " --input softmax_label=" + (dir / "y.npy").string() +
                    " --output-dir " + dir.string() + " 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_TRUE(fs::exists(dir / "softmax_output.npy")) << "outputs written";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace loom
