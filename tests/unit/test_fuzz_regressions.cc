// One test per finding of the libFuzzer campaign (tests/fuzz, scripts/fuzz.sh): the input
// that crashed, leaked or escaped as a foreign exception, and the Loom error it must give
// now. The same inputs are in tests/fuzz/corpus/*/finding_* and replayed by fuzz_replay_*.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "graph/infer.h"
#include "graph/json.h"
#include "runtime/executor.h"
#include "runtime/npy.h"
#include "runtime/params_io.h"

namespace loom {
namespace {

template <class E>
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("WRONG TYPE: ") + e.what();
  }
  return "NO ERROR";
}
#define EXPECT_CONTAINS(hay, needle) EXPECT_NE(std::string(hay).find(needle), std::string::npos) << hay

template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Leak: nodes hold their inputs by shared_ptr, so a cycle rejected by the loader kept itself
// alive. The error is unchanged; the sanitizer build (leak detection on) checks the memory.
TEST(FuzzRegressions, RejectedCycleIsFreed) {
  EXPECT_CONTAINS(error_of<GraphError>([] {
                    load_json(R"({"nodes": [{"op": "exp", "name": "a", "inputs": [[1, 0, 0]]},
                      {"op": "exp", "name": "b", "inputs": [[0, 0, 0]]}], "arg_nodes": [],
                      "heads": [[1, 0, 0]]})", "cycle.json");
                  }),
                  "cycle.json: cycle in graph: b -> a -> b");
}

// Leak: a cycle among nodes no head reaches loads (MXNet ignores unreachable nodes) and was
// never freed.
TEST(FuzzRegressions, UnreachableCycleIsDropped) {
  Symbol s = load_json(R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
    {"op": "exp", "name": "a", "inputs": [[2, 0, 0]]},
    {"op": "exp", "name": "b", "inputs": [[1, 0, 0]]}], "arg_nodes": [0], "heads": [[0, 0, 0]]})");
  EXPECT_EQ(s.list_arguments(), std::vector<std::string>{"x"});
  EXPECT_EQ(IndexedGraph(s.outputs()).num_nodes(), 1u);
}

// nlohmann::json::out_of_range escaped load_json: a number too large for a double.
TEST(FuzzRegressions, JsonNumberOverflowIsJsonError) {
  EXPECT_CONTAINS(error_of<JsonError>([] {
                    load_json(R"({"nodes": [], "arg_nodes": [], "heads": [],
                      "attrs": {"mxnet_version": ["int", 1e3088]}})", "big.json");
                  }),
                  "big.json: malformed JSON: [json.exception.out_of_range.406] number overflow");
}

// nlohmann::json::type_error escaped load_json: a control dependency that is not an integer.
TEST(FuzzRegressions, ControlDependencyMustBeNodeIndex) {
  EXPECT_CONTAINS(error_of<JsonError>([] {
                    load_json(R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
                      {"op": "exp", "name": "e", "inputs": [[0, 0, 0]], "control_deps": ["x"]}],
                      "arg_nodes": [0], "heads": [[1, 0, 0]]})", "deps.json");
                  }),
                  "deps.json: node 1 ('e'): control dependency \"x\" is not a node index");
}

// UBSan (signed overflow in Shape::numel): a .params record of shape (2^62, 3, 0) passed the
// size check (zero bytes) and overflowed int64 when the array was made.
TEST(FuzzRegressions, ParamsShapeOverflowWithZeroDimension) {
  std::string b;
  put<uint64_t>(b, 0x112);
  put<uint64_t>(b, 0);
  put<uint64_t>(b, 1);
  put<uint32_t>(b, 0xF993FAC9);  // V2
  put<int32_t>(b, 0);            // dense
  put<int32_t>(b, 3);
  for (int64_t d : {int64_t{1} << 62, int64_t{3}, int64_t{0}}) put<int64_t>(b, d);
  put<int32_t>(b, 1);
  put<int32_t>(b, 0);
  put<int32_t>(b, 3);  // uint8
  put<uint64_t>(b, 0);
  EXPECT_CONTAINS(error_of<FormatError>([&] { load_params_from_bytes(b, "big.params"); }),
                  "big.params: data of array 0, shape (4611686018427387904, 3, 0) uint8 is too "
                  "large: (4611686018427387904, 3, 0) needs more than 2^63 bytes (at offset 72)");
}

// The same in a .npy header (found by review after the .params finding, then confirmed by
// the harness).
TEST(FuzzRegressions, NpyShapeOverflowWithZeroDimension) {
  std::string h = "{'descr': '|u1', 'fortran_order': False, 'shape': (4611686018427387904, 3, 0), }";
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  std::string b = std::string("\x93NUMPY\x01\x00", 8);
  put<uint16_t>(b, static_cast<uint16_t>(h.size()));
  b += h;
  EXPECT_CONTAINS(error_of<FormatError>([&] { load_npy_from_bytes(b, "big.npy"); }),
                  "big.npy: shape (4611686018427387904, 3, 0) in the .npy header is absurdly large");
}

