// Buckets (ops/update/bucket.cc, StepOptions::bucket): a bucketed step graph, its update and
// EMA run as one chunked chain (Executor fuse_chains), computes what the
// one-node-per-parameter graph run node by node computes, for every optimizer and EMA mode; simple_bind
// lays out each kind of state as one flat buffer of per-parameter views; bad buckets fail
// with clear errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <set>

#include "graph/json.h"
#include "graph/step_builder.h"
#include "ops/param.h"
#include "tests/unit/op_reference.h"

namespace loom {
namespace {

// The sweep's reference: the inner op's own reference, tensor by tensor.
LOOM_OP_REFERENCE("_loom_bucket", [](const test::RefCall& c) {
  const OpDef& inner = get_op(c.attrs.dict.at("op"));
  const size_t n = static_cast<size_t>(parse_int(c.attrs.dict.at("num_tensors")));
  const size_t m = c.in.size() / n;
  std::vector<std::string> wds;
  if (auto it = c.attrs.dict.find("wds"); it != c.attrs.dict.end()) {
    std::string s = it->second.substr(1, it->second.size() - 2), cur;
    for (char ch : s + ",") {
      if (ch == ',') {
        if (cur.find_first_not_of(' ') != std::string::npos) wds.push_back(cur);
        cur.clear();
      } else {
        cur += ch;
      }
    }
  }
  const test::RefFn* ref = test::find_reference(inner.name);
  EXPECT_NE(ref, nullptr);
  std::vector<NDArray> outs;
  for (size_t i = 0; i < n; ++i) {
    Attrs d;
    for (const auto& [k, v] : c.attrs.dict)
      if (k != "op" && k != "num_tensors" && k != "wds") d[k] = v;
    if (!wds.empty()) d["wd"] = wds[i];
    OpAttrs a = make_op_attrs(inner, "tensor", d);
    std::vector<NDArray> in(c.in.begin() + static_cast<std::ptrdiff_t>(i * m),
                            c.in.begin() + static_cast<std::ptrdiff_t>((i + 1) * m));
    std::vector<Shape> os = {c.out_shapes[i]};
    auto r = (*ref)(test::RefCall{a, in, os, c.is_train});
    outs.push_back(r.at(0));
  }
  return outs;
});

Symbol net() {
  auto h = Symbol::Op("FullyConnected", {Symbol::Variable("data")}, {{"num_hidden", "300"}}, "fc1");
  h = Symbol::Op("BatchNorm", {h}, {{"fix_gamma", "False"}}, "bn");
  h = Symbol::Op("Activation", {h}, {{"act_type", "tanh"}}, "act");
  h = Symbol::Op("FullyConnected", {h}, {{"num_hidden", "3"}}, "fc2");
  return Symbol::Op("SoftmaxOutput", {h}, {}, "softmax");
}

std::unique_ptr<Executor> bind(const Symbol& step, bool fuse = true) {
  BindOptions o;
  o.default_req = Req::kNull;
  o.fuse_chains = fuse;
  auto ex = Executor::simple_bind(step, {{"data", Shape{6, 200}}}, o);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 0.1f);
  for (const char* p : {"fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias", "bn_gamma"}) {
    NDArray w = ex->arg_dict().at(p);
    for (int64_t i = 0; i < w.size(); ++i) w.data<float>()[i] = nd(rng) + (p[1] == 'n' ? 1.f : 0.f);
  }
  ex->aux_dict().at("bn_moving_var").fill(1.0);
  return ex;
}

/// Runs 7 micro-steps (k=3) on fixed data; returns every argument and aux state.
std::map<std::string, std::vector<float>> train(const Symbol& step, bool fuse = true,
                                                size_t* fused = nullptr) {
  auto ex = bind(step, fuse);
  if (fused) *fused = ex->fused_steps();
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  NDArray x(Shape{6, 200}), y(Shape{6});
  for (int s = 0; s < 7; ++s) {
    for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = nd(rng);
    for (int i = 0; i < 6; ++i) y.data<float>()[i] = static_cast<float>(rng() % 3);
    ex->forward(true, {{"data", x}, {"softmax_label", y}});
  }
  std::map<std::string, std::vector<float>> m;
  for (const auto& [n, a] : ex->arg_dict()) m[n].assign(a.data<float>(), a.data<float>() + a.size());
  for (const auto& [n, a] : ex->aux_dict()) m[n].assign(a.data<float>(), a.data<float>() + a.size());
  return m;
}

struct Case {
  OptimizerSpec opt;
  EmaOptions ema;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.opt.name << " / ema " << c.ema.schedule; }

class Bucketed : public ::testing::TestWithParam<Case> {};

TEST_P(Bucketed, EqualsOneNodePerParameter) {
  const Case& c = GetParam();
  StepOptions o;
  o.accumulate = 3;
  o.ema = c.ema;
  o.bucket = true;
  Symbol fused = make_step(net(), c.opt, o);
  o.bucket = false;
  Symbol plain = make_step(net(), c.opt, o);
  // The bucketed graph has one update node, not one per parameter.
  std::string js = save_json(fused);
  EXPECT_NE(js.find("\"step_update\""), std::string::npos);
  EXPECT_EQ(js.find("fc1_weight_update"), std::string::npos);
  // The fused pass splits the concatenated elements among threads: run it with two.
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  size_t chained = 0;
  auto a = train(fused, true, &chained);
  omp_set_num_threads(threads);
  // The reference: one node per parameter, each run on its own (no chunked chains).
  auto b = train(plain, false);
  // The update and EMA buckets (same partition, same predicate) run as one chunked chain.
  EXPECT_GE(chained, 1u);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [n, v] : b) {
    ASSERT_TRUE(a.count(n)) << n;
    ASSERT_EQ(a[n].size(), v.size()) << n;
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_NEAR(a[n][i], v[i], 1e-6f + 1e-6f * std::abs(v[i])) << n << "[" << i << "]";
  }
  // And the training moved the weights.
  NDArray w0 = bind(fused)->arg_dict().at("fc1_weight");
  EXPECT_NE(a["fc1_weight"], std::vector<float>(w0.data<float>(), w0.data<float>() + w0.size()));
}

