// Loom's own thread team for layers too small for an OpenMP parallel region. With passive
// OpenMP waiting (Loom's default, runtime/cpu/thread_cap.h) every parallel region pays a
// futex wake-up of tens of microseconds, so small layers run on one thread and at batch 1 the
// other cores idle. The team's workers instead spin for a bounded time after each task
// (LOOM_TEAM_SPIN_US, default 40 us; _mm_pause, with sched_yield now and then) before they
// block: a network's layers come back to back, so the workers stay awake through a forward
// pass and sleep once it ends, and a competing process loses at most the spin budget of a
// core. park() sends spinning workers to sleep at once; code calls it before an every-thread
// OpenMP region so the spinners do not take cores from OpenMP's workers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace loom::cpu {

/// A non-owning reference to a callable `void(int)`; valid while the callable lives.
class PartFn {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, PartFn>>>
  PartFn(F&& f)  // NOLINT: implicit, as a function parameter
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, int part) { (*static_cast<std::remove_reference_t<F>*>(o))(part); }) {}
  void operator()(int part) const { call_(obj_, part); }

 private:
  void* obj_;
  void (*call_)(void*, int);
};

class ThreadTeam {
 public:
  /// A team of `threads` threads: the caller of run() and threads - 1 workers (started
  /// lazily, at the first run with more than one part). `spin_us`: how long a worker spins
  /// for the next task before it blocks.
  /// `stall_window_ms`: see run() (tests widen it; the process-wide team uses kStallWindowMs).
  ThreadTeam(int threads, double spin_us, int stall_window_ms = kStallWindowMs);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  /// The process-wide team: omp_get_max_threads() of its first caller threads (so
  /// OMP_NUM_THREADS and --threads; the count before a ThreadCap when called inside one),
  /// LOOM_TEAM_SPIN_US spin. Created on first use.
  static ThreadTeam& global();

  /// Threads of the team, the caller included.
  int size() const { return threads_; }

  /// Runs fn(0) ... fn(parts - 1), each exactly once, on the caller and the workers (parts
  /// are claimed dynamically, so a worker that is slow to wake leaves its part to the
  /// others), and returns when all are done. The first exception a part throws is rethrown
  /// here after every part finished. Serial on the caller when called from inside a part,
  /// while another thread runs the team, with one part or a one-thread team, in a forked
  /// child, and for kStallBackoffMs after a run whose caller waited for a worker much longer
  /// than its own share took (over 300 us and 3x) for the second time within kStallWindowMs:
  /// a preempted worker, as when another process uses the cores, would otherwise hold up
  /// every run by a scheduler time slice. A lone stall (a virtual CPU descheduled for a
  /// moment on a shared host) costs less than a serial stretch would. Stalls soon after the
  /// last serial stretch double it, up to kStallBackoffMaxMs.
  void run(int parts, PartFn fn);

  /// Spinning workers block now instead of at the end of their spin budget (cheap; nothing
  /// when no worker is spinning). The next run() wakes them.
  void park();

  /// Runs in which the caller waited for a preempted worker (the second within
  /// kStallWindowMs then makes the next kStallBackoffMs of runs serial).
  long stalls() const { return stalls_.load(std::memory_order_relaxed); }
  static constexpr int kStallBackoffMs = 100, kStallBackoffMaxMs = 1600, kStallWindowMs = 200;

  /// The process-wide team, or null before its first use.
  static const ThreadTeam* existing();

  /// Parks the process-wide team if it exists (for code about to run an every-thread
  /// OpenMP region).
  static void park_global();

 private:
  void start();
  void worker_main();
  bool work_waiting(uint64_t seen_gen) const;
  void run_claimed(uint64_t word);

  // The run being published: generation (high 32 bits) | parts (16) | next part (16).
  static constexpr uint64_t kPartBits = 16, kPartMask = (uint64_t{1} << kPartBits) - 1;
  static uint64_t gen_of(uint64_t w) { return w >> 32; }
  static int parts_of(uint64_t w) { return static_cast<int>((w >> kPartBits) & kPartMask); }
  static int next_of(uint64_t w) { return static_cast<int>(w & kPartMask); }

  const int threads_;
  const double spin_us_;
  const std::chrono::milliseconds stall_window_;
  std::vector<std::thread> workers_;
  std::mutex run_mu_;  // one run at a time
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> parked_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
  const PartFn* fn_ = nullptr;                            // valid while a run is in progress
  std::chrono::steady_clock::time_point serial_until_{};  // under run_mu_
  std::chrono::milliseconds backoff_{kStallBackoffMs};    // under run_mu_
  std::chrono::steady_clock::time_point last_stall_{};    // under run_mu_
  std::atomic<long> stalls_{0};
  std::mutex err_mu_;
  std::exception_ptr err_;
};

}  // namespace loom::cpu
