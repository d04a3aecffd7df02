// The world-size-1 back end: a process on its own is a job of one rank. Every collective is
// the identity (a copy when not in place, then the scale), so code written for N ranks runs
// unchanged without MPI.
#include <cstring>

#include "runtime/dist/communicator.h"

namespace loom::dist {
namespace {

class NoopRequest : public Request {
 public:
  NoopRequest() : Request("local collective", 0) {}
  bool test() override { return true; }
};

void copy_scaled(const void* send, void* recv, size_t count, DType t, double scale) {
  if (send != recv) std::memmove(recv, send, count * dtype_size(t));
  scale_buffer(recv, count, t, scale);
}

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator() : Communicator(0, 1) {}
  const char* backend() const override { return "local"; }

 protected:
  std::unique_ptr<Request> start_allreduce(const void* send, void* recv, size_t count, DType t,
                                           double scale, bool) override {
    copy_scaled(send, recv, count, t, scale);
    return std::make_unique<NoopRequest>();
  }
  std::unique_ptr<Request> start_reduce_scatter(const void* send, void* recv, size_t count, DType t,
                                                double scale, bool) override {
    copy_scaled(send, recv, count, t, scale);
    return std::make_unique<NoopRequest>();
  }
  std::unique_ptr<Request> start_all_gather(const void* send, void* recv, size_t count, DType t,
                                            bool) override {
    copy_scaled(send, recv, count, t, 1.0);
    return std::make_unique<NoopRequest>();
  }
  std::unique_ptr<Request> start_broadcast(void*, size_t, DType, int, bool) override {
    return std::make_unique<NoopRequest>();
  }
  std::unique_ptr<Request> start_barrier(bool) override { return std::make_unique<NoopRequest>(); }
};

const bool kLocalRegistered =
    (register_backend("local",
                      [] { return std::unique_ptr<Communicator>(new LocalCommunicator()); }),
     true);

}  // namespace
}  // namespace loom::dist
