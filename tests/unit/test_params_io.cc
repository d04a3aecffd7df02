// .params and .npy files are built byte by byte here from the format description in
// spec/mxnet.md section 8 (and the NumPy format doc), so the reader is checked against the
// format rather than against Loom's own writer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "runtime/npy.h"
#include "runtime/params_io.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

// Little-endian byte builder.
struct Bytes {
  std::string s;
  template <class T>
  Bytes& put(T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& i32(int32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& i64(int64_t v) { return put(v); }
  template <class T>
  Bytes& values(std::initializer_list<T> vs) {
    for (T v : vs) put(v);
    return *this;
  }
  Bytes& name(const std::string& n) {
    u64(n.size());
    s += n;
    return *this;
  }
  // List header: magic, reserved, count.
  Bytes& header(uint64_t n) { return u64(0x112).u64(0).u64(n); }
  // Dense V2 record header up to (not including) the data.
  Bytes& v2(std::initializer_list<int64_t> dims, int flag, int dev_type = 1, int dev_id = 0) {
    u32(0xF993FAC9).i32(0).i32(static_cast<int32_t>(dims.size()));
    for (int64_t d : dims) i64(d);
    return i32(dev_type).i32(dev_id).i32(flag);
  }
};

constexpr uint32_t kV1 = 0xF993FAC8;
constexpr uint32_t kV3 = 0xF993FACA;

// Two named float32 arrays, exactly as MXNet's writer lays them out.
std::string two_array_file() {
  Bytes b;
  b.header(2);
  b.v2({2, 3}, 0).values<float>({0.f, 0.5f, 1.f, 1.5f, 2.f, 2.5f});
  b.v2({4}, 0).values<float>({1.f, -2.f, 3.25f, 1e-3f});
  b.u64(2).name("arg:fc1_weight").name("aux:bn0_moving_var");
  return b.s;
}

// A fresh directory, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("loom_params_io_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> list() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path path_;
};

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const FormatError& e) {
    return e.what();
  }
  return "(no error)";
}
std::string message_of(const std::string& bytes, const std::string& what = "model.params") {
  return error_of([&] { load_params_from_bytes(bytes, what); });
}
#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

