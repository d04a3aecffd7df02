#include "runtime/device.h"

#include <cstring>
#include <vector>

namespace loom {
namespace {
DeviceBackend*& slot(DeviceType t) {
  static DeviceBackend* backends[3] = {nullptr, nullptr, nullptr};
  return backends[static_cast<int>(t)];
}
}  // namespace

void register_device_backend(DeviceType t, DeviceBackend* b) { slot(t) = b; }

DeviceBackend& device_backend(DeviceType t) {
  DeviceBackend* b = slot(t);
  if (!b)
    throw Error(t == DeviceType::kGPU ? "this build of Loom has no CUDA support"
                                      : "no CPU backend registered");
  return *b;
}

bool device_available(DeviceType t) {
  DeviceBackend* b = slot(t);
  return b && b->count() > 0;
}

void check_device(Device d) {
  if (d.type == DeviceType::kGPU && !slot(d.type))
    throw Error("no CUDA device: " + d.str() + " is not available (this build of Loom has no "
                "CUDA support)");
  device_backend(d.type).check_available(d.id);
}

void device_copy(void* dst, Device dd, const void* src, Device sd, size_t bytes) {
  if (bytes == 0) return;
  if (dd.type == DeviceType::kCPU && sd.type == DeviceType::kCPU) {
    std::memmove(dst, src, bytes);
  } else if (sd.type == DeviceType::kCPU) {
    device_backend(dd.type).copy(dd.id, dst, src, bytes, true, false);
  } else if (dd.type == DeviceType::kCPU) {
    device_backend(sd.type).copy(sd.id, dst, src, bytes, false, true);
  } else if (dd == sd) {
    device_backend(dd.type).copy(dd.id, dst, src, bytes, true, true);
  } else {
    std::vector<char> host(bytes);
    device_backend(sd.type).copy(sd.id, host.data(), src, bytes, false, true);
    device_backend(dd.type).copy(dd.id, dst, host.data(), bytes, true, false);
  }
}

}  // namespace loom
