// Symbol API, JSON load/save in all three MXNet format generations, and bad-input errors.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "graph/infer.h"
#include "graph/json.h"

namespace loom {
namespace {

using Strs = std::vector<std::string>;

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

Symbol mlp_with_bn() {
  reset_auto_names();
  auto data = Symbol::Variable("data");
  auto fc1 = Symbol::Op("FullyConnected", {data}, {{"num_hidden", "4"}}, "fc1");
  auto bn = Symbol::Op("BatchNorm", {fc1}, {}, "bn1");
  return Symbol::Op("SoftmaxOutput", {bn}, {}, "softmax");
}

TEST(Symbol, AutoNamesAndLists) {
  Symbol net = mlp_with_bn();
  EXPECT_EQ(net.list_arguments(),
            (Strs{"data", "fc1_weight", "fc1_bias", "bn1_gamma", "bn1_beta", "softmax_label"}));
  EXPECT_EQ(net.list_auxiliary_states(), (Strs{"bn1_moving_mean", "bn1_moving_var"}));
  EXPECT_EQ(net.list_outputs(), (Strs{"softmax_output"}));
  auto internals = net.get_internals();
  auto names = internals.list_outputs();
  EXPECT_NE(std::find(names.begin(), names.end(), "fc1_output"), names.end());
  EXPECT_EQ(internals["fc1_output"].list_arguments(), (Strs{"data", "fc1_weight", "fc1_bias"}));
  // Automatic op names count per op.
  auto a = Symbol::Op("FullyConnected", {Symbol::Variable("x")}, {{"num_hidden", "2"}});
  auto b = Symbol::Op("FullyConnected", {a}, {{"num_hidden", "2"}});
  EXPECT_EQ(b.list_arguments(), (Strs{"x", "fullyconnected0_weight", "fullyconnected0_bias",
                                       "fullyconnected1_weight", "fullyconnected1_bias"}));
  // BatchNorm aux variables carry MXNet's initialisers.
  auto mv = net.get_internals()["bn1_moving_var"];
  EXPECT_EQ(mv.attr("__init__").value_or(""), "[\"one\", {}]");
}

TEST(Symbol, GroupIndexingAndAttrs) {
  auto x = Symbol::Variable("x", {{"shape", "(2, 3)"}, {"lr_mult", "0.5"}});
  EXPECT_EQ(*x.attr("__shape__"), "(2, 3)");
  EXPECT_EQ(*x.attr("lr_mult"), "0.5");
  auto y = Symbol::Op("exp", {x}, {}, "e");
  auto z = Symbol::Op("BlockGrad", {x}, {}, "bg");
  auto g = Symbol::Group({y, z});
  EXPECT_EQ(g.list_outputs(), (Strs{"e_output", "bg_output"}));
  EXPECT_EQ(g[1].name(), "bg");
  EXPECT_EQ(g["e_output"].name(), "e");
  EXPECT_THROW(g[2], GraphError);
  auto shapes = infer_shapes(IndexedGraph(g.outputs()), {});
  EXPECT_EQ(shapes.back(), (Shape{2, 3}));
}

TEST(Symbol, ShapeInferenceFillsWeights) {
  Symbol net = mlp_with_bn();
  IndexedGraph g(net.outputs());
  auto s = infer_shapes(g, {{"data", Shape{8, 10}}});
  auto args = g.arguments();
  EXPECT_EQ(s[g.entry_id(args[1], 0)], (Shape{4, 10}));  // fc1_weight
  EXPECT_EQ(s[g.entry_id(args[5], 0)], (Shape{8}));      // softmax_label
  // Partial: nothing known is fine with partial, an error otherwise naming what is missing.
  EXPECT_NO_THROW(infer_shapes(g, {}, true));
  EXPECT_CONTAINS(error_of<ShapeError>([&] { infer_shapes(g, {}); }), "'data'");
  // Mismatch names node, input, expected and actual.
  std::string m = error_of<ShapeError>(
      [&] { infer_shapes(g, {{"data", Shape{8, 10}}, {"fc1_weight", Shape{4, 11}}}); });
  EXPECT_CONTAINS(m, "fc1");
  EXPECT_CONTAINS(m, "weight");
  EXPECT_CONTAINS(m, "(4, 10)");
  EXPECT_CONTAINS(m, "(4, 11)");
}

TEST(Symbol, TypeInference) {
  auto x = Symbol::Variable("x", {{"dtype", "float64"}});
  auto e = Symbol::Op("exp", {x}, {}, "e");
  auto c = Symbol::Op("Cast", {e}, {{"dtype", "int32"}}, "c");
  auto y = Symbol::Variable("y");
  auto s = Symbol::Op("elemwise_add", {Symbol::Op("Cast", {c}, {{"dtype", "float32"}}, "c2"), y}, {}, "s");
  IndexedGraph g(s.outputs());
  auto t = infer_types(g, {});
  EXPECT_EQ(t[g.entry_id(g.node_id(e.outputs()[0].node.get()), 0)], DType::kFloat64);
  EXPECT_EQ(t[g.entry_id(g.node_id(c.outputs()[0].node.get()), 0)], DType::kInt32);
  EXPECT_EQ(t[g.heads()[0]], DType::kFloat32);
  EXPECT_EQ(t[g.entry_id(g.node_id(y.outputs()[0].node.get()), 0)], DType::kFloat32);
  // A conflict names the node.
  auto bad = Symbol::Op("elemwise_add", {x, Symbol::Variable("z", {{"dtype", "int32"}})}, {}, "bad");
  try {
    infer_types(IndexedGraph(bad.outputs()), {});
    FAIL();
  } catch (const ShapeError& err) {
    EXPECT_CONTAINS(err.what(), "bad");
    EXPECT_CONTAINS(err.what(), "int32");
  }
}

// The current-format example of spec/mxnet.md 1.8.
const char* kCurrentJson = R"({
  "nodes": [
    {"op": "null", "name": "data", "inputs": []},
    {"op": "null", "name": "fc1_weight", "attrs": {"num_hidden": "4"}, "inputs": []},
    {"op": "null", "name": "fc1_bias", "attrs": {"num_hidden": "4"}, "inputs": []},
    {"op": "FullyConnected", "name": "fc1", "attrs": {"num_hidden": "4"},
     "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]},
    {"op": "null", "name": "bn1_gamma", "inputs": []},
    {"op": "null", "name": "bn1_beta", "inputs": []},
    {"op": "null", "name": "bn1_moving_mean", "attrs": {"__init__": "[\"zero\", {}]"}, "inputs": []},
    {"op": "null", "name": "bn1_moving_var", "attrs": {"__init__": "[\"one\", {}]"}, "inputs": []},
    {"op": "BatchNorm", "name": "bn1",
     "inputs": [[3, 0, 0], [4, 0, 0], [5, 0, 0], [6, 0, 1], [7, 0, 1]]},
    {"op": "null", "name": "softmax_label", "inputs": []},
    {"op": "SoftmaxOutput", "name": "softmax", "inputs": [[8, 0, 0], [9, 0, 0]]}
  ],
  "arg_nodes": [0, 1, 2, 4, 5, 6, 7, 9],
  "node_row_ptr": [0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13],
  "heads": [[10, 0, 0]],
  "attrs": {"mxnet_version": ["int", 10600]}
})";

TEST(Json, CurrentFormatLoadsAndRoundTrips) {
  Symbol s = load_json(kCurrentJson, "example.json");
  EXPECT_EQ(s.list_arguments(),
            (Strs{"data", "fc1_weight", "fc1_bias", "bn1_gamma", "bn1_beta", "softmax_label"}));
  EXPECT_EQ(s.list_auxiliary_states(), (Strs{"bn1_moving_mean", "bn1_moving_var"}));
  std::string j1 = s.tojson();
  EXPECT_CONTAINS(j1, "\"node_row_ptr\": [0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13]");
  EXPECT_CONTAINS(j1, "\"arg_nodes\": [0, 1, 2, 4, 5, 6, 7, 9]");
  EXPECT_CONTAINS(j1, "[6, 0, 1]");  // aux entry versions survive
  Symbol s2 = load_json(j1);
  EXPECT_EQ(s2.tojson(), j1);  // lossless: save(load(save(x))) == save(x)
  EXPECT_EQ(s2.attr_dict(), s.attr_dict());
  // A C++-built graph round-trips too.
  Symbol built = mlp_with_bn();
  EXPECT_EQ(load_json(built.tojson()).tojson(), built.tojson());
}

TEST(Json, LegacyGenerationAUpgrades) {
  const char* legacy = R"({
  "nodes": [
    {"op": "null", "param": {}, "name": "data", "inputs": [], "backward_source_id": -1},
    {"op": "null", "param": {}, "name": "bn_gamma", "inputs": [], "backward_source_id": -1},
    {"op": "null", "param": {}, "name": "bn_beta", "inputs": [], "backward_source_id": -1},
    {"op": "BatchNorm", "param": {"eps": "0.001", "fix_gamma": "True", "momentum": "0.9",
       "use_global_stats": "False"}, "name": "bn", "inputs": [[0, 0], [1, 0], [2, 0]],
     "backward_source_id": -1, "attr": {"ctx_group": "stage1", "lr_mult": "0.5", "gamma_wd_mult": "0"}},
    {"op": "Flatten", "param": {}, "name": "flat", "inputs": [[3, 0]], "backward_source_id": -1}
  ],
  "arg_nodes": [0, 1, 2],
  "heads": [[3, 0], [4, 0]]
})";
  Symbol s = load_json(legacy, "legacy.json");
  EXPECT_EQ(s.list_arguments(), (Strs{"data", "bn_gamma", "bn_beta"}));
  EXPECT_EQ(s.list_auxiliary_states(), (Strs{"bn_moving_mean", "bn_moving_var"}));
  EXPECT_EQ(s.list_outputs(), (Strs{"bn_output", "flat_output"}));
  auto bn = s[0];
  EXPECT_EQ(*bn.attr("__ctx_group__"), "stage1");
  EXPECT_EQ(*bn.attr("__lr_mult__"), "0.5");
  EXPECT_FALSE(bn.attr("ctx_group").has_value() && *bn.attr("ctx_group") == "stage1" &&
               bn.attr_dict().at("bn").count("ctx_group"));
  EXPECT_EQ(*s.get_internals()["bn_gamma"].attr("__wd_mult__"), "0");
  EXPECT_EQ(s.get_internals()["bn_moving_var"].attr("__init__").value_or(""), "[\"one\", {}]");
  // Saved in the current format, it reloads to the same graph.
  Symbol again = load_json(s.tojson());
  EXPECT_EQ(again.tojson(), s.tojson());
  EXPECT_CONTAINS(s.tojson(), "\"mxnet_version\": [\"int\", 10901]");
}

