#include "runtime/npy.h"

#include <algorithm>
#include <cstring>

#include "runtime/params_io.h"

namespace loom {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

struct DescrEntry {
  const char* descr;
  DType dtype;
};
// The first spelling of each dtype is what the writer emits (NumPy's own spelling).
constexpr DescrEntry kDescrs[] = {
    {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}, {"<f2", DType::kFloat16},
    {"<i4", DType::kInt32},   {"<i8", DType::kInt64},   {"|u1", DType::kUint8},
    {"|i1", DType::kInt8},    {"|b1", DType::kBool},    {"<u1", DType::kUint8},
    {"<i1", DType::kInt8},    {"<b1", DType::kBool},    {"u1", DType::kUint8},
    {"i1", DType::kInt8},     {"b1", DType::kBool},
};

// Parser for the Python dict literal in the header, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(const std::string& text, size_t base, const std::string& what)
      : s_(text), base_(base), what_(what) {}

  [[noreturn]] void fail(const std::string& msg) const {
    throw FormatError(what_ + ": malformed .npy header at offset " + std::to_string(base_ + i_) +
                      ": " + msg + " (header: " + s_ + ")");
  }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  std::string str() {
    ws();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("expected a quoted string");
    const char q = s_[i_++];
    const size_t end = s_.find(q, i_);
    if (end == std::string::npos) fail("unterminated string");
    std::string out = s_.substr(i_, end - i_);
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    ws();
    for (const char* word : {"True", "False"})
      if (s_.compare(i_, std::strlen(word), word) == 0) {
        i_ += std::strlen(word);
        return word[0] == 'T';
      }
    fail("expected True or False");
  }
  Shape shape() {
    expect('(');
    std::vector<int64_t> dims;
    while (!eat(')')) {
      ws();
      int64_t v = 0;
      const size_t start = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[i_] - '0', &v))
          fail("dimension too large");
        ++i_;
      }
      if (i_ == start) fail("expected a non-negative integer dimension");
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 long literal
      if (dims.size() >= 64) fail("more than 64 dimensions");
      dims.push_back(v);
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return Shape(std::move(dims));
  }
  bool at_end() {
    ws();
    return i_ == s_.size();
  }

 private:
  const std::string& s_;
  size_t base_;
  const std::string& what_;
  size_t i_ = 0;
};

}  // namespace

