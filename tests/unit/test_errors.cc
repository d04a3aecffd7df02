// Errors a user can trigger are Loom errors with readable messages: bytes that are not
// UTF-8 are escaped, .params names must be UTF-8, element counts that overflow int64 are
// shape errors, and a bind whose arrays cannot fit in memory fails before it allocates,
// naming the node and the bytes.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "graph/json.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/params_io.h"

namespace loom {
namespace {

TEST(Errors, Utf8ValidationFollowsTheStandard) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("fc1_weight"));
  EXPECT_TRUE(valid_utf8("\xc3\xa9t\xc3\xa9"));           // été
  EXPECT_TRUE(valid_utf8("\xe4\xb8\xad"));                 // U+4E2D
  EXPECT_TRUE(valid_utf8("\xf0\x9f\x98\x80"));             // U+1F600
  EXPECT_TRUE(valid_utf8("\xf4\x8f\xbf\xbf"));             // U+10FFFF, the last code point
  EXPECT_FALSE(valid_utf8("\xc3"));                        // cut after the lead byte
  EXPECT_FALSE(valid_utf8("\xe4\xb8"));                    // cut in the middle
  EXPECT_FALSE(valid_utf8("\x80"));                        // a lone continuation byte
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));                    // overlong '/'
  EXPECT_FALSE(valid_utf8("\xe0\x80\xaf"));                // overlong '/'
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));                // a UTF-16 surrogate
  EXPECT_FALSE(valid_utf8("\xf4\x90\x80\x80"));            // past U+10FFFF
  EXPECT_FALSE(valid_utf8("\xff"));
}

