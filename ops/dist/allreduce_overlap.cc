// Gradient allreduce overlapped with backward: three ops that together do what one
// `_loom_allreduce` node does after backward, but start each bucket's collective as soon as its
// last gradient is accumulated (graph/step_builder.cc, DistOptions::overlap).
//
//   _loom_allreduce_plan(acc0..accN-1) -> handle
//       Reads only the accumulator *variables* (available before the step starts). At bind
//       it cuts the tensors, in input order (reverse topological: the last layers' first),
//       into buckets of first_bucket_mb then bucket_mb MiB (the rule of `_loom_allreduce`),
//       checks that every rank has the same plan, and lays the accumulators out back to back
//       (contiguous inputs: a bucket is one byte range, one collective). Each call writes a
//       (1,) float32 handle naming the plan, which the other two ops read.
//   _loom_allreduce_start(acc_i, handle) -> acc_i (in place), attribute `index` = i
//       Marks tensor i as accumulated. Once every tensor of the next bucket (in plan order)
//       has arrived, the bucket's non-blocking allreduce starts, in place, so buckets start in
//       the same order on every rank whatever order backward produces gradients in. It also
//       tests the collectives in flight: Open MPI progresses a non-blocking collective only
//       inside MPI calls, and these nodes run between backward's nodes
//       (LOOM_DIST_OVERLAP_TEST=0 leaves all progress to the wait, for measurements).
//   _loom_allreduce_wait(acc0..accN-1, handle) -> acc0..accN-1 (in place)
//       Waits for every bucket (bounded by LOOM_DIST_TIMEOUT_S); the optimizer update reads
//       its outputs. Depending on every gradient, it runs after the whole backward.
//
// Start and wait nodes are switched by the last-micro-step predicate, like the update; the
// plan node runs on every call (it only writes the handle).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "ops/dist/adjacent_runs.h"
#include "ops/dtype_policy.h"
#include "ops/infer.h"
#include "ops/op.h"
#include "runtime/dist/communicator.h"

namespace loom {
namespace {

struct PlanParam {
  int num_tensors;
  int world_size;
  double bucket_mb, first_bucket_mb;
};

const auto kPlanSchema =
    ParamSchema<PlanParam>()
        .required("num_tensors", &PlanParam::num_tensors, "Number of tensors.")
        .optional("world_size", &PlanParam::world_size, 0,
                  "Ranks the graph was built for (its scales assume it); 0: any.")
        .optional("bucket_mb", &PlanParam::bucket_mb, 25.0, "MiB per bucket after the first.")
        .optional("first_bucket_mb", &PlanParam::first_bucket_mb, 1.0,
                  "MiB of the first bucket (the last gradients of backward).")
        .check([](PlanParam& p) {
          check_input_count(p.num_tensors, "num_tensors");
          if (p.world_size < 0) throw ParamError("world_size must be >= 0");
          if (!(p.bucket_mb > 0) || !(p.first_bucket_mb > 0))
            throw ParamError("bucket_mb and first_bucket_mb must be > 0");
        });

struct StartParam {
  int index;
};
const auto kStartSchema = ParamSchema<StartParam>().required(
    "index", &StartParam::index, "Position of this tensor in its plan node's inputs.");

struct WaitParam {
  int num_tensors;
};
const auto kWaitSchema = ParamSchema<WaitParam>().required("num_tensors", &WaitParam::num_tensors,
                                                           "Number of tensors (the plan's).");

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

