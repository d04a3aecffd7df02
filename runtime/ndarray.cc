#include "runtime/ndarray.h"

#include "runtime/dtype_traits.h"

#include <vector>

namespace loom {

Storage::Storage(Device dev, size_t bytes) : dev_(dev), bytes_(bytes) {
  ptr_ = device_backend(dev.type).alloc(dev.id, bytes == 0 ? 64 : bytes);
}

Storage::Storage(Device dev, void* ptr, size_t bytes, std::shared_ptr<void> owner)
    : dev_(dev), bytes_(bytes), ptr_(ptr), escaped_(true), owner_(std::move(owner)) {}

Storage::~Storage() {
  if (!owner_) device_backend(dev_.type).free(dev_.id, ptr_, bytes_ == 0 ? 64 : bytes_);
}

namespace {
size_t checked_bytes(const Shape& s, DType t) {
  for (auto d : s)
    if (d < 0) throw ShapeError("cannot allocate an array of shape " + s.str() + ": negative dimension");
  return static_cast<size_t>(s.bytes(t));
}
}  // namespace

NDArray::NDArray(Shape shape, DType dtype, Device dev)
    : storage_(std::make_shared<Storage>(dev, checked_bytes(shape, dtype))),
      shape_(std::move(shape)),
      dtype_(dtype) {}

NDArray::NDArray(std::shared_ptr<Storage> storage, size_t offset, Shape shape, DType dtype)
    : storage_(std::move(storage)), offset_(offset), shape_(std::move(shape)), dtype_(dtype) {
  if (storage_ && offset_ + nbytes() > storage_->bytes())
    throw Error("NDArray view of " + shape_.str() + " exceeds its storage");
}

NDArray NDArray::zeros(Shape shape, DType dtype, Device dev) {
  NDArray a(std::move(shape), dtype, dev);
  a.zero();
  return a;
}

NDArray NDArray::full(Shape shape, double value, DType dtype, Device dev) {
  NDArray a(std::move(shape), dtype, dev);
  a.fill(value);
  return a;
}

NDArray NDArray::reshape(const Shape& s) const {
  if (s.numel() != size())
    throw ShapeError("cannot reshape array of shape " + shape_.str() + " to " + s.str());
  return NDArray(storage_, offset_, s, dtype_);
}

NDArray NDArray::slice(int64_t begin, int64_t end) const {
  if (shape_.ndim() == 0 || begin < 0 || end > shape_[0] || begin > end)
    throw ShapeError("slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") out of range for shape " + shape_.str());
  Shape s = shape_;
  s[0] = end - begin;
  size_t row = shape_[0] ? nbytes() / static_cast<size_t>(shape_[0]) : 0;
  return NDArray(storage_, offset_ + static_cast<size_t>(begin) * row, s, dtype_);
}

NDArray NDArray::copy(Device dev) const {
  NDArray out(shape_, dtype_, dev);
  out.copy_from(*this);
  return out;
}

void NDArray::copy_from(const NDArray& src) const {
  if (src.shape_.numel() != shape_.numel() || src.dtype_ != dtype_)
    throw ShapeError("copy: source " + src.shape_.str() + " " + dtype_name(src.dtype_) +
                     " does not match destination " + shape_.str() + " " + dtype_name(dtype_));
  if (same_memory(src)) return;
  device_copy(raw_for_write(), device(), src.craw(), src.device(), nbytes());
}

void NDArray::copy_from_host(const void* src, size_t bytes) const {
  if (bytes != nbytes()) throw Error("copy_from_host: byte count mismatch");
  device_copy(raw_for_write(), device(), src, Device::cpu(), bytes);
}

void NDArray::copy_to_host(void* dst, size_t bytes) const {
  if (bytes != nbytes()) throw Error("copy_to_host: byte count mismatch");
  device_copy(dst, Device::cpu(), craw(), device(), bytes);
}

void NDArray::zero() const {
  if (storage_) device_backend(device().type).zero(device().id, raw_for_write(), nbytes());
}

namespace {
void fill_typed(void* p, int64_t n, DType t, double v) {
  // The value converts as Cast would (MXNet: full(300, int8) is 44, full(-1, uint8) 255).
  dispatch_dtype(
      t,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T x = convert_value<T>(v);
        T* d = static_cast<T*>(p);
        for (int64_t i = 0; i < n; ++i) d[i] = x;
      },
      "fill");
}
}  // namespace

void NDArray::fill(double v) const {
  if (!storage_) return;
  if (device().type == DeviceType::kCPU) {
    fill_typed(raw_for_write(), size(), dtype_, v);
  } else {
    std::vector<char> host(nbytes());
    fill_typed(host.data(), size(), dtype_, v);
    copy_from_host(host.data(), host.size());
  }
}

double NDArray::at(int64_t i) const {
  if (device().type != DeviceType::kCPU) return copy(Device::cpu()).at(i);
  switch (dtype_) {
    case DType::kFloat32: return cdata<float>()[i];
    case DType::kFloat64: return cdata<double>()[i];
    case DType::kInt32: return cdata<int32_t>()[i];
    case DType::kInt64: return static_cast<double>(cdata<int64_t>()[i]);
    case DType::kUint8: case DType::kBool: return cdata<uint8_t>()[i];
    case DType::kInt8: return cdata<int8_t>()[i];
    case DType::kFloat16: return half_bits_to_float(cdata<uint16_t>()[i]);
    default: throw Error(std::string("at: unsupported dtype ") + dtype_name(dtype_));
  }
}

}  // namespace loom
