// Layout propagation: which entries the plan blocks, and that running with blocked
// intermediates gives the same outputs, gradients (write and add) and BatchNorm statistics
// as running everything plain (LOOM_LAYOUT_PROPAGATION=0).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "graph/exec_graph.h"
#include "graph/infer.h"
#include "graph/layout_plan.h"
#include "runtime/device.h"
#include "runtime/executor.h"

namespace loom {
namespace {

struct BlockCfg {
  int channels = 32;
  int batch = 2;
  int groups = 1;
  int dilate = 1;
  int size = 10;
};

// conv -> BN -> relu -> [conv (groups, dilation) -> BN -> relu -> conv] + 1x1 shortcut ->
// max pool -> BN -> relu -> global avg pool -> flatten -> FC -> SoftmaxOutput.
Symbol residual_block(const BlockCfg& c) {
  auto S = [](int v) { return std::to_string(v); };
  auto conv = [&](const Symbol& x, const std::string& name, int k, int g, int d) {
    int pad = (k / 2) * d;
    return Symbol::Op("Convolution", {x},
                      {{"kernel", "(" + S(k) + "," + S(k) + ")"},
                       {"pad", "(" + S(pad) + "," + S(pad) + ")"},
                       {"dilate", "(" + S(d) + "," + S(d) + ")"},
                       {"num_filter", S(c.channels)},
                       {"num_group", S(g)},
                       {"no_bias", "True"}},
                      name);
  };
  auto bn = [](const Symbol& x, const std::string& name) {
    return Symbol::Op("BatchNorm", {x}, {{"fix_gamma", "False"}, {"eps", "2e-5"}}, name);
  };
  auto relu = [](const Symbol& x, const std::string& name) {
    return Symbol::Op("Activation", {x}, {{"act_type", "relu"}}, name);
  };
  auto data = Symbol::Variable("data");
  auto x = relu(bn(conv(data, "conv0", 3, 1, 1), "bn0"), "relu0");
  auto b = relu(bn(conv(x, "conv1", 3, c.groups, c.dilate), "bn1"), "relu1");
  b = conv(b, "conv2", 3, 1, 1);
  auto sum = Symbol::Op("elemwise_add", {b, conv(x, "sc", 1, 1, 1)}, {}, "plus");
  auto p = Symbol::Op(
      "Pooling", {sum},
      {{"kernel", "(3,3)"}, {"stride", "(2,2)"}, {"pad", "(1,1)"}, {"pool_type", "max"}}, "pool0");
  p = relu(bn(p, "bn2"), "relu2");
  p = Symbol::Op("Pooling", {p},
                 {{"global_pool", "True"}, {"kernel", "(1,1)"}, {"pool_type", "avg"}}, "pool1");
  auto fc = Symbol::Op("FullyConnected", {Symbol::Op("Flatten", {p}, {}, "flat")},
                       {{"num_hidden", "5"}}, "fc");
  return Symbol::Op("SoftmaxOutput", {fc}, {}, "softmax");
}

struct RunResult {
  std::vector<std::vector<float>> outputs, grads, aux;
};

std::vector<float> values(const NDArray& a) {
  return std::vector<float>(a.data<float>(), a.data<float>() + a.size());
}

// Binds with layout propagation on or off, fills deterministic values, runs `steps`
// forward/backward passes in training mode, then one inference forward.
RunResult run(const Symbol& sym, const BlockCfg& c, bool propagate, Req req, int steps,
              bool fuse = true) {
  if (!fuse) setenv("LOOM_FUSE_EPILOGUE", "0", 1);
  if (propagate)
    unsetenv("LOOM_LAYOUT_PROPAGATION");
  else
    setenv("LOOM_LAYOUT_PROPAGATION", "0", 1);
  BindOptions opts;
  opts.default_req = req;
  opts.grad_req["softmax_label"] = Req::kNull;
  auto ex = Executor::simple_bind(sym, {{"data", Shape{c.batch, 3, c.size, c.size}}}, opts);
  unsetenv("LOOM_LAYOUT_PROPAGATION");
  unsetenv("LOOM_FUSE_EPILOGUE");
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& [name, a] : ex->arg_dict()) {
    for (int64_t i = 0; i < a.size(); ++i)
      a.data<float>()[i] = name == "softmax_label"                   ? static_cast<float>(i % 5)
                           : name.find("gamma") != std::string::npos ? 1.f + 0.1f * nd(rng)
                                                                     : 0.3f * nd(rng);
  }
  for (auto& [name, a] : ex->aux_dict())
    for (int64_t i = 0; i < a.size(); ++i)
      a.data<float>()[i] =
          name.find("var") != std::string::npos ? 1.f + 0.1f * std::abs(nd(rng)) : 0.1f * nd(rng);
  RunResult r;
  std::vector<NDArray> head_grads;
  for (size_t i = 0; i < ex->outputs().size(); ++i)
    head_grads.push_back(ex->needs_head_grad(i) ? NDArray::full(ex->outputs()[i].shape(), 0.5)
                                                : NDArray());
  for (int s = 0; s < steps; ++s) {
    ex->forward(true);
    ex->backward(head_grads);
  }
  for (const auto& o : ex->outputs()) r.outputs.push_back(values(o));
  for (const auto& g : ex->grad_arrays())
    if (!g.is_none()) r.grads.push_back(values(g));
  for (const auto& a : ex->aux_arrays()) r.aux.push_back(values(a));
  ex->forward(false);
  for (const auto& o : ex->outputs()) r.outputs.push_back(values(o));
  return r;
}

void expect_close(const std::vector<std::vector<float>>& a,
                  const std::vector<std::vector<float>>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t k = 0; k < a.size(); ++k) {
    ASSERT_EQ(a[k].size(), b[k].size()) << what << " " << k;
    for (size_t i = 0; i < a[k].size(); ++i)
      ASSERT_NEAR(a[k][i], b[k][i], 1e-5 + 1e-5 * std::abs(b[k][i]))
          << what << " array " << k << " element " << i;
  }
}