TEST(ParamsIo, HandWrittenV2LoadsAndSavesByteForByte) {
  const std::string file = two_array_file();
  NamedArrays p = load_params_from_bytes(file, "model.params");
  ASSERT_EQ(p.names, (std::vector<std::string>{"arg:fc1_weight", "aux:bn0_moving_var"}));
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p.arrays[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(p.arrays[0].dtype(), DType::kFloat32);
  EXPECT_EQ(p.arrays[0].device(), Device::cpu());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(p.arrays[0].at(i), 0.5 * i);
  EXPECT_EQ(p.arrays[1].shape(), (Shape{4}));
  EXPECT_EQ(p.arrays[1].at(2), 3.25);
  EXPECT_EQ(p.arrays[1].at(3), static_cast<double>(1e-3f));
  EXPECT_EQ(save_params_to_bytes(p), file);

  TempDir dir;
  save_params(dir.file("model.params"), p);
  EXPECT_EQ(read_file_bytes(dir.file("model.params")), file);
  NamedArrays again = load_params(dir.file("model.params"));
  EXPECT_EQ(again.names, p.names);
  EXPECT_EQ(again.find("aux:bn0_moving_var")->at(1), -2.0);
  EXPECT_EQ(again.find("missing"), nullptr);
  EXPECT_EQ(again.to_map().at("arg:fc1_weight").at(5), 2.5);
}

TEST(ParamsIo, LegacyV1AndV0Records) {
  Bytes b;
  b.header(3);
  // V1: magic, i32 ndim, i64 dims, ctx, type flag, data.
  b.u32(kV1).i32(2).i64(1).i64(2).i32(1).i32(0).i32(0).values<float>({7.f, 8.f});
  // V0 as in legacy_ndarray.v0: the first u32 is ndim, then u32 dims.
  b.u32(1).u32(3).i32(1).i32(0).i32(0).values<float>({1.f, 2.f, 3.f});
  b.u32(2).u32(2).u32(2).i32(1).i32(0).i32(1).values<double>({0.25, -1.0, 2.0, 4.0});
  b.u64(3).name("a").name("b").name("c");
  NamedArrays p = load_params_from_bytes(b.s, "legacy.params");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p.arrays[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(p.arrays[0].at(1), 8.0);
  EXPECT_EQ(p.arrays[1].shape(), (Shape{3}));
  EXPECT_EQ(p.arrays[1].at(2), 3.0);
  EXPECT_EQ(p.arrays[2].shape(), (Shape{2, 2}));
  EXPECT_EQ(p.arrays[2].dtype(), DType::kFloat64);
  EXPECT_EQ(p.arrays[2].at(0), 0.25);
  // Re-saved as the same content in V2 records.
  Bytes v2;
  v2.header(3);
  v2.v2({1, 2}, 0).values<float>({7.f, 8.f});
  v2.v2({3}, 0).values<float>({1.f, 2.f, 3.f});
  v2.v2({2, 2}, 1).values<double>({0.25, -1.0, 2.0, 4.0});
  v2.u64(3).name("a").name("b").name("c");
  EXPECT_EQ(save_params_to_bytes(p), v2.s);
}

TEST(ParamsIo, NoneArraysEndAfterTheShape) {
  Bytes b;
  b.header(6);
  b.u32(0xF993FAC9).i32(0).i32(0);  // V2 none, old writers
  b.v2({2}, 4).values<int32_t>({-5, 9});
  b.u32(0xF993FAC9).i32(0).i32(-1);  // V2 none, 1.5+ writers
  b.u32(kV1).i32(0);                 // V1 none
  b.u32(0);                          // V0 none
  b.v2({1}, 6).values<int64_t>({int64_t{1} << 40});
  b.u64(0);
  NamedArrays p = load_params_from_bytes(b.s, "none.params");
  ASSERT_EQ(p.size(), 6u);
  EXPECT_TRUE(p.names.empty());
  for (int i : {0, 2, 3, 4}) EXPECT_TRUE(p.arrays[i].is_none()) << i;
  EXPECT_EQ(p.arrays[1].dtype(), DType::kInt32);
  EXPECT_EQ(p.arrays[1].at(0), -5.0);
  EXPECT_EQ(p.arrays[5].dtype(), DType::kInt64);
  EXPECT_EQ(p.arrays[5].at(0), static_cast<double>(int64_t{1} << 40));
  // The writer emits none as V2 ndim 0.
  Bytes w;
  w.header(2).u32(0xF993FAC9).i32(0).i32(0);
  w.v2({2}, 4).values<int32_t>({-5, 9}).u64(0);
  EXPECT_EQ(save_params_to_bytes({{}, {p.arrays[0], p.arrays[1]}}), w.s);
}

TEST(ParamsIo, DtypesAndListWithoutNames) {
  Bytes b;
  b.header(4);
  b.v2({3}, 1).values<double>({1.5, -2.5, 1e300});
  b.v2({2, 1}, 4).values<int32_t>({-7, 2147483647});
  b.v2({3}, 3).values<uint8_t>({0, 128, 255});
  b.v2({2}, 7).values<uint8_t>({1, 0});
  b.u64(0);
  NamedArrays p = load_params_from_bytes(b.s, "list.params");
  EXPECT_FALSE(p.has_names());
  EXPECT_EQ(p.arrays[0].dtype(), DType::kFloat64);
  EXPECT_EQ(p.arrays[0].at(2), 1e300);
  EXPECT_EQ(p.arrays[1].dtype(), DType::kInt32);
  EXPECT_EQ(p.arrays[1].at(1), 2147483647.0);
  EXPECT_EQ(p.arrays[2].at(2), 255.0);
  EXPECT_EQ(p.arrays[3].dtype(), DType::kBool);
  EXPECT_EQ(save_params_to_bytes(p), b.s);
  EXPECT_THROW(p.to_map(), FormatError);
  EXPECT_THROW(split_checkpoint(p), FormatError);
}

TEST(ParamsIo, GpuContextLoadsToHostAndSavesAsCpu) {
  Bytes gpu, cpu;
  gpu.header(1).v2({2}, 0, /*dev_type=*/2, /*dev_id=*/3).values<float>({4.f, 5.f}).u64(1).name("w");
  cpu.header(1).v2({2}, 0).values<float>({4.f, 5.f}).u64(1).name("w");
  NamedArrays p = load_params_from_bytes(gpu.s, "gpu.params");
  EXPECT_EQ(p.arrays[0].device(), Device::cpu());
  EXPECT_EQ(p.arrays[0].at(1), 5.0);
  EXPECT_EQ(save_params_to_bytes(p), cpu.s);
  Bytes pinned;
  pinned.header(1).v2({1}, 0, /*cpu_pinned=*/3).values<float>({1.f}).u64(0);
  EXPECT_EQ(load_params_from_bytes(pinned.s, "p").arrays[0].at(0), 1.0);
  Bytes bad;
  bad.header(1).v2({1}, 0, /*dev_type=*/9).values<float>({1.f}).u64(0);
  EXPECT_HAS(message_of(bad.s), "unknown device type 9");
}

TEST(ParamsIo, V3NumpyShapeScalarsAndUnknown) {
  Bytes b;
  b.header(3);
  b.u32(kV3).i32(0).i32(0).i32(1).i32(0).i32(0).values<float>({42.f});  // scalar
  b.u32(kV3).i32(0).i32(-1);                                            // none
  b.u32(kV3).i32(0).i32(2).i64(0).i64(3).i32(1).i32(0).i32(0);          // zero-size
  b.u64(0);
  NamedArrays p = load_params_from_bytes(b.s, "v3.params");
  EXPECT_EQ(p.arrays[0].shape(), Shape());
  EXPECT_FALSE(p.arrays[0].is_none());
  EXPECT_EQ(p.arrays[0].at(0), 42.0);
  EXPECT_TRUE(p.arrays[1].is_none());
  EXPECT_EQ(p.arrays[2].shape(), (Shape{0, 3}));
  // A scalar cannot be written as V2, so the whole file is written as V3.
  EXPECT_EQ(save_params_to_bytes(p), b.s);
}

TEST(ParamsIo, ShapeSemanticsFollowMXNetsNpShapeRule) {
  const std::string v2_file = two_array_file();
  NamedArrays p = load_params_from_bytes(v2_file, "v2.params");
  // Legacy mode writes V2 (the file MXNet writes); NumPy mode writes every record as V3 with
  // the same payload, 4 bytes of magic differing per record.
  EXPECT_EQ(save_params_to_bytes(p, ShapeSemantics::kLegacy), v2_file);
  const std::string v3_file = save_params_to_bytes(p, ShapeSemantics::kNumpy);
  ASSERT_EQ(v3_file.size(), v2_file.size());
  size_t differing = 0;
  for (size_t i = 0; i < v2_file.size(); ++i) differing += v2_file[i] != v3_file[i];
  EXPECT_EQ(differing, 2u);  // the low byte of each record's magic: 0xC9 -> 0xCA
  // Each file loads in its own mode (and in kAuto), and is refused in the other one.
  auto mode_error = [](const std::string& bytes, ShapeSemantics mode) {
    return error_of([&] { load_params_from_bytes(bytes, "f.params", mode); });
  };
  EXPECT_EQ(mode_error(v2_file, ShapeSemantics::kLegacy), "(no error)");
  EXPECT_EQ(mode_error(v3_file, ShapeSemantics::kNumpy), "(no error)");
  NamedArrays back = load_params_from_bytes(v3_file, "f.params", ShapeSemantics::kNumpy);
  EXPECT_EQ(back.arrays[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(back.arrays[1].at(2), 3.25);
  const std::string in_legacy = mode_error(v3_file, ShapeSemantics::kLegacy);
  EXPECT_HAS(in_legacy, "f.params");
  EXPECT_HAS(in_legacy, "array 0");
  EXPECT_HAS(in_legacy, "np_shape(True)");
  EXPECT_HAS(mode_error(v2_file, ShapeSemantics::kNumpy), "np_shape(False)");
  // A scalar has no V2 form: legacy mode refuses to write it instead of losing it.
  NamedArrays scalar;
  scalar.arrays.push_back(NDArray::zeros(Shape(), DType::kFloat32));
  EXPECT_THROW(save_params_to_bytes(scalar, ShapeSemantics::kLegacy), Error);
}

TEST(ParamsIo, EveryTruncationThrowsFormatError) {
  Bytes legacy;
  legacy.header(3).u32(kV1).i32(1).i64(2).i32(1).i32(0).i32(0).values<float>({1.f, 2.f});
  legacy.u32(1).u32(1).i32(1).i32(0).i32(6).values<int64_t>({5}).u32(0);
  legacy.u64(3).name("x").name("y").name("z");
  for (const std::string& file : {two_array_file(), legacy.s}) {
    ASSERT_NO_THROW(load_params_from_bytes(file, "f"));
    for (size_t n = 0; n < file.size(); ++n)
      EXPECT_THROW(load_params_from_bytes(file.substr(0, n), "f"), FormatError) << "cut at " << n;
  }
  // Cut inside the data of the second array: 24 list header + 64 first record + 32 record
  // header + 8 of its 16 data bytes.
  const std::string msg = message_of(two_array_file().substr(0, 24 + 64 + 32 + 8));
  EXPECT_EQ(msg,
            "model.params: truncated at offset 120 while reading data of array 1, shape (4,) "
            "float32 (need 16 bytes, 8 left)");
  EXPECT_HAS(message_of(two_array_file().substr(0, 20)), "array count");
}

TEST(ParamsIo, CorruptBytesOnlyEverThrowFormatError) {
  const std::string file = two_array_file();
  for (size_t i = 0; i < file.size(); ++i)
    for (int v : {0x00, 0x01, 0x7F, 0x80, 0xFF}) {
      std::string f = file;
      f[i] = static_cast<char>(v);
      EXPECT_NO_THROW(error_of([&] { load_params_from_bytes(f, "f"); })) << i << " " << v;
    }
}

TEST(ParamsIo, CorruptMagicAndCounts) {
  std::string file = two_array_file();
  file[0] = 0x13;
  EXPECT_HAS(message_of(file), "model.params: bad magic 0x113");
  file = two_array_file();
  file[24] = 0x11;  // first record magic becomes 0xF993FA11: neither V1-V3 nor a V0 ndim
  EXPECT_HAS(message_of(file), "neither a record magic");
  // Names count neither 0 nor N.
  Bytes b;
  b.header(2).v2({1}, 0).values<float>({1.f}).v2({1}, 0).values<float>({2.f});
  b.u64(1).name("only_one");
  EXPECT_HAS(message_of(b.s), "names count 1 is neither 0 nor the array count 2");
  Bytes huge_count;
  huge_count.header(uint64_t{1} << 60);
  EXPECT_THROW(load_params_from_bytes(huge_count.s, "f"), FormatError);
  Bytes huge_name;
  huge_name.header(1).v2({1}, 0).values<float>({1.f}).u64(1).u64(uint64_t{1} << 62);
  EXPECT_HAS(message_of(huge_name.s), "name of array 0");
}

TEST(ParamsIo, AbsurdShapesNeverAllocate) {
  auto with_record = [](const std::string& record) {
    Bytes b;
    b.header(1);
    b.s += record;
    return b.u64(0).s;
  };
  Bytes r;
  r.u32(0xF993FAC9).i32(0).i32(1000000);
  EXPECT_HAS(message_of(with_record(r.s)), "impossible ndim 1000000");
  r = {};
  r.u32(0xF993FAC9).i32(0).i32(-7);
  EXPECT_HAS(message_of(with_record(r.s)), "impossible ndim -7");
  r = {};
  r.v2({int64_t{1} << 40, 1 << 20}, 0);  // 4 PB of float32
  EXPECT_HAS(message_of(with_record(r.s)), "need 4611686018427387904 bytes");
  r = {};
  r.v2({INT64_MAX, INT64_MAX}, 0);
  EXPECT_HAS(message_of(with_record(r.s)), "needs more than 2^63 bytes");
  r = {};
  r.v2({3, -2}, 0);
  EXPECT_HAS(message_of(with_record(r.s)), "negative dimension -2");
  r = {};
  r.u32(3).u32(0xFFFFFFFF).u32(0xFFFFFFFF).u32(0xFFFFFFFF).i32(1).i32(0).i32(0);  // V0
  EXPECT_THROW(load_params_from_bytes(with_record(r.s), "f"), FormatError);
  r = {};
  r.v2({2}, 99).values<float>({1.f, 2.f});
  EXPECT_HAS(message_of(with_record(r.s)), "unknown type flag 99");
}

TEST(ParamsIo, UnsupportedRecordsNameTheArray) {
  Bytes b;
  b.header(2).v2({1}, 0).values<float>({1.f});
  // row_sparse: storage shape (1, 2), shape (5, 2), ctx, float32, aux int64 (1,), data, aux data.
  b.u32(0xF993FAC9).i32(1).i32(2).i64(1).i64(2).i32(2).i64(5).i64(2).i32(1).i32(0).i32(0);
  b.i32(6).i32(1).i64(1).values<float>({3.f, 4.f}).values<int64_t>({4});
  b.u64(2).name("arg:w").name("arg:embed_weight");
  EXPECT_EQ(message_of(b.s, "sparse.params"),
            "sparse.params: array 1 'arg:embed_weight' has row_sparse storage, which Loom does "
            "not load (save it dense with tostype('default'))");
  Bytes i16;
  i16.header(1).v2({2}, 8).values<int16_t>({1, 2}).u64(1).name("arg:q");
  EXPECT_HAS(message_of(i16.s), "array 0 'arg:q' has type flag 8 (int16)");
}

TEST(ParamsIo, SplitAndJoinCheckpoint) {
  NamedArrays p;
  p.add("arg:fc1_weight", NDArray::full({2}, 1.0));
  p.add("aux:bn:moving_mean", NDArray::full({3}, 2.0));
  p.add("arg:fc1_bias", NDArray::full({1}, 3.0));
  CheckpointParams c = split_checkpoint(p);
  ASSERT_EQ(c.arg.size(), 2u);
  ASSERT_EQ(c.aux.size(), 1u);
  EXPECT_EQ(c.arg.at("fc1_bias").at(0), 3.0);
  EXPECT_EQ(c.aux.at("bn:moving_mean").shape(), (Shape{3}));  // split at the first ':'
  NamedArrays j = join_checkpoint(c);
  EXPECT_EQ(j.names,
            (std::vector<std::string>{"arg:fc1_bias", "arg:fc1_weight", "aux:bn:moving_mean"}));
  NamedArrays gluon;
  gluon.add("features.0.weight", NDArray::full({1}, 0.0));
  EXPECT_THROW(split_checkpoint(gluon, "net.params"), FormatError);
  p.add("arg:fc1_bias", NDArray::full({1}, 3.0));
  EXPECT_THROW(split_checkpoint(p), FormatError);  // duplicate key
}

TEST(ParamsIo, AtomicSaveLeavesNoTempFile) {
  TempDir dir;
  const std::string path = dir.file("net-0001.params");
  NamedArrays first;
  first.add("arg:w", NDArray::full({100}, 1.0));
  save_params(path, first);
  NamedArrays second;
  second.add("arg:w", NDArray::full({3}, 2.0));
  save_params(path, second);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"net-0001.params"});
  NamedArrays back = load_params(path);
  EXPECT_EQ(back.arrays[0].shape(), (Shape{3}));
  EXPECT_EQ(back.arrays[0].at(2), 2.0);
  EXPECT_THROW(save_params(dir.file("no_such_dir/x.params"), second), Error);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"net-0001.params"});
  EXPECT_THROW(load_params(dir.file("missing.params")), Error);
}

