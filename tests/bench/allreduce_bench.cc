// Allreduce of ResNet-18's gradients (11.7 M float32) through Loom vs a plain MPI_Allreduce of
// the same bytes in the same run: through the communicator (one flat buffer), and through a
// bound data-parallel step graph, the `_loom_allreduce` node (DataParallel(overlap=False))
// timed by the executor's step timer. The step graph's model has ResNet-18's 62 parameter
// tensors (11,689,512 floats) and a trivial loss (the sum of every parameter), so its gradients
// are ResNet-18's bytes in its flat accumulator buffer; it runs with the default buckets (1 MiB
// first, then 25 MiB: 3 collectives) and with one bucket (1 collective, the plain call's
// shape). Each round runs every variant, in an order rotating from round to round, so they
// see the same machine load. A time is the smallest over the ranks: the rank that reached the
// collective last waits for no one, while the other's time includes waiting for it (inside the
// step graph the ranks reach the node after different amounts of work). Reported: medians, the
// ratio of the medians and the median of the per-round ratios.
//   mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 \
//     build/bin/loom_bench_allreduce [floats] [rounds]
// ratio = plain time / Loom time (1.0: no overhead; the goal is >= 0.9).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "graph/step_builder.h"
#include "runtime/dist/communicator.h"
#include "runtime/executor.h"

using loom::DType;
namespace dist = loom::dist;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double last_arrival(double t);

// Seconds of f() after a barrier, on the rank that started it last.
template <class F>
double timed(F f) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  f();
  return last_arrival(MPI_Wtime() - t0);
}

// The smallest time over the ranks: that of the rank which reached the collective last.
double last_arrival(double t) {
  double m = t;
  MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  return m;
}

// ResNet-18's trainable parameter shapes (ImageNet, 1000 classes), as tests/bench/bench_step.cc.
std::vector<loom::Shape> resnet18_params() {
  std::vector<loom::Shape> v;
  auto conv_bn = [&](int64_t out, int64_t in, int64_t k) {
    v.push_back(loom::Shape{out, in, k, k});
    v.push_back(loom::Shape{out});
    v.push_back(loom::Shape{out});
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
  v.push_back(loom::Shape{1000, 512});
  v.push_back(loom::Shape{1000});
  return v;
}

// A data-parallel SGD step over variables of ResNet-18's parameter shapes whose loss is the sum
// of all their elements (every gradient is ones), communicating after backward in
// `_loom_allreduce` nodes.
std::unique_ptr<loom::Executor> resnet18_shaped_step(double bucket_mb, size_t* floats) {
  using loom::Symbol;
  std::vector<Symbol> sums;
  *floats = 0;
  const auto shapes = resnet18_params();
  for (size_t i = 0; i < shapes.size(); ++i) {
    Symbol p =
        Symbol::Variable("p" + std::to_string(i) + "_weight", {{"__shape__", shapes[i].str()}});
    sums.push_back(Symbol::Op("sum", {p}, {}, "sum" + std::to_string(i)));
    *floats += static_cast<size_t>(shapes[i].numel());
  }
  Symbol total = Symbol::Op("add_n", sums, {{"num_args", std::to_string(sums.size())}}, "total");
  Symbol loss = Symbol::Op("MakeLoss", {total}, {}, "loss");
  loom::StepOptions so;
  so.dist = loom::DistOptions{.bucket_mb = bucket_mb, .overlap = false};
  loom::BindOptions o;
  o.default_req = loom::Req::kNull;
  return loom::Executor::simple_bind(
      loom::make_step(loss, loom::OptimizerSpec{.name = "sgd", .learning_rate = 1e-9}, so), {}, o);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 11'689'512;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 15;
  dist::Communicator& comm = dist::init("mpi");
  std::vector<float> a(n, 1.0f), b(n, 1.0f), c(n, 1.0f);
  std::vector<double> plain, loom_sum, loom_avg, loom_nb, graph_default, graph_one;
  size_t graph_floats = 0;
  auto step_default = resnet18_shaped_step(25, &graph_floats);
  auto step_one = resnet18_shaped_step(1e6, &graph_floats);
  double node_s = 0;  // the last call's `step_allreduce` node time
  for (auto* ex : {step_default.get(), step_one.get()})
    ex->set_step_timer([&](const std::string& name, const std::string&, double s) {
      if (name == "step_allreduce") node_s = s;
    });
  auto graph_node = [&](loom::Executor& ex) {
    MPI_Barrier(MPI_COMM_WORLD);
    node_s = -1;
    ex.forward(true);
    if (node_s < 0) std::abort();  // the node must have run
    return last_arrival(node_s);
  };
  // The variants, run in an order rotating from round to round.
  std::vector<std::function<double()>> variants = {
      [&] {
        return timed([&] {
          MPI_Allreduce(MPI_IN_PLACE, a.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        });
      },
      [&] { return timed([&] { comm.allreduce(b.data(), b.data(), n, DType::kFloat32); }); },
      [&] {
        return timed([&] {
          comm.allreduce(c.data(), c.data(), n, DType::kFloat32, dist::ReduceOp::kAverage);
        });
      },
      [&] {
        return timed([&] { comm.iallreduce(b.data(), b.data(), n, DType::kFloat32)->wait(); });
      },
      [&] { return graph_node(*step_default); },
      [&] { return graph_node(*step_one); },
  };
  std::vector<std::vector<double>*> out = {&plain,   &loom_sum,      &loom_avg,
                                           &loom_nb, &graph_default, &graph_one};
  for (int r = -2; r < rounds; ++r) {  // two warm-up rounds
    for (size_t j = 0; j < variants.size(); ++j) {
      const size_t v = (j + static_cast<size_t>(r + 2)) % variants.size();
      const double t = variants[v]();
      if (r >= 0) out[v]->push_back(t);
    }
  }
  if (comm.rank() == 0) {
    const double p = median(plain);
    const double mb = n * 4.0 / 1e6;
    // ratio of the medians, and the median of the per-round ratios (robust to load drift)
    auto line = [&](const char* what, const std::vector<double>& t) {
      std::vector<double> q;
      for (size_t i = 0; i < t.size(); ++i) q.push_back(plain[i] / t[i]);
      std::printf("  %-26s %8.2f ms   ratio %.3f   per round %.3f\n", what, median(t) * 1e3,
                  p / median(t), median(q));
    };
    std::printf("allreduce of %zu float32 (%.1f MB), %d ranks, %d rounds, medians:\n", n, mb,
                comm.size(), rounds);
    std::printf("  plain MPI_Allreduce        %8.2f ms\n", p * 1e3);
    line("loom allreduce (sum)", loom_sum);
    line("loom allreduce (average)", loom_avg);
    line("loom iallreduce + wait", loom_nb);
    std::printf("through a bound step graph's _loom_allreduce node (%zu float32 = %.1f MB):\n",
                graph_floats, graph_floats * 4.0 / 1e6);
    line("buckets 1 + 25 MiB (3)", graph_default);
    line("one bucket", graph_one);
    if (graph_floats != n)
      std::printf("  (the plain call moves %zu floats: run with %zu for equal bytes)\n", n,
                  graph_floats);
  }
  dist::finalize();
  return 0;
}
