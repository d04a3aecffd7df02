#include "runtime/params_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace loom {

static_assert(std::endian::native == std::endian::little,
              ".params and .npy files are little-endian; a big-endian host needs byte swaps");

namespace {

constexpr uint64_t kListMagic = 0x112;
constexpr uint32_t kV1Magic = 0xF993FAC8;
constexpr uint32_t kV2Magic = 0xF993FAC9;
constexpr uint32_t kV3Magic = 0xF993FACA;
// No real network has more; anything above is a corrupt header, not a shape.
constexpr int64_t kMaxNdim = 64;

// Element sizes and names of mshadow type flags 0..12 (spec 8.3); Loom's DType covers 0..7.
constexpr size_t kFlagSize[] = {4, 8, 2, 1, 4, 1, 8, 1, 2, 2, 4, 8, 2};
constexpr const char* kFlagName[] = {"float32", "float64", "float16", "uint8", "int32",
                                     "int8",    "int64",   "bool",    "int16", "uint16",
                                     "uint32",  "uint64",  "bfloat16"};
constexpr int kNumFlags = 13;
constexpr int kNumLoomFlags = 8;

std::string hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llX", static_cast<unsigned long long>(v));
  return buf;
}

// Bounds-checked little-endian cursor; every failure names the source, offset and field.
class Reader {
 public:
  Reader(const std::string& bytes, const std::string& what) : b_(bytes), what_(what) {}
  size_t pos() const { return pos_; }
  size_t left() const { return b_.size() - pos_; }