// ---------------------------------------------------------------------------------------------

std::string npy_file(int major, const std::string& dict, const std::string& data) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64) header += ' ';
  header += '\n';
  Bytes b;
  b.s = std::string("\x93NUMPY", 6);
  b.s += static_cast<char>(major);
  b.s += '\0';
  if (major == 1)
    b.put<uint16_t>(header.size());
  else
    b.u32(header.size());
  b.s += header + data;
  return b.s;
}

TEST(NpyIo, HandWrittenHeaders) {
  Bytes data;
  data.values<float>({1.f, 2.5f, -3.f});
  NDArray a = load_npy_from_bytes(
      npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data.s), "a.npy");
  EXPECT_EQ(a.shape(), (Shape{3}));
  EXPECT_EQ(a.dtype(), DType::kFloat32);
  EXPECT_EQ(a.at(1), 2.5);
  // Writer output is exactly NumPy's layout for the same array.
  EXPECT_EQ(save_npy_to_bytes(a),
            npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", data.s));
  Bytes d2;
  d2.values<int64_t>({1, -2, 3, -4, 5, -6});
  NDArray b = load_npy_from_bytes(
      npy_file(2, "{\"shape\": (2L, 3L), \"fortran_order\": False, \"descr\": \"<i8\"}", d2.s),
      "b");
  EXPECT_EQ(b.shape(), (Shape{2, 3}));
  EXPECT_EQ(b.dtype(), DType::kInt64);
  EXPECT_EQ(b.at(5), -6.0);
  NDArray s =
      load_npy_from_bytes(npy_file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': ()}",
                                   Bytes().values<double>({7.5}).s),
                          "s");
  EXPECT_EQ(s.shape(), Shape());
  EXPECT_EQ(s.at(0), 7.5);
}

