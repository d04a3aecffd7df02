#include "runtime/base.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <cctype>

namespace loom {

namespace {
// Length of the valid UTF-8 sequence starting at s[i], or 0 when none starts there.
size_t utf8_len(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || c > 0xF4 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  unsigned char c1 = b(i + 1);
  if (c == 0xE0 && c1 < 0xA0) return 0;   // overlong
  if (c == 0xED && c1 >= 0xA0) return 0;  // UTF-16 surrogates
  if (c == 0xF0 && c1 < 0x90) return 0;   // overlong
  if (c == 0xF4 && c1 >= 0x90) return 0;  // past U+10FFFF
  return n;
}
}  // namespace

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_len(s, i);
    if (!n) return false;
    i += n;
  }
  return true;
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_len(s, i);
    auto c = static_cast<unsigned char>(s[i]);
    if (n == 0 || (n == 1 && ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F))) {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000 && u < 6) v /= 1000, ++u;
  if (u == 0) return std::to_string(bytes) + " bytes";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s (%llu bytes)", v, units[u],
                static_cast<unsigned long long>(bytes));
  return buf;
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat64: return 8;
    case DType::kFloat16: return 2;
    case DType::kUint8: return 1;
    case DType::kInt32: return 4;
    case DType::kInt8: return 1;
    case DType::kInt64: return 8;
    case DType::kBool: return 1;
    default: break;
  }
  throw Error("unsupported dtype flag " + std::to_string(static_cast<int>(t)));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kFloat16: return "float16";
    case DType::kUint8: return "uint8";
    case DType::kInt32: return "int32";
    case DType::kInt8: return "int8";
    case DType::kInt64: return "int64";
    case DType::kBool: return "bool";
    default: return "unknown";
  }
}

DType dtype_from_flag(int flag) {
  if (flag < 0 || flag > 7) throw FormatError("unknown dtype flag " + std::to_string(flag));
  return static_cast<DType>(flag);
}

DType dtype_from_string(const std::string& s) {
  static const char* names[] = {"float32", "float64", "float16", "uint8",
                                "int32",   "int8",    "int64",   "bool"};
  for (int i = 0; i < 8; ++i)
    if (s == names[i]) return static_cast<DType>(i);
  if (s == "float") return DType::kFloat32;
  if (s == "double") return DType::kFloat64;
  if (!s.empty() && s.size() < 4 && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      }))
    return dtype_from_flag(std::stoi(s));
  throw ParamError("unknown dtype '" + s + "'");
}

bool Shape::known() const {
  if (d_.empty()) return false;
  for (auto v : d_)
    if (v <= 0) return false;
  return true;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (auto v : d_)
    if (__builtin_mul_overflow(n, v, &n))
      throw ShapeError("shape " + str() + " has more elements than int64 can count");
  return n;
}

int64_t Shape::bytes(DType t) const {
  int64_t b = 0;
  if (__builtin_mul_overflow(numel(), static_cast<int64_t>(dtype_size(t)), &b))
    throw ShapeError("an array of shape " + str() + " and dtype " + dtype_name(t) +
                     " has more bytes than int64 can count");
  return b;
}

std::string Shape::str() const {
  std::string s = "(";
  for (size_t i = 0; i < d_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(d_[i]);
  }
  if (d_.size() == 1) s += ",";
  return s + ")";
}

std::string Device::str() const {
  return std::string(type == DeviceType::kCPU ? "cpu(" : "gpu(") + std::to_string(id) + ")";
}

const char* req_name(Req r) {
  switch (r) {
    case Req::kNull: return "null";
    case Req::kWrite: return "write";
    case Req::kInplace: return "inplace";
    case Req::kAdd: return "add";
  }
  return "?";
}

Req req_from_string(const std::string& s) {
  if (s == "null") return Req::kNull;
  if (s == "write") return Req::kWrite;
  if (s == "inplace") return Req::kInplace;
  if (s == "add") return Req::kAdd;
  throw BindError("unknown grad_req '" + s + "' (expected null, write or add)");
}

bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v && std::string(v) == "0";
}

}  // namespace loom
