#include "frontends/cli/bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frontends/cli/args.h"
#include "graph/infer.h"
#include "graph/json.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/cpu/thread_team.h"
#include "runtime/executor.h"
#include "runtime/params_io.h"

namespace loom::cli {

const char* kBenchUsage =
    "  loom bench SYMBOL.json [--params FILE] --shape NAME=d1,d2,... [--batch B]\n"
    "           [--threads N] [--iters N] [--warmup N] [--profile] [--trace FILE]\n"
    "      Inference latency (p50/p90/p99) and throughput after a warm-up. --batch sets the\n"
    "      first dimension of every --shape; --threads the OpenMP threads (default:\n"
    "      OMP_NUM_THREADS or all cores). Without --params the weights are random. --profile\n"
    "      adds a per-op time table (separate iterations) and the oneDNN implementation of\n"
    "      each convolution and fully-connected layer. --trace FILE (implies --profile)\n"
    "      writes the profiled iterations as a Chrome trace (chrome://tracing, Perfetto):\n"
    "      one event per iteration and one per kernel call, named by op, node in args.\n";

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Random weights that keep activations of deep nets in range (timing must not run into
// denormals or infinities): uniform with variance 1/fan_in for weights, 1 for BatchNorm
// scales and variances, 0 for biases, shifts and means; inputs uniform in [-1, 1]. Written
// through copy_from_host, a versioned write: a mutable pointer (data<float>()) would mark
// the weights as escaped, and kernels then redo their weight reorders on every call and skip
// their cached paths, so random-weight timings would be slower than with a params file.
void fill_random(const std::string& name, NDArray& a, bool is_input, std::mt19937& rng) {
  if (a.dtype() != DType::kFloat32 || a.shape().numel() == 0) return;
  const int64_t n = a.shape().numel();
  std::vector<float> v(static_cast<size_t>(n));
  float lo = -1.f, hi = 1.f;
  bool constant = false;
  if (!is_input) {
    if (ends_with(name, "gamma") || ends_with(name, "var") || ends_with(name, "alpha")) {
      std::fill(v.begin(), v.end(), ends_with(name, "alpha") ? 0.25f : 1.f);
      constant = true;
    } else if (a.shape().ndim() < 2) {
      constant = true;  // zeros
    } else {
      double fan_in = static_cast<double>(n) / static_cast<double>(a.shape()[0]);
      hi = static_cast<float>(std::sqrt(3.0 / fan_in));
      lo = -hi;
    }
  }
  if (!constant) {
    std::uniform_real_distribution<float> u(lo, hi);
    for (float& x : v) x = u(rng);
  }
  a.copy_from_host(v.data(), v.size() * sizeof(float));
}

struct OpTime {
  std::string op;
  double sec = 0;
  long calls = 0;
};

// The oneDNN implementation lines recorded at bind for one Convolution / FullyConnected
// node, found by the description its kernel records (input and weight shapes).
std::vector<std::string> impls_of(const std::string& op, const std::vector<Shape>& in,
                                  const std::string& num_hidden,
                                  const std::vector<std::string>& lines) {
  std::string prefix;
  if (op == "Convolution" && in.size() >= 2)
    prefix = "Convolution " + in[0].str() + " w" + in[1].str() + " g";
  else if (op == "FullyConnected" && !in.empty())
    prefix = "FullyConnected " + in[0].str() + "->" + num_hidden + " ";
  else
    return {};
  std::vector<std::string> out;
  for (const auto& l : lines) {
    if (l.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = l.substr(prefix.size());
    if (op == "Convolution") rest = rest.substr(std::min(rest.size(), rest.find(' ') + 1));
    // Inference runs the forward primitive: drop the backward ones from the line.
    auto bwd = rest.find(" bwd_data=");
    if (bwd != std::string::npos) rest = rest.substr(0, bwd);
    if (std::find(out.begin(), out.end(), rest) == out.end()) out.push_back(rest);
  }
  return out;
}

// A Chrome trace of the profiled iterations: complete ('X') events in microseconds from the
// first iteration's start, one per forward call ('forward') and one per kernel call (named
// by its op(s), the node(s) in args).
struct TraceEvent {
  std::string name, cat, node;
  double ts_us, dur_us;
};

void write_trace(const std::string& path, const std::vector<TraceEvent>& events) {
  nlohmann::json evs = nlohmann::json::array();
  evs.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "loom bench"}}}});
  for (const TraceEvent& e : events) {
    nlohmann::json j = {{"name", e.name}, {"cat", e.cat}, {"ph", "X"}, {"pid", 0}, {"tid", 0},
                        {"ts", e.ts_us}, {"dur", e.dur_us}};
    if (!e.node.empty()) j["args"] = {{"node", e.node}};
    evs.push_back(std::move(j));
  }
  std::ofstream f(path);
  if (!f) throw Error("loom bench: cannot write the trace to '" + path + "'");
  f << nlohmann::json{{"displayTimeUnit", "ms"}, {"traceEvents", std::move(evs)}}.dump(1) << "\n";
  if (!f.flush()) throw Error("loom bench: writing the trace to '" + path + "' failed");
}