TEST(NpyIo, RejectsFortranOrderBigEndianAndJunk) {
  auto load = [](const std::string& bytes) {
    return error_of([&] { load_npy_from_bytes(bytes, "x.npy"); });
  };
  auto msg = [&](const std::string& descr, const std::string& fortran, const std::string& shape) {
    return load(npy_file(
        1, "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }",
        std::string(16, '\0')));
  };
  EXPECT_EQ(msg("<f4", "False", "(4,)"), "(no error)");
  EXPECT_HAS(msg("<f4", "True", "(2, 2)"), "x.npy: fortran_order is True");
  EXPECT_HAS(msg(">f4", "False", "(4,)"), "big-endian");
  EXPECT_HAS(msg("<U8", "False", "(4,)"), "unsupported .npy dtype '<U8'");
  EXPECT_HAS(msg("<f4", "False", "(4, x)"), "malformed .npy header");
  EXPECT_HAS(msg("<f4", "False", "(99999999999, 99999999999, 99999999999)"), "absurdly large");
  EXPECT_EQ(msg("<f4", "False", "(5,)"),
            "x.npy: truncated at offset 128 while reading data, shape (5,) float32 (need 20 "
            "bytes, 16 left)");
  EXPECT_HAS(load(npy_file(1, "{'descr': '<f4', 'shape': (4,), }", std::string(16, '\0'))),
             "missing key 'fortran_order'");
  EXPECT_HAS(load("PK\x03\x04 not numpy"), "x.npy: bad magic");
}