// UBSan (signed overflow in Flatten's shape function): `loom info --shape
// data=1,9,993,999995799965775252` on a convolutional net. Shapes given by the user or by
// __shape__ must be ones an array can have.
TEST(FuzzRegressions, GivenShapeOverflowIsShapeError) {
  Symbol net = Symbol::Op("Flatten", {Symbol::Variable("data")}, {}, "flat");
  IndexedGraph g(net.outputs());
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    infer_shapes(g, {{"data", Shape{1, 9, 993, 999995799965775252}}}, true);
                  }),
                  "variable 'data' (given shape): shape (1, 9, 993, 999995799965775252) has more "
                  "than 2^63 elements");
  Symbol hinted = Symbol::Op(
      "Flatten", {Symbol::Variable("x", {{"__shape__", "(4294967296, 4294967296, 0)"}})}, {}, "f");
  EXPECT_CONTAINS(error_of<ShapeError>([&] { infer_shapes(IndexedGraph(hinted.outputs()), {}, true); }),
                  "variable 'x' (its __shape__ attribute): shape (4294967296, 4294967296, 0) has "
                  "more than 2^63 elements");
}

// Found by review with the Flatten finding: shape functions computing sizes from attributes
// (pads, strides, dilations, scales) overflowed int64 on hostile values.
TEST(FuzzRegressions, OpSizeArithmeticOverflowIsShapeError) {
  auto data = Symbol::Variable("data");
  auto conv = Symbol::Op("Convolution", {data},
                         {{"kernel", "(3, 3)"}, {"num_filter", "2"}, {"pad", "(4611686018427387904, 1)"}},
                         "conv");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    infer_shapes(IndexedGraph(conv.outputs()), {{"data", Shape{1, 1, 4, 4}}}, true);
                  }),
                  "node 'conv' (op Convolution): Convolution output size: 2 * 4611686018427387904 "
                  "overflows int64");
  auto pool = Symbol::Op("Pooling", {data},
                         {{"kernel", "(2, 2)"}, {"stride", "(9223372036854775807, 1)"},
                          {"pooling_convention", "full"}},
                         "pool");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    infer_shapes(IndexedGraph(pool.outputs()), {{"data", Shape{1, 1, 4, 4}}}, true);
                  }),
                  "node 'pool' (op Pooling): Pooling output size: 2 + 9223372036854775806 overflows");
  auto deconv = Symbol::Op("Deconvolution", {data},
                           {{"kernel", "(2, 2)"}, {"num_filter", "1"}, {"stride", "(4611686018427387904, 1)"}},
                           "deconv");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    infer_shapes(IndexedGraph(deconv.outputs()), {{"data", Shape{1, 1, 4, 4}}}, true);
                  }),
                  "node 'deconv' (op Deconvolution): Deconvolution output size: 4611686018427387904 "
                  "* 3 overflows int64");
  EXPECT_CONTAINS(error_of<ParamError>([&] {
                    Symbol::Op("UpSampling", {data},
                               {{"scale", "(1, 4611686018427387904)"}, {"sample_type", "nearest"},
                                {"num_args", "1"}},
                               "up");
                  }),
                  "scale (1, 4611686018427387904) is larger than 2147483647");
}

// UBSan (float-cast-overflow in parse_int): an integer attribute written as "1e300" (or inf)
// passed the integral-float check and was converted to int64; a decimal past 64 bits was
// silently clamped by strtoll.
TEST(FuzzRegressions, IntegerAttributeOutOfRangeIsParamError) {
  auto fc = [](const char* n) {
    return load_json(std::string(R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
      {"op": "FullyConnected", "name": "fc", "attrs": {"num_hidden": ")") + n + R"("},
       "inputs": [[0, 0, 0]]}], "arg_nodes": [0], "heads": [[1, 0, 0]]})", "fc.json");
  };
  EXPECT_CONTAINS(error_of<ParamError>([&] { fc("1e300"); }), "cannot parse '1e300' as an integer");
  EXPECT_CONTAINS(error_of<ParamError>([&] { fc("inf"); }), "cannot parse 'inf' as an integer");
  EXPECT_CONTAINS(error_of<ParamError>([&] { fc("99999999999999999999"); }),
                  "integer '99999999999999999999' is out of range (more than 64 bits)");
  EXPECT_EQ(fc("3.0").list_arguments(), (std::vector<std::string>{"x", "fc_weight", "fc_bias"}));
}

