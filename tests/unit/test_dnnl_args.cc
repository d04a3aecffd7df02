// oneDNN memory arguments kept between calls (ops/nn/dnnl_args.h): a kernel makes its memory
// objects once and only points them at each call's buffers. A stale handle would compute on
// the previous call's arrays, so every test runs one kernel or executor again and again on
// different arrays (and the same ones again) and compares each call with a fresh kernel or
// executor given the same values, and with LOOM_DNNL_CACHED_ARGS=0 (fresh memory objects
// on every call).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "ops/nn/dnnl_args.h"
#include "ops/nn/winograd.h"
#include "runtime/executor.h"
#include "runtime/imperative.h"
#include "tests/unit/host_values.h"

namespace loom {
namespace {

using test_util::host;

std::vector<float> draw(size_t n, int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
NDArray array(const Shape& s, int seed) {
  NDArray a(s, DType::kFloat32);
  auto v = draw(static_cast<size_t>(a.size()), seed);
  a.copy_from_host(v.data(), a.nbytes());
  return a;
}
// Same primitives on the same values: equal up to (at most) a different summation order of
// oneDNN's threads; a stale handle differs by the whole value.
void expect_same(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1e-3;
  for (float x : want) scale = std::max(scale, static_cast<double>(std::abs(x)));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * scale) << what << " at " << i;
}

struct EnvScope {
  EnvScope(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvScope() { unsetenv(name_); }
  const char* name_;
};

// y (m x n) = x (m x k) . w (k x n), naive.
std::vector<float> matmul_ref(const std::vector<float>& x, const std::vector<float>& w, int m,
                              int k, int n) {
  std::vector<float> y(static_cast<size_t>(m) * n);
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < n; ++c) {
      double acc = 0;
      for (int q = 0; q < k; ++q) acc += double(x[r * k + q]) * w[q * n + c];
      y[r * n + c] = static_cast<float>(acc);
    }
  return y;
}

TEST(DnnlArgs, FollowsChangingBuffers) {
  const int m = 3, k = 20, n = 7;
  auto md = [](int64_t r, int64_t c) { return dnnl_util::plain_md({r, c}); };
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(md(m, k), md(k, n), md(m, n)),
                                  dnnl_util::engine());
  dnnl::matmul prim(pd);
  for (const char* cached : {"1", "0"}) {
    SCOPED_TRACE(std::string("LOOM_DNNL_CACHED_ARGS=") + cached);
    EnvScope env("LOOM_DNNL_CACHED_ARGS", cached);
    nn::PrimitiveArgs args;
    args.add(DNNL_ARG_SRC, md(m, k));
    args.add(DNNL_ARG_WEIGHTS, md(k, n));
    args.add(DNNL_ARG_DST, md(m, n));
    args.add(DNNL_ARG_BIAS, dnnl::memory::desc());  // zero size: declares nothing
    EXPECT_FALSE(args.has(DNNL_ARG_BIAS));
    std::vector<std::vector<float>> x, w, y;
    for (int s = 0; s < 3; ++s) {
      x.push_back(draw(m * k, 10 + s));
      w.push_back(draw(k * n, 20 + s));
      y.emplace_back(m * n, 0.f);
    }
    // Sets 0, 1, 2, 0 again, then 1's data with 2's output: every handle changes alone too.
    const int order[][3] = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {0, 0, 0}, {1, 1, 2}, {1, 0, 2}};
    for (const auto& o : order) {
      std::fill(y[o[2]].begin(), y[o[2]].end(), 0.f);
      args.set(DNNL_ARG_SRC, x[o[0]].data());
      args.set(DNNL_ARG_WEIGHTS, w[o[1]].data());
      args.set(DNNL_ARG_DST, y[o[2]].data());
      args.execute(prim);
      expect_same(y[o[2]], matmul_ref(x[o[0]], w[o[1]], m, k, n),
                  "x" + std::to_string(o[0]) + " w" + std::to_string(o[1]));
    }
    // Every argument must be set before each call: a forgotten one is an error, not the
    // previous call's buffer.
    args.set(DNNL_ARG_SRC, x[0].data());
    args.set(DNNL_ARG_DST, y[0].data());
    EXPECT_THROW(args.execute(prim), Error);
    // A copy has memory objects of its own.
    nn::PrimitiveArgs copy = args;
    for (auto* a : {&args, &copy}) {
      a->set(DNNL_ARG_SRC, x[0].data());
      a->set(DNNL_ARG_WEIGHTS, w[0].data());
    }
    args.set(DNNL_ARG_DST, y[0].data());
    copy.set(DNNL_ARG_DST, y[1].data());
    copy.execute(prim);
    args.execute(prim);
    expect_same(y[0], y[1], "copy");
  }
}

