// Sharded vs unsharded state updates of a ResNet-18-sized parameter set (62 tensors, 11.69 M
// float32) on every rank of an MPI job, in one run: the model EMA (`_loom_bucket` of
// `_loom_ema_update` vs `_loom_ema_shard_update`), the Adam update (`_loom_bucket` of
// `adam_update` vs `_loom_shard_update`), and the whole real-step tail of the optimizer with its
// communication (allreduce + update vs reduce-scatter + update of the own range + all-gather,
// as make_step emits them). Variants alternate within each round (a barrier before each, so
// the ranks run together and share the memory bus as in training); medians over the rounds
// of the slowest rank's time.
//   lbuild loom_bench_dist_shard
//   mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 \
//     build/bin/loom_bench_dist_shard [rounds]
// ratio = sharded / unsharded time per rank (the goal for the EMA: <= 0.55 at 2 ranks).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "graph/symbol.h"
#include "runtime/dist/communicator.h"
#include "runtime/executor.h"

using namespace loom;

namespace {

/// ResNet-18 v1's trained parameters: convolutions, BatchNorm gamma/beta, the classifier.
std::vector<Shape> resnet18_params() {
  std::vector<Shape> v;
  auto conv_bn = [&](int64_t o, int64_t i, int64_t k) {
    v.push_back(Shape{o, i, k, k});
    v.push_back(Shape{o});
    v.push_back(Shape{o});
  };
  conv_bn(64, 3, 7);
  int64_t in = 64;
  for (int64_t c : {64, 128, 256, 512}) {
    for (int b = 0; b < 2; ++b) {
      conv_bn(c, b == 0 ? in : c, 3);
      conv_bn(c, c, 3);
      if (b == 0 && in != c) conv_bn(c, in, 1);
    }
    in = c;
  }
  v.push_back(Shape{1000, 512});
  v.push_back(Shape{1000});
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Seconds of one forward, the slowest rank's.
double timed(Executor& e) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  e.forward(true);
  double t = MPI_Wtime() - t0, worst = 0;
  MPI_Allreduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

void fill(Executor& e, const std::string& name, float v) {
  for (size_t i = 0; i < e.arg_names().size(); ++i)
    if (e.arg_names()[i] == name) e.arg_arrays()[i].fill(v);
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  dist::Communicator& comm = dist::init("mpi");
  const int world = comm.size();
  const auto shapes = resnet18_params();
  const size_t n = shapes.size();
  int64_t total = 0;
  for (const auto& s : shapes) total += s.numel();
  std::map<std::string, Shape> bind_shapes;
  std::vector<Symbol> w, g;
  for (size_t i = 0; i < n; ++i) {
    const std::string p = "p" + std::to_string(i);
    w.push_back(Symbol::Variable(p));
    g.push_back(Symbol::Variable(p + "_grad"));
    bind_shapes[p] = shapes[i];
    bind_shapes[p + "_grad"] = shapes[i];
  }
  const std::string ws = std::to_string(world), nt = std::to_string(n);
  const Attrs adam{{"lr", "0.001"}, {"wd", "0.0001"}};
  auto inplace_of = [&](size_t m) {
    std::string t = "(";
    for (size_t i = 0; i < n; ++i) t += (i ? ", " : "") + std::to_string(i * m);
    return t + ")";
  };
  auto all_inplace = [&](size_t k) {
    std::string t = "(";
    for (size_t i = 0; i < k; ++i) t += (i ? ", " : "") + std::to_string(i);
    return t + ")";
  };

  // EMA: per-tensor shadows in one bucket vs the rank's shard.
  Symbol t = Symbol::Variable("t");
  std::vector<Symbol> in;
  for (size_t i = 0; i < n; ++i)
    in.insert(in.end(), {Symbol::Variable("e" + std::to_string(i)), w[i], t});
  Symbol ema = Symbol::Op("_loom_bucket", in,
                          {{"op", "_loom_ema_update"},
                           {"num_tensors", nt},
                           {"decay", "0.999"},
                           {"__inplace__", inplace_of(3)}},
                          "ema");
  in = {Symbol::Variable("ema_shard")};
  in.insert(in.end(), w.begin(), w.end());
  in.push_back(t);
  Symbol ema_shard = Symbol::Op(
      "_loom_ema_shard_update", in,
      {{"num_tensors", nt}, {"world_size", ws}, {"decay", "0.999"}, {"__inplace__", "(0,)"}},
      "ema_shard");

  // Adam: per-tensor states in one bucket vs the rank's range (gradient in the padded buffer).
  in.clear();
  for (size_t i = 0; i < n; ++i)
    in.insert(in.end(), {w[i], g[i], Symbol::Variable("m" + std::to_string(i)),
                         Symbol::Variable("v" + std::to_string(i))});
  Attrs a = adam;
  a["op"] = "adam_update";
  a["num_tensors"] = nt;
  a["__inplace__"] = inplace_of(4);
  Symbol upd = Symbol::Op("_loom_bucket", in, a, "adam");
  Symbol flat = Symbol::Variable("flat");
  auto shard_update = [&](const Symbol& grad) {
    std::vector<Symbol> x = w;
    x.insert(x.end(), {grad, Symbol::Variable("shard_mean"), Symbol::Variable("shard_var")});
    Attrs b = adam;
    b["op"] = "adam_update";
    b["num_tensors"] = nt;
    b["world_size"] = ws;
    b["__inplace__"] = "(" + std::to_string(n) + ",)";
    return Symbol::Op("_loom_shard_update", x, b, "adam_shard");
  };
  Symbol upd_shard = shard_update(flat);

  // The optimizer's real-step tail with its communication.
  Attrs ar{{"num_tensors", nt}, {"world_size", ws}, {"__inplace__", all_inplace(n)}};
  Symbol reduced = Symbol::Op("_loom_allreduce", g, ar, "allreduce");
  in.clear();
  for (size_t i = 0; i < n; ++i)
    in.insert(in.end(), {w[i], reduced[i], Symbol::Variable("m" + std::to_string(i)),
                         Symbol::Variable("v" + std::to_string(i))});
  Symbol tail = Symbol::Op("_loom_bucket", in, a, "adam_after_allreduce");
  Symbol rs = Symbol::Op("_loom_shard_reduce_scatter", g, {{"num_tensors", nt}, {"world_size", ws}},
                         "reduce_scatter");
  std::vector<Symbol> x = w;
  x.push_back(shard_update(rs));
  Symbol tail_shard = Symbol::Op(
      "_loom_shard_all_gather", x,
      {{"num_tensors", nt}, {"world_size", ws}, {"__inplace__", all_inplace(n + 1)}}, "all_gather");

  std::map<std::string, Shape> s1 = bind_shapes;
  s1["t"] = Shape{1};
  const std::vector<std::pair<std::string, Symbol>> graphs = {
      {"ema", ema},   {"ema_shard", ema_shard},  {"adam", upd}, {"adam_shard", upd_shard},
      {"tail", tail}, {"tail_shard", tail_shard}};
  std::vector<std::unique_ptr<Executor>> exes;
  BindOptions opts;
  opts.default_req = Req::kNull;
  for (const auto& [name, sym] : graphs) {
    std::map<std::string, Shape> own;  // the shapes of this graph's arguments
    for (const auto& arg : sym.list_arguments())
      if (s1.count(arg)) own[arg] = s1.at(arg);
    exes.push_back(Executor::simple_bind(sym, own, opts));
    fill(*exes.back(), "t", 100.f);  // the EMA's constant decay (not the copy of step 1)
    for (size_t i = 0; i < n; ++i) {
      fill(*exes.back(), "p" + std::to_string(i), 0.5f);
      fill(*exes.back(), "p" + std::to_string(i) + "_grad", 1e-3f);
    }
    fill(*exes.back(), "flat", 1e-3f);
  }
  std::vector<std::vector<double>> times(graphs.size());
  for (int r = -2; r < rounds; ++r)  // two warm-up rounds
    for (size_t k = 0; k < graphs.size(); ++k) {
      const double s = timed(*exes[k]);
      if (r >= 0) times[k].push_back(s);
    }
  // Sanity: after c calls the shadow of a constant weight 0.5 is 0.5 * (1 - 0.999^c).
  const double c = rounds + 2, want = 0.5 * (1 - std::pow(0.999, c));
  // Every element of every shadow (and of the own shard range) must hold it.
  auto check = [&](Executor& e, const std::string& prefix, int64_t skip_tail) {
    for (size_t i = 0; i < e.aux_names().size(); ++i) {
      if (e.aux_names()[i].rfind(prefix, 0) != 0) continue;
      const NDArray& x = e.aux_arrays()[i];
      for (int64_t j = 0; j + skip_tail < x.size(); ++j)
        if (std::abs(x.cdata<float>()[j] - want) > 1e-4 * want) {
          std::fprintf(stderr, "rank %d: %s[%lld] = %g, expected %g\n", comm.rank(),
                       e.aux_names()[i].c_str(), static_cast<long long>(j),
                       double{x.cdata<float>()[j]}, want);
          return;
        }
    }
  };
  check(*exes[0], "e", 0);
  check(*exes[1], "ema_shard", total % world ? 1 : 0);  // a short range leaves one zero
  if (comm.rank() == 0) {
    std::printf(
        "%zu tensors, %lld float32 (ResNet-18), %d ranks, %d rounds, medians of the "
        "slowest rank (ms):\n",
        n, static_cast<long long>(total), world, rounds);
    const char* what[] = {"EMA update", "Adam update", "Adam + its communication"};
    for (size_t k = 0; k < graphs.size(); k += 2) {
      const double u = median(times[k]) * 1e3, s = median(times[k + 1]) * 1e3;
      std::printf("  %-26s unsharded %8.2f  sharded %8.2f  ratio %.3f\n", what[k / 2], u, s, s / u);
    }
  }
  dist::finalize();
  return 0;
}
