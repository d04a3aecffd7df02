// Collective communication between the processes of a data-parallel job, over flat buffers:
// the layer the step graph's allreduce nodes, sharded state and mx.kv stores sit on. One
// interface, three back ends: "local" (world size 1, no MPI), "mpi" (Open MPI, CPU buffers)
// and "nccl" (GPU buffers, bootstrapped over MPI). Back ends register themselves by name
// (runtime/dist/mpi, runtime/dist/nccl are compiled only when their library is found).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/base.h"

namespace loom::dist {

/// A collective failed, timed out (LOOM_DIST_TIMEOUT_S), or the ranks disagree
/// (check_same). The message names the rank(s) and the collective.
class DistError : public Error {
  using Error::Error;
};

/// How contributions are combined. kAverage is kSum with the scale multiplied by 1/size.
enum class ReduceOp { kSum, kAverage };

/// Counts of the collectives a communicator issued (tests assert communication happens only
/// where it should) and the bytes each rank contributed.
struct CommStats {
  uint64_t allreduce = 0, reduce_scatter = 0, all_gather = 0, broadcast = 0, barrier = 0;
  uint64_t bytes = 0;
  /// Seconds step-graph nodes spent blocked in collectives: `_loom_allreduce` nodes and the
  /// overlapped `_loom_allreduce_wait` (communication that backward did not hide).
  double exposed_s = 0;
  uint64_t collectives() const {
    return allreduce + reduce_scatter + all_gather + broadcast + barrier;
  }
};

/// A collective in flight (non-blocking allreduce / reduce-scatter). Every rank must start the
/// same collectives in the same order. The buffers must stay untouched until wait() returns.
class Request {
 public:
  virtual ~Request() = default;
  /// True once the result is in the output buffer; drives the back end's progress.
  virtual bool test() = 0;
  /// Blocks until done; throws DistError after the communicator's timeout, naming the
  /// collective and this rank.
  void wait();
  /// The collective and rank, as messages name them.
  const std::string& what() const { return what_; }

 protected:
  Request(std::string what, double timeout_s) : what_(std::move(what)), timeout_s_(timeout_s) {}

 private:
  std::string what_;
  double timeout_s_;
};

/// Polls `done` until it returns true. After `timeout_s` seconds (<= 0: never) throws
/// DistError "<what> did not complete within T s". Spins first, then yields the CPU.
void wait_until(const std::function<bool()>& done, const std::string& what, double timeout_s);

/// The group of processes of one job. Buffers are host memory for "local"/"mpi" and device
/// memory for "nccl". Send and receive buffers follow NCCL's conventions: equal pointers (or
/// the documented offsets below) mean in place. All ranks must call every collective with the
/// same counts, dtype and op, in the same order.
class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// "local", "mpi" or "nccl".
  virtual const char* backend() const = 0;
  /// Back ends whose collectives take device memory ("nccl"): the cudaStream_t they are
  /// issued on, so device kernels can order it with their own stream by events (no host
  /// wait); null for the host back ends.
  virtual void* device_stream() const { return nullptr; }

  /// recv[i] = scale * (op == kAverage ? 1/size : 1) * sum over ranks of send[i].
  /// Reductions take float32, float64, float16 (summed in float), int32 and int64; a scale
  /// other than 1 (or kAverage) only floats. The scale is folded into the reduction where the
  /// back end can (NCCL pre-multiplied sum); MPI applies it in one pass after the sum.
  void allreduce(const void* send, void* recv, size_t count, DType t, ReduceOp op = ReduceOp::kSum,
                 double scale = 1.0);
  /// Non-blocking allreduce; the result (scaled) is in `recv` once the request completes.
  std::unique_ptr<Request> iallreduce(const void* send, void* recv, size_t count, DType t,
                                      ReduceOp op = ReduceOp::kSum, double scale = 1.0);
  /// `send` holds size*count elements; rank r receives the reduction of chunk r (elements
  /// [r*count, (r+1)*count)) in `recv` (count elements). In place: recv == send + rank*count.
  void reduce_scatter(const void* send, void* recv, size_t count, DType t,
                      ReduceOp op = ReduceOp::kSum, double scale = 1.0);
  std::unique_ptr<Request> ireduce_scatter(const void* send, void* recv, size_t count, DType t,
                                           ReduceOp op = ReduceOp::kSum, double scale = 1.0);
  /// `send` holds count elements; `recv` (size*count) gets rank r's at offset r*count.
  /// In place: send == recv + rank*count. Any dtype (bytes are moved, not combined).
  void all_gather(const void* send, void* recv, size_t count, DType t);
  /// Non-blocking all_gather (device kernels order it by events instead of waiting).
  std::unique_ptr<Request> iall_gather(const void* send, void* recv, size_t count, DType t);
  /// Rank `root`'s count elements are copied into `data` on every rank. Any dtype.
  void broadcast(void* data, size_t count, DType t, int root = 0);
  void barrier();

