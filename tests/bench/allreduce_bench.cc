// Allreduce of ResNet-18's gradients (11.7 M float32, one flat bucket) through Loom's
// communicator vs a plain MPI_Allreduce of the same bytes in the same run. Rounds alternate
// between the two so both see the same machine load; medians are reported.
//   mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 \
//     build/bin/loom_bench_allreduce [floats] [rounds]
// ratio = plain time / Loom time (1.0: no overhead; the goal is >= 0.9).
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "runtime/dist/communicator.h"

using loom::DType;
namespace dist = loom::dist;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double timed(F f) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  f();
  return MPI_Wtime() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 11'700'000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 15;
  dist::Communicator& comm = dist::init("mpi");
  std::vector<float> a(n, 1.0f), b(n, 1.0f), c(n, 1.0f);
  std::vector<double> plain, loom_sum, loom_avg, loom_nb;
  for (int r = -2; r < rounds; ++r) {  // two warm-up rounds
    const double tp = timed(
        [&] { MPI_Allreduce(MPI_IN_PLACE, a.data(), int(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
    const double ts = timed([&] { comm.allreduce(b.data(), b.data(), n, DType::kFloat32); });
    const double ta = timed(
        [&] { comm.allreduce(c.data(), c.data(), n, DType::kFloat32, dist::ReduceOp::kAverage); });
    const double tn =
        timed([&] { comm.iallreduce(b.data(), b.data(), n, DType::kFloat32)->wait(); });
    if (r < 0) continue;
    plain.push_back(tp);
    loom_sum.push_back(ts);
    loom_avg.push_back(ta);
    loom_nb.push_back(tn);
  }
  if (comm.rank() == 0) {
    const double p = median(plain);
    const double mb = n * 4.0 / 1e6;
    std::printf("allreduce of %zu float32 (%.1f MB), %d ranks, %d rounds, medians:\n", n, mb,
                comm.size(), rounds);
    std::printf("  plain MPI_Allreduce        %8.2f ms\n", p * 1e3);
    std::printf("  loom allreduce (sum)       %8.2f ms   ratio %.3f\n", median(loom_sum) * 1e3,
                p / median(loom_sum));
    std::printf("  loom allreduce (average)   %8.2f ms   ratio %.3f\n", median(loom_avg) * 1e3,
                p / median(loom_avg));
    std::printf("  loom iallreduce + wait     %8.2f ms   ratio %.3f\n", median(loom_nb) * 1e3,
                p / median(loom_nb));
  }
  dist::finalize();
  return 0;
}