OptimizerSpec spec(const std::string& name, double momentum = 0, bool centered = false) {
  OptimizerSpec s;
  s.name = name;
  s.learning_rate = 0.05;
  s.wd = 0.01;
  s.momentum = momentum;
  s.centered = centered;
  s.clip_gradient = 0.5;
  s.lr_mult["fc2_bias"] = 2;  // a second lr group, hence a second bucket
  return s;
}
EmaOptions ema(const std::string& schedule, const std::string& init, bool aux) {
  EmaOptions e;
  e.decay = 0.9;
  e.schedule = schedule;
  e.init = init;
  e.include_aux = aux;
  return e;
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, Bucketed,
    ::testing::Values(Case{spec("sgd"), ema("constant", "copy", false)},
                      Case{spec("sgd", 0.9), ema("tf", "zero_debias", true)},
                      Case{spec("nag", 0.9), ema("yolov5", "copy", true)},
                      Case{spec("adam"), ema("timm", "zero_debias", false)},
                      Case{spec("adamw"), ema("tf", "copy", true)},
                      Case{spec("rmsprop"), ema("constant", "zero_debias", false)},
                      Case{spec("rmsprop", 0, true), ema("tf", "copy", false)},
                      Case{spec("lamb"), ema("tf", "zero_debias", true)}),
    [](const ::testing::TestParamInfo<Case>& i) {
      return i.param.opt.name + std::to_string(i.index) + "_" + i.param.ema.schedule;
    });

