// The MPI back end (Open MPI on CPU; any MPI-3 library), on a duplicate of MPI_COMM_WORLD.
// A blocking collective is MPI's blocking call (Open MPI's tuned algorithms: twice as fast as
// the non-blocking ones for large buffers here) watched by a thread that aborts the job, naming
// the collective and rank, when it outlasts LOOM_DIST_TIMEOUT_S; a hang inside MPI cannot be
// unwound into an exception. A non-blocking collective is the MPI-3 I-call, completed by
// polling MPI_Test (Request::wait throws DistError after the timeout). Compiled only when
// CMake finds MPI (LOOM_MPI).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <dlfcn.h>
#include <mpi.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "runtime/dist/communicator.h"
#include "runtime/dtype_traits.h"

namespace loom::dist {
namespace {

void check_mpi(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw DistError("loom.dist: " + what + " failed: " + std::string(msg, len));
}

// MPI has no half type: float16 travels as 16-bit words and this op adds them in float.
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = float_to_half_bits(half_bits_to_float(a[i]) + half_bits_to_float(b[i]));
}

// What remains once MPI is done: moving an in-place reduce-scatter's chunk from where MPI
// leaves it (offset 0) to rank*count, then the scale pass.
struct After {
  const void* move_from = nullptr;
  void* move_to = nullptr;
  size_t move_bytes = 0;
  void* scale_data = nullptr;
  size_t scale_count = 0;
  DType scale_dtype = DType::kFloat32;
  double scale = 1.0;

  void run() const {
    if (move_bytes) std::memmove(move_to, move_from, move_bytes);
    if (scale_data) scale_buffer(scale_data, scale_count, scale_dtype, scale);
  }
};

class MpiRequest : public Request {
 public:
  MpiRequest(std::string what, double timeout_s, MPI_Request req, After after)
      : Request(std::move(what), timeout_s), req_(req), after_(after) {}
  // A request dropped before completion (an exception unwound past it) is left to MPI:
  // freeing an active collective request is erroneous, and the job is ending anyway.
  bool test() override {
    if (done_) return true;
    int flag = 0;
    check_mpi(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), what());
    if (!flag) return false;
    after_.run();
    done_ = true;
    return true;
  }

 private:
  MPI_Request req_;
  After after_;
  bool done_ = false;
};

// Calls `expire(what)` (which must not return) when a watched blocking call outlasts its
// timeout. One thread per communicator, asleep between collectives.
class Watchdog {
 public:
  explicit Watchdog(std::function<void(const std::string&)> expire)
      : expire_(std::move(expire)), thread_([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm(const std::string& what, double timeout_s) {
    if (timeout_s <= 0) return;
    std::lock_guard<std::mutex> lock(m_);
    what_ = what;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(timeout_s));
    timeout_s_ = timeout_s;
    armed_ = true;
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard<std::mutex> lock(m_);
    armed_ = false;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      const auto deadline = deadline_;
      cv_.wait_until(lock, deadline);
      if (armed_ && !stop_ && deadline_ == deadline && std::chrono::steady_clock::now() >= deadline)
        expire_(what_ + " did not complete within " + std::to_string(static_cast<int>(timeout_s_)) +
                " s (LOOM_DIST_TIMEOUT_S): another rank is stalled, dead or calling a different "
                "collective; aborting every rank");
    }
  }

  std::function<void(const std::string&)> expire_;
  std::mutex m_;
  std::condition_variable cv_;
  bool armed_ = false, stop_ = false;
  std::chrono::steady_clock::time_point deadline_;
  double timeout_s_ = 0;
  std::string what_;
  std::thread thread_;
};

class MpiCommunicator;
MpiCommunicator* g_live = nullptr;  // for the terminate handler

// Open MPI loads its components with dlopen and they need libmpi's symbols in the global
// scope; libloom (and Python's extension module) may have been opened RTLD_LOCAL.
void promote_libmpi_symbols() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) && info.dli_fname)
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
}