// UBSan (float-cast-overflow in Cast's kernel): casting inf (exp(0) * 1e300 in float32) to
// int32. Floats out of an integer type's range now saturate and NaN becomes 0.
TEST(FuzzRegressions, CastSaturatesOutOfRangeFloats) {
  auto x = Symbol::Variable("x");
  auto c = Symbol::Op("Cast", {x}, {{"dtype", "int32"}}, "c");
  auto ex = Executor::simple_bind(c, {{"x", Shape{5}}}, {.default_req = Req::kNull});
  const float in[5] = {INFINITY, -INFINITY, NAN, 3e9f, -7.9f};
  ex->arg_arrays()[0].copy_from_host(in, sizeof in);
  ex->forward(false);
  std::vector<int32_t> out(5);
  ex->outputs()[0].copy_to_host(out.data(), sizeof(int32_t) * 5);
  EXPECT_EQ(out, (std::vector<int32_t>{INT32_MAX, INT32_MIN, 0, INT32_MAX, -7}));
}

// Out of memory (a structured sweep of every op with hostile attributes): a variadic op's
// input or output names are made per input, so Concat(num_args=2147483647) or
// _loom_after(num_args=2147483647) tried to allocate billions of names. Counts are limited
// to kMaxVariadicInputs, and int attributes must fit 32 bits (4294967298 wrapped to 2).
TEST(FuzzRegressions, VariadicInputCountsAreBounded) {
  auto var = [](const char* op, const char* key, const char* n) {
    return load_json(std::string(R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
      {"op": ")") + op + R"(", "name": "v", "attrs": {")" + key + R"(": ")" + n + R"("},
       "inputs": [[0, 0, 0]]}], "arg_nodes": [0], "heads": [[1, 0, 0]]})", "v.json");
  };
  EXPECT_CONTAINS(error_of<ParamError>([&] { var("Concat", "num_args", "2147483647"); }),
                  "node 'v' (op Concat): num_args 2147483647 is out of range (1..65536)");
  EXPECT_CONTAINS(error_of<ParamError>([&] { var("_loom_after", "num_args", "2147483647"); }),
                  "num_args 2147483647 is out of range (1..65536)");
  EXPECT_CONTAINS(error_of<ParamError>([&] { var("add_n", "num_args", "65537"); }),
                  "num_args 65537 is out of range (1..65536)");
  EXPECT_CONTAINS(error_of<ParamError>([&] { var("SliceChannel", "num_outputs", "2147483647"); }),
                  "num_outputs 2147483647 is out of range (1..65536)");
  EXPECT_CONTAINS(error_of<ParamError>([&] { var("Concat", "num_args", "4294967298"); }),
                  "integer '4294967298' does not fit 32 bits");
}

// UBSan (signed overflow in Deconvolution's shape function): pad (2^63-1, 2^63-1).
TEST(FuzzRegressions, DeconvolutionHugePadIsShapeError) {
  auto deconv = Symbol::Op("Deconvolution", {Symbol::Variable("data")},
                           {{"kernel", "(2, 2)"}, {"num_filter", "2"},
                            {"pad", "(9223372036854775807, 9223372036854775807)"}},
                           "deconv");
  EXPECT_CONTAINS(error_of<ShapeError>([&] {
                    infer_shapes(IndexedGraph(deconv.outputs()), {{"data", Shape{1, 2, 4, 4}}}, true);
                  }),
                  "node 'deconv' (op Deconvolution): Deconvolution output size: "
                  "-9223372036854775802 + -9223372036854775807 overflows int64");
}

// UBSan (float-cast-overflow in the loss heads' label-to-class conversion):
// SoftmaxOutput(ignore_label=nan). NaN and labels past int32 map to INT32_MIN, as x86's
// truncation gives MXNet: such a label is no class, and ignore_label=nan ignores exactly them.
TEST(FuzzRegressions, SoftmaxOutputNanLabelIsNoClass) {
  auto grad_of = [](bool use_ignore) {
    auto net = Symbol::Op("SoftmaxOutput", {Symbol::Variable("x"), Symbol::Variable("label")},
                          {{"ignore_label", "nan"}, {"use_ignore", use_ignore ? "True" : "False"}},
                          "sm");
    auto ex = Executor::simple_bind(net, {{"x", Shape{2, 3}}, {"label", Shape{2}}});
    const float label[2] = {NAN, 1.f};
    ex->arg_dict().at("label").copy_from_host(label, sizeof label);
    ex->forward(true);
    ex->backward();
    std::vector<float> g(6);
    ex->grad_dict().at("x").copy_to_host(g.data(), sizeof(float) * 6);
    return g;
  };
  const float t = 1.f / 3;  // softmax of zeros
  std::vector<float> ignored = grad_of(true), plain = grad_of(false);
  const std::vector<float> want_ignored = {0, 0, 0, t, t - 1, t}, want_plain = {t, t, t, t, t - 1, t};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(ignored[i], want_ignored[i], 1e-6) << i;
    EXPECT_NEAR(plain[i], want_plain[i], 1e-6) << i;
  }
}

}  // namespace
}  // namespace loom
