// The device seam: the executor and NDArray see a device only through these few calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/base.h"

namespace loom {

/// One backend per device type (CPU, CUDA). Implementations register themselves with
/// `register_device_backend`; nothing else in Loom branches on the device type.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  /// Allocates `bytes` (64-byte aligned at least) on device `id`; never returns null.
  virtual void* alloc(int id, size_t bytes) = 0;
  /// Returns memory obtained from alloc (pooled backends keep it for reuse).
  virtual void free(int id, void* p, size_t bytes) = 0;
  /// Sets `bytes` bytes at `p` to zero.
  virtual void zero(int id, void* p, size_t bytes) = 0;
  /// Copies between this device and the host (or within the device). `to_device` and
  /// `from_device` say which side is on this backend's device.
  virtual void copy(int id, void* dst, const void* src, size_t bytes, bool dst_on_device,
                    bool src_on_device) = 0;
  /// Waits until all work queued on device `id` has finished.
  virtual void synchronize(int id) = 0;
  /// Number of usable devices of this type (0 when none is present or the driver errors).
  virtual int count() = 0;
  /// The stream handle kernels on device `id` enqueue to (nullptr for CPU).
  virtual void* stream(int id) { (void)id; return nullptr; }
  /// Channels per block of the channel-blocked layout this device's kernels prefer for 4-D
  /// intermediates (1 = keep everything plain). See plan_layouts.
  virtual int channel_block() { return 1; }
  /// Bytes device `id` can still hand out without failing or swapping the machine to death
  /// (CPU: available RAM and swap, within the cgroup's limit); SIZE_MAX when unknown. Bind
  /// checks its memory plan against it before allocating anything.
  virtual size_t available_memory(int id) { (void)id; return SIZE_MAX; }
};

/// Backend for a device type; throws Error when none is compiled in.
DeviceBackend& device_backend(DeviceType t);
/// True when a backend for `t` is compiled in and reports at least one device.
bool device_available(DeviceType t);
/// Called by backends at static-initialisation time.
void register_device_backend(DeviceType t, DeviceBackend* backend);

/// Copies `bytes` from (src, src_dev) to (dst, dst_dev), routing through the host if needed.
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);

}  // namespace loom
