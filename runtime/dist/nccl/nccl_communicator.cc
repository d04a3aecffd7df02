// The NCCL back end (GPU buffers): collectives on a communicator stream, completion by a CUDA
// event, so waits poll and stay bounded by LOOM_DIST_TIMEOUT_S (ncclCommAbort on failure).
// Compiled when the CUDA layer is and nccl.h exists. libnccl is opened on first use, as cuBLAS
// is: a CPU-only process never maps it.
//
// Rendezvous: rank 0's ncclUniqueId reaches the other ranks through a broadcast over the "mpi"
// back end (the job is started by mpirun or another MPI launcher); with one rank no bootstrap
// is needed. Each rank drives the GPU numbered by its local rank (OMPI_COMM_WORLD_LOCAL_RANK,
// MPI_LOCALRANKID, SLURM_LOCALID or LOCAL_RANK) modulo the visible devices.
//
// Several GPUs of one process (make_local_group("nccl", devices), a Module with several GPU
// contexts): ncclCommInitAll makes one communicator per listed device, each with its own
// stream on its device, and NcclGroup::run issues every rank's collectives from one thread
// inside ncclGroupStart/End.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>

#include "runtime/device.h"
#include "runtime/dist/communicator.h"
#include "runtime/dist/local_group.h"
#include "runtime/dtype_traits.h"

namespace loom::dist {
namespace {

// The NCCL entry points Loom calls, resolved from libnccl at first use.
struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id;
  decltype(&ncclCommInitRank) comm_init_rank;
  decltype(&ncclCommInitAll) comm_init_all;
  decltype(&ncclGroupStart) group_start;
  decltype(&ncclGroupEnd) group_end;
  decltype(&ncclCommDestroy) comm_destroy;
  decltype(&ncclCommAbort) comm_abort;
  decltype(&ncclCommGetAsyncError) comm_get_async_error;
  decltype(&ncclGetErrorString) get_error_string;
  decltype(&ncclRedOpCreatePreMulSum) red_op_create_pre_mul_sum;
  decltype(&ncclRedOpDestroy) red_op_destroy;
  decltype(&ncclAllReduce) all_reduce;
  decltype(&ncclReduceScatter) reduce_scatter;
  decltype(&ncclAllGather) all_gather;
  decltype(&ncclBroadcast) broadcast;
};

template <class F>
void resolve(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn)
    throw DistError(std::string("loom.dist: libnccl has no ") + name + " (NCCL >= 2.11 needed)");
}

const NcclApi& nccl() {
  static const NcclApi api = [] {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) lib = dlopen("libnccl.so", RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
      throw DistError(std::string("loom.dist: the nccl back end cannot load libnccl.so.2: ") +
                      dlerror());
    NcclApi a{};
    resolve(lib, "ncclGetUniqueId", a.get_unique_id);
    resolve(lib, "ncclCommInitRank", a.comm_init_rank);
    resolve(lib, "ncclCommInitAll", a.comm_init_all);
    resolve(lib, "ncclGroupStart", a.group_start);
    resolve(lib, "ncclGroupEnd", a.group_end);
    resolve(lib, "ncclCommDestroy", a.comm_destroy);
    resolve(lib, "ncclCommAbort", a.comm_abort);
    resolve(lib, "ncclCommGetAsyncError", a.comm_get_async_error);
    resolve(lib, "ncclGetErrorString", a.get_error_string);
    resolve(lib, "ncclRedOpCreatePreMulSum", a.red_op_create_pre_mul_sum);
    resolve(lib, "ncclRedOpDestroy", a.red_op_destroy);
    resolve(lib, "ncclAllReduce", a.all_reduce);
    resolve(lib, "ncclReduceScatter", a.reduce_scatter);
    resolve(lib, "ncclAllGather", a.all_gather);
    resolve(lib, "ncclBroadcast", a.broadcast);
    return a;
  }();
  return api;
}

void check_nccl(ncclResult_t rc, const std::string& what) {
  if (rc != ncclSuccess && rc != ncclInProgress)
    throw DistError("loom.dist: " + what + " failed: " + nccl().get_error_string(rc));
}

void check_cuda(cudaError_t rc, const std::string& what) {
  if (rc != cudaSuccess)
    throw DistError("loom.dist: " + what + " failed: " + cudaGetErrorString(rc));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kFloat64:
      return ncclFloat64;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    default:
      return ncclUint8;  // moved as bytes (gather, broadcast)
  }
}

