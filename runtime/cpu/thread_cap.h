// Small operations on one thread. With passive OpenMP waiting (Loom's default) every
// parallel region wakes sleeping threads, which costs tens of microseconds on an idle
// (virtual) CPU: more than a small layer's whole work at batch 1. A kernel estimates its
// single-thread time at bind and, below a threshold, builds and runs its primitives with
// the OpenMP thread count capped at 1 (oneDNN fixes a primitive's thread count when it is
// created, and runs a one-thread primitive without a parallel region).
#pragma once

#include <cstdint>

namespace loom::dnnl_util {

/// Threads for an operation doing `flops` floating-point operations and moving `bytes` per
/// call: 1 when its estimated single-thread time is below LOOM_SERIAL_US microseconds
/// (default 80), else 0 (= no cap, every thread). LOOM_SERIAL_SMALL_OPS=0 turns the cap off.
/// Read at every call (bind time), so tests can switch it.
int threads_for_work(double flops, double bytes);

/// True when a layer doing `flops` / moving `bytes` per call is small enough (estimated
/// single-thread time below LOOM_TEAM_SPLIT_US microseconds, default 1000) to run its
/// inference split over Loom's thread team (runtime/cpu/thread_team.h) rather than one
/// OpenMP region: the team's workers spin between back-to-back layers, while passive OpenMP
/// threads must be woken for each (MobileFaceNet b1 with AVX2: 3.9 -> 2.5 ms).
bool team_split_worth(double flops, double bytes);

/// A time in microseconds from environment variable `name` (a number >= 0), or `fallback`
/// when it is unset or empty; throws Error naming the variable otherwise (LOOM_SERIAL_US,
/// LOOM_TEAM_SPIN_US).
double env_microseconds(const char* name, double fallback);

/// True when an element-wise loop over `bytes` (read plus written) should run in parallel:
/// the same estimate as threads_for_work.
bool parallel_worth(double bytes);

/// omp_get_max_threads() as it was before this thread's active ThreadCaps (what
/// OMP_NUM_THREADS / --threads set), for code that sizes its own threads inside a cap.
int uncapped_max_threads();

/// Caps this thread's OpenMP team size (omp_set_num_threads) for its lifetime when `threads`
/// is positive and below the current maximum; restores the previous value. Nothing inside a
/// parallel region. Any other count than 1 also parks Loom's thread team
/// (runtime/cpu/thread_team.h), whose spinning workers would compete with OpenMP's.
class ThreadCap {
 public:
  explicit ThreadCap(int threads);
  ~ThreadCap();
  ThreadCap(const ThreadCap&) = delete;
  ThreadCap& operator=(const ThreadCap&) = delete;

 private:
  int previous_ = 0;
  bool outermost_ = false;  // this cap recorded the uncapped count
};

}  // namespace loom::dnnl_util
