// Pooling's backward on blocked layouts (the vectorised per-channel-block loop) against a
// naive per-plane reference, with many ties: values from {0, 1, 2}, so most max windows
// hold several maximal cells and the gradient must go to the first one in scan order (h,
// then w), as MXNet sends it. A 1x1 identity convolution before the pooling makes the
// pooling's input (and so its gradient) blocked; its backward passes the gradient through
// exactly. grad_req write, and add over two passes.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "runtime/executor.h"

namespace loom {
namespace {

struct PoolBwdCase {
  std::string type;  // max / avg / sum
  int k, s, p;
  std::string convention = "valid";
};

// Gradient of the pooling input for head gradient `gy`, one (n, c) plane at a time.
std::vector<float> pool_bwd_reference(const PoolBwdCase& c, const std::vector<float>& x,
                                      const std::vector<float>& gy, int planes, int h, int w,
                                      int oh, int ow) {
  std::vector<float> gx(x.size(), 0.f);
  for (int pl = 0; pl < planes; ++pl) {
    const float* xp = x.data() + static_cast<size_t>(pl) * h * w;
    float* gp = gx.data() + static_cast<size_t>(pl) * h * w;
    for (int i = 0; i < oh; ++i)
      for (int j = 0; j < ow; ++j) {
        const float g = gy[(static_cast<size_t>(pl) * oh + i) * ow + j];
        const int h0 = i * c.s - c.p, w0 = j * c.s - c.p;
        const int h1 = std::min(h0 + c.k, h + c.p), w1 = std::min(w0 + c.k, w + c.p);
        const float pad_count = static_cast<float>((h1 - h0) * (w1 - w0));
        const int hs = std::max(h0, 0), ws = std::max(w0, 0), he = std::min(h1, h),
                  we = std::min(w1, w);
        if (hs >= he || ws >= we) continue;
        if (c.type == "max") {
          int best = hs * w + ws;
          for (int a = hs; a < he; ++a)
            for (int b = ws; b < we; ++b)
              if (xp[a * w + b] > xp[best]) best = a * w + b;
          gp[best] += g;
          continue;
        }
        const float div = c.type == "avg" ? pad_count : 1.f;  // count_include_pad default
        for (int a = hs; a < he; ++a)
          for (int b = ws; b < we; ++b) gp[a * w + b] += g / div;
      }
  }
  return gx;
}

void check_pool_backward(const PoolBwdCase& c, int n, int ch, int h, int w) {
  auto data = Symbol::Variable("data");
  auto conv = Symbol::Op("Convolution", {data},
                         {{"kernel", "(1,1)"}, {"num_filter", std::to_string(ch)}, {"no_bias", "True"}},
                         "ident");
  std::string kk = "(" + std::to_string(c.k) + "," + std::to_string(c.k) + ")";
  std::string ss = "(" + std::to_string(c.s) + "," + std::to_string(c.s) + ")";
  std::string pp = "(" + std::to_string(c.p) + "," + std::to_string(c.p) + ")";
  auto pool = Symbol::Op("Pooling", {conv},
                         {{"kernel", kk}, {"stride", ss}, {"pad", pp}, {"pool_type", c.type},
                          {"pooling_convention", c.convention}},
                         "pool");
  for (Req req : {Req::kWrite, Req::kAdd}) {
    BindOptions opts;
    opts.default_req = req;
    opts.grad_req["ident_weight"] = Req::kNull;
    auto ex = Executor::simple_bind(pool, {{"data", Shape{n, ch, h, w}}}, opts);
    std::mt19937 rng(11);
    std::uniform_int_distribution<int> three(0, 2);
    NDArray x = ex->arg_dict().at("data"), wt = ex->arg_dict().at("ident_weight");
    for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = static_cast<float>(three(rng));
    std::fill(wt.data<float>(), wt.data<float>() + wt.size(), 0.f);
    for (int i = 0; i < ch; ++i) wt.data<float>()[i * ch + i] = 1.f;
    const Shape os = ex->outputs()[0].shape();
    NDArray gy = NDArray::zeros(os);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (int64_t i = 0; i < gy.size(); ++i) gy.data<float>()[i] = u(rng);
    const int passes = req == Req::kAdd ? 2 : 1;
    for (int s = 0; s < passes; ++s) {
      ex->forward(true);
      ex->backward({gy});
    }
    std::vector<float> xv(x.data<float>(), x.data<float>() + x.size());
    std::vector<float> gv(gy.data<float>(), gy.data<float>() + gy.size());
    auto ref = pool_bwd_reference(c, xv, gv, n * ch, h, w, static_cast<int>(os[2]),
                                  static_cast<int>(os[3]));
    const NDArray gx = ex->grad_dict().at("data");
    ASSERT_EQ(static_cast<size_t>(gx.size()), ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(gx.data<float>()[i], passes * ref[i], 1e-6f + 1e-6f * std::abs(ref[i]))
          << c.type << " k" << c.k << " s" << c.s << " p" << c.p << " " << c.convention
          << " req " << (req == Req::kAdd ? "add" : "write") << " element " << i;
  }
}

TEST(PoolBackward, BlockedMaxSendsGradientToFirstMaximum) {
  check_pool_backward({"max", 3, 2, 1}, 2, 32, 11, 9);
  check_pool_backward({"max", 2, 2, 0}, 1, 48, 8, 8);
  check_pool_backward({"max", 3, 1, 1}, 1, 16, 7, 6);
  check_pool_backward({"max", 3, 2, 0, "full"}, 1, 32, 10, 10);
}

TEST(PoolBackward, BlockedAvgAndSumShareEachWindow) {
  check_pool_backward({"avg", 3, 2, 1}, 2, 32, 9, 11);
  check_pool_backward({"avg", 2, 2, 0}, 1, 16, 8, 6);
  check_pool_backward({"sum", 3, 2, 1}, 1, 32, 7, 7);
}

}  // namespace
}  // namespace loom