void print_profile(Executor& ex, const Symbol& sym, const std::map<std::string, Shape>& shapes,
                   int iters, size_t impl_lines_before, const std::string& trace_path) {
  std::map<std::string, OpTime> times;
  std::vector<std::string> order;
  std::vector<TraceEvent> trace;
  const auto origin = Clock::now();
  auto us_since_origin = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - origin).count();
  };
  ex.set_step_timer([&](const std::string& node, const std::string& op, double sec) {
    auto [it, fresh] = times.try_emplace(node);
    if (fresh) order.push_back(node), it->second.op = op;
    it->second.sec += sec;
    ++it->second.calls;
    if (!trace_path.empty())
      trace.push_back({op, "operator", node, us_since_origin(Clock::now()) - sec * 1e6, sec * 1e6});
  });
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    const auto start = Clock::now();
    ex.forward(false);
    if (!trace_path.empty())
      trace.push_back({"forward", "executor", "", us_since_origin(start), ms_since(start) * 1e3});
  }
  double wall_ms = ms_since(t0);
  ex.set_step_timer({});
  if (!trace_path.empty()) write_trace(trace_path, trace);
  double sum_ms = 0;
  for (const auto& [k, v] : times) sum_ms += v.sec * 1e3;
  std::sort(order.begin(), order.end(),
            [&](const auto& a, const auto& b) { return times[a].sec > times[b].sec; });
  std::printf("\nper-op profile: %d iterations, wall %.2f ms, ops sum %.2f ms (%.1f%% of wall)\n",
              iters, wall_ms, sum_ms, wall_ms > 0 ? 100.0 * sum_ms / wall_ms : 0.0);
  std::printf("%10s %6s %6s %9s  %-28s %s\n", "total ms", "%", "calls", "ms/call", "op", "node");
  for (const auto& node : order) {
    const OpTime& t = times[node];
    std::printf("%10.3f %6.2f %6ld %9.4f  %-28s %s\n", t.sec * 1e3,
                sum_ms > 0 ? 100.0 * t.sec * 1e3 / sum_ms : 0.0, t.calls,
                t.calls ? t.sec * 1e3 / static_cast<double>(t.calls) : 0.0, t.op.c_str(),
                node.c_str());
  }
  // By op type, for the overview.
  std::map<std::string, std::pair<double, long>> by_op;
  for (const auto& [k, v] : times) by_op[v.op].first += v.sec * 1e3, by_op[v.op].second += v.calls;
  std::vector<std::pair<std::string, std::pair<double, long>>> ops(by_op.begin(), by_op.end());
  std::sort(ops.begin(), ops.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("\nby op type:\n%10s %6s %6s  %s\n", "total ms", "%", "calls", "op");
  for (const auto& [op, v] : ops)
    std::printf("%10.3f %6.2f %6ld  %s\n", v.first, sum_ms > 0 ? 100.0 * v.first / sum_ms : 0.0,
                v.second, op.c_str());

  // oneDNN implementations of the heavy ops, matched by the descriptions recorded at bind.
  auto all = dnnl_util::recorded_impls();
  std::vector<std::string> lines(
      all.begin() + static_cast<long>(std::min(impl_lines_before, all.size())), all.end());
  IndexedGraph g(sym.outputs());
  auto ent = infer_shapes(g, shapes, /*partial=*/true);
  std::printf("\noneDNN implementations (isa %s):\n", dnnl_util::isa_name().c_str());
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = *g.node(i).node;
    if (n.is_variable()) continue;
    const std::string& op = n.attrs.op->name;
    if (op != "Convolution" && op != "FullyConnected") continue;
    std::vector<Shape> in;
    for (uint32_t e : g.node(i).inputs) in.push_back(ent[e]);
    auto it = n.attrs.dict.find("num_hidden");
    auto impls = impls_of(op, in, it == n.attrs.dict.end() ? "" : it->second, lines);
    std::string joined;
    for (const auto& s : impls) joined += (joined.empty() ? "" : " | ") + s;
    std::printf("  %-28s %-16s %s\n", n.name().c_str(), op.c_str(),
                joined.empty() ? "(not recorded)" : joined.c_str());
  }
}

}  // namespace