int local_rank() {
  for (const char* v :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 0;
}

// Done when the event recorded after the collective has passed; an asynchronous NCCL error
// (a peer died, a network failure) becomes a DistError instead of a hang.
class NcclRequest : public Request {
 public:
  NcclRequest(std::string what, double timeout_s, cudaEvent_t ev, ncclComm_t comm)
      : Request(std::move(what), timeout_s), ev_(ev), comm_(comm) {}
  ~NcclRequest() override { cudaEventDestroy(ev_); }
  bool test() override {
    const cudaError_t q = cudaEventQuery(ev_);
    if (q == cudaSuccess) return true;
    if (q != cudaErrorNotReady) check_cuda(q, what());
    ncclResult_t async = ncclSuccess;
    check_nccl(nccl().comm_get_async_error(comm_, &async), what());
    check_nccl(async, what());
    return false;
  }

 private:
  cudaEvent_t ev_;
  ncclComm_t comm_;
};

class NcclCommunicator : public Communicator {
 public:
  static std::unique_ptr<Communicator> create() {
    const LaunchEnv env = launch_env();
    std::unique_ptr<Communicator> boot;
    ncclUniqueId id{};
    if (env.size > 1) {
      boot = make_backend("mpi");
      if (boot->rank() == 0) check_nccl(nccl().get_unique_id(&id), "ncclGetUniqueId");
      boot->broadcast(&id, sizeof id, DType::kUint8, 0);
    } else {
      check_nccl(nccl().get_unique_id(&id), "ncclGetUniqueId");
    }
    const int rank = boot ? boot->rank() : 0, size = boot ? boot->size() : 1;
    int devices = 0;
    check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    if (devices == 0) throw DistError("loom.dist: the nccl back end needs a GPU; none is visible");
    check_cuda(cudaSetDevice(local_rank() % devices), "cudaSetDevice");
    ncclComm_t comm;
    check_nccl(nccl().comm_init_rank(&comm, size, id, rank), "ncclCommInitRank");
    return std::unique_ptr<Communicator>(new NcclCommunicator(comm, rank, size, std::move(boot)));
  }

  /// Rank `rank` of a group made by ncclCommInitAll; its stream is created on the current
  /// device (the caller sets the rank's).
  static std::unique_ptr<NcclCommunicator> adopt(ncclComm_t comm, int rank, int size) {
    return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(comm, rank, size, nullptr));
  }

  ~NcclCommunicator() override {
    if (scratch_) cudaFree(scratch_);
    if (stream_) cudaStreamDestroy(stream_);
    nccl().comm_destroy(comm_);
  }

  const char* backend() const override { return "nccl"; }
  void* device_stream() const override { return stream_; }
  ncclComm_t nccl_comm() const { return comm_; }

  [[noreturn]] void abort(int code, const std::string& message) override {
    nccl().comm_abort(comm_);
    if (boot_) boot_->abort(code, message);
    Communicator::abort(code, message);
  }

 protected:
  std::unique_ptr<Request> start_allreduce(const void* send, void* recv, size_t count, DType t,
                                           double scale, bool) override {
    const std::string what = describe("allreduce", stats().allreduce, count, t);
    return launch(what, scale, t, [&](ncclRedOp_t op) {
      return nccl().all_reduce(send, recv, count, nccl_type(t), op, comm_, stream_);
    });
  }
  std::unique_ptr<Request> start_reduce_scatter(const void* send, void* recv, size_t count, DType t,
                                                double scale, bool) override {
    const std::string what = describe("reduce_scatter", stats().reduce_scatter, count, t);
    return launch(what, scale, t, [&](ncclRedOp_t op) {
      return nccl().reduce_scatter(send, recv, count, nccl_type(t), op, comm_, stream_);
    });
  }
  std::unique_ptr<Request> start_all_gather(const void* send, void* recv, size_t count, DType t,
                                            bool) override {
    const std::string what = describe("all_gather", stats().all_gather, count, t);
    const size_t bytes = count * dtype_size(t);
    if (is_host(recv)) return host_all_gather(what, send, recv, bytes);
    return launch(what, 1.0, DType::kUint8, [&](ncclRedOp_t) {
      return nccl().all_gather(send, recv, bytes, ncclUint8, comm_, stream_);
    });
  }
  std::unique_ptr<Request> start_broadcast(void* data, size_t count, DType t, int root,
                                           bool) override {
    const std::string what = describe("broadcast", stats().broadcast, count, t);
    const size_t bytes = count * dtype_size(t);
    return launch(what, 1.0, DType::kUint8, [&](ncclRedOp_t) {
      return nccl().broadcast(data, data, bytes, ncclUint8, root, comm_, stream_);
    });
  }
  // NCCL has no barrier: a one-element allreduce on a device scratch word stands for it.
  std::unique_ptr<Request> start_barrier(bool) override {
    const std::string what = "barrier #" + std::to_string(stats().barrier) + " on rank " +
                             std::to_string(rank()) + " (nccl)";
    return launch(what, 1.0, DType::kInt32, [&](ncclRedOp_t op) {
      return nccl().all_reduce(scratch_, scratch_, 1, ncclInt32, op, comm_, stream_);
    });
  }

 private:
  NcclCommunicator(ncclComm_t comm, int rank, int size, std::unique_ptr<Communicator> boot)
      : Communicator(rank, size), comm_(comm), boot_(std::move(boot)) {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaMalloc(&scratch_, sizeof(int32_t)), "cudaMalloc");
  }

  static bool is_host(const void* p) {
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky-free error of an unknown pointer
      return true;
    }
    return a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged;
  }

  // All-gather of host bytes (Communicator::check_same at bind): staged through a device
  // buffer, completed before returning (bind time only, so the host wait costs nothing).
  std::unique_ptr<Request> host_all_gather(const std::string& what, const void* send, void* recv,
                                           size_t bytes) {
    const size_t all = bytes * static_cast<size_t>(size());
    void* dev = nullptr;
    check_cuda(cudaMalloc(&dev, all ? all : 1), what);
    char* mine = static_cast<char*>(dev) + bytes * static_cast<size_t>(rank());
    auto done = [&](cudaError_t rc) {
      if (rc != cudaSuccess) cudaFree(dev);
      check_cuda(rc, what);
    };
    done(cudaMemcpyAsync(mine, send, bytes, cudaMemcpyHostToDevice, stream_));
    const ncclResult_t rc = nccl().all_gather(mine, dev, bytes, ncclUint8, comm_, stream_);
    if (rc != ncclSuccess && rc != ncclInProgress) cudaFree(dev);
    check_nccl(rc, what);
    done(cudaMemcpyAsync(recv, dev, all, cudaMemcpyDeviceToHost, stream_));
    done(cudaStreamSynchronize(stream_));
    cudaFree(dev);
    return nullptr;
  }

  // Issues one collective with ncclSum, or with a pre-multiplied sum when scale != 1 (the
  // scale folded into the reduction: no extra pass), and records its completion event.
  template <class Issue>
  std::unique_ptr<Request> launch(const std::string& what, double scale, DType t, Issue issue) {
    ncclRedOp_t op = ncclSum;
    bool custom = false;
    if (scale != 1.0) {
      float f = static_cast<float>(scale);
      uint16_t h = float_to_half_bits(f);
      void* scalar = &f;
      if (t == DType::kFloat64) scalar = &scale;
      if (t == DType::kFloat16) scalar = &h;
      check_nccl(nccl().red_op_create_pre_mul_sum(&op, scalar, nccl_type(t),
                                                  ncclScalarHostImmediate, comm_),
                 what);
      custom = true;
    }
    check_nccl(issue(op), what);
    if (custom) nccl().red_op_destroy(op, comm_);
    cudaEvent_t ev;
    check_cuda(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), what);
    check_cuda(cudaEventRecord(ev, stream_), what);
    return std::make_unique<NcclRequest>(what, timeout_s(), ev, comm_);
  }

  ncclComm_t comm_;
  std::unique_ptr<Communicator> boot_;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
};

