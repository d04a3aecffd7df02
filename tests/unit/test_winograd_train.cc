// Loom's own Winograd F(4x4, 3x3) in training (LOOM_CONV_OWN_WINOGRAD_TRAIN): the forward,
// the data gradient and the weight gradient (F(3x3, 4x4)) of a 3x3 stride-1 layer, between two 1x1 layers so that its data,
// output and both gradients are channel-blocked. Checked against oneDNN's direct
// convolution (the switch off) for outputs and every gradient, with grad_req write and add
// over two passes, for pads 0-2 and odd map sizes; and the whole chain's data gradient
// against central differences of its loss with the switch forced on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu/dnnl_util.h"
#include "runtime/executor.h"

namespace loom {
namespace {

struct WtCase {
  int n, c, k, h, w, pad;
};

Symbol wt_chain(const WtCase& t) {
  auto conv = [](const Symbol& x, const std::string& name, int k, int filters, int pad) {
    std::string kk = "(" + std::to_string(k) + "," + std::to_string(k) + ")";
    std::string pp = "(" + std::to_string(pad) + "," + std::to_string(pad) + ")";
    return Symbol::Op("Convolution", {x},
                      {{"kernel", kk}, {"pad", pp}, {"num_filter", std::to_string(filters)}}, name);
  };
  auto x = conv(Symbol::Variable("data"), "pre", 1, t.c, 0);
  x = conv(x, "mid", 3, t.k, t.pad);
  x = conv(x, "post", 1, 8, 0);
  return Symbol::Op("MakeLoss", {Symbol::Op("sum", {Symbol::Op("square", {x}, {}, "sq")}, {}, "s")},
                    {}, "loss");
}

struct WtRun {
  std::vector<std::vector<float>> outs, grads;
  bool own = false;    // the layer reported Loom's training Winograd
  bool wgrad = false;  // ... with its weight gradient
};

std::unique_ptr<Executor> wt_bind(const Symbol& sym, const WtCase& t, const char* mode, Req req) {
  setenv("LOOM_CONV_OWN_WINOGRAD_TRAIN", mode, 1);
  BindOptions opts;
  opts.default_req = req;
  auto ex = Executor::simple_bind(sym, {{"data", Shape{t.n, 3, t.h, t.w}}}, opts);
  unsetenv("LOOM_CONV_OWN_WINOGRAD_TRAIN");
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (auto& [name, a] : ex->arg_dict())
    for (int64_t i = 0; i < a.size(); ++i) a.data<float>()[i] = u(rng);
  return ex;
}

WtRun wt_run(const Symbol& sym, const WtCase& t, const char* mode, Req req) {
  const uint64_t mark = dnnl_util::recorded_impl_count();
  auto ex = wt_bind(sym, t, mode, req);
  WtRun r;
  for (const auto& line : dnnl_util::recorded_impls_since(mark))
    if (line.find("training fwd+bwd_data") != std::string::npos)
      r.own = true, r.wgrad = r.wgrad || line.find("+wgrad") != std::string::npos;
  const int passes = req == Req::kAdd ? 2 : 1;
  for (int p = 0; p < passes; ++p) {
    ex->forward(true);
    ex->backward();
  }
  for (const auto& o : ex->outputs())
    r.outs.emplace_back(o.data<float>(), o.data<float>() + o.size());
  for (const auto& g : ex->grad_arrays())
    if (!g.is_none()) r.grads.emplace_back(g.data<float>(), g.data<float>() + g.size());
  return r;
}

void wt_expect_close(const std::vector<std::vector<float>>& a,
                     const std::vector<std::vector<float>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t k = 0; k < a.size(); ++k) {
    ASSERT_EQ(a[k].size(), b[k].size()) << what << " " << k;
    double scale = 0;
    for (float v : b[k]) scale = std::max(scale, static_cast<double>(std::abs(v)));
    for (size_t i = 0; i < a[k].size(); ++i)
      ASSERT_NEAR(a[k][i], b[k][i], 2e-5 * scale + 1e-5) << what << " array " << k << " element " << i;
  }
}

TEST(WinogradTrain, MatchesDirectConvolution) {
  const int block = dnnl_util::preferred_channel_block();
  const std::vector<WtCase> cases = {{2, 16, 32, 9, 7, 1}, {1, 32, 16, 8, 8, 0},
                                     {3, 16, 16, 6, 10, 2}, {1, 48, 32, 13, 5, 1}};
  for (const auto& t : cases) {
    if (t.c % block || t.k % block) continue;
    Symbol sym = wt_chain(t);
    for (Req req : {Req::kWrite, Req::kAdd}) {
      WtRun own = wt_run(sym, t, "1", req), direct = wt_run(sym, t, "0", req);
      const std::string what = "n" + std::to_string(t.n) + " c" + std::to_string(t.c) + " k" +
                               std::to_string(t.k) + " " + std::to_string(t.h) + "x" +
                               std::to_string(t.w) + " pad " + std::to_string(t.pad) +
                               (req == Req::kAdd ? " add" : " write");
      ASSERT_TRUE(own.own && own.wgrad) << "own Winograd not chosen: " << what;
      ASSERT_FALSE(direct.own) << what;
      wt_expect_close(own.outs, direct.outs, "loss " + what);
      wt_expect_close(own.grads, direct.grads, "gradients " + what);
    }
  }
}

TEST(WinogradTrain, DataGradientMatchesCentralDifferences) {
  const WtCase t{1, 16, 16, 6, 5, 1};
  Symbol sym = wt_chain(t);
  auto ex = wt_bind(sym, t, "1", Req::kWrite);
  ex->forward(true);
  ex->backward();
  NDArray x = ex->arg_dict().at("data");
  const NDArray g = ex->grad_dict().at("data");
  std::vector<float> analytic(g.data<float>(), g.data<float>() + g.size());
  auto loss = [&] {
    ex->forward(true);
    return static_cast<double>(ex->outputs()[0].data<float>()[0]);
  };
  const float eps = 1e-2f;
  for (int64_t i = 0; i < x.size(); i += 7) {
    float* p = x.data<float>() + i;
    const float keep = *p;
    *p = keep + eps;
    const double up = loss();
    *p = keep - eps;
    const double down = loss();
    *p = keep;
    const double numeric = (up - down) / (2.0 * eps);
    EXPECT_NEAR(analytic[static_cast<size_t>(i)], numeric, 2e-3 * std::abs(numeric) + 2e-3)
        << "element " << i;
  }
}

}  // namespace
}  // namespace loom