int mpi_rank_size(MPI_Comm c, int* size) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  MPI_Comm_size(c, size);
  return r;
}

class MpiCommunicator : public Communicator {
 public:
  static std::unique_ptr<Communicator> create() {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (finalized)
      throw DistError("loom.dist: MPI was finalised in this process and cannot start again");
    bool owns = false;
    if (!inited) {
      promote_libmpi_symbols();
      // Open MPI's non-blocking allreduce (libnbc) picks an algorithm that sends and sums the
      // whole buffer on every rank for 2 ranks; its ring (a reduce-scatter then an all-gather,
      // as the blocking call's large-message algorithms) took 60 ms instead of 115 ms for
      // 46.8 MB here (tests/bench/allreduce_bench.cc). The overlapped gradient allreduce uses
      // it. An explicit setting in the environment wins.
      setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
                "MPI_Init_thread");
      owns = true;
    }
    MPI_Comm comm;
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup");
    // Errors come back as codes (then DistError), not MPI's default abort without a message.
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int size = 0;
    const int rank = mpi_rank_size(comm, &size);
    return std::unique_ptr<Communicator>(new MpiCommunicator(comm, rank, size, owns));
  }

  ~MpiCommunicator() override {
    g_live = nullptr;
    MPI_Op_free(&half_sum_);
    MPI_Comm_free(&comm_);
    if (owns_mpi_) MPI_Finalize();
  }

  const char* backend() const override { return "mpi"; }

  [[noreturn]] void abort(int code, const std::string& message) override {
    std::fprintf(stderr, "loom.dist: rank %d of %d: %s\n", rank(), size(), message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 protected:
  std::unique_ptr<Request> start_allreduce(const void* send, void* recv, size_t count, DType t,
                                           double scale, bool blocking) override {
    const std::string what = describe("allreduce", stats().allreduce, count, t);
    const void* in = send == recv ? MPI_IN_PLACE : send;
    const int n = checked_count(count, what);
    After after{.scale_data = recv, .scale_count = count, .scale_dtype = t, .scale = scale};
    return run(what, blocking, after, [&](MPI_Request* req) {
      return req ? MPI_Iallreduce(in, recv, n, reduce_type(t), reduce_op(t), comm_, req)
                 : MPI_Allreduce(in, recv, n, reduce_type(t), reduce_op(t), comm_);
    });
  }

  std::unique_ptr<Request> start_reduce_scatter(const void* send, void* recv, size_t count, DType t,
                                                double scale, bool blocking) override {
    const std::string what = describe("reduce_scatter", stats().reduce_scatter, count, t);
    const size_t chunk = count * dtype_size(t);
    const bool in_place = static_cast<const char*>(send) + rank() * chunk == recv;
    // In place, MPI reads the whole buffer and leaves this rank's block at its start.
    void* out = in_place ? const_cast<void*>(send) : recv;
    const void* in = in_place ? MPI_IN_PLACE : send;
    const int n = checked_count(count, what);
    After after{.scale_data = recv, .scale_count = count, .scale_dtype = t, .scale = scale};
    if (in_place && rank() != 0) {
      after.move_from = out;
      after.move_to = recv;
      after.move_bytes = chunk;
    }
    return run(what, blocking, after, [&](MPI_Request* req) {
      return req ? MPI_Ireduce_scatter_block(in, out, n, reduce_type(t), reduce_op(t), comm_, req)
                 : MPI_Reduce_scatter_block(in, out, n, reduce_type(t), reduce_op(t), comm_);
    });
  }

  std::unique_ptr<Request> start_all_gather(const void* send, void* recv, size_t count, DType t,
                                            bool blocking) override {
    const std::string what = describe("all_gather", stats().all_gather, count, t);
    const size_t chunk = count * dtype_size(t);
    const bool in_place = static_cast<const char*>(recv) + rank() * chunk == send;
    const void* in = in_place ? MPI_IN_PLACE : send;
    const int n = checked_count(chunk, what);
    return run(what, blocking, After{}, [&](MPI_Request* req) {
      return req ? MPI_Iallgather(in, n, MPI_BYTE, recv, n, MPI_BYTE, comm_, req)
                 : MPI_Allgather(in, n, MPI_BYTE, recv, n, MPI_BYTE, comm_);
    });
  }

  std::unique_ptr<Request> start_broadcast(void* data, size_t count, DType t, int root,
                                           bool blocking) override {
    const std::string what =
        describe("broadcast", stats().broadcast, count, t) + " from rank " + std::to_string(root);
    const int n = checked_count(count * dtype_size(t), what);
    return run(what, blocking, After{}, [&](MPI_Request* req) {
      return req ? MPI_Ibcast(data, n, MPI_BYTE, root, comm_, req)
                 : MPI_Bcast(data, n, MPI_BYTE, root, comm_);
    });
  }

  std::unique_ptr<Request> start_barrier(bool blocking) override {
    const std::string what = "barrier #" + std::to_string(stats().barrier) + " on rank " +
                             std::to_string(rank()) + " of " + std::to_string(size()) + " (mpi)";
    return run(what, blocking, After{}, [&](MPI_Request* req) {
      return req ? MPI_Ibarrier(comm_, req) : MPI_Barrier(comm_);
    });
  }

 private:
  MpiCommunicator(MPI_Comm comm, int rank, int size, bool owns)
      : Communicator(rank, size), comm_(comm), owns_mpi_(owns) {
    check_mpi(MPI_Op_create(&half_sum, 1, &half_sum_), "MPI_Op_create");
    g_live = this;
    // A rank that dies of an uncaught C++ exception takes the job down instead of leaving
    // the other ranks inside a collective.
    std::set_terminate([] {
      std::string what = "terminate called";
      if (auto e = std::current_exception()) try {
          std::rethrow_exception(e);
        } catch (const std::exception& x) {
          what = std::string("uncaught exception: ") + x.what();
        } catch (...) {
          what = "uncaught exception";
        }
      if (g_live) g_live->abort(134, what + "; aborting every rank");
      std::abort();
    });
  }

  // One collective: `issue(nullptr)` makes MPI's blocking call (under the watchdog) and
  // `issue(&req)` its non-blocking twin, returned as a request.
  template <class Issue>
  std::unique_ptr<Request> run(const std::string& what, bool blocking, const After& after,
                               Issue issue) {
    if (!blocking) {
      MPI_Request req;
      check_mpi(issue(&req), what);
      return std::make_unique<MpiRequest>(what, timeout_s(), req, after);
    }
    watchdog_.arm(what, timeout_s());
    const int rc = issue(nullptr);
    watchdog_.disarm();
    check_mpi(rc, what);
    after.run();
    return nullptr;
  }

  static int checked_count(size_t count, const std::string& what) {
    if (count > static_cast<size_t>(INT32_MAX))
      throw DistError("loom.dist: " + what + ": more than 2^31-1 elements in one MPI call");
    return static_cast<int>(count);
  }

  static MPI_Datatype reduce_type(DType t) {
    switch (t) {
      case DType::kFloat32:
        return MPI_FLOAT;
      case DType::kFloat64:
        return MPI_DOUBLE;
      case DType::kFloat16:
        return MPI_UINT16_T;
      case DType::kInt32:
        return MPI_INT32_T;
      default:
        return MPI_INT64_T;  // the base class admits nothing else
    }
  }

  MPI_Op reduce_op(DType t) const { return t == DType::kFloat16 ? half_sum_ : MPI_SUM; }

  MPI_Comm comm_;
  MPI_Op half_sum_ = MPI_OP_NULL;
  bool owns_mpi_;
  Watchdog watchdog_{[this](const std::string& why) { abort(70, why); }};
};

const bool kMpiRegistered = (register_backend("mpi", &MpiCommunicator::create), true);

}  // namespace
}  // namespace loom::dist
