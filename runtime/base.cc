#include "runtime/base.h"

#include <cstdlib>

#include <cctype>

namespace loom {

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
  if (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) return dtype_from_flag(std::stoi(s));
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
  for (auto v : d_) n *= v;
  return n;
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