TEST(Errors, PrintableEscapesExactlyTheBadBytes) {
  EXPECT_EQ(printable("plain text\nline two\tok"), "plain text\nline two\tok");
  EXPECT_EQ(printable("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(printable("ab\xe4\xb8"), "ab\\xe4\\xb8");  // a sequence cut at the end
  EXPECT_EQ(printable("x\xffy"), "x\\xffy");
  EXPECT_EQ(printable(std::string("a\0b\x1b", 4)), "a\\x00b\\x1b");
  EXPECT_EQ(printable("\x7f"), "\\x7f");
  // Every Loom error goes through it.
  FormatError e("file 'w\xe9ights.params': bad");
  EXPECT_STREQ(e.what(), "file 'w\\xe9ights.params': bad");
  EXPECT_TRUE(valid_utf8(e.what()));
}

TEST(Errors, MalformedJsonMessageIsValidUtf8) {
  for (std::string text : {std::string("{\"nodes\": [{\"op\": \"null\", \"name\": \"d\xe4\xb8"),
                           std::string("{\"nodes\": \xff\xfe]}"),
                           std::string("{\"nodes\": [{\"op\": \"\xc0\xaf\"}]}")}) {
    try {
      load_json(text, "bad.json");
      ADD_FAILURE() << "loaded malformed JSON";
    } catch (const JsonError& e) {
      EXPECT_TRUE(valid_utf8(e.what())) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
    }
  }
}

// A .params file: one float32 array of shape (1,) named `name`.
std::string params_with_name(const std::string& name) {
  NamedArrays p;
  p.add("arg:w", NDArray::full(Shape{1}, 1.0));
  std::string bytes = save_params_to_bytes(p);
  // The name is the last field: its 8-byte length, then its bytes.
  bytes.resize(bytes.size() - 5 - 8);
  uint64_t len = name.size();
  bytes.append(reinterpret_cast<const char*>(&len), 8);
  return bytes + name;
}

TEST(Errors, ParamsNamesMustBeUtf8) {
  EXPECT_EQ(load_params_from_bytes(params_with_name("arg:\xc3\xa9"), "ok.params").names[0],
            "arg:\xc3\xa9");
  try {
    load_params_from_bytes(params_with_name("arg:w\xff"), "bad.params");
    ADD_FAILURE() << "accepted a name that is not UTF-8";
  } catch (const FormatError& e) {
    std::string m = e.what();
    EXPECT_TRUE(valid_utf8(m)) << m;
    EXPECT_NE(m.find("bad.params: name of array 0 is not valid UTF-8: 'arg:w\\xff'"), std::string::npos)
        << m;
  }
}

TEST(Errors, ElementCountOverflowIsAShapeError) {
  Shape s{4000000000, 4000000000, 4000000000};
  EXPECT_THROW(s.numel(), ShapeError);
  Shape t{1 << 30, 1 << 30, 1 << 2};  // 2^62 elements fit; 2^64 bytes of float32 do not
  EXPECT_EQ(t.numel(), int64_t(1) << 62);
  EXPECT_THROW(t.bytes(DType::kFloat32), ShapeError);
  EXPECT_THROW((void)NDArray(Shape{-1, 3}), ShapeError);
  EXPECT_THROW((void)NDArray(Shape(t)), ShapeError);
}

template <class E>
std::string bind_error(const Symbol& sym, const std::map<std::string, Shape>& shapes) {
  try {
    Executor::simple_bind(sym, shapes);
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return "";
  }
  ADD_FAILURE() << "the bind succeeded";
  return "";
}

TEST(Errors, BindRefusesAWeightLargerThanMemory) {
  auto fc = Symbol::Op("FullyConnected", {Symbol::Variable("data")}, {{"num_hidden", "2000000000"}},
                       "fc_huge");
  std::string m = bind_error<OutOfMemoryError>(fc, {{"data", Shape{4, 1000}}});
  // Weight (2e9, 1000) and its gradient: 2 x 8e12 bytes; bias and its gradient 2 x 8e9; the
  // head gradient of the (4, 2e9) output 32e9; data and its gradient 2 x 16000.
  EXPECT_NE(m.find("variable 'fc_huge_weight', shape (2000000000, 1000) float32, 8.00 TB "
                   "(8000000000000 bytes)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("need 16.05 TB (16048000032000 bytes)"), std::string::npos) << m;
  EXPECT_NE(m.find("available"), std::string::npos) << m;
}

TEST(Errors, BindRefusesAHugeShapeAttribute) {
  auto sym = load_json(R"JSON({"nodes": [
    {"op": "null", "name": "data", "attrs": {"__shape__": "(99999999, 99999999)"}, "inputs": []},
    {"op": "Activation", "name": "act", "attrs": {"act_type": "relu"}, "inputs": [[0, 0, 0]]}],
    "arg_nodes": [0], "heads": [[1, 0, 0]]})JSON");
  std::string m = bind_error<OutOfMemoryError>(sym, {});
  EXPECT_NE(m.find("shape (99999999, 99999999) float32"), std::string::npos) << m;
  // The largest array is the data variable or act's output: both are that big.
  EXPECT_TRUE(m.find("variable 'data'") != std::string::npos ||
              m.find("node 'act' (Activation)") != std::string::npos)
      << m;
}

TEST(Errors, BindRefusesAnIntermediateLargerThanMemory) {
  // No arguments at all; only an op output is too large.
  auto ones = Symbol::Op("_ones", {}, {{"shape", "(300000, 300000, 100)"}}, "blow_up");
  auto sum = Symbol::Op("sum", {ones}, {}, "total");
  std::string m = bind_error<OutOfMemoryError>(sum, {});
  EXPECT_NE(m.find("node 'blow_up' (_ones), shape (300000, 300000, 100) float32, 36.00 TB"),
            std::string::npos)
      << m;
}

TEST(Errors, BindRefusesAnOverflowingElementCount) {
  auto ones = Symbol::Op("_ones", {}, {{"shape", "(4000000000, 4000000000, 4000000000)"}}, "overflow");
  try {
    Executor::simple_bind(Symbol::Op("sum", {ones}, {}, "total"), {});
    ADD_FAILURE() << "the bind succeeded";
  } catch (const ShapeError& e) {
    std::string m = e.what();
    // Shape inference refuses it first, naming the node.
    EXPECT_NE(m.find("node 'overflow' (op _ones): output 0: shape (4000000000, 4000000000, "
                     "4000000000) has more than 2^63 elements"),
              std::string::npos)
        << m;
  }
}

TEST(Errors, AvailableMemoryIsReported) {
  size_t avail = device_backend(DeviceType::kCPU).available_memory(0);
  EXPECT_GT(avail, size_t(64) << 20);           // this machine has more than 64 MB free
  EXPECT_LT(avail, size_t(1) << 50);            // and less than a petabyte
}

}  // namespace
}  // namespace loom
