// Inference in sample chunks (runtime/infer_chunk.cc): an inference executor runs its batch
// through a second executor bound at a few samples. Checked against the same graph run whole
// (LOOM_INFER_CHUNK=0), for the chunk sizes it may pick, the automatic choice, the graphs and
// executors it must refuse, weights written after the first call, and the profile timer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "runtime/executor.h"
#include "tests/unit/host_values.h"

namespace loom {
namespace {

using test_util::host;
using test_util::set;

// The kernel tests pick their batches on purpose (a Winograd tile count, a split's parts):
// the whole suite runs whole batches unless a test here asks for chunks. Set before main.
const bool kWholeBatches = [] { return setenv("LOOM_INFER_CHUNK", "0", 0) == 0; }();

std::string S(int64_t v) { return std::to_string(v); }

// Sets LOOM_INFER_CHUNK (nullptr: unset, the automatic choice) for one scope, then restores
// the suite's "0".
struct ChunkEnv {
  explicit ChunkEnv(const char* v) {
    if (v)
      setenv("LOOM_INFER_CHUNK", v, 1);
    else
      unsetenv("LOOM_INFER_CHUNK");
  }
  ~ChunkEnv() { setenv("LOOM_INFER_CHUNK", "0", 1); }
};

Symbol conv(const Symbol& x, const std::string& name, int c, int k, int group = 1) {
  return Symbol::Op("Convolution", {x},
                    {{"kernel", "(" + S(k) + "," + S(k) + ")"},
                     {"pad", "(" + S(k / 2) + "," + S(k / 2) + ")"},
                     {"num_filter", S(c)},
                     {"num_group", S(group)}},
                    name);
}
Symbol bn(const Symbol& x, const std::string& name) {
  return Symbol::Op("BatchNorm", {x}, {{"fix_gamma", "False"}}, name);
}

// A mobile-style network: stem, depthwise + PReLU, a residual 1x1, a channel concat, global
// pooling, a classifier and its loss head (whose label is a second sample input).
Symbol mobile_net(int classes = 10) {
  auto x = Symbol::Op("Activation", {bn(conv(Symbol::Variable("data"), "c0", 16, 3), "bn0")},
                      {{"act_type", "relu"}}, "r0");
  auto d =
      Symbol::Op("LeakyReLU", {bn(conv(x, "dw", 16, 3, 16), "bn1")}, {{"act_type", "prelu"}}, "p1");
  auto p = Symbol::Op("elemwise_add", {bn(conv(d, "pw", 16, 1), "bn2"), x}, {}, "plus");
  auto cat =
      Symbol::Op("Concat", {p, conv(p, "side", 8, 1)}, {{"dim", "1"}, {"num_args", "2"}}, "cat");
  auto g = Symbol::Op("Pooling", {cat},
                      {{"kernel", "(1,1)"}, {"global_pool", "True"}, {"pool_type", "avg"}}, "gp");
  auto f = Symbol::Op("FullyConnected", {Symbol::Op("Flatten", {g}, {}, "flat")},
                      {{"num_hidden", S(classes)}}, "fc");
  return Symbol::Op("SoftmaxOutput", {f, Symbol::Variable("softmax_label")}, {}, "softmax");
}

BindOptions inference() {
  BindOptions o;
  o.default_req = Req::kNull;
  return o;
}

// Seeded values for every argument (BatchNorm's gamma near 1) and aux state (variances > 0).
void fill(Executor& ex) {
  int seed = 3;
  for (const auto& [k, v] : ex.arg_dict()) {
    const bool gamma = k.find("gamma") != std::string::npos;
    set(v, gamma ? 0.5f : -0.5f, gamma ? 1.5f : 0.5f, seed++);
  }
  for (const auto& [k, v] : ex.aux_dict()) {
    const bool var = k.find("var") != std::string::npos;
    set(v, var ? 0.5f : -0.3f, var ? 2.f : 0.3f, seed++);
  }
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5f + 1e-4f * std::fabs(want[i])) << what << " at " << i;
}

// The executor run in chunks under `env`, and a whole-batch executor on the same arrays.
struct Pair {
  std::unique_ptr<Executor> chunked, whole;
};
Pair bind_pair(const Symbol& sym, const Shape& data, const char* env, bool label = true) {
  std::map<std::string, Shape> shapes{{"data", data}};
  if (label) shapes["softmax_label"] = Shape{data[0]};
  Pair p;
  p.chunked = Executor::simple_bind(sym, shapes, inference());
  fill(*p.chunked);
  p.whole = Executor::bind(sym, p.chunked->arg_dict(), {}, p.chunked->aux_dict(), inference());
  {
    ChunkEnv e(env);
    p.chunked->forward(false);  // decides here
  }
  p.whole->forward(false);
  return p;
}

TEST(InferChunk, ChunksMatchTheWholeBatch) {
  // Asked size -> the chunk run: the largest divisor of 12 not above it; 12 itself is whole.
  for (auto [asked, expect] : {std::pair{"1", 1}, {"3", 3}, {"4", 4}, {"5", 4}, {"12", 0}}) {
    SCOPED_TRACE(std::string("LOOM_INFER_CHUNK=") + asked);
    Pair p = bind_pair(mobile_net(), Shape{12, 3, 10, 10}, asked);
    EXPECT_EQ(p.chunked->inference_chunk(), expect) << p.chunked->inference_chunk_note();
    expect_close(host(p.chunked->outputs()[0]), host(p.whole->outputs()[0]), "first call");
    // New sample inputs reach every chunk.
    set(p.chunked->arg_dict().at("data"), -2.f, 2.f, 99);
    p.chunked->forward(false);
    p.whole->forward(false);
    expect_close(host(p.chunked->outputs()[0]), host(p.whole->outputs()[0]), "new data");
  }
}

TEST(InferChunk, SeesWeightsWrittenAfterTheFirstCall) {
  Pair p = bind_pair(mobile_net(), Shape{8, 3, 9, 9}, "2");
  ASSERT_EQ(p.chunked->inference_chunk(), 2);
  const auto before = host(p.chunked->outputs()[0]);
  // The chunk executor shares the weights and aux states: writes reach its cached kernels.
  set(p.chunked->arg_dict().at("pw_weight"), -1.f, 1.f, 41);
  set(p.chunked->arg_dict().at("fc_weight"), -1.f, 1.f, 42);
  set(p.chunked->aux_dict().at("bn1_moving_mean"), -1.f, 1.f, 43);
  p.chunked->forward(false);
  p.whole->forward(false);
  const auto after = host(p.chunked->outputs()[0]);
  expect_close(after, host(p.whole->outputs()[0]), "after new weights");
  float moved = 0;
  for (size_t i = 0; i < after.size(); ++i)
    moved = std::max(moved, std::fabs(after[i] - before[i]));
  EXPECT_GT(moved, 1e-3f) << "the new weights changed nothing";
}

TEST(InferChunk, AutomaticChoiceFollowsActivationsAndWeights) {
  {
    // 192x192 maps: the concat's input and output take 5.9 MB a sample, 94 MB for 16, more
    // than twice the 32 MB cache budget: chunks of 5 fit it, 4 divide the batch.
    Pair p = bind_pair(mobile_net(), Shape{16, 3, 192, 192}, nullptr);
    EXPECT_EQ(p.chunked->inference_chunk(), 4) << p.chunked->inference_chunk_note();
    expect_close(host(p.chunked->outputs()[0]), host(p.whole->outputs()[0]), "auto chunks");
  }
  {
    // 16x16 maps: the batch's activations fit; whole batches.
    Pair p = bind_pair(mobile_net(), Shape{16, 3, 16, 16}, nullptr);
    EXPECT_EQ(p.chunked->inference_chunk(), 0);
    EXPECT_NE(p.chunked->inference_chunk_note().find("within twice"), std::string::npos)
        << p.chunked->inference_chunk_note();
  }
  {
    // The same large maps, pooled 4x4 into a 200-unit layer: 29.5 MB of weights against 4.7
    // MB a sample, so whole batches again.
    auto x = bn(conv(Symbol::Variable("data"), "c0", 16, 3), "bn0");
    auto pool = Symbol::Op("Pooling", {x},
                           {{"kernel", "(4,4)"}, {"stride", "(4,4)"}, {"pool_type", "max"}}, "pl");
    auto fc = Symbol::Op("FullyConnected", {pool}, {{"num_hidden", "200"}}, "fc");
    auto sym = Symbol::Op("SoftmaxOutput", {fc, Symbol::Variable("softmax_label")}, {}, "sm");
    Pair p = bind_pair(sym, Shape{16, 3, 192, 192}, nullptr);
    EXPECT_EQ(p.chunked->inference_chunk(), 0);
    EXPECT_NE(p.chunked->inference_chunk_note().find("outweigh"), std::string::npos)
        << p.chunked->inference_chunk_note();
  }
}

TEST(InferChunk, RefusesGraphsThatMixSamples) {
  auto data = Symbol::Variable("data");
  auto c = conv(data, "c0", 4, 3);
  struct Case {
    const char* what;
    Symbol sym;
    const char* note;  // expected in inference_chunk_note()
  };
  const Case cases[] = {
      {"a sum over the batch", Symbol::Op("sum", {c}, {{"axis", "0"}}, "s"), "op sum"},
      {"a concat along the batch",
       Symbol::Op("Concat", {c, c}, {{"dim", "0"}, {"num_args", "2"}}, "cat0"), "may mix"},
      {"softmax over the batch axis", Symbol::Op("softmax", {c}, {{"axis", "0"}}, "sm"), "may mix"},
      {"a reshape folding the batch into rows",
       Symbol::Op("Reshape", {Symbol::Op("Flatten", {c}, {}, "f")}, {{"shape", "(-1,)"}}, "r"),
       "does not keep the batch"},
      {"a reshape regrouping samples, and back",
       Symbol::Op("Reshape", {Symbol::Op("Reshape", {c}, {{"shape", "(-1,8,10,10)"}}, "r2")},
                  {{"shape", "(-1,4,10,10)"}}, "r3"),
       "does not keep the batch"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    Pair p = bind_pair(k.sym, Shape{4, 3, 10, 10}, "2", false);
    EXPECT_EQ(p.chunked->inference_chunk(), 0);
    EXPECT_NE(p.chunked->inference_chunk_note().find(k.note), std::string::npos)
        << p.chunked->inference_chunk_note();
    expect_close(host(p.chunked->outputs()[0]), host(p.whole->outputs()[0]), k.what);
  }
}

TEST(InferChunk, MalformedSwitchRunsWholeAndSaysWhy) {
  for (const char* bad : {"abc", "-2", "4x"}) {
    Pair p = bind_pair(mobile_net(), Shape{4, 3, 6, 6}, bad);
    EXPECT_EQ(p.chunked->inference_chunk(), 0);
    EXPECT_NE(p.chunked->inference_chunk_note().find(std::string("LOOM_INFER_CHUNK='") + bad +
                                                     "' is not a number"),
              std::string::npos)
        << p.chunked->inference_chunk_note();
  }
}

TEST(InferChunk, TrainingCallsAndGradientExecutorsRunWhole) {
  ChunkEnv e("2");
  // Training calls use the batch's statistics (BatchNorm): never in chunks.
  auto ex = Executor::simple_bind(
      mobile_net(), {{"data", Shape{8, 3, 6, 6}}, {"softmax_label", Shape{8}}}, inference());
  fill(*ex);
  auto ref = Executor::bind(mobile_net(), ex->arg_dict(), {}, ex->aux_dict(), inference());
  ex->forward(true);
  ref->forward(true);  // (training calls never chunk: no switch needed)
  EXPECT_EQ(ex->inference_chunk(), 0);
  expect_close(host(ex->outputs()[0]), host(ref->outputs()[0]), "training call");
  ex->forward(false);
  EXPECT_EQ(ex->inference_chunk(), 2) << ex->inference_chunk_note();
  // An executor with gradients keeps whole batches for its inference calls too (a backward
  // after them reads the intermediate arrays).
  auto tr = Executor::simple_bind(mobile_net(),
                                  {{"data", Shape{8, 3, 6, 6}}, {"softmax_label", Shape{8}}});
  tr->forward(false);
  EXPECT_EQ(tr->inference_chunk(), 0);
  EXPECT_NE(tr->inference_chunk_note().find("gradients"), std::string::npos);
}

TEST(InferChunk, BindTellsSampleInputsFromParametersByName) {
  // 8 filters at batch 8: c0_weight's leading axis equals the batch, and it is not a sample
  // input. bind() has no shapes to go by, so parameter names decide.
  auto sym = Symbol::Op("Pooling", {conv(Symbol::Variable("data"), "c0", 8, 3)},
                        {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "max"}}, "pool");
  auto first = Executor::simple_bind(sym, {{"data", Shape{8, 3, 6, 6}}}, inference());
  fill(*first);
  auto ex = Executor::bind(sym, first->arg_dict(), {}, first->aux_dict(), inference());
  {
    ChunkEnv e("4");
    ex->forward(false);
    first->forward(false);
  }
  EXPECT_EQ(ex->inference_chunk(), 4) << ex->inference_chunk_note();
  EXPECT_EQ(first->inference_chunk(), 4) << first->inference_chunk_note();
  expect_close(host(ex->outputs()[0]), host(first->outputs()[0]), "bind vs simple_bind");
  auto ref = Executor::bind(sym, first->arg_dict(), {}, first->aux_dict(), inference());
  ref->forward(false);
  expect_close(host(ex->outputs()[0]), host(ref->outputs()[0]), "chunks vs whole");
  // simple_bind given the weight's shape as well (as loom bench does): still chunks.
  auto both = Executor::simple_bind(
      sym, {{"data", Shape{8, 3, 6, 6}}, {"c0_weight", Shape{8, 3, 3, 3}}}, inference());
  both->copy_params_from(first->arg_dict(), first->aux_dict());
  {
    ChunkEnv e("4");
    both->forward(false);
  }
  EXPECT_EQ(both->inference_chunk(), 4) << both->inference_chunk_note();
  expect_close(host(both->outputs()[0]), host(ref->outputs()[0]), "weight shapes given");
}

TEST(InferChunk, ProfileTimerSeesEveryChunk) {
  auto ex = Executor::simple_bind(
      mobile_net(), {{"data", Shape{6, 3, 6, 6}}, {"softmax_label", Shape{6}}}, inference());
  fill(*ex);
  std::map<std::string, int> calls;
  ex->set_step_timer([&](const std::string& node, const std::string&, double) { ++calls[node]; });
  ChunkEnv e("2");
  ex->forward(false);
  ASSERT_EQ(ex->inference_chunk(), 2);
  calls.clear();
  ex->forward(false);
  ASSERT_FALSE(calls.empty());
  for (const auto& [node, n] : calls) EXPECT_EQ(n, 3) << node << ": one call per chunk";
}

}  // namespace
}  // namespace loom