TEST(NpyIo, RoundTripAndTruncation) {
  TempDir dir;
  const std::vector<NDArray> arrays = {NDArray::full({2, 3}, 1.25),
                                       NDArray::full({4}, -2.0, DType::kFloat64),
                                       NDArray::full({2, 2}, -9, DType::kInt32),
                                       NDArray::full({3}, 1LL << 40, DType::kInt64),
                                       NDArray::full({5}, 200, DType::kUint8),
                                       NDArray::full({2}, 1, DType::kBool),
                                       NDArray::full({}, 3.0)};
  for (const NDArray& a : arrays) {
    const std::string path = dir.file("a.npy");
    save_npy(path, a);
    const std::string bytes = read_file_bytes(path);
    const uint16_t header_len = static_cast<uint16_t>(static_cast<unsigned char>(bytes[8]) |
                                                      (static_cast<unsigned char>(bytes[9]) << 8));
    EXPECT_EQ((10 + header_len) % 64, 0u);  // data 64-byte aligned, as NumPy writes it
    EXPECT_EQ(bytes[10 + header_len - 1], '\n');
    NDArray b = load_npy(path);
    EXPECT_EQ(b.shape(), a.shape());
    EXPECT_EQ(b.dtype(), a.dtype());
    for (int64_t i = 0; i < a.size(); ++i) EXPECT_EQ(b.at(i), a.at(i));
    for (size_t n = 0; n < bytes.size(); ++n)
      EXPECT_THROW(load_npy_from_bytes(bytes.substr(0, n), "a.npy"), FormatError) << n;
  }
  EXPECT_EQ(dir.list(), std::vector<std::string>{"a.npy"});
  EXPECT_THROW(save_npy(dir.file("none.npy"), NDArray()), Error);
}

}  // namespace
}  // namespace loom
