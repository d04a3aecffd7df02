// NDArray: a typed, shaped view of reference-counted device storage.
#pragma once

#include <atomic>
#include <cstring>
#include <memory>
#include <string>

#include "runtime/base.h"
#include "runtime/device.h"

namespace loom {

/// A block of device memory, freed back to its backend's pool when the last owner goes.
class Storage {
 public:
  Storage(Device dev, size_t bytes);
  /// Adopts `bytes` at `ptr` owned elsewhere (a NumPy array, a DLPack producer): `owner`
  /// keeps them alive until the last NDArray on them goes; they never enter the pool.
  Storage(Device dev, void* ptr, size_t bytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  /// A mutable pointer to the block; marks the storage escaped (see `version`).
  void* data() const {
    mark_escaped();
    return ptr_;
  }
  /// The block for reading (does not mark the storage escaped).
  const void* cdata() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return dev_; }

  /// Write tracking for values derived from the contents (cached oneDNN weight reorders).
  /// `version` counts the writes NDArray's own methods make (copy_from, copy_from_host, zero,
  /// fill). Once a mutable pointer has been handed out (`NDArray::raw` / `data`, NumPy views)
  /// later writes cannot be seen, so the storage is `escaped` for good and nothing may be
  /// cached from it.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  bool escaped() const { return escaped_.load(std::memory_order_acquire); }
  void bump_version() { version_.fetch_add(1, std::memory_order_acq_rel); }
  void mark_escaped() const {
    if (!escaped_.load(std::memory_order_relaxed)) escaped_.store(true, std::memory_order_release);
  }

 private:
  Device dev_;
  size_t bytes_;
  void* ptr_;
  std::atomic<uint64_t> version_{0};
  mutable std::atomic<bool> escaped_{false};
  std::shared_ptr<void> owner_;  // set for adopted memory
};

/// An n-dimensional array. Copies of an NDArray share storage (like MXNet's handles);
/// `copy()` makes a deep copy. An empty (default) NDArray has no storage ("none").
class NDArray {
 public:
  NDArray() = default;
  /// Allocates uninitialised storage.
  NDArray(Shape shape, DType dtype = DType::kFloat32, Device dev = Device::cpu());
  /// Wraps existing storage at a byte offset (used for views and memory planning).
  NDArray(std::shared_ptr<Storage> storage, size_t offset, Shape shape, DType dtype);

  static NDArray zeros(Shape shape, DType dtype = DType::kFloat32, Device dev = Device::cpu());
  static NDArray full(Shape shape, double value, DType dtype = DType::kFloat32,
                      Device dev = Device::cpu());

  bool is_none() const { return storage_ == nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  int64_t size() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(size()) * dtype_size(dtype_); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t offset() const { return offset_; }

  /// Raw pointer to the first element (device memory for GPU arrays). A mutable pointer
  /// marks the storage escaped (Storage::version); code that only reads uses `craw`/`cdata`.
  void* raw() const { return static_cast<char*>(storage_->data()) + offset_; }
  template <class T>
  T* data() const { return static_cast<T*>(raw()); }
  /// Read-only pointer to the first element.
  const void* craw() const { return static_cast<const char*>(storage_->cdata()) + offset_; }
  template <class T>
  const T* cdata() const { return static_cast<const T*>(craw()); }

  /// A view with a new shape of the same number of elements (shares storage).
  NDArray reshape(const Shape& s) const;
  /// A view of rows [begin, end) along axis 0 (shares storage).
  NDArray slice(int64_t begin, int64_t end) const;
  /// Deep copy, optionally to another device.
  NDArray copy(Device dev) const;
  NDArray copy() const { return copy(device()); }
  /// Copies the contents of `src` (same shape and dtype; any device) into this array.
  void copy_from(const NDArray& src) const;
  /// Copies raw bytes from host memory.
  void copy_from_host(const void* src, size_t bytes) const;
  /// Copies the contents into host memory.
  void copy_to_host(void* dst, size_t bytes) const;
  /// Sets every element to zero.
  void zero() const;
  /// Sets every element to `v` (CPU arrays; GPU arrays go through the host).
  void fill(double v) const;
  /// True when both arrays view the same bytes.
  /// True when the two arrays share any byte.
  bool overlaps(const NDArray& o) const {
    if (is_none() || o.is_none() || storage_ != o.storage_) return false;
    return offset_ < o.offset_ + o.nbytes() && o.offset_ < offset_ + nbytes();
  }
  bool same_memory(const NDArray& o) const {
    return storage_ == o.storage_ && offset_ == o.offset_;
  }
  /// Reads element i as double (CPU arrays; for tests and printing).
  double at(int64_t i) const;

 private:
  // A pointer for one of the writes NDArray makes itself: counted in the storage's version
  // instead of marking it escaped.
  void* raw_for_write() const {
    storage_->bump_version();
    return const_cast<void*>(craw());
  }
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
};

}  // namespace loom