  /// Checks that every rank passes the same bytes under `tag` (graphs, shapes, bucket plans at
  /// bind): gathers a 64-bit hash from every rank and throws DistError on every rank naming
  /// the ranks that differ from rank 0. One all_gather of size*8 bytes.
  void check_same(const std::string& tag, const void* bytes, size_t n);

  /// Ends the whole job now (every rank), after printing `message` to stderr with this rank.
  /// Used on uncaught errors: a rank that stops calling collectives must not leave the
  /// others waiting. Never returns.
  [[noreturn]] virtual void abort(int code, const std::string& message);

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats{}; }
  /// Adds to CommStats::exposed_s.
  void add_exposed(double seconds) { stats_.exposed_s += seconds; }
  /// Seconds a collective may take (LOOM_DIST_TIMEOUT_S, default 300; 0 = no limit): then
  /// Request::wait() throws DistError, and a blocking MPI call, which cannot be interrupted,
  /// aborts the job with a message naming the collective and rank.
  double timeout_s() const { return timeout_s_; }
  void set_timeout_s(double s) { timeout_s_ = s; }

 protected:
  Communicator(int rank, int size);

  /// Back-end hooks, called after validation and counting. `scale` already includes 1/size
  /// for kAverage. With `blocking` the hook may complete the collective itself and return
  /// nullptr (the MPI back end then uses MPI's blocking call, its fastest algorithms, under a
  /// watchdog that aborts the job after the timeout); a returned request is waited for by
  /// Request::wait(), bounded by the timeout.
  virtual std::unique_ptr<Request> start_allreduce(const void* send, void* recv, size_t count,
                                                   DType t, double scale, bool blocking) = 0;
  virtual std::unique_ptr<Request> start_reduce_scatter(const void* send, void* recv, size_t count,
                                                        DType t, double scale, bool blocking) = 0;
  virtual std::unique_ptr<Request> start_all_gather(const void* send, void* recv, size_t count,
                                                    DType t, bool blocking) = 0;
  virtual std::unique_ptr<Request> start_broadcast(void* data, size_t count, DType t, int root,
                                                   bool blocking) = 0;
  virtual std::unique_ptr<Request> start_barrier(bool blocking) = 0;

  /// "allreduce #12 of 11700000 float32 on rank 1 of 2": names a collective in messages.
  std::string describe(const char* op, uint64_t serial, size_t count, DType t) const;

 private:
  double reduction_scale(const char* op, DType t, ReduceOp rop, double scale) const;
  void count_collective(uint64_t& counter, size_t bytes) {
    ++counter;
    stats_.bytes += bytes;
  }
  static void finish(std::unique_ptr<Request> r) {
    if (r) r->wait();
  }
  void check_root(int root) const;

  int rank_, size_;
  double timeout_s_;
  CommStats stats_;
};

/// A factory for a back end; the launcher environment tells it rank and size.
using BackendFactory = std::function<std::unique_ptr<Communicator>()>;

/// Registers a back end by name (static registrars in the back ends' sources).
void register_backend(const std::string& name, BackendFactory factory);
/// Names of the back ends compiled into this build ("local" always).
std::vector<std::string> backends();
/// A new communicator of back end `name` (throws DistError naming the compiled ones). init()
/// uses it for the process's communicator; the NCCL back end for its MPI bootstrap.
std::unique_ptr<Communicator> make_backend(const std::string& name);

/// Rank and world size announced by a launcher (mpirun/Open MPI, MPICH/PMI, PMIx, SLURM),
/// or {0, 1} without one.
struct LaunchEnv {
  int rank = 0, size = 1;
  std::string source;  // the variable that said so ("OMPI_COMM_WORLD_SIZE", ...) or ""
};
LaunchEnv launch_env();

/// Creates the process's communicator once (later calls return it). `backend` "auto" (or
/// LOOM_DIST_BACKEND): "mpi" when a launcher started the process, else "local". Throws
/// DistError when a launcher asks for several ranks and no back end for them is compiled.
Communicator& init(const std::string& backend = "auto");
/// True after init().
bool initialized();
/// The communicator made by init(); throws DistError before it.
Communicator& world();
/// Ends communication (MPI_Finalize for "mpi"); a no-op when not initialised. Every rank
/// must call it after its last collective; init() registers it with atexit.
void finalize();

/// Reads LOOM_DIST_TIMEOUT_S (default 300 s); throws DistError for a malformed value.
double timeout_from_env();

/// Multiplies `count` elements of dtype `t` by `scale` in place (no-op for scale 1).
void scale_buffer(void* data, size_t count, DType t, double scale);

}  // namespace loom::dist