NDArray load_npy_from_bytes(const std::string& bytes, const std::string& what) {
  auto truncated = [&](size_t at, const std::string& field, uint64_t need) {
    return FormatError(what + ": truncated at offset " + std::to_string(at) + " while reading " +
                       field + " (need " + std::to_string(need) + " bytes, " +
                       std::to_string(bytes.size() - at) + " left)");
  };
  if (bytes.size() < kMagicLen) throw truncated(0, "the .npy magic", kMagicLen);
  if (bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    throw FormatError(what + ": bad magic at offset 0, expected \"\\x93NUMPY\": not a .npy file");
  if (bytes.size() < kMagicLen + 2) throw truncated(kMagicLen, "the format version", 2);
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3)
    throw FormatError(what + ": unsupported .npy format version " + std::to_string(major) + "." +
                      std::to_string(minor) + " at offset 6 (expected 1.0, 2.0 or 3.0)");
  const size_t len_size = major == 1 ? 2 : 4;
  size_t pos = 8;
  if (bytes.size() - pos < len_size) throw truncated(pos, "the header length", len_size);
  uint32_t header_len = 0;
  std::memcpy(&header_len, bytes.data() + pos, len_size);  // little-endian host
  pos += len_size;
  if (bytes.size() - pos < header_len) throw truncated(pos, "the header", header_len);
  const std::string header = bytes.substr(pos, header_len);
  const size_t header_at = pos;
  pos += header_len;

  HeaderParser p(header, header_at, what);
  std::string descr;
  bool fortran = false;
  Shape shape;
  bool seen[3] = {false, false, false};
  p.expect('{');
  while (!p.eat('}')) {
    const std::string key = p.str();
    p.expect(':');
    int k = key == "descr" ? 0 : key == "fortran_order" ? 1 : key == "shape" ? 2 : -1;
    if (k < 0) p.fail("unexpected key '" + key + "'");
    if (seen[k]) p.fail("duplicate key '" + key + "'");
    seen[k] = true;
    if (k == 0) {
      p.ws();
      if (p.eat('[')) p.fail("structured dtypes are not supported");
      descr = p.str();
    } else if (k == 1) {
      fortran = p.boolean();
    } else {
      shape = p.shape();
    }
    if (!p.eat(',')) {
      p.expect('}');
      break;
    }
  }
  if (!p.at_end()) p.fail("unexpected text after the dict");
  for (int k = 0; k < 3; ++k)
    if (!seen[k])
      p.fail(std::string("missing key '") +
             (k == 0   ? "descr"
              : k == 1 ? "fortran_order"
                       : "shape") +
             "'");
  if (fortran)
    throw FormatError(what +
                      ": fortran_order is True; Loom reads only C-order .npy files "
                      "(save with np.ascontiguousarray)");
  DType dtype = DType::kUnknown;
  for (const auto& e : kDescrs)
    if (descr == e.descr) dtype = e.dtype;
  if (dtype == DType::kUnknown) {
    std::string why =
        !descr.empty() && descr[0] == '>' ? " (big-endian data is not supported)" : "";
    throw FormatError(what + ": unsupported .npy dtype '" + descr + "'" + why +
                      "; expected one of <f4 <f8 <f2 <i4 <i8 |u1 |i1 |b1");
  }
  // Zero dimensions count as 1 here: an empty array whose other dimensions overflow int64
  // is refused too (NumPy cannot make it, and size computations downstream would overflow).
  int64_t bound = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bound, std::max<int64_t>(d, 1), &bound))
      throw FormatError(what + ": shape " + shape.str() + " in the .npy header is absurdly large");
  uint64_t nbytes = dtype_size(dtype);
  for (int64_t d : shape) nbytes *= static_cast<uint64_t>(d);
  const std::string field = "data, shape " + shape.str() + " " + dtype_name(dtype);
  if (bytes.size() - pos < nbytes) throw truncated(pos, field, nbytes);  // before allocating
  NDArray a(std::move(shape), dtype, Device::cpu());
  if (nbytes) a.copy_from_host(bytes.data() + pos, nbytes);
  return a;
}

NDArray load_npy(const std::string& path) {
  return load_npy_from_bytes(read_file_bytes(path), path);
}

std::string save_npy_to_bytes(const NDArray& a) {
  if (a.is_none()) throw Error("save_npy: cannot save a none array");
  const char* descr = nullptr;
  for (const auto& e : kDescrs)
    if (e.dtype == a.dtype()) {
      descr = e.descr;
      break;
    }
  if (!descr) throw Error(std::string("save_npy: unsupported dtype ") + dtype_name(a.dtype()));
  std::string header = std::string("{'descr': '") + descr +
                       "', 'fortran_order': False, 'shape': " + a.shape().str() + ", }";
  // NumPy pads with spaces and ends with '\n' so the data starts 64-byte aligned.
  auto padded = [&](size_t prefix) { return (prefix + header.size() + 1 + 63) / 64 * 64 - prefix; };
  const bool v1 = padded(kMagicLen + 4) <= 65535;
  const size_t header_len = padded(kMagicLen + (v1 ? 4 : 6));
  header.append(header_len - header.size() - 1, ' ');
  header += '\n';

  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(v1 ? 1 : 2);
  out += '\0';
  const uint32_t len = static_cast<uint32_t>(header.size());
  out.append(reinterpret_cast<const char*>(&len), v1 ? 2 : 4);
  out += header;
  const size_t at = out.size();
  out.resize(at + a.nbytes());
  if (a.nbytes()) a.copy_to_host(out.data() + at, a.nbytes());
  return out;
}

void save_npy(const std::string& path, const NDArray& a) {
  write_file_atomic(path, save_npy_to_bytes(a));
}

}  // namespace loom