// Makes `device` current for a scope and restores the previous one.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    check_cuda(cudaGetDevice(&prev_), "cudaGetDevice");
    set(device);
  }
  ~DeviceScope() { cudaSetDevice(prev_); }
  static void set(int device) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  }

 private:
  int prev_ = 0;
};

class NcclGroup : public LocalGroup {
 public:
  using Issue = std::function<RankRequests(int, Communicator&)>;

  explicit NcclGroup(const std::vector<int>& devices) : LocalGroup(devices) {
    int visible = 0;
    check_cuda(cudaGetDeviceCount(&visible), "cudaGetDeviceCount");
    for (size_t r = 0; r < devices.size(); ++r) {
      if (devices[r] < 0 || devices[r] >= visible)
        throw DistError("loom.dist: nccl group: gpu(" + std::to_string(devices[r]) +
                        ") is not available: " + std::to_string(visible) +
                        " CUDA device(s) present");
      for (size_t q = 0; q < r; ++q)
        if (devices[q] == devices[r])
          throw DistError("loom.dist: nccl group: gpu(" + std::to_string(devices[r]) +
                          ") is listed twice (one rank per device)");
    }
    const int n = static_cast<int>(devices.size());
    std::vector<ncclComm_t> comms(devices.size());
    check_nccl(nccl().comm_init_all(comms.data(), n, devices.data()), "ncclCommInitAll");
    DeviceScope keep(devices[0]);
    for (int r = 0; r < n; ++r) {
      DeviceScope::set(devices[static_cast<size_t>(r)]);
      comms_.push_back(NcclCommunicator::adopt(comms[static_cast<size_t>(r)], r, n));
    }
  }
  const char* backend() const override { return "nccl"; }