// One kernel instance (as mx.nd calls reuse them) called on new arrays every time, against a
// fresh instance per call.
struct OpCase {
  std::string op;
  Attrs attrs;
  std::vector<Shape> in;
  bool backward;
};

void check_reused_kernel(const OpCase& c, bool is_train) {
  SCOPED_TRACE(c.op + (is_train ? " train" : " inference"));
  ImperativeOp reused(c.op, c.attrs, c.in);
  // Three sets of arrays, then the first again (the same pointers as two calls before).
  std::vector<std::vector<NDArray>> sets;
  for (int s = 0; s < 3; ++s) {
    std::vector<NDArray> in;
    for (size_t i = 0; i < c.in.size(); ++i) in.push_back(array(c.in[i], 100 * s + int(i)));
    sets.push_back(in);
  }
  for (int s : {0, 1, 2, 0, 1}) {
    SCOPED_TRACE("set " + std::to_string(s));
    auto got = reused.forward(sets[s], is_train);
    ImperativeOp fresh(c.op, c.attrs, c.in);
    auto want = fresh.forward(sets[s], is_train);
    expect_same(host(got[0]), host(want[0]), "forward");
    if (!is_train || !c.backward) continue;
    NDArray og = array(got[0].shape(), 7 + s);
    auto grads = [&](ImperativeOp& op, const std::vector<NDArray>& out) {
      std::vector<NDArray> ig;
      for (const auto& s : c.in) ig.emplace_back(s, DType::kFloat32);
      op.backward({og}, sets[s], out, std::vector<Req>(ig.size(), Req::kWrite), ig);
      return ig;
    };
    auto g1 = grads(reused, got), g2 = grads(fresh, want);
    for (size_t i = 0; i < g1.size(); ++i)
      expect_same(host(g1[i]), host(g2[i]), "gradient " + std::to_string(i));
  }
}

TEST(DnnlArgs, ReusedKernelsFollowNewArrays) {
  const std::vector<OpCase> cases = {
      {"Convolution",
       {{"kernel", "(3,3)"}, {"pad", "(1,1)"}, {"num_filter", "8"}},
       {{2, 4, 6, 6}, {8, 4, 3, 3}, {8}},
       true},
      {"Deconvolution",
       {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"num_filter", "3"}, {"no_bias", "False"}},
       {{1, 4, 3, 3}, {4, 3, 2, 2}, {3}},
       true},
      {"FullyConnected", {{"num_hidden", "5"}}, {{3, 12}, {5, 12}, {5}}, true},
      {"Pooling",
       {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "max"}},
       {{2, 3, 4, 4}},
       false},
  };
  for (const char* cached : {"1", "0"}) {
    SCOPED_TRACE(std::string("LOOM_DNNL_CACHED_ARGS=") + cached);
    EnvScope env("LOOM_DNNL_CACHED_ARGS", cached);
    for (const auto& c : cases)
      for (bool train : {false, true}) check_reused_kernel(c, train);
  }
}

// A ResNet-like inference network (fused conv+BN+ReLU, Loom's Winograd, a residual sum,
// global pooling and the classifier) run again and again on new data and new weights,
// including weights that escaped (redone on every call), against fresh executors.
Symbol net() {
  auto conv = [](const Symbol& x, const std::string& name, int f, int k) {
    const std::string kk = "(" + std::to_string(k) + "," + std::to_string(k) + ")";
    const std::string pad = k == 3 ? "(1,1)" : "(0,0)";
    return Symbol::Op("Convolution", {x},
                      {{"kernel", kk}, {"pad", pad}, {"num_filter", std::to_string(f)},
                       {"no_bias", "True"}},
                      name);
  };
  auto bn_relu = [](const Symbol& x, const std::string& name) {
    auto b = Symbol::Op("BatchNorm", {x}, {{"fix_gamma", "False"}}, name + "_bn");
    return Symbol::Op("Activation", {b}, {{"act_type", "relu"}}, name + "_relu");
  };
  auto x = bn_relu(conv(Symbol::Variable("data"), "stem", 16, 3), "stem");
  auto b = bn_relu(conv(x, "c1", 16, 3), "c1");
  b = Symbol::Op("BatchNorm", {conv(b, "c2", 16, 3)}, {{"fix_gamma", "False"}}, "c2_bn");
  auto y = Symbol::Op("Activation", {Symbol::Op("elemwise_add", {b, x}, {}, "plus")},
                      {{"act_type", "relu"}}, "out_relu");
  y = bn_relu(conv(y, "c3", 32, 1), "c3");
  auto p = Symbol::Op("Pooling", {y},
                      {{"kernel", "(1,1)"}, {"global_pool", "True"}, {"pool_type", "avg"}},
                      "pool");
  return Symbol::Op("FullyConnected", {Symbol::Op("Flatten", {p}, {}, "flat")},
                    {{"num_hidden", "10"}}, "fc");
}

