// Training-step benchmarks:
//  - BM_FusedUpdate: the optimizer update (sgd with momentum and weight decay) and the model
//    EMA over all parameters of ResNet-18 (11.7 M floats, 62 tensors), as bucketed
//    `_loom_bucket` nodes (one pass each) and as one node per parameter. Reported as GB/s
//    next to a STREAM-style triad (a = b + s*c) over as many floats, timed in the same
//    process and interleaved with the update, and as the fraction of the triad.
//  - BM_MicroStep: an MLP (784-512-512-10, batch 64) training step graph with accumulate=4:
//    a micro-step that does not update, against forward+backward on a plain executor plus
//    one accumulate pass over the gradients (the ratio should be about 1), and the updating
//    micro-step.
//
//   build/bin/loom_bench --benchmark_filter='FusedUpdate|MicroStep'
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <span>

#include "graph/step_builder.h"
#include "runtime/executor.h"

namespace loom {
namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// ResNet-18's trainable parameter shapes (ImageNet, 1000 classes): convolutions, BatchNorm
/// gamma and beta, the classifier.
std::vector<Shape> resnet18_params() {
  std::vector<Shape> v;
  auto conv_bn = [&](int64_t out, int64_t in, int64_t k) {
    v.push_back(Shape{out, in, k, k});
    v.push_back(Shape{out});
    v.push_back(Shape{out});
  };
  conv_bn(64, 3, 7);
  int64_t in = 64;
  for (int64_t c : {64, 128, 256, 512}) {
    for (int b = 0; b < 2; ++b) {
      conv_bn(c, b ? c : in, 3);
      conv_bn(c, c, 3);
      if (b == 0 && c != in) conv_bn(c, in, 1);
    }
    in = c;
  }
  v.push_back(Shape{1000, 512});
  v.push_back(Shape{1000});
  return v;
}

/// best seconds of a STREAM triad over n floats (all threads).
double triad_seconds(std::span<float> a, std::span<float> b, std::span<float> c) {
  const int64_t n = static_cast<int64_t>(a.size());
  const float s = 0.5f;
  float* pa = a.data();
  const float* pb = b.data();
  const float* pc = c.data();
  double t = now();
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
  return now() - t;
}

/// The update graph: momentum SGD on every weight, then the EMA of the updated weights.
Symbol update_graph(const std::vector<Shape>& shapes, bool bucket,
                    std::map<std::string, Shape>& bind_shapes) {
  const size_t n = shapes.size();
  auto t = Symbol::Variable("t");
  bind_shapes["t"] = Shape{1};
  std::vector<std::vector<Symbol>> upd_in, ema_in;
  for (size_t i = 0; i < n; ++i) {
    const std::string p = "p" + std::to_string(i);
    for (const char* s : {"", "_grad", "_mom", "_ema"}) bind_shapes[p + s] = shapes[i];
    upd_in.push_back({Symbol::Variable(p), Symbol::Variable(p + "_grad"), Symbol::Variable(p + "_mom")});
  }
  Attrs ua{{"lr", "0.01"}, {"momentum", "0.9"}}, ea{{"decay", "0.999"}};
  std::vector<Symbol> heads;
  if (bucket) {
    std::vector<Symbol> flat;
    std::string wds = "(", inplace = "(";  // both buckets: output i into input 3i
    for (size_t i = 0; i < n; ++i) {
      flat.insert(flat.end(), upd_in[i].begin(), upd_in[i].end());
      wds += (i ? ", " : "") + std::string(i % 3 ? "0" : "0.0001");
      inplace += (i ? ", " : "") + std::to_string(3 * i);
    }
    Attrs a = ua;
    a["op"] = "sgd_mom_update";
    a["num_tensors"] = std::to_string(n);
    a["wds"] = wds + ")";
    a["__inplace__"] = inplace + ")";
    auto upd = Symbol::Op("_loom_bucket", flat, a, "update");
    std::vector<Symbol> eflat;
    for (size_t i = 0; i < n; ++i) {
      eflat.push_back(Symbol::Variable("p" + std::to_string(i) + "_ema"));
      eflat.push_back(upd[i]);
      eflat.push_back(t);
    }
    Attrs e = ea;
    e["op"] = "_loom_ema_update";
    e["num_tensors"] = std::to_string(n);
    e["__inplace__"] = inplace + ")";
    auto ema = Symbol::Op("_loom_bucket", eflat, e, "ema");
    for (size_t i = 0; i < n; ++i) heads.push_back(ema[i]);
  } else {
    for (size_t i = 0; i < n; ++i) {
      Attrs a = ua;
      a["wd"] = i % 3 ? "0" : "0.0001";
      a["__inplace__"] = "(0,)";
      auto u = Symbol::Op("sgd_mom_update", upd_in[i], a);
      Attrs e = ea;
      e["__inplace__"] = "(0,)";
      heads.push_back(Symbol::Op("_loom_ema_update",
                                 {Symbol::Variable("p" + std::to_string(i) + "_ema"), u, t}, e));
    }
  }
  return Symbol::Group(heads);
}

void BM_FusedUpdate(benchmark::State& state) {
  const bool bucket = state.range(0) != 0, chains = state.range(1) != 0;
  auto shapes = resnet18_params();
  int64_t n = 0;
  for (const auto& s : shapes) n += s.numel();
  std::map<std::string, Shape> bs;
  Symbol g = update_graph(shapes, bucket, bs);
  BindOptions o;
  o.default_req = Req::kNull;
  o.fuse_chains = chains;
  auto ex = Executor::simple_bind(g, bs, o);
  for (auto& [k, v] : ex->arg_dict()) v.fill(k == "t" ? 100.0 : 0.01);
  for (auto& [k, v] : ex->aux_dict()) v.fill(0.0);
  // The triad's arrays at different offsets modulo 4 KiB, as STREAM's padding does.
  std::vector<float> buf(3 * static_cast<size_t>(n) + 4096, 1.f);
  std::span<float> a(buf.data(), n), b(buf.data() + n + 80, n), c(buf.data() + 2 * n + 160, n);
  ex->forward(true);
  triad_seconds(a, b, c);
  double best_upd = 1e30, best_triad = 1e30;
  for (auto _ : state) {
    best_triad = std::min(best_triad, triad_seconds(a, b, c));
    double t = now();
    ex->forward(true);
    best_upd = std::min(best_upd, now() - t);
    benchmark::DoNotOptimize(ex->outputs()[0].raw());
  }
  // Bytes moved per element: update reads w, g, mom and writes w, mom (5); EMA reads ema,
  // w and writes ema (3). Triad: reads b, c, writes a (3).
  const double upd_gbs = 8.0 * 4 * double(n) / best_upd / 1e9;
  const double triad_gbs = 3.0 * 4 * double(n) / best_triad / 1e9;
  state.counters["update_ms"] = best_upd * 1e3;
  state.counters["GB/s"] = upd_gbs;
  state.counters["triad_GB/s"] = triad_gbs;
  state.counters["of_triad"] = upd_gbs / triad_gbs;
  state.SetLabel(std::string(bucket ? "bucketed" : "per-parameter") + ", " +
                 std::to_string(ex->fused_steps()) + " steps chained, " +
                 std::to_string(shapes.size()) + " tensors, " + std::to_string(n) + " floats, " +
                 std::to_string(omp_get_max_threads()) + " threads");
}
BENCHMARK(BM_FusedUpdate)
    ->Args({1, 1})
    ->Args({1, 0})
    ->Args({0, 1})
    ->Args({0, 0})
    ->Iterations(30)->Unit(benchmark::kMillisecond);

Symbol mlp() {
  auto h = Symbol::Op("FullyConnected", {Symbol::Variable("data")}, {{"num_hidden", "512"}}, "fc1");
  h = Symbol::Op("Activation", {h}, {{"act_type", "relu"}}, "relu1");
  h = Symbol::Op("FullyConnected", {h}, {{"num_hidden", "512"}}, "fc2");
  h = Symbol::Op("Activation", {h}, {{"act_type", "relu"}}, "relu2");
  h = Symbol::Op("FullyConnected", {h}, {{"num_hidden", "10"}}, "fc3");
  return Symbol::Op("SoftmaxOutput", {h}, {}, "softmax");
}

void fill(Executor& ex) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 0.05f);
  for (auto& [k, v] : ex.arg_dict())
    for (int64_t i = 0; i < v.size(); ++i)
      v.data<float>()[i] = k == "softmax_label" ? float(i % 10) : nd(rng);
}