TEST(Bucket, SimpleBindLaysOutEachStateFlat) {
  OptimizerSpec s = spec("sgd", 0.9);
  s.lr_mult.clear();
  StepOptions o;
  o.ema = ema("tf", "copy", false);
  auto ex = bind(make_step(net(), s, o));
  const std::vector<std::string> params = {"fc1_weight", "fc1_bias", "bn_gamma", "bn_beta",
                                           "fc2_weight", "fc2_bias"};
  for (const char* suffix : {"", "_acc", "_mom", "_ema"}) {
    NDArray prev;
    for (const auto& p : params) {
      const std::string n = p + suffix;
      auto args = ex->arg_dict();
      auto aux = ex->aux_dict();
      NDArray a = args.count(n) ? args.at(n) : aux.at(n);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(a.raw()) % 64, 0u) << n;
      if (!prev.is_none()) {
        EXPECT_EQ(a.storage(), prev.storage()) << n << " is not in the bucket of its group";
        size_t end = prev.offset() + (prev.nbytes() + 63) / 64 * 64;
        EXPECT_EQ(a.offset(), end) << n << " does not follow the previous parameter";
      }
      prev = a;
    }
  }
  // Different kinds of state are different buffers.
  EXPECT_NE(ex->arg_dict().at("fc1_weight").storage(), ex->aux_dict().at("fc1_weight_acc").storage());
}

TEST(Bucket, SimpleBindGradientsShareOneBuffer) {
  auto ex = Executor::simple_bind(net(), {{"data", Shape{6, 200}}},
                                  BindOptions{.grad_req = {{"data", Req::kNull}, {"softmax_label", Req::kNull}}});
  auto grads = ex->grad_dict();
  ASSERT_EQ(grads.size(), 6u);
  std::set<size_t> offsets;
  for (const auto& [n, gr] : grads) {
    EXPECT_EQ(gr.storage(), grads.at("fc1_weight").storage()) << n;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(gr.raw()) % 64, 0u) << n;
    offsets.insert(gr.offset());
  }
  EXPECT_EQ(offsets.size(), grads.size());
}

// Chunked chains: an update followed by the EMA of its output joins; a step reading a
// one-element state an earlier step writes once per call does not.
TEST(Chain, JoinsOnlyElementForElementDependencies) {
  const int64_t n = 100000;  // above the parallel threshold
  auto w = Symbol::Variable("w"), g = Symbol::Variable("g"), t = Symbol::Variable("t");
  auto ema = Symbol::Variable("ema"), norm = Symbol::Variable("norm"), w2 = Symbol::Variable("w2");
  auto upd = Symbol::Op("sgd_update", {w, g}, {{"lr", "0.1"}, {"wd", "0.01"}, {"__inplace__", "(0,)"}}, "upd");
  auto avg = Symbol::Op("_loom_ema_update", {ema, upd, t, norm},
                        {{"decay", "0.9"}, {"init", "zero_debias"}, {"__inplace__", "(0,)"}}, "avg");
  // Reads the norm `avg` writes once per call, as its learning rate.
  auto upd2 = Symbol::Op("sgd_update", {w2, g, norm}, {{"lr", "1"}, {"lr_input", "True"}, {"__inplace__", "(0,)"}}, "upd2");
  Symbol graph = Symbol::Group({avg, upd2});
  auto run = [&](bool fuse, size_t* fused) {
    BindOptions o;
    o.default_req = Req::kNull;
    o.fuse_chains = fuse;
    auto ex = Executor::simple_bind(graph, {{"w", Shape{n}}, {"t", Shape{1}}}, o);
    for (auto& [k, v] : ex->arg_dict())
      for (int64_t i = 0; i < v.size(); ++i) v.data<float>()[i] = std::sin(float(i) + float(k[0]));
    ex->arg_dict().at("t").fill(5);
    ex->aux_dict().at("norm").fill(0.5);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(2);
    for (int i = 0; i < 3; ++i) ex->forward(true);
    omp_set_num_threads(threads);
    *fused = ex->fused_steps();
    std::map<std::string, std::vector<float>> m;
    for (auto& [k, v] : ex->arg_dict()) m[k].assign(v.data<float>(), v.data<float>() + v.size());
    for (auto& [k, v] : ex->aux_dict()) m[k].assign(v.data<float>(), v.data<float>() + v.size());
    return m;
  };
  size_t fused = 0, unfused = 0;
  auto a = run(true, &fused), b = run(false, &unfused);
  EXPECT_EQ(fused, 1u);  // upd + avg; upd2 stays apart
  EXPECT_EQ(unfused, 0u);
  // Equal up to rounding: where a chunk boundary falls decides which elements the
  // vectorised loop body computes (with fused multiply-adds) and which the scalar tail.
  for (const auto& [k, v] : b)
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_NEAR(a[k][i], v[i], 4e-7f * std::max(1.f, std::abs(v[i]))) << k << "[" << i << "]";
}

