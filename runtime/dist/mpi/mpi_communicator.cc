// The MPI back end (Open MPI on CPU; any MPI-3 library): every collective is an MPI-3
// non-blocking call on a duplicate of MPI_COMM_WORLD, completed by polling MPI_Test so that
// a wait is bounded by LOOM_DIST_TIMEOUT_S. Compiled only when CMake finds MPI (LOOM_MPI).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <dlfcn.h>
#include <mpi.h>

#include <cstring>
#include <exception>

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

// A request plus what remains once MPI is done: the scale pass and, for an in-place
// reduce-scatter, moving the chunk from where MPI leaves it (offset 0) to rank*count.
class MpiRequest : public Request {
 public:
  MpiRequest(std::string what, double timeout_s, MPI_Request req)
      : Request(std::move(what), timeout_s), req_(req) {}
  ~MpiRequest() override {
    // A request dropped before completion (an exception unwound past it) is left to MPI:
    // freeing an active collective request is erroneous, and the job is ending anyway.
  }
  bool test() override {
    if (done_) return true;
    int flag = 0;
    check_mpi(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), what());
    if (!flag) return false;
    if (move_bytes_) std::memmove(move_to_, move_from_, move_bytes_);
    scale_buffer(scale_data_, scale_count_, scale_dtype_, scale_);
    done_ = true;
    return true;
  }
  void then_move(const void* from, void* to, size_t bytes) {
    move_from_ = from;
    move_to_ = to;
    move_bytes_ = bytes;
  }
  void then_scale(void* data, size_t count, DType t, double scale) {
    scale_data_ = data;
    scale_count_ = count;
    scale_dtype_ = t;
    scale_ = scale;
  }

 private:
  MPI_Request req_;
  bool done_ = false;
  const void* move_from_ = nullptr;
  void* move_to_ = nullptr;
  size_t move_bytes_ = 0;
  void* scale_data_ = nullptr;
  size_t scale_count_ = 0;
  DType scale_dtype_ = DType::kFloat32;
  double scale_ = 1.0;
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
                                           double scale) override {
    const std::string what = describe("allreduce", stats().allreduce, count, t);
    MPI_Request req;
    check_mpi(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, checked_count(count, what),
                             reduce_type(t), reduce_op(t), comm_, &req),
              what);
    auto r = std::make_unique<MpiRequest>(what, timeout_s(), req);
    r->then_scale(recv, count, t, scale);
    return r;
  }

  std::unique_ptr<Request> start_reduce_scatter(const void* send, void* recv, size_t count, DType t,
                                                double scale) override {
    const std::string what = describe("reduce_scatter", stats().reduce_scatter, count, t);
    const size_t chunk = count * dtype_size(t);
    const bool in_place = static_cast<const char*>(send) + rank() * chunk == recv;
    // In place, MPI reads the whole buffer and leaves this rank's block at its start.
    void* mpi_recv = in_place ? const_cast<void*>(send) : recv;
    MPI_Request req;
    check_mpi(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : send, mpi_recv,
                                        checked_count(count, what), reduce_type(t), reduce_op(t),
                                        comm_, &req),
              what);
    auto r = std::make_unique<MpiRequest>(what, timeout_s(), req);
    if (in_place && rank() != 0) r->then_move(mpi_recv, recv, chunk);
    r->then_scale(recv, count, t, scale);
    return r;
  }

  std::unique_ptr<Request> start_all_gather(const void* send, void* recv, size_t count,
                                            DType t) override {
    const std::string what = describe("all_gather", stats().all_gather, count, t);
    const size_t chunk = count * dtype_size(t);
    const bool in_place = static_cast<const char*>(recv) + rank() * chunk == send;
    const int n = checked_count(chunk, what);
    MPI_Request req;
    check_mpi(
        MPI_Iallgather(in_place ? MPI_IN_PLACE : send, n, MPI_BYTE, recv, n, MPI_BYTE, comm_, &req),
        what);
    return std::make_unique<MpiRequest>(what, timeout_s(), req);
  }

  std::unique_ptr<Request> start_broadcast(void* data, size_t count, DType t, int root) override {
    const std::string what =
        describe("broadcast", stats().broadcast, count, t) + " from rank " + std::to_string(root);
    MPI_Request req;
    check_mpi(
        MPI_Ibcast(data, checked_count(count * dtype_size(t), what), MPI_BYTE, root, comm_, &req),
        what);
    return std::make_unique<MpiRequest>(what, timeout_s(), req);
  }

  std::unique_ptr<Request> start_barrier() override {
    const std::string what = "barrier #" + std::to_string(stats().barrier) + " on rank " +
                             std::to_string(rank()) + " of " + std::to_string(size()) + " (mpi)";
    MPI_Request req;
    check_mpi(MPI_Ibarrier(comm_, &req), what);
    return std::make_unique<MpiRequest>(what, timeout_s(), req);
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
};

const bool registered = (register_backend("mpi", &MpiCommunicator::create), true);

}  // namespace
}  // namespace loom::dist