void check_same(const BlockCfg& c) {
  Symbol sym = residual_block(c);
  for (Req req : {Req::kWrite, Req::kAdd}) {
    int steps = req == Req::kAdd ? 2 : 1;  // add: gradients of two passes accumulate
    RunResult on = run(sym, c, true, req, steps), off = run(sym, c, false, req, steps);
    expect_close(on.outputs, off.outputs, "output");
    expect_close(on.grads, off.grads, "gradient");
    expect_close(on.aux, off.aux, "aux state");
  }
}

TEST(Layouts, ResidualBlockMatchesPlain) { check_same({}); }
// BatchNorm applying the following in-place ReLU itself (epilogue fusion) changes nothing.
TEST(Layouts, FusedBatchNormReluMatchesSeparate) {
  BlockCfg c;
  Symbol sym = residual_block(c);
  for (Req req : {Req::kWrite, Req::kAdd}) {
    int steps = req == Req::kAdd ? 2 : 1;
    RunResult fused = run(sym, c, true, req, steps, true),
              apart = run(sym, c, true, req, steps, false);
    expect_close(fused.outputs, apart.outputs, "output");
    expect_close(fused.grads, apart.grads, "gradient");
    expect_close(fused.aux, apart.aux, "aux state");
  }
}
TEST(Layouts, BatchOne) { check_same({.channels = 16, .batch = 1}); }
TEST(Layouts, GroupsAndDilation) { check_same({.channels = 32, .groups = 2, .dilate = 2}); }
TEST(Layouts, ChannelsNotDivisibleBy16) { check_same({.channels = 24, .batch = 2}); }
TEST(Layouts, WinogradSizes) { check_same({.channels = 16, .batch = 2, .size = 20}); }
TEST(Layouts, OddSpatialSize) { check_same({.channels = 16, .batch = 3, .size = 7}); }

// The plan itself: conv/BN/relu/add/pool entries blocked; arguments, outputs and entries
// whose channels the block does not divide stay plain.
std::vector<Layout> plan_for(const Symbol& sym, const Shape& data, bool grads, Layout blocked,
                             ExecGraph& eg, IndexedGraph& g) {
  auto shapes = infer_shapes(g, {{"data", data}});
  auto types = infer_types(g, {});
  eg = build_exec_graph(g, shapes, types, std::vector<bool>(g.arguments().size(), grads));
  std::vector<bool> fixed(eg.shapes.size(), false);
  for (auto a : g.arguments()) fixed[g.entry_id(a, 0)] = true;
  for (auto a : g.aux_states()) fixed[g.entry_id(a, 0)] = true;
  for (auto h : eg.heads) fixed[h] = true;
  for (auto e : eg.arg_grad)
    if (e != kNoEntry) fixed[e] = true;
  (void)sym;
  return plan_layouts(eg, fixed, blocked);
}