// _assign in a bucket, on int32 states: copies where pred is 1, leaves dst where it is 0.
TEST(Bucket, AssignsAnyDtypeWhenThePredicateHolds) {
  auto p = Symbol::Variable("p");
  std::vector<Symbol> in;
  for (const char* i : {"0", "1"})
    for (const char* n : {"d", "s"}) in.push_back(Symbol::Variable(n + std::string(i)));
  in.insert(in.begin() + 2, p);
  in.push_back(p);
  auto b = Symbol::Op("_loom_bucket", in, {{"op", "_assign"}, {"num_tensors", "2"}, {"__inplace__", "(0, 3)"}}, "b");
  BindOptions o;
  o.default_req = Req::kNull;
  for (const char* n : {"d0", "s0", "d1", "s1"}) o.type_dict[n] = DType::kInt32;
  auto ex = Executor::simple_bind(b, {{"d0", Shape{5}}, {"d1", Shape{3, 2}}, {"p", Shape{1}}}, o);
  auto args = ex->arg_dict();
  auto aux = ex->aux_dict();
  for (const char* n : {"s0", "s1"}) args.at(n).fill(7);
  for (const char* n : {"d0", "d1"}) aux.at(n).fill(-1);
  ex->forward(true);  // p = 0: nothing changes
  for (const char* n : {"d0", "d1"})
    for (int64_t i = 0; i < aux.at(n).size(); ++i) EXPECT_EQ(aux.at(n).data<int32_t>()[i], -1) << n;
  args.at("p").fill(1);
  ex->forward(true);
  for (const char* n : {"d0", "d1"})
    for (int64_t i = 0; i < aux.at(n).size(); ++i) EXPECT_EQ(aux.at(n).data<int32_t>()[i], 7) << n;
  EXPECT_EQ(ex->outputs()[1].data<int32_t>()[5], 7);
}

TEST(Bind, TwoVariablesWithOneNameAreAnError) {
  auto s = Symbol::Op("elemwise_add", {Symbol::Variable("x"), Symbol::Variable("x")}, {}, "sum");
  try {
    Executor::simple_bind(s, {{"x", Shape{2}}});
    ADD_FAILURE() << "no error";
  } catch (const BindError& e) {
    EXPECT_NE(std::string(e.what()).find("two different variables are named 'x'"), std::string::npos) << e.what();
  }
}

TEST(Bucket, BadBucketsFailClearly) {
  auto w = Symbol::Variable("w"), g = Symbol::Variable("g");
  auto expect_error = [](auto f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "no error; expected " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error([&] { Symbol::Op("_loom_bucket", {w, g}, {{"op", "Activation"}, {"num_tensors", "1"}}, "b"); },
               "differentiable");
  expect_error([&] { Symbol::Op("_loom_bucket", {w, g}, {{"op", "nope"}, {"num_tensors", "1"}}, "b"); },
               "'nope'");
  expect_error([&] {
    Symbol::Op("_loom_bucket", {w, g, w, g},
               {{"op", "sgd_update"}, {"num_tensors", "2"}, {"lr", "1"}, {"wds", "(0.1,)"}}, "b");
  }, "wds has 1 values for 2 tensors");
  // An op without a range kernel is refused at bind, naming the node.
  auto copy = Symbol::Op("_loom_bucket", {w}, {{"op", "BlockGrad"}, {"num_tensors", "1"}}, "cb");
  expect_error([&] { Executor::simple_bind(copy, {{"w", Shape{4}}}); },
               "node 'cb' (op _loom_bucket): op 'BlockGrad' is not an element-wise update");
}

}  // namespace
}  // namespace loom
