// Several ranks inside one process: one communicator per device, for a Module with several
// contexts (MXNet's context=[mx.gpu(0), mx.gpu(1)]). A group is independent of the process's
// communicator (init()/world(), the job's ranks over MPI): making one neither reads nor
// changes it. Back ends register themselves by name:
//   "threads"  host buffers: the ranks are threads of this process, collectives meet in shared
//              memory behind a barrier (the CPU contexts' back end; always built);
//   "nccl"     device buffers: ncclCommInitAll over the listed GPUs (built with the NCCL back
//              end, runtime/dist/nccl).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dist/communicator.h"

namespace loom::dist {

/// The collectives one rank starts in a group call (GroupComm::run). Requests that are
/// already complete may be left out.
using RankRequests = std::vector<std::unique_ptr<Request>>;

/// N communicators of one process, rank r driving devices()[r]. Every collective of a rank
/// must be matched by the same collective on every other rank, as across processes; run()
/// drives all ranks so that they can meet.
class LocalGroup {
 public:
  virtual ~LocalGroup() = default;
  LocalGroup(const LocalGroup&) = delete;
  LocalGroup& operator=(const LocalGroup&) = delete;

  int size() const { return static_cast<int>(comms_.size()); }
  /// "threads" or "nccl".
  virtual const char* backend() const = 0;
  /// The device id each rank drives (CPU groups: the context ids given at creation).
  const std::vector<int>& devices() const { return devices_; }
  Communicator& comm(int rank);

  /// Calls `issue(rank, comm)` once per rank, which starts that rank's collectives (blocking
  /// or not) and returns the requests still in flight; returns when every one has completed.
  /// "threads" runs each rank on its own thread (rank 0 on the caller's); "nccl" issues every
  /// rank from the caller's thread inside one ncclGroupStart/End with that rank's device
  /// current, so `issue` must use the non-blocking calls there. The first exception of any
  /// rank is rethrown after every rank has returned.
  virtual void run(const std::function<RankRequests(int rank, Communicator& comm)>& issue) = 0;

  /// As run(), for buffers that work queued on each rank's device stream (the executors'
  /// stream, DeviceBackend::stream) writes before the call and reads after it: where the back
  /// end allows, the collectives wait for that work on the device and the stream's later work
  /// waits for them, so the host waits for neither. "nccl" links the streams by events and
  /// returns once the collectives are queued (an asynchronous NCCL error of a call is raised
  /// by the next one); the default, and "threads" (host buffers, written by the time the
  /// call is made), is run().
  virtual void run_stream_ordered(
      const std::function<RankRequests(int rank, Communicator& comm)>& issue) {
    run(issue);
  }

 protected:
  explicit LocalGroup(std::vector<int> devices) : devices_(std::move(devices)) {}
  std::vector<int> devices_;
  std::vector<std::unique_ptr<Communicator>> comms_;
};

/// Makes a group of back end `backend` over `devices` (one rank each; at least one). Throws
/// DistError naming the compiled group back ends for an unknown name.
std::unique_ptr<LocalGroup> make_local_group(const std::string& backend,
                                             const std::vector<int>& devices);

using GroupFactory = std::function<std::unique_ptr<LocalGroup>(const std::vector<int>&)>;
/// Registers a group back end by name (static registrars in the back ends' sources).
void register_group_backend(const std::string& name, GroupFactory factory);
/// Names of the group back ends compiled into this build ("threads" always).
std::vector<std::string> group_backends();

}  // namespace loom::dist
