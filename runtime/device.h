// The device seam: the executor and NDArray see a device only through these few calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/base.h"

namespace loom {

/// Device work recorded once and replayed as one launch (a CUDA Graph), on the stream it
/// was recorded from. Everything it touches (pointers, sizes, kernel arguments) is fixed.
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  /// Queues one replay on the device's stream (asynchronous, as the recorded launches).
  virtual void launch() = 0;
};

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
  /// Throws Error naming the device and why when device `id` cannot be used (CUDA: no
  /// device, e.g. "no CUDA device: gpu(0) is not available (cudaGetDeviceCount: ...)", or an
  /// id out of range). Bind calls it before anything else touches the device.
  virtual void check_available(int id) { (void)id; }
  /// Records the device work `work` queues on device `id`'s stream without running it and
  /// returns it as a replayable graph; null (with `why` set) when the backend cannot record
  /// or recording failed (e.g. `work` waited for the device). Either way nothing has run.
  virtual std::unique_ptr<DeviceGraph> capture(int id, const std::function<void()>& work,
                                               std::string* why) {
    (void)id, (void)work;
    if (why) *why = "this device does not record graphs";
    return nullptr;
  }
};

/// Backend for a device type; throws Error when none is compiled in.
DeviceBackend& device_backend(DeviceType t);
/// True when a backend for `t` is compiled in and reports at least one device.
bool device_available(DeviceType t);
/// Throws Error with a clear message when `d` cannot be used here (no CUDA in this build, no
/// device, id out of range): what bind, the CLI and the Python contexts call first.
void check_device(Device d);
/// Called by backends at static-initialisation time.
void register_device_backend(DeviceType t, DeviceBackend* backend);

/// Copies `bytes` from (src, src_dev) to (dst, dst_dev), routing through the host if needed.
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);

}  // namespace loom