  /// Tensor i is accumulated; starts every bucket that is complete and next in order.
  void arrive(size_t i, const NDArray& a, const std::string& node) {
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

  /// Waits for every collective of this call, then forgets them.
  void finish() {
    if (next_ != buckets_.size()) {
      std::string absent;
      for (size_t i = 0; i < arrived_.size(); ++i)
        if (arrived_[i].is_none()) absent += (absent.empty() ? "" : ", ") + std::to_string(i);
      reset();
      throw dist::DistError(where_ + ": the wait ran before tensors " + absent +
                            " were started (their _loom_allreduce_start nodes did not run)");
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& r : requests_) r->wait();
    if (thread_) thread_->wait_all();
    comm_.add_exposed(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    reset();
  }

  /// A new call begins (the plan node runs first): if the last call ended between a start
  /// and its wait (an exception), its collectives are completed and forgotten.
  void begin_call() {
    if (!dirty_) return;
    for (auto& r : requests_) r->wait();
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
};

// Plans by handle. A handle travels through the graph as a float32 value (exact below 2^24).
std::mutex& plans_mutex() {
  static std::mutex m;
  return m;
}
std::map<int, Plan*>& plans() {
  static std::map<int, Plan*> p;
  return p;
}

Plan& find_plan(const NDArray& handle, const std::string& node, const char* op) {
  const float h = *handle.cdata<float>();
  std::lock_guard<std::mutex> lock(plans_mutex());
  auto it = plans().find(static_cast<int>(h));
  if (it == plans().end())
    throw dist::DistError("node '" + node + "' (op " + std::string(op) +
                          "): its handle input does not come from a live _loom_allreduce_plan "
                          "node of this executor");
  return *it->second;
}

class PlanKernel final : public Kernel {
 public:
  explicit PlanKernel(const KernelArgs& a) {
    const auto& p = a.attrs.param<PlanParam>();
    dist::Communicator& comm = dist::init();
    const std::string where = "node '" + a.attrs.name + "' (op _loom_allreduce_plan) on rank " +
                              std::to_string(comm.rank()) + " of " + std::to_string(comm.size());
    if (p.world_size > 0 && p.world_size != comm.size())
      throw dist::DistError(where + ": the step graph was built for " +
                            std::to_string(p.world_size) +
                            " ranks (its gradient scale assumes it); rebuild it for this job");
    // The bucket plan: tensors in input order, a bucket closes once it holds its cap.
    std::vector<std::vector<size_t>> buckets;
    std::string text = a.attrs.name;
    size_t bytes = 0;
    for (size_t i = 0; i < a.in_shapes.size(); ++i) {
      const size_t cap =
          static_cast<size_t>((buckets.size() <= 1 ? p.first_bucket_mb : p.bucket_mb) * 1048576.0);
      if (buckets.empty() || bytes >= cap) {
        buckets.emplace_back();
        bytes = 0;
        text += ";";
      }
      buckets.back().push_back(i);
      bytes += static_cast<size_t>(a.in_shapes[i].bytes(a.in_types[i]));
      text += " " + a.in_shapes[i].str() + dtype_name(a.in_types[i]);
    }
    if (comm.size() > 1) comm.check_same("bucket plan of " + where, text.data(), text.size());
    plan_ = std::make_unique<Plan>(where, comm, std::move(buckets), a.in_shapes.size());
    static std::atomic<int> next{1};
    std::lock_guard<std::mutex> lock(plans_mutex());
    do {
      handle_ = next++ % (1 << 24);
    } while (handle_ == 0 || plans().count(handle_));
    plans()[handle_] = plan_.get();
  }
  ~PlanKernel() override {
    std::lock_guard<std::mutex> lock(plans_mutex());
    plans().erase(handle_);
  }

  void forward(const OpContext&, std::span<const NDArray>, std::span<const Req> req,
               std::span<const NDArray> out) override {
    plan_->begin_call();
    if (req[0] != Req::kNull) out[0].fill(static_cast<double>(handle_));
  }

 private:
  std::unique_ptr<Plan> plan_;
  int handle_ = 0;
};

class StartKernel final : public Kernel {
 public:
  explicit StartKernel(const KernelArgs& a)
      : name_(a.attrs.name), index_(static_cast<size_t>(a.attrs.param<StartParam>().index)) {}

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    Plan& plan = find_plan(in[1], name_, "_loom_allreduce_start");
    if (index_ >= plan.size())
      throw dist::DistError("node '" + name_ + "' (op _loom_allreduce_start): index " +
                            std::to_string(index_) + " but " + plan.where() + " has " +
                            std::to_string(plan.size()) + " tensors");
    if (!out[0].same_memory(in[0])) out[0].copy_from(in[0]);
    plan.arrive(index_, out[0], name_);
  }

 private:
  std::string name_;
  size_t index_;
};

class WaitKernel final : public Kernel {
 public:
  explicit WaitKernel(const KernelArgs& a) : name_(a.attrs.name) {}

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    const size_t n = out.size();
    Plan& plan = find_plan(in[n], name_, "_loom_allreduce_wait");
    if (plan.size() != n)
      throw dist::DistError("node '" + name_ + "' (op _loom_allreduce_wait): " + std::to_string(n) +
                            " tensors but " + plan.where() + " has " + std::to_string(plan.size()));
    for (size_t i = 0; i < n; ++i)
      if (!out[i].same_memory(in[i]))
        throw dist::DistError("node '" + name_ + "' (op _loom_allreduce_wait): output " +
                              std::to_string(i) + " must be written in place into input " +
                              std::to_string(i));
    plan.finish();
  }

 private:
  std::string name_;
};

std::vector<std::string> numbered(int n, const char* base) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(base + std::to_string(i));
  return v;
}

void handle_shape(std::vector<Shape>& s, size_t i, const std::string& what) {
  merge_shape(s[i], Shape{1}, what);
}

LOOM_REGISTER_OP("_loom_allreduce_plan")
    .describe(
        "The bucket plan of an overlapped gradient allreduce over its inputs (the "
        "accumulators, laid out back to back); outputs a handle read by "
        "_loom_allreduce_start and _loom_allreduce_wait.")
    .params(kPlanSchema)
    .inputs([](const OpAttrs& a) { return numbered(a.param<PlanParam>().num_tensors, "acc"); })
    .outputs({"handle"})
    .shape_fn([](const OpAttrs&, std::vector<Shape>&, std::vector<Shape>& out) {
      handle_shape(out, 0, "output 0");
    })
    .type_fn([](const OpAttrs&, std::vector<DType>&, std::vector<DType>& out) {
      merge_type(out[0], DType::kFloat32, "output 0");
    })
    .contiguous([](const OpAttrs& a) {
      std::vector<int> all;
      for (int i = 0; i < a.param<PlanParam>().num_tensors; ++i) all.push_back(i);
      return std::vector<std::vector<int>>{all};
    })
    .zero_grad()
    .cpu<PlanKernel>();

LOOM_REGISTER_OP("_loom_allreduce_start")
    .describe(
        "Tensor `index` of a _loom_allreduce_plan is accumulated: starts the non-blocking "
        "allreduce of each bucket whose tensors have all arrived (in plan order), in place.")
    .params(kStartSchema)
    .inputs({"data", "handle"})
    .outputs({"output"})
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      merge_shape(out[0], in[0], "output 0");
      merge_shape(in[0], out[0], input_label(a, 0));
      handle_shape(in, 1, input_label(a, 1));
    })
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      merge_type(out[0], in[0], "output 0");
      merge_type(in[0], out[0], input_label(a, 0));
      merge_type(in[1], DType::kFloat32, input_label(a, 1));
    })
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<StartKernel>();

