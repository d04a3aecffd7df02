#include "runtime/dist/communicator.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/dtype_traits.h"

namespace loom::dist {

void wait_until(const std::function<bool()>& done, const std::string& what, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Spinning keeps the latency of small collectives low (the back end progresses inside
  // done()); after a millisecond the CPU is offered to the other ranks sharing the cores.
  for (uint64_t i = 0;; ++i) {
    if (done()) return;
    if ((i & 255) != 0) continue;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (timeout_s > 0 && waited > timeout_s)
      throw DistError("loom.dist: " + what + " did not complete within " +
                      std::to_string(static_cast<int>(timeout_s)) +
                      " s (LOOM_DIST_TIMEOUT_S): another rank is stalled, dead or calling a "
                      "different collective");
    if (waited > 1e-3) std::this_thread::yield();
  }
}

void Request::wait() {
  wait_until([this] { return test(); }, what_, timeout_s_);
}

Communicator::Communicator(int rank, int size)
    : rank_(rank), size_(size), timeout_s_(timeout_from_env()) {}

std::string Communicator::describe(const char* op, uint64_t serial, size_t count, DType t) const {
  return std::string(op) + " #" + std::to_string(serial) + " of " + std::to_string(count) + " " +
         dtype_name(t) + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
         " (" + backend() + ")";
}

double Communicator::reduction_scale(const char* op, DType t, ReduceOp rop, double scale) const {
  if (t != DType::kFloat32 && t != DType::kFloat64 && t != DType::kFloat16 && t != DType::kInt32 &&
      t != DType::kInt64)
    throw DistError(std::string("loom.dist: ") + op + ": cannot reduce " + dtype_name(t) +
                    " (float32, float64, float16, int32, int64)");
  const double s = rop == ReduceOp::kAverage ? scale / size_ : scale;
  if ((s != 1.0 || rop == ReduceOp::kAverage) && !dtype_is_float(t))
    throw DistError(std::string("loom.dist: ") + op + ": an average or scaled sum of " +
                    dtype_name(t) + " is not defined; use a plain sum");
  return s;
}

void Communicator::check_root(int root) const {
  if (root < 0 || root >= size_)
    throw DistError("loom.dist: broadcast root " + std::to_string(root) + " is not a rank of " +
                    std::to_string(size_));
}

std::unique_ptr<Request> Communicator::iallreduce(const void* send, void* recv, size_t count,
                                                  DType t, ReduceOp op, double scale) {
  const double s = reduction_scale("allreduce", t, op, scale);
  count_collective(stats_.allreduce, count * dtype_size(t));
  return start_allreduce(send, recv, count, t, s, false);
}

void Communicator::allreduce(const void* send, void* recv, size_t count, DType t, ReduceOp op,
                             double scale) {
  const double s = reduction_scale("allreduce", t, op, scale);
  count_collective(stats_.allreduce, count * dtype_size(t));
  finish(start_allreduce(send, recv, count, t, s, true));
}

std::unique_ptr<Request> Communicator::ireduce_scatter(const void* send, void* recv, size_t count,
                                                       DType t, ReduceOp op, double scale) {
  const double s = reduction_scale("reduce_scatter", t, op, scale);
  count_collective(stats_.reduce_scatter, count * size_ * dtype_size(t));
  return start_reduce_scatter(send, recv, count, t, s, false);
}

void Communicator::reduce_scatter(const void* send, void* recv, size_t count, DType t, ReduceOp op,
                                  double scale) {
  const double s = reduction_scale("reduce_scatter", t, op, scale);
  count_collective(stats_.reduce_scatter, count * size_ * dtype_size(t));
  finish(start_reduce_scatter(send, recv, count, t, s, true));
}

void Communicator::all_gather(const void* send, void* recv, size_t count, DType t) {
  count_collective(stats_.all_gather, count * dtype_size(t));
  finish(start_all_gather(send, recv, count, t, true));
}

std::unique_ptr<Request> Communicator::iall_gather(const void* send, void* recv, size_t count,
                                                   DType t) {
  count_collective(stats_.all_gather, count * dtype_size(t));
  return start_all_gather(send, recv, count, t, false);
}

void Communicator::broadcast(void* data, size_t count, DType t, int root) {
  check_root(root);
  count_collective(stats_.broadcast, count * dtype_size(t));
  finish(start_broadcast(data, count, t, root, true));
}

void Communicator::barrier() {
  count_collective(stats_.barrier, 0);
  finish(start_barrier(true));
}

void Communicator::check_same(const std::string& tag, const void* bytes, size_t n) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the bytes, then their length
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  h = (h ^ n) * 1099511628211ull;
  std::vector<uint64_t> all(size_);
  all[rank_] = h;
  all_gather(&all[rank_], all.data(), 1, DType::kInt64);
  std::string differ;
  for (int r = 1; r < size_; ++r)
    if (all[r] != all[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  if (!differ.empty())
    throw DistError("loom.dist: ranks disagree on " + tag + ": rank(s) " + differ +
                    " differ from rank 0 (every rank must bind the same graph, shapes and "
                    "bucket plan)");
}

void Communicator::abort(int code, const std::string& message) {
  std::fprintf(stderr, "loom.dist: rank %d of %d: %s\n", rank_, size_, message.c_str());
  std::fflush(stderr);
  std::_Exit(code);
}

double timeout_from_env() {
  const char* v = std::getenv("LOOM_DIST_TIMEOUT_S");
  if (!v || !*v) return 300.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (*end != '\0' || !(s >= 0))
    throw DistError(std::string("loom.dist: LOOM_DIST_TIMEOUT_S='") + v +
                    "' is not a number of seconds >= 0");
  return s;
}

void scale_buffer(void* data, size_t count, DType t, double scale) {
  if (scale == 1.0) return;
  dispatch_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      auto* p = static_cast<double*>(data);
      for (size_t i = 0; i < count; ++i) p[i] *= scale;
    } else if constexpr (std::is_same_v<T, float>) {
      auto* p = static_cast<float*>(data);
      const float s = static_cast<float>(scale);
      for (size_t i = 0; i < count; ++i) p[i] *= s;
    } else if constexpr (std::is_same_v<T, half_t>) {
      auto* p = static_cast<uint16_t*>(data);
      const float s = static_cast<float>(scale);
      for (size_t i = 0; i < count; ++i) p[i] = float_to_half_bits(half_bits_to_float(p[i]) * s);
    } else {
      throw DistError(std::string("loom.dist: cannot scale ") + dtype_name(t));
    }
  });
}

