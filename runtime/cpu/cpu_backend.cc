// CPU device backend: a pooled, 64-byte-aligned allocator.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "runtime/cpu/dnnl_util.h"
#include "runtime/device.h"

namespace loom {
namespace {

// Freed blocks are kept per rounded size class and handed out again, so rebinding an
// executor or allocating temporaries does not hit malloc in steady state. Blocks above
// kMaxPooled go straight back to the system.
class CpuBackend final : public DeviceBackend {
 public:
  static constexpr size_t kAlign = 64;
  static constexpr size_t kMaxPooled = size_t(1) << 30;
  static constexpr size_t kMaxCachedBytes = size_t(2) << 30;

  void* alloc(int, size_t bytes) override {
    size_t n = round(bytes);
    {
      std::lock_guard<std::mutex> lk(mu_);
      auto it = pool_.find(n);
      if (it != pool_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= n;
        return p;
      }
    }
    void* p = std::aligned_alloc(kAlign, n);
    if (!p) throw OutOfMemoryError("out of memory: cannot allocate " + format_bytes(bytes) + " on cpu");
    return p;
  }
  void free(int, void* p, size_t bytes) override {
    size_t n = round(bytes);
    if (n <= kMaxPooled) {
      std::lock_guard<std::mutex> lk(mu_);
      if (cached_ + n <= kMaxCachedBytes) {
        pool_[n].push_back(p);
        cached_ += n;
        return;
      }
    }
    std::free(p);
  }
  void zero(int, void* p, size_t bytes) override { std::memset(p, 0, bytes); }
  void copy(int, void* dst, const void* src, size_t bytes, bool, bool) override {
    std::memmove(dst, src, bytes);
  }
  void synchronize(int) override {}
  int count() override { return 1; }
  int channel_block() override { return dnnl_util::preferred_channel_block(); }
  size_t available_memory(int) override {
    // MemAvailable (free plus reclaimable cache) and free swap, capped by a cgroup v2 limit
    // (containers), plus what this pool holds for reuse.
    uint64_t avail = meminfo_kb("MemAvailable:") * 1024 + meminfo_kb("SwapFree:") * 1024;
    uint64_t limit = read_u64("/sys/fs/cgroup/memory.max"), used = read_u64("/sys/fs/cgroup/memory.current");
    if (limit && used && limit > used) avail = std::min<uint64_t>(avail, limit - used);
    if (avail == 0) return SIZE_MAX;  // no /proc (unknown): do not refuse
    std::lock_guard<std::mutex> lk(mu_);
    return static_cast<size_t>(avail) + cached_;
  }

 private:
  // Size classes: multiples of 64 B up to 4 KiB, then quarter-powers of two, so a pooled
  // block wastes at most ~19%.
  static size_t round(size_t b) {
    if (b <= 4096) return (b + kAlign - 1) / kAlign * kAlign;
    size_t p = 4096;
    while (p < b) p <<= 1;
    size_t q = p / 8;
    size_t r = p / 2;
    while (r < b) r += q;
    return r;
  }
  // A "Key: N kB" line of /proc/meminfo (0 when absent).
  static uint64_t meminfo_kb(const char* key) {
    std::ifstream f("/proc/meminfo");
    std::string k;
    uint64_t v;
    while (f >> k >> v) {
      if (k == key) return v;
      f.ignore(64, '\n');
    }
    return 0;
  }
  // A file holding one number (0 when absent or "max").
  static uint64_t read_u64(const char* path) {
    std::ifstream f(path);
    uint64_t v = 0;
    return f >> v ? v : 0;
  }
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> pool_;
  size_t cached_ = 0;
};

struct Registrar {
  Registrar() {
    // Never destroyed: arrays held by other static objects may be freed after main().
    register_device_backend(DeviceType::kCPU, new CpuBackend);
  }
} registrar;

}  // namespace
}  // namespace loom