using Values = std::map<std::string, std::vector<float>>;

Values values(const Executor& ex, int seed) {
  Values v;
  int i = 0;
  for (const auto& [name, a] : ex.arg_dict()) v[name] = draw(static_cast<size_t>(a.size()), seed + i++);
  for (const auto& [name, a] : ex.aux_dict()) {
    v[name] = draw(static_cast<size_t>(a.size()), seed + i++);
    if (name.find("var") != std::string::npos)
      for (auto& x : v[name]) x = 1.f + 0.5f * x;
  }
  return v;
}
void load(Executor& ex, const Values& v) {
  for (const auto& [name, a] : ex.arg_dict()) a.copy_from_host(v.at(name).data(), a.nbytes());
  for (const auto& [name, a] : ex.aux_dict()) a.copy_from_host(v.at(name).data(), a.nbytes());
}

TEST(DnnlArgs, ReusedExecutorMatchesFreshOnes) {
  EnvScope wino("LOOM_CONV_OWN_WINOGRAD", "1");
  const std::map<std::string, Shape> shapes{{"data", Shape{1, 16, 16, 16}}};
  BindOptions opt;
  opt.default_req = Req::kNull;  // inference: post-op chains form
  auto ex = Executor::simple_bind(net(), shapes, opt);
  EXPECT_GT(ex->fused_affine_pairs(), 0u);
  EXPECT_EQ(ex->fused_sum_pairs(), 1u);
  auto fresh_output = [&](const Values& v) {
    auto f = Executor::simple_bind(net(), shapes, opt);
    load(*f, v);
    f->forward(false);
    return host(f->outputs()[0]);
  };
  std::vector<Values> sets{values(*ex, 1), values(*ex, 50), values(*ex, 99)};
  for (int s : {0, 1, 2, 0}) {
    load(*ex, sets[s]);
    ex->forward(false);
    expect_same(host(ex->outputs()[0]), fresh_output(sets[s]), "set " + std::to_string(s));
  }
  // Escaped weights are reordered and scaled on every call (into a new buffer each time).
  float* w = ex->arg_dict().at("c1_weight").data<float>();
  for (int s : {1, 2}) {
    load(*ex, sets[s]);
    w[0] += 0.5f;
    Values v = sets[s];
    v["c1_weight"][0] += 0.5f;
    ex->forward(false);
    expect_same(host(ex->outputs()[0]), fresh_output(v), "escaped, set " + std::to_string(s));
  }
  // Fresh memory objects on every call give the same outputs.
  load(*ex, sets[0]);
  ex->forward(false);
  auto cached = host(ex->outputs()[0]);
  EnvScope off("LOOM_DNNL_CACHED_ARGS", "0");
  expect_same(cached, fresh_output(sets[0]), "LOOM_DNNL_CACHED_ARGS=0");
}

// Chunked Winograd runs its matmul on several threads at once, each with its own arguments.
TEST(DnnlArgs, ChunkedWinogradOnTwoThreads) {
  const int prev = omp_get_max_threads();
  omp_set_num_threads(2);
  const int block = dnnl_util::preferred_channel_block() == 8 ? 8 : 16;
  nn::WinogradShape s{2, 16, 12, 12, 16, 12, 12, 1, 1, block};
  nn::WinogradConv reused(s, /*chunk_tiles=*/4);
  NDArray w = array(Shape{s.k, s.c, 3, 3}, 3);
  std::vector<float> ws(reused.workspace_bytes() / sizeof(float) + 16);
  std::vector<std::vector<float>> src;
  for (int i = 0; i < 2; ++i) src.push_back(draw(s.n * s.c * s.h * s.w, 30 + i));
  for (int i : {0, 1, 0}) {
    std::vector<float> got(s.n * s.k * s.oh * s.ow), want(got.size());
    reused.forward(src[i].data(), w, {}, nullptr, got.data(), false, FusedActivation{}, ws.data());
    nn::WinogradConv fresh(s, 4);
    std::vector<float> ws2(fresh.workspace_bytes() / sizeof(float) + 16);
    fresh.forward(src[i].data(), w, {}, nullptr, want.data(), false, FusedActivation{}, ws2.data());
    expect_same(got, want, "source " + std::to_string(i));
  }
  omp_set_num_threads(prev);
}

}  // namespace
}  // namespace loom
