// Basic value types shared by every layer: errors, dtypes, shapes, devices.
#pragma once

#include <algorithm>
#include <utility>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

/// `s` with every byte that is not part of a valid UTF-8 sequence, and every control
/// character but newline and tab, written as `\xNN`: safe to print and to hand to Python.
std::string printable(std::string_view s);
/// True when `s` is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(std::string_view s);
/// "8.00 TB (8000000000000 bytes)": a byte count for messages.
std::string format_bytes(uint64_t bytes);

/// Base of every error Loom throws on bad user input. `what()` is one line that names the
/// file, node, op, input or offset involved. Messages quote user input, so they pass through
/// `printable`: whatever the input held, a message is valid UTF-8.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(printable(msg)) {}
};
/// Malformed or inconsistent JSON graph files.
class JsonError : public Error { using Error::Error; };
/// An operator name that no registered op (or alias) matches.
class UnknownOpError : public Error { using Error::Error; };
/// Structural graph problems: cycles, dangling inputs, bad indices.
class GraphError : public Error { using Error::Error; };
/// Shape or dtype inference failures and mismatches.
class ShapeError : public Error { using Error::Error; };
/// Bad or missing operator attributes.
class ParamError : public Error { using Error::Error; };
/// Problems binding arrays to a graph (missing argument, wrong shape, ...).
class BindError : public Error { using Error::Error; };
/// Truncated or corrupt `.params` / `.npy` files.
class FormatError : public Error { using Error::Error; };
/// An allocation the machine cannot satisfy (a bind whose arrays exceed the memory there is,
/// or a failed device allocation). Python sees it as loom.OutOfMemoryError, a MemoryError.
class OutOfMemoryError : public Error { using Error::Error; };

/// Element types, numbered as MXNet's type flags (these numbers appear in `.params` files and
/// in the `__dtype__` variable attribute).
enum class DType : int {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,
  kUint8 = 3,
  kInt32 = 4,
  kInt8 = 5,
  kInt64 = 6,
  kBool = 7,
  kUnknown = -1,
};

/// Bytes per element; throws for kUnknown or an unsupported flag.
size_t dtype_size(DType t);
/// NumPy-style name ("float32", "int64", ...).
const char* dtype_name(DType t);
/// Parses a NumPy-style name or an integer type flag given as a string.
DType dtype_from_string(const std::string& s);
/// Maps an integer MXNet type flag to DType, throwing FormatError when it is unknown.
DType dtype_from_flag(int flag);

/// Physical layout of an array a kernel reads or writes. User-visible arrays (arguments,
/// aux states, gradients, outputs) are always plain; the executor may keep intermediate
/// 4-D entries in a oneDNN channel-blocked layout (layout propagation, DESIGN.md).
enum class Layout : uint8_t {
  kPlain,     ///< row-major, as the shape says
  kNChw8c,    ///< (N, C/8, H, W, 8): oneDNN nChw8c, C divisible by 8
  kNChw16c,   ///< (N, C/16, H, W, 16): oneDNN nChw16c, C divisible by 16
};
/// Channels per block of a layout (1 for plain).
inline int layout_block(Layout l) { return l == Layout::kNChw16c ? 16 : l == Layout::kNChw8c ? 8 : 1; }

/// A tensor shape. In MXNet's legacy shape semantics (the ones its JSON uses), ndim 0 means
/// "unknown" and a 0 dimension means "unknown size"; Loom keeps those semantics.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> d) : d_(d) {}
  explicit Shape(std::vector<int64_t> d) : d_(std::move(d)) {}

  int ndim() const { return static_cast<int>(d_.size()); }
  int64_t operator[](int i) const { return d_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return d_[static_cast<size_t>(i)]; }
  /// True when ndim > 0 and every dimension is > 0.
  bool known() const;
  /// Product of the dimensions (1 for ndim 0); throws ShapeError when it overflows int64.
  int64_t numel() const;
  /// Bytes of an array of this shape and `t`; throws ShapeError when that overflows int64.
  int64_t bytes(DType t) const;
  const std::vector<int64_t>& dims() const { return d_; }
  std::vector<int64_t>& dims() { return d_; }
  auto begin() const { return d_.begin(); }
  auto end() const { return d_.end(); }
  void push_back(int64_t v) { d_.push_back(v); }
  /// "(2, 3, 4)" as MXNet prints shapes.
  std::string str() const;
  bool operator==(const Shape& o) const { return d_ == o.d_; }
  bool operator!=(const Shape& o) const { return d_ != o.d_; }

 private:
  std::vector<int64_t> d_;
};

/// Where an array lives.
enum class DeviceType : int { kCPU = 1, kGPU = 2 };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int id = 0;
  bool operator==(const Device& o) const { return type == o.type && id == o.id; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
  static Device cpu() { return {DeviceType::kCPU, 0}; }
  static Device gpu(int i = 0) { return {DeviceType::kGPU, i}; }
};

/// Gradient / output write request, numbered as MXNet's OpReqType.
enum class Req : int { kNull = 0, kWrite = 1, kInplace = 2, kAdd = 3 };
const char* req_name(Req r);
Req req_from_string(const std::string& s);

/// True when environment variable `name` is "0": the switches that turn an optimisation off
/// (LOOM_LAYOUT_PROPAGATION=0, LOOM_FUSE_EPILOGUE=0, ...).
bool env_off(const char* name);

/// Thread t's share of [begin, end) among nt threads, contiguous and in 16-element (64-byte
/// for float) units: the static split of every element-wise parallel loop.
inline std::pair<int64_t, int64_t> thread_share(int64_t begin, int64_t end, int64_t nt, int64_t t) {
  const int64_t units = (end - begin + 15) / 16;
  return {std::min(end, begin + units * t / nt * 16), std::min(end, begin + units * (t + 1) / nt * 16)};
}

}  // namespace loom