// ---- back-end registry and the process's communicator --------------------------------------

namespace {

std::map<std::string, BackendFactory>& registry() {
  static std::map<std::string, BackendFactory> r;
  return r;
}

std::mutex& world_mutex() {
  static std::mutex m;
  return m;
}

std::unique_ptr<Communicator>& world_ptr() {
  static std::unique_ptr<Communicator> w;
  return w;
}

// The first launcher variable pair found wins; each names rank then size.
bool read_pair(const char* rank_var, const char* size_var, LaunchEnv& out) {
  const char* r = std::getenv(rank_var);
  const char* s = std::getenv(size_var);
  if (!r || !s) return false;
  out.rank = std::atoi(r);
  out.size = std::atoi(s);
  out.source = size_var;
  if (out.size < 1 || out.rank < 0 || out.rank >= out.size)
    throw DistError(std::string("loom.dist: launcher says rank ") + r + " of " + s + " (" +
                    rank_var + ", " + size_var + ")");
  return true;
}

}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  registry()[name] = std::move(factory);
}

std::vector<std::string> backends() {
  std::vector<std::string> out;
  for (auto& [name, f] : registry()) out.push_back(name);
  return out;
}

std::unique_ptr<Communicator> make_backend(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string have;
    for (auto& b : backends()) have += (have.empty() ? "" : ", ") + b;
    throw DistError("loom.dist: back end '" + name + "' is not compiled into this build (" + have +
                    ")");
  }
  return it->second();
}

LaunchEnv launch_env() {
  LaunchEnv e;
  if (read_pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", e) ||
      read_pair("PMIX_RANK", "PMIX_SIZE", e) || read_pair("PMI_RANK", "PMI_SIZE", e) ||
      read_pair("SLURM_PROCID", "SLURM_NTASKS", e))
    return e;
  return LaunchEnv{};
}

Communicator& init(const std::string& backend) {
  std::lock_guard<std::mutex> lock(world_mutex());
  auto& w = world_ptr();
  if (w) return *w;
  std::string name = backend;
  if (name == "auto") {
    const char* forced = std::getenv("LOOM_DIST_BACKEND");
    name = forced && *forced ? forced : "auto";
  }
  const LaunchEnv env = launch_env();
  const bool have_mpi = registry().count("mpi") != 0;
  if (name == "auto") name = !env.source.empty() && (env.size > 1 || have_mpi) ? "mpi" : "local";
  if (name == "mpi" && !have_mpi && env.size > 1)
    throw DistError("loom.dist: the launcher started " + std::to_string(env.size) + " ranks (" +
                    env.source +
                    ") but this build of Loom has no MPI back end (install "
                    "libopenmpi-dev and configure with LOOM_MPI)");
  w = make_backend(name);
  static const bool at_exit = (std::atexit(finalize), true);
  (void)at_exit;
  return *w;
}

bool initialized() {
  std::lock_guard<std::mutex> lock(world_mutex());
  return world_ptr() != nullptr;
}

Communicator& world() {
  std::lock_guard<std::mutex> lock(world_mutex());
  if (!world_ptr()) throw DistError("loom.dist: not initialised (call loom.dist.init() first)");
  return *world_ptr();
}

void finalize() {
  std::lock_guard<std::mutex> lock(world_mutex());
  world_ptr().reset();
}

}  // namespace loom::dist