int cmd_bench(const std::vector<std::string>& args) {
  std::string json, params_path;
  std::map<std::string, Shape> inputs;
  int threads = 0, iters = 50, warmup = 5;
  long batch = 0;
  bool profile = false;
  std::string trace_path;
  auto int_value = [](const std::string& flag, const std::string& v, long lo) {
    try {
      size_t used = 0;
      long x = std::stol(v, &used);
      if (used == v.size() && x >= lo) return x;
    } catch (const std::exception&) {
    }
    throw UsageError(flag + " expects an integer >= " + std::to_string(lo) + ", got '" + v + "'");
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      return args[++i];
    };
    if (a == "--params")
      params_path = value();
    else if (a == "--shape") {
      auto [name, dims] = split_eq(value(), "--shape");
      inputs[name] = parse_dims(dims);
    } else if (a == "--threads")
      threads = static_cast<int>(int_value(a, value(), 1));
    else if (a == "--batch")
      batch = int_value(a, value(), 1);
    else if (a == "--iters")
      iters = static_cast<int>(int_value(a, value(), 1));
    else if (a == "--warmup")
      warmup = static_cast<int>(int_value(a, value(), 0));
    else if (a == "--profile")
      profile = true;
    else if (a == "--trace")
      trace_path = value(), profile = true;
    else if (!a.empty() && a[0] == '-')
      throw UsageError("unknown option " + a);
    else if (json.empty())
      json = a;
    else
      throw UsageError("unexpected argument '" + a + "'");
  }
  if (json.empty()) throw UsageError("bench needs a SYMBOL.json");
  if (inputs.empty()) throw UsageError("bench needs --shape NAME=d1,d2,... for the data input(s)");
  if (batch > 0)
    for (auto& [k, s] : inputs) s[0] = batch;
  if (threads > 0) omp_set_num_threads(threads);

  Symbol sym = load_json_file(json);
  auto arg_names = sym.list_arguments();
  auto aux_names = sym.list_auxiliary_states();
  for (const auto& [k, v] : inputs)
    if (std::find(arg_names.begin(), arg_names.end(), k) == arg_names.end())
      throw BindError("--shape " + k + ": the graph has no argument named '" + k + "'");
  std::map<std::string, NDArray> arg_params, aux_params;
  if (!params_path.empty()) {
    auto ck = split_checkpoint(load_params(params_path), params_path);
    arg_params = ck.arg;
    aux_params = ck.aux;
    for (const auto& n : aux_names) {
      auto it = arg_params.find(n);
      if (it != arg_params.end() && !aux_params.count(n)) {
        aux_params[n] = it->second;
        arg_params.erase(it);
      }
    }
  }
  std::map<std::string, Shape> shapes = inputs;
  for (const auto& [k, v] : arg_params)
    if (!shapes.count(k) && std::find(arg_names.begin(), arg_names.end(), k) != arg_names.end())
      shapes[k] = v.shape();

  BindOptions opts;
  opts.default_req = Req::kNull;
  size_t impl_lines_before = dnnl_util::recorded_impls().size();
  auto t_bind = Clock::now();
  auto ex = Executor::simple_bind(sym, shapes, opts);
  double bind_ms = ms_since(t_bind);
  std::mt19937 rng(0);
  size_t randomized = 0;
  for (auto [name, arr] : ex->arg_dict()) {
    if (arg_params.count(name)) continue;
    fill_random(name, arr, inputs.count(name) > 0, rng);
    if (!inputs.count(name)) ++randomized;
  }
  for (auto [name, arr] : ex->aux_dict())
    if (!aux_params.count(name)) fill_random(name, arr, false, rng), ++randomized;
  ex->copy_params_from(arg_params, aux_params);
  if (!params_path.empty() && randomized)
    std::cerr << "loom: note: " << randomized
              << " arguments/aux states not in the params file got random values\n";

  std::string in_desc;
  for (const auto& [k, s] : inputs) in_desc += (in_desc.empty() ? "" : " ") + k + "=" + s.str();
  const long samples = inputs.begin()->second[0];
  std::printf("model: %s\ninputs: %s\nweights: %s\nthreads: %d  isa: %s\n", json.c_str(),
              in_desc.c_str(), params_path.empty() ? "random" : params_path.c_str(),
              omp_get_max_threads(), dnnl_util::isa_name().c_str());

  auto t_first = Clock::now();
  ex->forward(false);
  double first_ms = ms_since(t_first);
  for (int i = 1; i < warmup; ++i) ex->forward(false);
  std::vector<double> lat;
  lat.reserve(static_cast<size_t>(iters));
  auto t_all = Clock::now();
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    ex->forward(false);
    lat.push_back(ms_since(t0));
  }
  double all_ms = ms_since(t_all);
  std::vector<double> sorted = lat;
  std::sort(sorted.begin(), sorted.end());
  double mean = all_ms / iters;
  std::printf("bind: %.1f ms  first run: %.2f ms  warm-up: %d  iterations: %d\n", bind_ms, first_ms,
              std::max(warmup, 1), iters);
  std::printf("latency ms: mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  min %.3f  max %.3f\n", mean,
              percentile(sorted, 50), percentile(sorted, 90), percentile(sorted, 99),
              sorted.front(), sorted.back());
  std::printf("throughput: %.2f samples/s (batch %ld), %.2f batches/s\n",
              1e3 * static_cast<double>(samples) / mean, samples, 1e3 / mean);
  if (ex->inference_chunk())
    std::printf("inference in chunks of %ld samples (LOOM_INFER_CHUNK=0: whole batches)\n",
                static_cast<long>(ex->inference_chunk()));
  else if (samples > 1 && !ex->inference_chunk_note().empty())
    std::printf("%s\n", ex->inference_chunk_note().c_str());
  if (const cpu::ThreadTeam* team = cpu::ThreadTeam::existing())
    std::printf(
        "thread team: %d threads, %ld stalled runs (a second within 200 ms made the next runs "
        "serial)\n",
        team->size(), team->stalls());
  if (profile) print_profile(*ex, sym, shapes, iters, impl_lines_before, trace_path);
  if (!trace_path.empty()) std::printf("\nChrome trace: %s\n", trace_path.c_str());
  return 0;
}

}  // namespace loom::cli
