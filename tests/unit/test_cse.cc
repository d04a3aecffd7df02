// Common-subexpression elimination (graph/cse.h) and the executor features around it:
// the optimized symbol, outputs bound to given arrays, the backward monitor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "graph/cse.h"
#include "runtime/executor.h"

namespace loom {
namespace {

using Strs = std::vector<std::string>;

size_t internals(const Symbol& s) { return s.get_internals().num_outputs(); }

Symbol plus(const Symbol& a, const Symbol& b) { return Symbol::Op("elemwise_add", {a, b}); }

// Sets MXNET_ELIMINATE_COMMON_EXPR for one scope.
struct CseEnv {
  explicit CseEnv(const char* v) { setenv("MXNET_ELIMINATE_COMMON_EXPR", v, 1); }
  ~CseEnv() { unsetenv("MXNET_ELIMINATE_COMMON_EXPR"); }
};

TEST(Cse, MergesEqualNodesTransitivelyAndLeavesTheInputGraphAlone) {
  reset_auto_names();
  auto a = Symbol::Variable("a"), b = Symbol::Variable("b"), c = Symbol::Variable("c");
  auto first = plus(a, b), second = plus(a, b);  // (argument order is unspecified in C++)
  Symbol once = plus(first, second);
  Symbol opt = eliminate_common_expr(once);
  EXPECT_EQ(internals(once), 5u);  // a, b, three adds
  EXPECT_EQ(internals(opt), 4u);   // a, b, a+b, (a+b)+(a+b)
  // The first node in topological order survives, with its name.
  EXPECT_EQ(opt.get_internals().list_outputs(),
            (Strs{"a", "b", "elemwise_add0_output", "elemwise_add2_output"}));
  EXPECT_EQ(opt.list_arguments(), once.list_arguments());

  // ((a+b)+c) twice: merging a+b makes the two (.)+c equal too.
  Symbol twice = plus(plus(plus(a, b), c), plus(plus(a, b), c));
  EXPECT_EQ(internals(twice) - internals(eliminate_common_expr(twice)), 2u);
  EXPECT_EQ(eliminate_common_expr(twice).list_arguments(), (Strs{"a", "b", "c"}));
}

TEST(Cse, AttributesAndInputOrderMustMatch) {
  auto a = Symbol::Variable("a"), b = Symbol::Variable("b");
  auto s1 = Symbol::Op("_plus_scalar", {a}, {{"scalar", "1"}});
  auto s2 = Symbol::Op("_plus_scalar", {a}, {{"scalar", "2"}});
  Symbol diff = plus(s1, s2);
  EXPECT_EQ(internals(eliminate_common_expr(diff)), internals(diff));
  // b+a is not recognised as a+b (MXNet compares inputs in order too).
  Symbol swapped = Symbol::Op("elemwise_mul", {plus(a, b), plus(b, a)});
  EXPECT_EQ(internals(eliminate_common_expr(swapped)), internals(swapped));
}

TEST(Cse, RandomStatefulAndMutatingOpsAreNeverMerged) {
  auto a = Symbol::Variable("a");
  auto twice = [&](const std::string& op, const Attrs& attrs) {
    return plus(Symbol::Op(op, {a}, attrs), Symbol::Op(op, {a}, attrs));
  };
  for (const auto& [op, attrs] : std::vector<std::pair<std::string, Attrs>>{
           {"Dropout", {}}, {"LeakyReLU", {{"act_type", "rrelu"}}}}) {
    Symbol s = twice(op, attrs);
    EXPECT_EQ(internals(eliminate_common_expr(s)), internals(s)) << op;
    EXPECT_FALSE(cse_mergeable(*s.get_children().outputs()[0].node)) << op;
  }
  // A deterministic LeakyReLU merges.
  Symbol leaky = twice("LeakyReLU", {{"act_type", "leaky"}});
  EXPECT_EQ(internals(leaky) - internals(eliminate_common_expr(leaky)), 1u);
  // BatchNorm updates its moving statistics (aux inputs) in place: two nodes, even on one
  // set of inputs, are two updates.
  auto g = Symbol::Variable("g"), be = Symbol::Variable("be"), m = Symbol::Variable("m"),
       v = Symbol::Variable("v");
  auto bn = [&] { return Symbol::Op("BatchNorm", {a, g, be, m, v}); };
  Symbol bns = plus(bn(), bn());
  EXPECT_EQ(internals(eliminate_common_expr(bns)), internals(bns));
  // Variables and input-less nodes are never merged.
  EXPECT_FALSE(cse_mergeable(*a.outputs()[0].node));
}

TEST(Cse, OutputsThatBecomeOneEntryAreKeptApartByCopies) {
  reset_auto_names();
  auto a = Symbol::Variable("a"), b = Symbol::Variable("b");
  auto d = Symbol::Op("_plus_scalar", {a}, {{"scalar", "1"}});
  auto ad = [&] { return Symbol::Op("elemwise_mul", {a, d}); };
  // Group(a*d, a*d): one product, then a copy for the second output; no net saving.
  Symbol g2 = Symbol::Group({ad(), ad()});
  Symbol opt = eliminate_common_expr(g2);
  EXPECT_EQ(internals(opt), internals(g2));
  ASSERT_EQ(opt.num_outputs(), 2u);
  EXPECT_EQ(opt.outputs()[1].node->attrs.op->name, "_copy");
  EXPECT_EQ(opt.outputs()[1].node->name(), "elemwise_mul0_0_copy");
  EXPECT_EQ(opt.outputs()[1].node->inputs[0].node, opt.outputs()[0].node);
  // Group(a*d+b, a*d+b): the product and the sum merge, one copy: a saving of 1.
  Symbol g3 = Symbol::Group({plus(ad(), b), plus(ad(), b)});
  EXPECT_EQ(internals(g3) - internals(eliminate_common_expr(g3)), 1u);
}

// y = exp(a*b) + exp(a*b), and the group (exp(a*b), exp(a*b)), bound with and without the
// pass: outputs and gradients against the closed forms, under write and add.
TEST(Cse, BindRunsTheOptimisedGraphWithTheSameResults) {
  auto a = Symbol::Variable("a"), b = Symbol::Variable("b");
  auto e = [&] { return Symbol::Op("exp", {Symbol::Op("elemwise_mul", {a, b})}); };
  Symbol sum = plus(e(), e());
  Symbol group = Symbol::Group({e(), e()});
  const int n = 5;
  for (const char* env : {"0", "1"}) {
    CseEnv scope(env);
    for (Req req : {Req::kWrite, Req::kAdd}) {
      BindOptions o;
      o.default_req = req;
      auto ex = Executor::simple_bind(sum, {{"a", Shape{n}}, {"b", Shape{n}}}, o);
      auto gx = Executor::simple_bind(group, {{"a", Shape{n}}, {"b", Shape{n}}}, o);
      EXPECT_EQ(internals(ex->optimized_symbol()), env[0] == '1' ? 5u : 7u);
      EXPECT_EQ(ex->output_names(), sum.list_outputs());
      for (auto* x : {ex.get(), gx.get()})
        for (int i = 0; i < n; ++i) {
          x->arg_dict().at("a").data<float>()[i] = 0.2f * i - 0.3f;
          x->arg_dict().at("b").data<float>()[i] = 0.5f - 0.1f * i;
          x->grad_dict().at("a").data<float>()[i] = 1.f;  // seen under add only
        }
      ex->forward(true);
      ex->backward({NDArray::full(Shape{n}, 3.0)});
      gx->forward(true);
      gx->backward({NDArray::full(Shape{n}, 3.0), NDArray::full(Shape{n}, 0.5)});
      ASSERT_FALSE(gx->outputs()[0].same_memory(gx->outputs()[1]));
      const double base = req == Req::kAdd ? 1.0 : 0.0;
      for (int i = 0; i < n; ++i) {
        const double av = 0.2 * i - 0.3, bv = 0.5 - 0.1 * i, y = std::exp(av * bv);
        EXPECT_NEAR(ex->outputs()[0].at(i), 2 * y, 1e-5);
        // d/da of 2 exp(ab) with head gradient 3; the group's heads sum to 3.5.
        EXPECT_NEAR(ex->grad_dict().at("a").at(i), base + 6 * y * bv, 1e-5);
        EXPECT_NEAR(ex->grad_dict().at("b").at(i), 6 * y * av, 1e-5);
        EXPECT_NEAR(gx->outputs()[0].at(i), y, 1e-6);
        EXPECT_NEAR(gx->outputs()[1].at(i), y, 1e-6);
        EXPECT_NEAR(gx->grad_dict().at("a").at(i), base + 3.5 * y * bv, 1e-5);
      }
    }
  }
}

TEST(Executor, OutputsBoundToGivenArrays) {
  auto x = Symbol::Variable("x");
  Symbol y = Symbol::Op("FullyConnected", {x}, {{"num_hidden", "4"}}, "fc");
  NDArray big = NDArray::zeros(Shape{5, 4}, DType::kFloat32, Device::cpu());
  NDArray view(big.storage(), big.offset(), Shape{3, 4}, DType::kFloat32);
  NDArray w = NDArray::full(Shape{4, 4}, 1.0), bias = NDArray::full(Shape{4}, 0.5);
  BindOptions o;
  o.outputs = {view};
  auto ex = Executor::bind(y, {{"x", NDArray::full(Shape{3, 4}, 1.0)}, {"fc_weight", w},
                               {"fc_bias", bias}}, {}, {}, o);
  ASSERT_TRUE(ex->outputs()[0].same_memory(big));
  ex->forward(false);
  for (int i = 0; i < 20; ++i) EXPECT_FLOAT_EQ(big.at(i), i < 12 ? 4.5f : 0.f) << i;
  o.outputs = {NDArray::zeros(Shape{2, 4}, DType::kFloat32, Device::cpu())};
  EXPECT_THROW(Executor::bind(y, {{"x", NDArray::full(Shape{3, 4}, 1.0)}, {"fc_weight", w},
                                  {"fc_bias", bias}}, {}, {}, o),
               BindError);
}

// The backward monitor reports every backward node's input gradients, zeros where the
// node writes none (the data's grad_req is null, the label is never differentiated).
TEST(Executor, BackwardMonitorNamesEveryInputGradient) {
  auto x = Symbol::Variable("x");
  auto fc = Symbol::Op("FullyConnected", {x}, {{"num_hidden", "2"}}, "fc");
  Symbol loss = Symbol::Op("LinearRegressionOutput", {fc}, {}, "lro");
  BindOptions o;
  o.grad_req["x"] = Req::kNull;
  auto ex = Executor::simple_bind(loss, {{"x", Shape{1, 3}}, {"lro_label", Shape{1, 2}}}, o);
  for (int i = 0; i < 3; ++i) ex->arg_dict().at("x").data<float>()[i] = 1.f + i;
  for (int i = 0; i < 6; ++i) ex->arg_dict().at("fc_weight").data<float>()[i] = 0.1f * i;
  std::vector<std::pair<std::string, std::vector<float>>> seen;
  ex->set_backward_monitor([&](const std::string& name, const NDArray& a) {
    std::vector<float> v(a.data<float>(), a.data<float>() + a.size());
    seen.emplace_back(name, v);
  });
  ex->forward(true);
  ex->backward();
  Strs names;
  for (const auto& [n, v] : seen) names.push_back(n);
  EXPECT_EQ(names, (Strs{"lro_backward_output0", "lro_backward_output1", "fc_backward_output0",
                         "fc_backward_output1", "fc_backward_output2"}));
  // fc = W x, label 0: dL/dfc = fc / 2 (MXNet divides by the 2 outputs per example),
  // dW = dfc^T x, db = dfc; dx and dlabel unwritten.
  const float f0 = (0.f * 1 + 0.1f * 2 + 0.2f * 3) / 2, f1 = (0.3f * 1 + 0.4f * 2 + 0.5f * 3) / 2;
  EXPECT_EQ(seen[1].second, (std::vector<float>{0.f, 0.f}));
  EXPECT_EQ(seen[2].second, (std::vector<float>{0.f, 0.f, 0.f}));
  EXPECT_NEAR(seen[0].second[1], f1, 1e-6);
  EXPECT_NEAR(seen[3].second[4], f1 * 2, 1e-5);
  EXPECT_NEAR(seen[4].second[0], f0, 1e-6);
  ex->set_backward_monitor({});
  seen.clear();
  ex->backward();
  EXPECT_TRUE(seen.empty());
}

}  // namespace
}  // namespace loom