Layout output_layout(const ExecGraph& eg, const std::vector<Layout>& l, const std::string& node) {
  for (const auto& n : eg.nodes)
    if (n.attrs && n.kind == ExecNode::Kind::kForward && n.attrs->name == node) return l[n.out[0]];
  ADD_FAILURE() << "no node " << node;
  return Layout::kPlain;
}

TEST(Layouts, PlanBlocksConvolutionChains) {
  Symbol sym = residual_block({});
  IndexedGraph g(sym.outputs());
  ExecGraph eg;
  auto l = plan_for(sym, Shape{2, 3, 10, 10}, true, Layout::kNChw16c, eg, g);
  for (const char* n : {"conv0", "bn0", "relu0", "conv1", "plus", "pool0", "bn2", "relu2"})
    EXPECT_EQ(output_layout(eg, l, n), Layout::kNChw16c) << n;
  // pool1 feeds Flatten, which only takes plain data; the FC output is 2-D.
  for (const char* n : {"pool1", "flat", "fc", "softmax"})
    EXPECT_EQ(output_layout(eg, l, n), Layout::kPlain) << n;
  // Every gradient entry of a blocked forward entry flows through the same ops.
  size_t blocked_grads = 0;
  for (size_t e = eg.num_forward_entries; e < l.size(); ++e)
    blocked_grads += l[e] == Layout::kNChw16c;
  EXPECT_GT(blocked_grads, 5u);
  // Arguments, aux states and gradient arrays are always plain.
  for (auto a : g.arguments()) EXPECT_EQ(l[g.entry_id(a, 0)], Layout::kPlain);
  for (auto a : g.aux_states()) EXPECT_EQ(l[g.entry_id(a, 0)], Layout::kPlain);
  for (auto e : eg.arg_grad) {
    if (e != kNoEntry) {
      EXPECT_EQ(l[e], Layout::kPlain);
    }
  }
  // Off: everything plain.
  for (auto x : plan_for(sym, Shape{2, 3, 10, 10}, true, Layout::kPlain, eg, g))
    EXPECT_EQ(x, Layout::kPlain);
}

TEST(Layouts, PlanKeepsIndivisibleChannelsAndOutputsPlain) {
  Symbol sym = residual_block({.channels = 24});
  IndexedGraph g(sym.outputs());
  ExecGraph eg;
  auto l16 = plan_for(sym, Shape{2, 3, 10, 10}, false, Layout::kNChw16c, eg, g);
  for (auto x : l16) EXPECT_EQ(x, Layout::kPlain);
  auto l8 = plan_for(sym, Shape{2, 3, 10, 10}, false, Layout::kNChw8c, eg, g);
  EXPECT_EQ(output_layout(eg, l8, "conv1"), Layout::kNChw8c);
  // An internal entry that is also a graph output stays plain, and so does everything
  // tied to it through element-wise ops.
  Symbol net = residual_block({});
  Symbol both = Symbol::Group({net, net.get_internals()["relu1_output"]});
  IndexedGraph g2(both.outputs());
  auto l2 = plan_for(both, Shape{2, 3, 10, 10}, false, Layout::kNChw16c, eg, g2);
  EXPECT_EQ(output_layout(eg, l2, "relu1"), Layout::kPlain);
  EXPECT_EQ(output_layout(eg, l2, "bn1"), Layout::kPlain);
  EXPECT_EQ(output_layout(eg, l2, "conv2"), Layout::kNChw16c);
}

TEST(Layouts, InternalOutputMatchesPlain) {
  Symbol net = residual_block({});
  Symbol both = Symbol::Group({net, net.get_internals()["relu1_output"]});
  RunResult on = run(both, {}, true, Req::kWrite, 1), off = run(both, {}, false, Req::kWrite, 1);
  expect_close(on.outputs, off.outputs, "output");
  expect_close(on.grads, off.grads, "gradient");
}

}  // namespace
}  // namespace loom