  // Collectives issued inside a group reach the streams only at ncclGroupEnd, so the events
  // the communicators recorded at issue time say nothing: completion is an event recorded on
  // every rank's stream after the group ends.
  void run(const Issue& issue) override {
    issue_group(issue);
    std::vector<std::unique_ptr<Request>> done;
    for (int r = 0; r < size(); ++r) {
      DeviceScope on(devices_[static_cast<size_t>(r)]);
      auto& c = static_cast<NcclCommunicator&>(comm(r));
      const std::string what = rank_what(r);
      cudaEvent_t ev;
      check_cuda(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), what);
      check_cuda(cudaEventRecord(ev, static_cast<cudaStream_t>(c.device_stream())), what);
      done.push_back(std::make_unique<NcclRequest>(what, c.timeout_s(), ev, c.nccl_comm()));
    }
    for (auto& d : done) d->wait();
  }

  // Each rank's collective stream waits for its device stream's work so far, and that device
  // stream's later work waits for the collectives: no host wait on either side. A failure an
  // earlier call left behind (asynchronous NCCL error) is raised first.
  void run_stream_ordered(const Issue& issue) override {
    for (int r = 0; r < size(); ++r) {
      ncclResult_t async = ncclSuccess;
      auto& c = static_cast<NcclCommunicator&>(comm(r));
      check_nccl(nccl().comm_get_async_error(c.nccl_comm(), &async), rank_what(r));
      check_nccl(async, rank_what(r));
    }
    link_streams(true);
    issue_group(issue);
    link_streams(false);
  }

 private:
  std::string rank_what(int r) const {
    return "group collectives on rank " + std::to_string(r) + " of " + std::to_string(size()) +
           " (nccl, gpu(" + std::to_string(devices_[static_cast<size_t>(r)]) + "))";
  }

  // Every rank's collectives issued from this thread inside one ncclGroupStart/End, with the
  // rank's device current; the requests are dropped (their events say nothing, see run()).
  void issue_group(const Issue& issue) {
    DeviceScope keep(devices_[0]);
    check_nccl(nccl().group_start(), "ncclGroupStart");
    try {
      for (int r = 0; r < size(); ++r) {
        DeviceScope::set(devices_[static_cast<size_t>(r)]);
        issue(r, comm(r));
      }
    } catch (...) {
      nccl().group_end();
      throw;
    }
    check_nccl(nccl().group_end(), "ncclGroupEnd");
  }

  // collectives_after_device: each rank's collective stream waits for the work queued so far
  // on its device's stream; otherwise the device stream waits for the collectives.
  void link_streams(bool collectives_after_device) {
    for (int r = 0; r < size(); ++r) {
      const int dev = devices_[static_cast<size_t>(r)];
      DeviceScope on(dev);
      auto* device = static_cast<cudaStream_t>(device_backend(DeviceType::kGPU).stream(dev));
      auto* coll = static_cast<cudaStream_t>(comm(r).device_stream());
      cudaStream_t from = collectives_after_device ? device : coll;
      cudaStream_t to = collectives_after_device ? coll : device;
      const std::string what = rank_what(r);
      cudaEvent_t ev;
      check_cuda(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), what);
      check_cuda(cudaEventRecord(ev, from), what);
      check_cuda(cudaStreamWaitEvent(to, ev, 0), what);
      check_cuda(cudaEventDestroy(ev), what);
    }
  }
};

const bool registered = (register_backend("nccl", &NcclCommunicator::create), true);
const bool group_registered =
    (register_group_backend(
         "nccl",
         [](const std::vector<int>& d) { return std::unique_ptr<LocalGroup>(new NcclGroup(d)); }),
     true);

}  // namespace
}  // namespace loom::dist
