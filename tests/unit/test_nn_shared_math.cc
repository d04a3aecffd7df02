// The per-window and per-channel arithmetic the nn ops' CPU and GPU kernels share
// (ops/nn/pool_window.h, lrn_math.h, batch_norm_math.h, conv_params.h), against naive
// loops, closed forms and numeric gradients. The GPU kernels run this code per thread; the
// op sweep checks the CPU kernels that call it end to end.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "ops/nn/batch_norm_math.h"
#include "ops/nn/conv_params.h"
#include "ops/nn/legacy_v1_math.h"
#include "ops/nn/lrn_math.h"
#include "ops/nn/pool_window.h"

namespace loom {
namespace {

// MXNet's window rule written out cell by cell: the window of output o covers padded
// positions o*s - p + [0, k) that lie before the padded border in + p; the real ones are
// those inside [0, in).
struct NaiveWindow {
  int64_t lo = 0, hi = 0, padded = 0, valid = 0;
};
NaiveWindow naive_window(int64_t o, int64_t k, int64_t s, int64_t p, int64_t in) {
  NaiveWindow w;
  int64_t first = -1, last = -1;
  for (int64_t t = o * s - p; t < o * s - p + k; ++t) {
    if (t >= in + p) continue;
    ++w.padded;
    if (t >= 0 && t < in) {
      ++w.valid;
      if (first < 0) first = t;
      last = t;
    }
  }
  if (first >= 0) w.lo = first, w.hi = last + 1;
  return w;
}

TEST(NnSharedMath, PoolWindowMatchesNaiveCells) {
  int cases = 0;
  for (int64_t in = 1; in <= 7; ++in)
    for (int64_t k = 1; k <= 4; ++k)
      for (int64_t s = 1; s <= 3; ++s)
        for (int64_t p = 0; p < k; ++p)
          for (bool full : {false, true}) {
            const int64_t span = in + 2 * p - k;
            if (span < 0) continue;
            const int64_t out = 1 + (full ? (span + s - 1) / s : span / s);
            nn::PoolGeometry g{{1, 1, in}, {1, 1, out}, {1, 1, k}, {1, 1, s}, {0, 0, p}, 1};
            for (int64_t o = 0; o < out; ++o) {
              const NaiveWindow w = naive_window(o, k, s, p, in);
              for (bool include_pad : {false, true}) {
                int64_t pos[3] = {0, 0, o}, lo[3], hi[3];
                const float div = g.clipped(pos, nn::PoolKind::kAvg, include_pad, lo, hi);
                EXPECT_EQ(div, static_cast<float>(include_pad ? w.padded : w.valid))
                    << "in " << in << " k " << k << " s " << s << " p " << p << " o " << o;
                if (w.valid > 0) {
                  EXPECT_EQ(lo[2], w.lo);
                  EXPECT_EQ(hi[2], w.hi);
                } else {
                  EXPECT_LE(hi[2], lo[2]);  // no real cell: the loops run zero times
                }
                EXPECT_EQ(g.clipped(pos, nn::PoolKind::kSum, include_pad, lo, hi), 1.f);
                ++cases;
              }
            }
          }
  EXPECT_GT(cases, 1000);
}

TEST(NnSharedMath, PoolWindowDivisorIsProductOverDims) {
  // 3-D: the padded and real sizes multiply across dims.
  nn::PoolGeometry g{{3, 4, 5}, {2, 2, 3}, {2, 3, 3}, {2, 2, 2}, {1, 1, 1}, 1};
  int64_t pos[3] = {1, 0, 2}, lo[3], hi[3];
  const NaiveWindow a = naive_window(1, 2, 2, 1, 3), b = naive_window(0, 3, 2, 1, 4),
                    c = naive_window(2, 3, 2, 1, 5);
  EXPECT_EQ(g.clipped(pos, nn::PoolKind::kAvg, true, lo, hi),
            static_cast<float>(a.padded * b.padded * c.padded));
  EXPECT_EQ(g.clipped(pos, nn::PoolKind::kAvg, false, lo, hi),
            static_cast<float>(a.valid * b.valid * c.valid));
  EXPECT_EQ(lo[0], a.lo);
  EXPECT_EQ(hi[1], b.hi);
  EXPECT_EQ(lo[2], c.lo);
}

TEST(NnSharedMath, PoolResultRules) {
  using nn::PoolKind;
  EXPECT_EQ(nn::pool_result(PoolKind::kMax, -FLT_MAX, false, 4.f), -FLT_MAX);
  EXPECT_EQ(nn::pool_result(PoolKind::kAvg, 0.f, false, 4.f), 0.f);
  EXPECT_EQ(nn::pool_result(PoolKind::kSum, 0.f, false, 1.f), 0.f);
  EXPECT_EQ(nn::pool_result(PoolKind::kAvg, 6.f, true, 4.f), 1.5f);
  EXPECT_EQ(nn::pool_result(PoolKind::kSum, 6.f, true, 1.f), 6.f);
  EXPECT_EQ(nn::pool_result(PoolKind::kMax, 2.5f, true, 9.f), 2.5f);
}

// y_c = x_c · (k + α/n · Σ_window x²)^(−β), written directly in double.
double lrn_naive(const std::vector<double>& x, int64_t c, int nsize, double alpha, double beta,
                 double knorm) {
  const int64_t C = static_cast<int64_t>(x.size()), half = nsize / 2;
  double sq = 0;
  for (int64_t k = std::max<int64_t>(0, c - half); k <= std::min(C - 1, c + half); ++k)
    sq += x[static_cast<size_t>(k)] * x[static_cast<size_t>(k)];
  return x[static_cast<size_t>(c)] * std::pow(knorm + alpha / nsize * sq, -beta);
}

TEST(NnSharedMath, LrnOutputAndGradientAgainstNaiveAndNumeric) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  const int64_t C = 7;
  for (int nsize : {1, 3, 4, 5}) {
    const float alpha = 0.3f, beta = 0.75f, knorm = 1.5f;
    const nn::LRNMath m = nn::LRNMath::make(C, 1, nsize, alpha, beta, knorm);
    std::vector<float> x(C), g(C), n(C);
    for (auto& v : x) v = nd(rng);
    for (auto& v : g) v = nd(rng);
    std::vector<double> xd(x.begin(), x.end());
    for (int64_t c = 0; c < C; ++c) {
      n[static_cast<size_t>(c)] = m.norm(x.data(), 0, c);
      EXPECT_NEAR(m.output(x[static_cast<size_t>(c)], n[static_cast<size_t>(c)]),
                  lrn_naive(xd, c, nsize, alpha, beta, knorm), 1e-5);
    }
    for (int64_t c = 0; c < C; ++c) {  // d(Σ g·y)/dx_c by central differences
      auto loss = [&](double h) {
        std::vector<double> xp = xd;
        xp[static_cast<size_t>(c)] += h;
        double l = 0;
        for (int64_t j = 0; j < C; ++j)
          l += g[static_cast<size_t>(j)] * lrn_naive(xp, j, nsize, alpha, beta, knorm);
        return l;
      };
      const double num = (loss(1e-5) - loss(-1e-5)) / 2e-5;
      EXPECT_NEAR(m.grad(g.data(), x.data(), n.data(), 0, c), num, 1e-4) << "nsize " << nsize;
    }
  }
}

TEST(NnSharedMath, BatchNormChannelMath) {
  // Moving average with MXNet's convention, and the variance recovered from the inverse std.
  EXPECT_FLOAT_EQ(nn::bn_moving(2.f, 4.0, 0.9f), 2.f * 0.9f + 4.f * 0.1f);
  EXPECT_NEAR(nn::bn_var_from_invstd(nn::bn_invstd(0.37, 1e-3), 1e-3), 0.37, 1e-12);
  EXPECT_DOUBLE_EQ(nn::bn_invstd(3.0, 1.0), 0.5);
  float sc, sh;
  nn::bn_scale_shift(0.5f, 2.f, 3.f, 1.f, false, &sc, &sh);
  EXPECT_EQ(sc, 1.5f);
  EXPECT_EQ(sh, 1.f - 2.f * 1.5f);
  nn::bn_scale_shift(0.5f, 2.f, 3.f, 1.f, true, &sc, &sh);  // fix_gamma: gamma taken as 1
  EXPECT_EQ(sc, 0.5f);

  // Training gradient of Σ g·y, y = γ(x − μ)/√(σ² + ε) + β with batch μ, σ², numerically.
  std::mt19937 rng(3);
  std::normal_distribution<double> nd;
  const int m = 6;
  const double gamma = 1.7, eps = 1e-3;
  std::vector<double> x(m), g(m);
  for (auto& v : x) v = nd(rng);
  for (auto& v : g) v = nd(rng);
  auto loss = [&](const std::vector<double>& xs) {
    double mu = 0, var = 0;
    for (double v : xs) mu += v / m;
    for (double v : xs) var += (v - mu) * (v - mu) / m;
    double l = 0;
    for (int i = 0; i < m; ++i) l += g[i] * gamma * (xs[i] - mu) / std::sqrt(var + eps);
    return l;
  };
  double mu = 0, var = 0;
  for (double v : x) mu += v / m;
  for (double v : x) var += (v - mu) * (v - mu) / m;
  const double is = nn::bn_invstd(var, eps);
  double sg = 0, sgx = 0;
  for (int i = 0; i < m; ++i) sg += g[i], sgx += g[i] * (x[i] - mu) * is;
  for (int j = 0; j < m; ++j) {
    std::vector<double> xp = x, xm = x;
    xp[j] += 1e-6;
    xm[j] -= 1e-6;
    const double num = (loss(xp) - loss(xm)) / 2e-6;
    const float got =
        nn::bn_dx_train(static_cast<float>(g[j]), static_cast<float>(x[j]), static_cast<float>(mu),
                        static_cast<float>(is), static_cast<float>(sg / m),
                        static_cast<float>(sgx / m), static_cast<float>(gamma * is));
    EXPECT_NEAR(got, num, 1e-4 * (1 + std::fabs(num)));
  }
}

TEST(NnSharedMath, DeconvPadsFollowMXNetInferPad) {
  nn::DeconvParam p{};
  p.kernel = Shape{4, 3};
  p.stride = Shape{2, 1};
  p.dilate = Shape{1, 1};
  p.pad = Shape{1, 0};
  p.adj = Shape{1, 0};
  p.target_shape = Shape{0, 0};
  std::vector<int64_t> l, r;
  nn::deconv_pads(p, Shape{1, 2, 5, 6}, l, r);
  EXPECT_EQ(l, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(r, (std::vector<int64_t>{0, 0}));  // pad - adj
  // target (11, 9): totals 2*(5-1)+4-11 = 1 and 1*(6-1)+3-9 = -1 < 0 (too big) -> error.
  p.target_shape = Shape{11, 9};
  EXPECT_THROW(nn::deconv_pads(p, Shape{1, 2, 5, 6}, l, r), ShapeError);
  p.target_shape = Shape{11, 7};  // totals 1 and 1: adj 1, pad 1 -> right pad 0
  nn::deconv_pads(p, Shape{1, 2, 5, 6}, l, r);
  EXPECT_EQ(l, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(r, (std::vector<int64_t>{0, 0}));
  // The output length full - pad_l - pad_r is the target.
  EXPECT_EQ(nn::deconv_full_length(p, 0, 5) - l[0] - r[0], 11);
  EXPECT_EQ(nn::deconv_full_length(p, 1, 6) - l[1] - r[1], 7);
}

// Pooling_v1 over an explicitly zero-padded plane: window (i, j) covers padded rows
// [i·sh, i·sh + kh) inside the padded extent; max takes the padding zeros into account.
TEST(NnSharedMath, PoolV1WindowAgainstPaddedPlane) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  const int64_t h = 5, w = 6;
  std::vector<float> x(h * w);
  for (auto& v : x) v = nd(rng) - 1.f;  // mostly negative: the padding's zeros matter
  for (int type = 0; type < 3; ++type)
    for (int64_t k = 1; k <= 3; ++k)
      for (int64_t s = 1; s <= 2; ++s)
        for (int64_t p = 0; p < k; ++p) {
          nn::PoolV1Window g{
              k, k + 1, s, s,    p,
              p, h,     w, type, type == 2 ? 1.f / static_cast<float>(k * (k + 1)) : 1.f};
          const int64_t ph = h + 2 * p, pw = w + 2 * p;
          std::vector<float> padded(static_cast<size_t>(ph * pw), 0.f);
          for (int64_t r = 0; r < h; ++r)
            for (int64_t q = 0; q < w; ++q) padded[(r + p) * pw + q + p] = x[r * w + q];
          const int64_t oh = (ph - k + s - 1) / s + 1, ow = (pw - k - 1 + s - 1) / s + 1;  // full
          for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j) {
              float mx = -INFINITY, sum = 0;
              for (int64_t r = i * s; r < std::min(i * s + k, ph); ++r)
                for (int64_t q = j * s; q < std::min(j * s + k + 1, pw); ++q) {
                  mx = std::max(mx, padded[r * pw + q]);
                  sum += padded[r * pw + q];
                }
              const float want = type == 0 ? mx : sum * g.scale;
              EXPECT_NEAR(g.pooled(x.data(), i, j), want, 1e-5)
                  << "type " << type << " k " << k << " s " << s << " p " << p;
            }
        }
}

TEST(NnSharedMath, BatchNormV1ChannelMath) {
  EXPECT_DOUBLE_EQ(nn::bnv1_inv(3.0, 1.f), 0.5);
  EXPECT_FLOAT_EQ(nn::bnv1_output(3.f, 1.0, 0.5, 2.0, 0.25), 2.25f);
  EXPECT_FLOAT_EQ(nn::bnv1_moving(2.f, 4.0, 0.75f), 2.5f);
  // The training gradient formula equals the BatchNorm one written with x̂.
  const double mu = 0.3, inv = 1.7, g = 1.2, m = 5, sdy = 0.8, sdyx = -0.4;
  const double got = nn::bnv1_dx_train(0.5f, 1.1f, mu, g * inv, sdy / m, sdyx * inv * inv / m);
  const double xhat = (1.1f - mu) * inv;
  EXPECT_NEAR(got, g * inv * (0.5f - sdy / m - xhat * (sdyx * inv / m)), 1e-12);
}

}  // namespace
}  // namespace loom
