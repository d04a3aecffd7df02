// The overlapped allreduce's bucket plan and per-call state (_loom_allreduce_plan, _start,
// _wait: allreduce_overlap.cc has the ops and their CPU kernels, dist_ops.cu the GPU ones),
// and the process-wide table that maps a plan node's handle to its Plan.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <atomic>

#include "ops/dist/adjacent_runs.h"
#include "ops/dist/allreduce_plan.h"
#include "ops/op.h"
#include "runtime/dist/communicator.h"

namespace loom::dist_ops {

struct PlanParam {
  int num_tensors;
  int world_size;
  double bucket_mb, first_bucket_mb;
};
struct StartParam {
  int index;
};
struct WaitParam {
  int num_tensors;
};

/// How a device plan orders the communicator's stream with the executor's (dist_ops.cu:
/// events): fork = the communicator's stream waits for the work queued on `stream`; join =
/// `stream` waits for the collectives queued so far.
class DeviceOrder {
 public:
  virtual ~DeviceOrder() = default;
  virtual void fork(void* stream) = 0;
  virtual void join(void* stream) = 0;
};

/// The experiment LOOM_DIST_OVERLAP_THREAD=1: buckets reduced by MPI's blocking allreduce on a
/// communication thread, in the order they were pushed (one queue per communicator). Between the
/// first push and wait_all() the executor's thread makes no MPI call (MPI_THREAD_SERIALIZED holds).
class CommThread {
 public:
  struct Run {
    void* data;
    size_t count;
    DType dtype;
  };
  explicit CommThread(dist::Communicator& comm) : comm_(comm), thread_([this] { loop(); }) {}
  /// The communicator's one thread, shared by every plan (several plans, e.g. one per lr_mult
  /// group, must not call MPI concurrently, and their collectives must keep executor order).
  static std::shared_ptr<CommThread> of(dist::Communicator& comm) {
    static std::mutex m;
    static std::map<dist::Communicator*, std::weak_ptr<CommThread>> threads;
    std::lock_guard<std::mutex> lock(m);
    auto t = threads[&comm].lock();
    if (!t) threads[&comm] = t = std::make_shared<CommThread>(comm);
    return t;
  }
  ~CommThread() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(Run r) {
    {
      std::lock_guard<std::mutex> lock(m_);
      queue_.push_back(r);
    }
    cv_.notify_all();
  }
  /// Returns once every pushed run is reduced; rethrows the first failure.
  void wait_all() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      Run r = queue_.front();
      busy_ = true;
      lock.unlock();
      try {
        comm_.allreduce(r.data, r.data, r.count, r.dtype);
      } catch (...) {
        std::lock_guard<std::mutex> g(m_);
        if (!error_) error_ = std::current_exception();
      }
      lock.lock();
      queue_.pop_front();
      busy_ = false;
      cv_.notify_all();
    }
  }

  dist::Communicator& comm_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Run> queue_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

/// One plan node's buckets and the state of the current call's collectives.
class Plan {
 public:
  Plan(std::string where, dist::Communicator& comm, std::vector<std::vector<size_t>> buckets,
       size_t n)
      : where_(std::move(where)),
        comm_(comm),
        buckets_(std::move(buckets)),
        bucket_of_(n),
        arrived_(n) {
    for (size_t b = 0; b < buckets_.size(); ++b)
      for (size_t i : buckets_[b]) bucket_of_[i] = b;
    missing_.assign(buckets_.size(), 0);
    reset();
    const char* th = std::getenv("LOOM_DIST_OVERLAP_THREAD");
    if (comm_.size() > 1 && th && std::string(th) == "1") thread_ = CommThread::of(comm_);
  }

  const std::string& where() const { return where_; }
  size_t size() const { return arrived_.size(); }

  /// GPU buffers (the NCCL back end): the collectives are ordered with the executor's stream
  /// by `order` instead of waited for on the host, and nothing polls them (NCCL progresses on
  /// its own stream); the communication-thread experiment is off.
  void set_device(std::unique_ptr<DeviceOrder> order) {
    device_ = std::move(order);
    thread_.reset();
    test_in_flight_ = false;
  }
  bool on_device() const { return device_ != nullptr; }

  /// Tensor i is accumulated; starts every bucket that is complete and next in order.
  /// `stream`: the executor's stream (device plans only).
  void arrive(size_t i, const NDArray& a, const std::string& node, void* stream = nullptr) {
    stream_ = stream;
    if (!arrived_[i].is_none())
      throw dist::DistError("node '" + node + "' (op _loom_allreduce_start): tensor " +
                            std::to_string(i) + " of " + where_ +
                            " arrived twice in one call (a wait node did not run)");
    arrived_[i] = a;
    dirty_ = true;
    --missing_[bucket_of_[i]];
    while (next_ < buckets_.size() && missing_[next_] == 0) start(next_++);
    if (test_in_flight_) progress();
  }