TEST(Json, GenerationBAttr) {
  const char* b = R"({"nodes": [
    {"op": "null", "name": "x", "inputs": []},
    {"op": "Activation", "name": "act", "attr": {"act_type": "relu", "__ctx_group__": "g1"},
     "inputs": [[0, 0, 0]]}],
  "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
  "attrs": {"mxnet_version": ["int", 903]}})";
  Symbol s = load_json(b);
  EXPECT_EQ(*s.attr("act_type"), "relu");
  EXPECT_EQ(*s.attr("__ctx_group__"), "g1");
}

TEST(Json, ErrorsNameTheProblem) {
  EXPECT_CONTAINS(error_of<JsonError>([] { load_json("{\"nodes\": [", "bad.json"); }),
                  "bad.json: malformed JSON at byte");
  EXPECT_CONTAINS(error_of<JsonError>([] { load_json("[1, 2]", "bad.json"); }), "not a JSON object");
  EXPECT_CONTAINS(error_of<JsonError>([] { load_json("{\"nodes\": []}", "bad.json"); }),
                  "missing required key 'arg_nodes'");
  std::string unknown = error_of<UnknownOpError>([] {
    load_json(R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
      {"op": "WarpCTC", "name": "ctc", "inputs": [[0, 0, 0]]}],
      "arg_nodes": [0], "heads": [[1, 0, 0]]})", "m.json");
  });
  EXPECT_CONTAINS(unknown, "unknown operator WarpCTC in node 1 ('ctc')");
  EXPECT_CONTAINS(unknown, "m.json");
  // Every unknown operator in one message, each with its (first three) nodes.
  std::string several = error_of<UnknownOpError>([] {
    load_json(R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
      {"op": "ROIPool", "name": "r1", "inputs": [[0, 0, 0]]},
      {"op": "exp", "name": "e", "inputs": [[1, 0, 0]]},
      {"op": "Proposal2", "name": "p", "inputs": [[2, 0, 0]]},
      {"op": "ROIPool", "name": "r2", "inputs": [[3, 0, 0]]},
      {"op": "ROIPool", "name": "r3", "inputs": [[4, 0, 0]]},
      {"op": "ROIPool", "name": "r4", "inputs": [[5, 0, 0]]}],
      "arg_nodes": [0], "heads": [[6, 0, 0]]})", "m.json");
  });
  EXPECT_CONTAINS(several, "m.json: 2 unknown operators: ROIPool in nodes 1 ('r1'), 4 ('r2'), 5 ('r3') "
                           "and 1 more; Proposal2 in node 3 ('p')");
  EXPECT_CONTAINS(error_of<GraphError>([] {
    load_json(R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
      {"op": "exp", "name": "e", "inputs": [[7, 0, 0]]}], "arg_nodes": [0], "heads": [[1, 0, 0]]})",
              "m.json");
  }), "node 1 ('e'): input 0 refers to node 7, but the file has 2 nodes");
  std::string cyc = error_of<GraphError>([] {
    load_json(R"({"nodes": [{"op": "exp", "name": "a", "inputs": [[1, 0, 0]]},
      {"op": "exp", "name": "b", "inputs": [[0, 0, 0]]}], "arg_nodes": [], "heads": [[1, 0, 0]]})",
              "m.json");
  });
  EXPECT_CONTAINS(cyc, "cycle");
  EXPECT_CONTAINS(cyc, "a");
  EXPECT_CONTAINS(error_of<GraphError>([] {
    load_json(R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
      {"op": "exp", "name": "e", "inputs": [[0, 3, 0]]}], "arg_nodes": [0], "heads": [[1, 0, 0]]})");
  }), "reads output 3 of node 'x'");
  EXPECT_CONTAINS(error_of<JsonError>([] {
    load_json(R"({"nodes": [{"op": "null", "name": "x", "inputs": []}], "arg_nodes": [0],
      "heads": [[4, 0, 0]]})");
  }), "head refers to node 4");
  std::string param = error_of<ParamError>([] {
    load_json(R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
      {"op": "FullyConnected", "name": "fc", "attrs": {"num_hidden": "many"},
       "inputs": [[0, 0, 0]]}], "arg_nodes": [0], "heads": [[1, 0, 0]]})", "m.json");
  });
  EXPECT_CONTAINS(param, "node 'fc' (op FullyConnected)");
  EXPECT_CONTAINS(param, "num_hidden");
  EXPECT_CONTAINS(error_of<JsonError>([] {
    load_json(R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
      {"op": "exp", "name": "e", "inputs": [[0]]}], "arg_nodes": [0], "heads": [[1, 0, 0]]})");
  }), "malformed input entry");
  EXPECT_CONTAINS(error_of<JsonError>([] {
    load_json(R"({"nodes": [{"op": "null", "name": "x", "inputs": []},
      {"op": "exp", "name": "e", "inputs": [[0, 0]]}], "arg_nodes": [1], "heads": [[1, 0, 0]]})");
  }), "is not a variable");
}

}  // namespace
}  // namespace loom