LOOM_REGISTER_OP("_loom_allreduce_wait")
    .describe(
        "Waits for the allreduce of every bucket of a _loom_allreduce_plan; outputs alias the "
        "reduced inputs.")
    .params(kWaitSchema)
    .inputs([](const OpAttrs& a) {
      auto v = numbered(a.param<WaitParam>().num_tensors, "data");
      v.push_back("handle");
      return v;
    })
    .outputs([](const OpAttrs& a) { return numbered(a.param<WaitParam>().num_tensors, "output"); })
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      for (size_t i = 0; i < out.size(); ++i) {
        merge_shape(out[i], in[i], "output " + std::to_string(i));
        merge_shape(in[i], out[i], input_label(a, i));
      }
      handle_shape(in, out.size(), input_label(a, out.size()));
    })
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      for (size_t i = 0; i < out.size(); ++i) {
        merge_type(out[i], in[i], "output " + std::to_string(i));
        merge_type(in[i], out[i], input_label(a, i));
      }
      merge_type(in[out.size()], DType::kFloat32, input_label(a, out.size()));
    })
    .inplace_fn([](const OpAttrs& a) {
      std::vector<std::pair<int, int>> v;
      for (int i = 0; i < a.param<WaitParam>().num_tensors; ++i) v.emplace_back(i, i);
      return v;
    })
    .zero_grad()
    .cpu<WaitKernel>();

LOOM_CPU_DTYPES("_loom_allreduce_plan", kDTypePolicyFloats);
LOOM_CPU_DTYPES("_loom_allreduce_start", kDTypePolicyFloats);
LOOM_CPU_DTYPES("_loom_allreduce_wait", kDTypePolicyFloats);

}  // namespace
}  // namespace loom