  [[noreturn]] void fail(size_t at, const std::string& msg) const {
    throw FormatError(what_ + ": " + msg + " (at offset " + std::to_string(at) + ")");
  }
  void need(uint64_t n, const std::string& field) const {
    if (n > left()) fail_truncated(field, std::to_string(n));
  }
  [[noreturn]] void fail_truncated(const std::string& field, const std::string& n) const {
    throw FormatError(what_ + ": truncated at offset " + std::to_string(pos_) + " while reading " +
                      field + " (need " + n + " bytes, " + std::to_string(left()) + " left)");
  }
  template <class T>
  T get(const std::string& field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  const char* take(uint64_t n, const std::string& field) {
    need(n, field);
    const char* p = b_.data() + pos_;
    pos_ += n;
    return p;
  }

 private:
  const std::string& b_;
  const std::string& what_;
  size_t pos_ = 0;
};

enum class Version { kV0, kV1, kV2, kV3 };

// Reads a SHAPE. Returns false for a none shape (the record ends there). `v0_ndim` is the
// already-consumed first word of a V0 record.
bool read_shape(Reader& r, Version ver, uint32_t v0_ndim, const std::string& field, Shape* out) {
  const size_t at = r.pos();
  int64_t ndim;
  if (ver == Version::kV0) {
    ndim = v0_ndim;
  } else {
    ndim = r.get<int32_t>("ndim of " + field);
  }
  if (ndim == -1 || (ndim == 0 && ver != Version::kV3)) return false;
  if (ndim < 0 || ndim > kMaxNdim) {
    if (ver == Version::kV0)
      r.fail(at - 4, field + " starts with " + hex(v0_ndim) +
                         ", which is neither a record magic (V1 0xF993FAC8, V2 0xF993FAC9, "
                         "V3 0xF993FACA) nor a plausible V0 ndim");
    r.fail(at, field + " has impossible ndim " + std::to_string(ndim) + " (expected -1.." +
                   std::to_string(kMaxNdim) + ")");
  }
  const size_t dim_size = ver == Version::kV0 ? 4 : 8;
  r.need(ndim * dim_size, std::to_string(ndim) + " dims of " + field);
  std::vector<int64_t> dims(static_cast<size_t>(ndim));
  const std::string dims_field = "dims of " + field;
  bool unknown = false;
  for (auto& d : dims) {
    const size_t dim_at = r.pos();
    d = ver == Version::kV0 ? int64_t{r.get<uint32_t>(dims_field)} : r.get<int64_t>(dims_field);
    if (d == -1 && ver == Version::kV3) {
      unknown = true;  // NumPy-shape "unknown size": MXNet loads such a record as none
    } else if (d < 0) {
      r.fail(dim_at, field + " has negative dimension " + std::to_string(d));
    }
  }
  *out = Shape(std::move(dims));
  return !unknown;
}

// Consumes the data of `shape` elements of `elem` bytes, checking first that the file holds
// them, so a corrupt shape can never cause a huge allocation. A shape whose size in bytes
// does not fit int64 is refused even when a zero dimension makes it empty (NumPy refuses
// such arrays too, and every size computation downstream would overflow).
const char* take_data(Reader& r, const Shape& shape, size_t elem, const std::string& field) {
  const size_t at = r.pos();
  int64_t bound = static_cast<int64_t>(elem);
  for (int64_t d : shape)
    if (__builtin_mul_overflow(bound, std::max<int64_t>(d, 1), &bound))
      r.fail(at, field + " is too large: " + shape.str() + " needs more than 2^63 bytes");
  uint64_t n = elem;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return r.take(n, field);
}

int read_type_flag(Reader& r, const std::string& field) {
  const size_t at = r.pos();
  const int32_t flag = r.get<int32_t>("type flag of " + field);
  if (flag < 0 || flag >= kNumFlags)
    r.fail(at, field + " has unknown type flag " + std::to_string(flag) + " (expected 0..12)");
  return flag;
}

// Reads one record. Records Loom cannot represent but can skip (sparse storage, exotic
// dtypes) yield a none array and set *deferred, so the final error can quote the name.
NDArray read_array(Reader& r, size_t index, std::string* deferred, ShapeSemantics mode) {
  const std::string label = "array " + std::to_string(index);
  const uint32_t magic = r.get<uint32_t>("record magic of " + label);
  Version ver = Version::kV0;
  if (magic == kV1Magic) ver = Version::kV1;
  if (magic == kV2Magic) ver = Version::kV2;
  if (magic == kV3Magic) ver = Version::kV3;
  if (mode == ShapeSemantics::kLegacy && ver == Version::kV3)
    r.fail(r.pos() - 4, label + " was saved with NumPy shape semantics (V3 record) and must be "
                        "loaded with them: load it inside `with mx.np_shape(True)` or a "
                        "function decorated with `mx.use_np_shape`");
  if (mode == ShapeSemantics::kNumpy && ver != Version::kV3)
    r.fail(r.pos() - 4, label + " was saved with legacy shape semantics (not a V3 record) "
                        "and cannot be loaded with NumPy shape semantics on: load it inside "
                        "`with mx.np_shape(False)`");

  int32_t stype = 0;
  Shape storage_shape;
  if (ver == Version::kV2 || ver == Version::kV3) {
    stype = r.get<int32_t>("storage type of " + label);
    if (stype < 0 || stype > 2)
      r.fail(r.pos() - 4, label + " has unknown storage type " + std::to_string(stype) +
                              " (expected 0 dense, 1 row_sparse, 2 csr)");
    if (stype != 0 && !read_shape(r, ver, 0, "storage shape of " + label, &storage_shape))
      storage_shape = Shape{0};
  }
  Shape shape;
  if (!read_shape(r, ver, magic, label, &shape)) return NDArray();

  const size_t dev_at = r.pos();
  const int32_t dev_type = r.get<int32_t>("device type of " + label);
  if (dev_type != 1 && dev_type != 2 && dev_type != 3 && dev_type != 5)
    r.fail(dev_at, label + " has unknown device type " + std::to_string(dev_type) +
                       " (expected 1 cpu, 2 gpu, 3 cpu_pinned or 5 cpu_shared)");
  r.get<int32_t>("device id of " + label);  // loaded to host regardless of the saved device
  const int flag = read_type_flag(r, label);

  if (stype != 0) {
    const int nad = stype == 1 ? 1 : 2;
    std::vector<std::pair<int, Shape>> aux(nad);
    for (int k = 0; k < nad; ++k) {
      const std::string aux_label = "aux array " + std::to_string(k) + " of " + label;
      aux[k].first = read_type_flag(r, aux_label);
      if (!read_shape(r, ver, 0, aux_label, &aux[k].second)) aux[k].second = Shape{0};
    }
    take_data(r, storage_shape, kFlagSize[flag], "data of " + label);
    for (int k = 0; k < nad; ++k)
      take_data(r, aux[k].second, kFlagSize[aux[k].first],
                "aux data " + std::to_string(k) + " of " + label);
    if (deferred->empty())
      *deferred = std::string(stype == 1 ? "row_sparse" : "csr") +
                  " storage, which Loom does not load (save it dense with tostype('default'))";
    return NDArray();
  }
  if (flag >= kNumLoomFlags) {
    take_data(r, shape, kFlagSize[flag], "data of " + label);
    if (deferred->empty())
      *deferred = "type flag " + std::to_string(flag) + " (" + kFlagName[flag] +
                  "), which Loom does not support";
    return NDArray();
  }
  const DType dtype = static_cast<DType>(flag);
  const std::string data_field =
      "data of " + label + ", shape " + shape.str() + " " + dtype_name(dtype);
  const char* src = take_data(r, shape, dtype_size(dtype), data_field);
  NDArray a(std::move(shape), dtype, Device::cpu());
  if (a.nbytes()) a.copy_from_host(src, a.nbytes());
  return a;
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace

void NamedArrays::add(std::string name, NDArray array) {
  names.push_back(std::move(name));
  arrays.push_back(std::move(array));
}

const NDArray* NamedArrays::find(const std::string& name) const {
  for (size_t i = 0; i < names.size() && i < arrays.size(); ++i)
    if (names[i] == name) return &arrays[i];
  return nullptr;
}

std::map<std::string, NDArray> NamedArrays::to_map() const {
  if (names.size() != arrays.size())
    throw FormatError("params: " + std::to_string(arrays.size()) + " arrays but " +
                      std::to_string(names.size()) + " names (a file saved from a list has none)");
  std::map<std::string, NDArray> m;
  for (size_t i = 0; i < names.size(); ++i)
    if (!m.emplace(names[i], arrays[i]).second)
      throw FormatError("params: duplicate name '" + names[i] + "'");
  return m;
}

NamedArrays NamedArrays::from_map(const std::map<std::string, NDArray>& m) {
  NamedArrays out;
  for (const auto& [k, v] : m) out.add(k, v);
  return out;
}

NamedArrays load_params_from_bytes(const std::string& bytes, const std::string& what,
                                   ShapeSemantics mode) {
  Reader r(bytes, what);
  const uint64_t magic = r.get<uint64_t>("list magic");
  if (magic != kListMagic)
    r.fail(0, "bad magic " + hex(magic) + ", expected 0x112: not an MXNet .params file");
  r.get<uint64_t>("reserved word");
  const size_t count_at = r.pos();
  const uint64_t n = r.get<uint64_t>("array count");
  if (n > r.left() / 4)  // every record is at least 4 bytes; guards the reserve below
    r.fail(count_at, "array count " + std::to_string(n) + " is impossible with " +
                         std::to_string(r.left()) + " bytes left");
  NamedArrays out;
  out.arrays.reserve(n);
  std::string deferred;
  size_t deferred_index = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const bool had = !deferred.empty();
    out.arrays.push_back(read_array(r, i, &deferred, mode));
    if (!had && !deferred.empty()) deferred_index = i;
  }
  const size_t names_at = r.pos();
  const uint64_t m = r.get<uint64_t>("names count");
  if (m != 0 && m != n)
    r.fail(names_at, "names count " + std::to_string(m) + " is neither 0 nor the array count " +
                         std::to_string(n));
  out.names.reserve(m);
  for (uint64_t i = 0; i < m; ++i) {
    const std::string label = "name of array " + std::to_string(i);
    const size_t len_at = r.pos();
    const uint64_t len = r.get<uint64_t>("length of " + label);
    out.names.emplace_back(r.take(len, label), len);
    // Names become Python strings and graph variable names: MXNet writes them as UTF-8.
    if (!valid_utf8(out.names.back()))
      r.fail(len_at, label + " is not valid UTF-8: '" + out.names.back() + "'");
  }
  // Trailing bytes are ignored, as MXNet's loader does.
  if (!deferred.empty()) {
    std::string label = "array " + std::to_string(deferred_index);
    if (m) label += " '" + out.names[deferred_index] + "'";
    throw FormatError(what + ": " + label + " has " + deferred);
  }
  return out;
}

NamedArrays load_params(const std::string& path, ShapeSemantics mode) {
  return load_params_from_bytes(read_file_bytes(path), path, mode);
}

std::string save_params_to_bytes(const NamedArrays& params, ShapeSemantics mode) {
  if (!params.names.empty() && params.names.size() != params.arrays.size())
    throw Error("save_params: " + std::to_string(params.names.size()) + " names for " +
                std::to_string(params.arrays.size()) + " arrays");
  bool has_scalar = false;
  for (const auto& a : params.arrays) has_scalar |= !a.is_none() && a.shape().ndim() == 0;
  if (has_scalar && mode == ShapeSemantics::kLegacy)
    throw Error("save_params: a 0-dim (scalar) array needs NumPy shape semantics: save it "
                "inside `with mx.np_shape(True)`");
  const bool numpy_shape =
      mode == ShapeSemantics::kNumpy || (mode == ShapeSemantics::kAuto && has_scalar);

  std::string out;
  put<uint64_t>(out, kListMagic);
  put<uint64_t>(out, 0);
  put<uint64_t>(out, params.arrays.size());
  for (const auto& a : params.arrays) {
    put<uint32_t>(out, numpy_shape ? kV3Magic : kV2Magic);
    put<int32_t>(out, 0);  // dense
    if (a.is_none()) {
      put<int32_t>(out, numpy_shape ? -1 : 0);
      continue;
    }
    put<int32_t>(out, a.shape().ndim());
    for (int64_t d : a.shape()) put<int64_t>(out, d);
    put<int32_t>(out, 1);  // cpu
    put<int32_t>(out, 0);
    put<int32_t>(out, static_cast<int32_t>(a.dtype()));
    const size_t nbytes = a.nbytes();
    const size_t at = out.size();
    out.resize(at + nbytes);
    if (nbytes) a.copy_to_host(out.data() + at, nbytes);
  }
  put<uint64_t>(out, params.names.size());
  for (const auto& name : params.names) {
    put<uint64_t>(out, name.size());
    out += name;
  }
  return out;
}

void save_params(const std::string& path, const NamedArrays& params, ShapeSemantics mode) {
  write_file_atomic(path, save_params_to_bytes(params, mode));
}

CheckpointParams split_checkpoint(const NamedArrays& params, const std::string& what) {
  if (params.names.size() != params.arrays.size())
    throw FormatError(what +
                      ": arrays are unnamed (saved from a list); a checkpoint needs "
                      "'arg:'/'aux:' names");
  CheckpointParams out;
  for (size_t i = 0; i < params.names.size(); ++i) {
    const std::string& key = params.names[i];
    const size_t colon = key.find(':');
    const std::string prefix = colon == std::string::npos ? "" : key.substr(0, colon);
    if (prefix != "arg" && prefix != "aux")
      throw FormatError(what + ": key '" + key + "' of array " + std::to_string(i) +
                        " has no 'arg:' or 'aux:' prefix (Gluon save_parameters files use "
                        "bare names; read them with load_params)");
    auto& dst = prefix == "arg" ? out.arg : out.aux;
    if (!dst.emplace(key.substr(colon + 1), params.arrays[i]).second)
      throw FormatError(what + ": duplicate key '" + key + "'");
  }
  return out;
}

NamedArrays join_checkpoint(const CheckpointParams& ckpt) {
  NamedArrays out;
  for (const auto& [k, v] : ckpt.arg) out.add("arg:" + k, v);
  for (const auto& [k, v] : ckpt.aux) out.add("aux:" + k, v);
  return out;
}

std::string read_file_bytes(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw Error("cannot read '" + path + "': " + std::strerror(err));
    }
    out.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return out;
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  namespace fs = std::filesystem;
  static std::atomic<unsigned> counter{0};
  const fs::path target(path);
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  // Hidden name in the same directory, so the rename stays within one filesystem.
  std::string tmp_name = ".";
  tmp_name += target.filename().string();
  tmp_name += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  const std::string tmp = (dir / tmp_name).string();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0)
    throw Error("cannot save '" + path + "': creating " + tmp + ": " + std::strerror(errno));
  auto fail = [&](const char* step) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("cannot save '" + path + "': " + step + ": " + std::strerror(err));
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && ::fchmod(fd, st.st_mode & 07777) != 0) fail("chmod");
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t put = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) fail("write");
    done += static_cast<size_t>(put);
  }
  if (::fsync(fd) != 0) fail("fsync");
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) fail("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename");
  // Make the rename itself durable; failure here does not lose data already written.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace loom
