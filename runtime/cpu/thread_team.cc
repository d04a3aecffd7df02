#include "runtime/cpu/thread_team.h"

#include <immintrin.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "runtime/base.h"
#include "runtime/cpu/thread_cap.h"

namespace loom::cpu {
namespace {

// Set in a forked child: the parent's workers do not exist there, so every run is serial.
std::atomic<bool> team_forked{false};
// Inside a part: nested runs are serial.
thread_local bool team_in_part = false;

double team_spin_us_from_env() { return dnnl_util::env_microseconds("LOOM_TEAM_SPIN_US", 40.0); }

std::atomic<ThreadTeam*> team_global_ptr{nullptr};

}  // namespace

ThreadTeam::ThreadTeam(int threads, double spin_us, int stall_window_ms)
    : threads_(std::max(1, std::min(threads, static_cast<int>(kPartMask)))),
      spin_us_(spin_us),
      stall_window_(stall_window_ms) {}

ThreadTeam::~ThreadTeam() {
  if (team_global_ptr.load() == this) team_global_ptr.store(nullptr);
  {
    std::lock_guard<std::mutex> lock(sleep_mu_);
    stop_.store(true);
  }
  sleep_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadTeam& ThreadTeam::global() {
  // Often first used inside a ThreadCap(1) (a small layer's call): its uncapped count.
  static ThreadTeam team(dnnl_util::uncapped_max_threads(), team_spin_us_from_env());
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { team_forked.store(true); });
    team_global_ptr.store(&team);
    return true;
  }();
  (void)registered;
  return team;
}

const ThreadTeam* ThreadTeam::existing() { return team_global_ptr.load(); }

void ThreadTeam::park_global() {
  if (ThreadTeam* t = team_global_ptr.load(std::memory_order_relaxed)) t->park();
}

void ThreadTeam::park() {
  if (!parked_.load(std::memory_order_relaxed)) parked_.store(true, std::memory_order_relaxed);
}

void ThreadTeam::start() {
  workers_.reserve(static_cast<size_t>(threads_ - 1));
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker_main(); });
}

bool ThreadTeam::work_waiting(uint64_t) const {
  const uint64_t w = claim_.load(std::memory_order_acquire);
  return next_of(w) < parts_of(w);
}

// Claims and runs parts of the run `word` belongs to until none is left.
void ThreadTeam::run_claimed(uint64_t w) {
  for (;;) {
    if (next_of(w) >= parts_of(w)) return;
    if (!claim_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      continue;  // w reloaded
    const int part = next_of(w);
    team_in_part = true;
    try {
      (*fn_)(part);
    } catch (...) {
      std::lock_guard<std::mutex> lock(err_mu_);
      if (!err_) err_ = std::current_exception();
    }
    team_in_part = false;
    done_.fetch_add(1, std::memory_order_acq_rel);
    w = claim_.load(std::memory_order_acquire);
  }
}

void ThreadTeam::worker_main() {
  // Parts are one-thread work: a oneDNN primitive asking omp_get_max_threads() at run time
  // must not open a parallel region from a worker.
  omp_set_num_threads(1);
  using Clock = std::chrono::steady_clock;
  const auto budget = std::chrono::nanoseconds(static_cast<int64_t>(spin_us_ * 1e3));
  for (;;) {
    // Spin for the next task, then block.
    const auto t0 = Clock::now();
    bool found = false;
    for (uint32_t i = 1;; ++i) {
      if (work_waiting(0)) {
        found = true;
        break;
      }
      if (stop_.load(std::memory_order_relaxed) || parked_.load(std::memory_order_relaxed)) break;
      _mm_pause();
      if (i % 16 == 0) {
        if (Clock::now() - t0 >= budget) break;
        if (i % 256 == 0) sched_yield();  // a competing thread on this core gets it
      }
    }
    if (!found) {
      sleepers_.fetch_add(1);
      {
        std::unique_lock<std::mutex> lock(sleep_mu_);
        sleep_cv_.wait(lock, [&] { return stop_.load() || work_waiting(0); });
      }
      sleepers_.fetch_sub(1);
      if (stop_.load()) return;
    }
    run_claimed(claim_.load(std::memory_order_acquire));
  }
}

void ThreadTeam::run(int parts, PartFn fn) {
  if (parts <= 0) return;
  auto serial = [&] {
    for (int p = 0; p < parts; ++p) fn(p);
  };
  if (parts == 1 || threads_ == 1 || team_in_part || parts > static_cast<int>(kPartMask) ||
      team_forked.load(std::memory_order_relaxed))
    return serial();
  std::unique_lock<std::mutex> lock(run_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return serial();  // another thread runs the team
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  if (t0 < serial_until_) return serial();
  if (workers_.empty()) start();
  fn_ = &fn;
  err_ = nullptr;
  done_.store(0, std::memory_order_relaxed);
  parked_.store(false, std::memory_order_relaxed);
  const uint64_t gen = gen_of(claim_.load(std::memory_order_relaxed)) + 1;
  // Part 0 is the caller's; the workers claim from part 1.
  const uint64_t word = (gen << 32) | (static_cast<uint64_t>(parts) << kPartBits) | 1;
  claim_.store(word);  // seq_cst: ordered before the read of sleepers_
  if (sleepers_.load() > 0) {
    { std::lock_guard<std::mutex> l(sleep_mu_); }
    sleep_cv_.notify_all();
  }
  team_in_part = true;
  try {
    fn(0);
  } catch (...) {
    std::lock_guard<std::mutex> l(err_mu_);
    if (!err_) err_ = std::current_exception();
  }
  team_in_part = false;
  done_.fetch_add(1, std::memory_order_acq_rel);
  run_claimed(claim_.load(std::memory_order_acquire));
  if (done_.load(std::memory_order_acquire) < parts) {
    // A worker still runs a part. Waiting much longer than the caller's own share took means
    // it was preempted (another process wants its core): run serially for a while.
    const auto t1 = Clock::now();
    const auto limit = std::max<Clock::duration>(std::chrono::microseconds(300), 3 * (t1 - t0));
    bool stalled = false;
    for (uint32_t i = 1; done_.load(std::memory_order_acquire) < parts; ++i) {
      _mm_pause();
      if (i % 64 == 0 && !stalled && Clock::now() - t1 > limit) stalled = true;
      if (i % 1024 == 0) sched_yield();
    }
    const auto now = Clock::now();
    if (stalled && now - last_stall_ < stall_window_) {
      // Back to back stalls (another process keeps the cores busy) double the serial
      // stretch, up to kStallBackoffMaxMs; a stall after a calm stretch starts again at
      // kStallBackoffMs.
      const auto calm = now - serial_until_ > 4 * backoff_;
      backoff_ = calm ? std::chrono::milliseconds(kStallBackoffMs)
                      : std::min<std::chrono::milliseconds>(
                            2 * backoff_, std::chrono::milliseconds(kStallBackoffMaxMs));
      serial_until_ = now + backoff_;
    }
    if (stalled) {
      last_stall_ = now;
      stalls_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  fn_ = nullptr;
  if (err_) {
    std::exception_ptr e = err_;
    err_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace loom::cpu