  /// Waits for every collective of this call, then forgets them. Device plans: `stream`
  /// (the executor's) waits for them instead.
  void finish(void* stream = nullptr) {
    if (next_ != buckets_.size()) {
      std::string absent;
      for (size_t i = 0; i < arrived_.size(); ++i)
        if (arrived_[i].is_none()) absent += (absent.empty() ? "" : ", ") + std::to_string(i);
      reset();
      throw dist::DistError(where_ + ": the wait ran before tensors " + absent +
                            " were started (their _loom_allreduce_start nodes did not run)");
    }
    if (device_) {  // the executor's stream waits for the NCCL stream: no host wait
      if (!requests_.empty()) device_->join(stream);
      reset();
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& r : requests_) r->wait();
    if (thread_) thread_->wait_all();
    comm_.add_exposed(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    reset();
  }

  /// A new call begins (the plan node runs first): if the last call ended between a start
  /// and its wait (an exception), its collectives are completed and forgotten.
  /// Device plans: `stream` (the executor's) waits for such leftover collectives instead.
  void begin_call(void* stream = nullptr) {
    if (!dirty_) return;
    if (device_) {
      if (!requests_.empty()) device_->join(stream);
    } else {
      for (auto& r : requests_) r->wait();
    }
    if (thread_) thread_->wait_all();
    reset();
  }

  /// Drives the collectives in flight (MPI progresses them inside its calls).
  void progress() {
    for (auto& r : requests_) r->test();
  }

 private:
  void reset() {
    for (auto& a : arrived_) a = NDArray();
    for (size_t b = 0; b < buckets_.size(); ++b) missing_[b] = buckets_[b].size();
    next_ = 0;
    dirty_ = false;
    requests_.clear();
  }

  // One non-blocking allreduce per run of the bucket's tensors adjacent in one storage.
  void start(size_t b) {
    if (device_) device_->fork(stream_);  // the NCCL stream waits for the executor's
    for (const dist_ops::Run& r : dist_ops::adjacent_runs(arrived_, buckets_[b])) {
      if (thread_)
        thread_->push({r.data, r.count, r.dtype});
      else
        requests_.push_back(comm_.iallreduce(r.data, r.data, r.count, r.dtype));
    }
  }

  std::string where_;
  dist::Communicator& comm_;
  std::vector<std::vector<size_t>> buckets_;
  std::vector<size_t> bucket_of_;
  std::vector<NDArray> arrived_;  ///< this call's arrays, none until arrived
  std::vector<size_t> missing_;   ///< per bucket, tensors not arrived yet
  size_t next_ = 0;               ///< the next bucket to start
  bool dirty_ = false;            ///< something arrived since the last reset
  std::vector<std::unique_ptr<dist::Request>> requests_;
  bool test_in_flight_ = !env_off("LOOM_DIST_OVERLAP_TEST");
  std::shared_ptr<CommThread> thread_;
  std::unique_ptr<DeviceOrder> device_;
  void* stream_ = nullptr;  ///< the executor's stream of the current arrive (device plans)
};

// Plans by handle. A handle travels through the graph as a float32 value (exact below 2^24).
inline std::mutex& plans_mutex() {
  static std::mutex m;
  return m;
}
inline std::map<int, Plan*>& plans() {
  static std::map<int, Plan*> p;
  return p;
}


/// The live plan of `handle` (a _loom_allreduce_plan output's value); `node`/`op` name the
/// caller in the error when there is none.
inline Plan& find_plan(int handle, const std::string& node, const char* op) {
  std::lock_guard<std::mutex> lock(plans_mutex());
  auto it = plans().find(handle);
  if (it == plans().end())
    throw dist::DistError("node '" + node + "' (op " + std::string(op) +
                          "): its handle input does not come from a live _loom_allreduce_plan "
                          "node of this executor");
  return *it->second;
}

/// A plan node's Plan (the bucket plan of its inputs, checked across ranks), registered under
/// a fresh handle for the kernel's life: what the CPU and GPU plan kernels share.
class PlanSlot {
 public:
  explicit PlanSlot(const KernelArgs& a) {
    const auto& p = a.attrs.param<PlanParam>();
    dist::Communicator& comm = dist::init();
    const std::string where = dist_ops::where(a.attrs.name, "_loom_allreduce_plan", comm);
    if (p.world_size > 0 && p.world_size != comm.size())
      throw dist::DistError(where + ": the step graph was built for " +
                            std::to_string(p.world_size) +
                            " ranks (its gradient scale assumes it); rebuild it for this job");
    BucketPlan b = plan_buckets(a.attrs.name, a.in_shapes, a.in_types, mib(p.first_bucket_mb),
                                mib(p.bucket_mb));
    if (comm.size() > 1) comm.check_same("bucket plan of " + where, b.text.data(), b.text.size());
    plan_ = std::make_unique<Plan>(where, comm, std::move(b.buckets), a.in_shapes.size());
    static std::atomic<int> next{1};
    std::lock_guard<std::mutex> lock(plans_mutex());
    do {
      handle_ = next++ % (1 << 24);
    } while (handle_ == 0 || plans().count(handle_));
    plans()[handle_] = plan_.get();
  }
  ~PlanSlot() {
    std::lock_guard<std::mutex> lock(plans_mutex());
    plans().erase(handle_);
  }
  PlanSlot(const PlanSlot&) = delete;
  PlanSlot& operator=(const PlanSlot&) = delete;

  Plan& plan() { return *plan_; }
  int handle() const { return handle_; }

 private:
  std::unique_ptr<Plan> plan_;
  int handle_ = 0;
};

}  // namespace loom::dist_ops
