// The memory plan lets element-wise backward kernels (Activation, BatchNorm, elemwise_add,
// add_n) write an input's gradient over the output gradient they consume.
#include <gtest/gtest.h>

#include "graph/exec_graph.h"
#include "graph/infer.h"
#include "runtime/executor.h"

namespace loom {
namespace {

TEST(BackwardInplace, ElementwiseGradientsReuseTheirInputBuffer) {
  auto data = Symbol::Variable("data");
  auto fc = Symbol::Op("FullyConnected", {data}, {{"num_hidden", "8"}}, "fc");
  auto bn = Symbol::Op("BatchNorm", {fc}, {{"fix_gamma", "False"}}, "bn");
  auto act = Symbol::Op("Activation", {bn}, {{"act_type", "relu"}}, "relu");
  auto out = Symbol::Op("FullyConnected", {act}, {{"num_hidden", "3"}}, "fc2");
  auto net = Symbol::Op("SoftmaxOutput", {out}, {}, "softmax");
  IndexedGraph g(net.outputs());
  auto shapes = infer_shapes(g, {{"data", Shape{4, 5}}});
  auto types = infer_types(g, {});
  std::vector<bool> need(g.arguments().size(), true);
  ExecGraph eg = build_exec_graph(g, shapes, types, need);
  std::vector<bool> external(eg.shapes.size(), false), pinned(eg.shapes.size(), false);
  for (auto a : g.arguments()) external[g.entry_id(a, 0)] = true;
  for (auto a : g.aux_states()) external[g.entry_id(a, 0)] = true;
  for (auto e : eg.arg_grad)
    if (e != kNoEntry) external[e] = true;
  for (auto h : eg.heads) pinned[h] = true;
  MemoryPlan plan = plan_memory(eg, external, pinned);
  int shared = 0;
  for (const auto& n : eg.nodes) {
    if (n.kind != ExecNode::Kind::kBackward) continue;
    const std::string& op = n.attrs->op->name;
    if (op != "Activation" && op != "BatchNorm") continue;
    ASSERT_EQ(n.inplace.size(), 1u) << op;
    uint32_t dx = n.out[0], dy = n.in[0];
    EXPECT_EQ(plan.storage[dx], plan.storage[dy]) << op << " backward writes dx over dy";
    ++shared;
  }
  EXPECT_EQ(shared, 2);
}

TEST(BackwardInplace, GradientReadTwiceIsNotOverwritten) {
  // relu's output feeds two FullyConnected layers: their data gradients meet in add_n, whose
  // result relu's backward may overwrite; the add_n inputs stay intact until it has run.
  auto data = Symbol::Variable("data");
  auto act = Symbol::Op("Activation", {data}, {{"act_type", "relu"}}, "relu");
  auto a = Symbol::Op("FullyConnected", {act}, {{"num_hidden", "2"}, {"no_bias", "True"}}, "fa");
  auto b = Symbol::Op("FullyConnected", {act}, {{"num_hidden", "2"}, {"no_bias", "True"}}, "fb");
  auto loss = Symbol::Op("MakeLoss", {Symbol::Op("elemwise_add", {a, b}, {}, "sum")}, {}, "loss");
  BindOptions o;
  auto ex = Executor::simple_bind(loss, {{"data", Shape{1, 3}}}, o);
  auto args = ex->arg_dict();
  const float x[3] = {1.f, -2.f, 3.f}, wa[6] = {1, 2, 3, 4, 5, 6}, wb[6] = {-1, 0, 1, 0, 2, 0};
  args["data"].copy_from_host(x, sizeof(x));
  args["fa_weight"].copy_from_host(wa, sizeof(wa));
  args["fb_weight"].copy_from_host(wb, sizeof(wb));
  ex->forward(true);
  ex->backward();
  // d loss / d data = relu'(x) * column sums of (wa + wb)
  const float* g = ex->grad_dict().at("data").data<float>();
  EXPECT_FLOAT_EQ(g[0], (1 + 4) + (-1 + 0));
  EXPECT_FLOAT_EQ(g[1], 0.f);
  EXPECT_FLOAT_EQ(g[2], (3 + 6) + (1 + 0));
}

}  // namespace
}  // namespace loom