void BM_MicroStep(benchmark::State& state) {
  const int k = 4;
  const Shape data{64, 784};
  OptimizerSpec opt;
  opt.momentum = 0.9;
  opt.wd = 1e-4;
  StepOptions so;
  so.accumulate = k;
  so.ema = EmaOptions{};
  BindOptions null_req;
  null_req.default_req = Req::kNull;
  auto step = Executor::simple_bind(make_step(mlp(), opt, so), {{"data", data}}, null_req);
  fill(*step);
  // Baseline: forward+backward on a plain executor, then one bucketed accumulate pass over
  // arrays of the gradients' sizes.
  BindOptions o;
  o.grad_req = {{"data", Req::kNull}, {"softmax_label", Req::kNull}};
  auto plain = Executor::simple_bind(mlp(), {{"data", data}}, o);
  fill(*plain);
  std::vector<Symbol> acc_in;
  std::map<std::string, Shape> acc_shapes{{"first", Shape{1}}};
  size_t na = 0;
  for (const auto& [name, gr] : plain->grad_dict()) {
    if (gr.is_none()) continue;
    acc_in.push_back(Symbol::Variable(name + "_acc"));
    acc_in.push_back(Symbol::Variable(name + "_g"));
    acc_in.push_back(Symbol::Variable("first"));
    acc_shapes[name + "_acc"] = acc_shapes[name + "_g"] = gr.shape();
    ++na;
  }
  auto acc = Executor::simple_bind(
      Symbol::Op("_loom_bucket", acc_in, {{"op", "_loom_accumulate"}, {"num_tensors", std::to_string(na)}}),
      acc_shapes, null_req);
  for (int i = 0; i < 3 * k; ++i) step->forward(true);  // warm up, ends on a real step
  double micro = 1e30, last = 1e30, base = 1e30;
  for (auto _ : state) {
    for (int i = 0; i < k; ++i) {
      double t = now();
      step->forward(true);
      double dt = now() - t;
      (i == k - 1 ? last : micro) = std::min(i == k - 1 ? last : micro, dt);
    }
    double t = now();
    plain->forward(true);
    plain->backward();
    acc->forward(true);
    base = std::min(base, now() - t);
  }
  state.counters["micro_ms"] = micro * 1e3;
  state.counters["fwd_bwd_acc_ms"] = base * 1e3;
  state.counters["ratio"] = micro / base;
  state.counters["update_step_ms"] = last * 1e3;
  state.SetLabel("MLP 784-512-512-10 b64, k=4, sgd momentum + EMA");
}
BENCHMARK(BM_MicroStep)->Iterations(50)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace loom
