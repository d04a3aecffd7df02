#include "runtime/cpu/thread_cap.h"

#include <omp.h>

#include <cstdlib>
#include <string>

#include "runtime/base.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/cpu/thread_team.h"

namespace loom::dnnl_util {
namespace {

// Single-thread rates of one core, roughly (Zen 2 / Zen 5 measured): direct and 1x1
// convolutions reach ~200 GFLOP/s with AVX-512 and about half with AVX2; memory-bound loops
// over data in cache (a layer's output) move ~100 GB/s.
double estimated_us(double flops, double bytes) {
  const double flop_per_us = isa_has_avx512() ? 200e3 : 100e3;
  return flops / flop_per_us + bytes / 100e3;
}

// The OpenMP thread count this thread had before its outermost active ThreadCap.
thread_local int cap_uncapped = 0;

}  // namespace

double env_microseconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  double d = std::strtod(v, &end);
  if (end == v || *end || d < 0)
    throw Error(std::string(name) + " must be a number >= 0, got '" + std::string(v) + "'");
  return d;
}

int uncapped_max_threads() { return cap_uncapped > 0 ? cap_uncapped : omp_get_max_threads(); }

int threads_for_work(double flops, double bytes) {
  if (env_off("LOOM_SERIAL_SMALL_OPS")) return 0;
  return estimated_us(flops, bytes) < env_microseconds("LOOM_SERIAL_US", 80.0) ? 1 : 0;
}

bool team_split_worth(double flops, double bytes) {
  return estimated_us(flops, bytes) < env_microseconds("LOOM_TEAM_SPLIT_US", 1000.0);
}

bool parallel_worth(double bytes) { return threads_for_work(0, bytes) != 1; }

ThreadCap::ThreadCap(int threads) {
  // An every-thread primitive follows: spinning team workers would take cores from its
  // OpenMP threads.
  if (threads != 1) cpu::ThreadTeam::park_global();
  if (threads <= 0 || omp_in_parallel()) return;
  const int now = omp_get_max_threads();
  if (threads >= now) return;
  previous_ = now;
  if (cap_uncapped == 0) {
    cap_uncapped = now;
    outermost_ = true;
  }
  omp_set_num_threads(threads);
}

ThreadCap::~ThreadCap() {
  if (previous_ > 0) omp_set_num_threads(previous_);
  if (outermost_) cap_uncapped = 0;
}

}  // namespace loom::dnnl_util
