// The row and group pieces that the cooperative GPU launches run (softmax family, SoftmaxOutput,
// softmax_cross_entropy, the group norms, L2Normalization, moments: ops/nn/softmax_common.h,
// ops/loss/softmax_output.h, ops/loss/sce_svm_math.h, ops/nn/group_norm_math.h,
// l2_normalization_math.h, moments_math.h, BatchNorm's chunks of batch_norm_math.h), composed on
// the host in the GPU's order — each of W lanes reduces the entries lane, lane + W, ..., then the
// lanes combine as warp shuffles do (butterfly within 32, then the warps in order) — against the
// whole-row functions the CPU kernels run (equal within float rounding) and against naive
// long-double references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "ops/loss/sce_svm_math.h"
#include "ops/loss/softmax_output.h"
#include "ops/nn/batch_norm_math.h"
#include "ops/nn/group_norm_math.h"
#include "ops/nn/l2_normalization_math.h"
#include "ops/nn/moments_math.h"
#include "ops/nn/row_launch.h"
#include "ops/nn/softmax_common.h"

namespace loom {
namespace {

// The reduction of lanes[0..W) as the GPU's team does it: a butterfly inside each warp of 32
// (warp_reduce), then warp results combined in order (block_reduce); W = 32 is one warp.
template <class T, class Op>
T team_reduce(std::vector<T> v, Op op) {
  const size_t w = v.size();
  for (size_t base = 0; base < w; base += 32) {
    for (size_t o = 16; o > 0; o >>= 1) {
      std::vector<T> next(v.begin() + base, v.begin() + base + 32);
      for (size_t l = 0; l < 32; ++l) next[l] = op(v[base + l], v[base + (l ^ o)]);
      std::copy(next.begin(), next.end(), v.begin() + base);
    }
  }
  T r = v[0];
  for (size_t base = 32; base < w; base += 32) r = op(r, v[base]);
  return r;
}
template <class T>
T team_max(const std::vector<T>& v) {
  return team_reduce(v, [](T a, T b) { return b > a ? b : a; });
}
template <class T>
T team_sum(const std::vector<T>& v) {
  return team_reduce(v, [](T a, T b) { return a + b; });
}

bool close(double a, double b, double rel) { return std::fabs(a - b) <= rel * (1 + std::fabs(b)); }

std::vector<float> random_row(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = nd(rng);
  return v;
}

// Softmax forward in the team's order over a row of n_all entries spaced `stride`, the first
// m taking part (softmax.cu's softmax_fwd_team).
void team_softmax_forward(const float* x, float* y, int64_t n_all, int64_t m, int64_t stride,
                          float inv_t, bool log, bool add, int w) {
  for (int64_t i = m; i < n_all; ++i) nn::sm_st(y, i * stride, 0.f, add);
  if (m <= 0) return;
  std::vector<float> mx(static_cast<size_t>(w), -INFINITY);
  for (int64_t i = 0; i < m; ++i)
    mx[static_cast<size_t>(i % w)] = nn::softmax_max_step(mx[i % w], x[i * stride]);
  const float rmx = team_max(mx);
  std::vector<double> sum(static_cast<size_t>(w), 0.0);
  for (int64_t i = 0; i < m; ++i) sum[i % w] += nn::softmax_exp_term(x[i * stride], rmx, inv_t);
  const auto norm = nn::softmax_row_norm(rmx, team_sum(sum));
  for (int64_t i = 0; i < m; ++i)
    nn::sm_st(y, i * stride, nn::softmax_value(x[i * stride], norm, inv_t, log), add);
}

void team_softmax_backward(const float* g, const float* y, float* dx, int64_t n_all, int64_t m,
                           int64_t stride, float inv_t, bool log, bool add, int w) {
  for (int64_t i = m; i < n_all; ++i) nn::sm_st(dx, i * stride, 0.f, add);
  std::vector<double> dot(static_cast<size_t>(w), 0.0);
  for (int64_t i = 0; i < m; ++i)
    dot[i % w] += nn::softmax_dot_term(g[i * stride], y[i * stride], log);
  const float d = static_cast<float>(team_sum(dot));
  for (int64_t i = 0; i < m; ++i) {
    const int64_t k = i * stride;
    nn::sm_st(dx, k, nn::softmax_grad_value(g[k], y[k], d, inv_t, log), add);
  }
}

TEST(NnRowPieces, SoftmaxTeamMatchesRowFunctionsAndNaive) {
  std::mt19937 rng(7);
  int cases = 0;
  for (int64_t n : {1, 5, 31, 32, 33, 100, 1024, 1500})
    for (int64_t stride : {1, 3})
      for (int64_t m : {n, (n + 1) / 2, int64_t(0)})
        for (float t : {1.f, 0.5f, 2.5f})
          for (bool log : {false, true})
            for (bool add : {false, true})
              for (int w : {32, 256}) {
                const std::vector<float> x = random_row(rng, n * stride, 3.f);
                const std::vector<float> g = random_row(rng, n * stride, 1.f);
                const std::vector<float> old = random_row(rng, n * stride, 1.f);
                std::vector<float> y_row = old, y_team = old;
                const float inv_t = 1.f / t;
                nn::softmax_row_forward(x.data(), y_row.data(), n, m, stride, inv_t, log, add);
                team_softmax_forward(x.data(), y_team.data(), n, m, stride, inv_t, log, add, w);
                // The naive reference: long double throughout.
                long double mx = -INFINITY, s = 0;
                for (int64_t i = 0; i < m; ++i) mx = std::max<long double>(mx, x[i * stride]);
                for (int64_t i = 0; i < m; ++i) s += std::exp((x[i * stride] - mx) / t);
                for (int64_t i = 0; i < n; ++i) {
                  const size_t k = static_cast<size_t>(i * stride);
                  const long double z = (x[k] - mx) / t;
                  const double want =
                      (add ? old[k] : 0.0) +
                      (i >= m ? 0.0 : double(log ? z - std::log(s) : std::exp(z) / s));
                  ASSERT_TRUE(close(y_team[k], y_row[k], 2e-6))
                      << "n " << n << " i " << i << " " << y_team[k] << " vs " << y_row[k];
                  ASSERT_TRUE(close(y_team[k], want, 2e-5)) << y_team[k] << " vs " << want;
                }
                // Backward from the forward output (without add, so y is the softmax).
                std::vector<float> y(static_cast<size_t>(n * stride));
                nn::softmax_row_forward(x.data(), y.data(), n, m, stride, inv_t, log, false);
                std::vector<float> d_row = old, d_team = old;
                nn::softmax_row_backward(g.data(), y.data(), d_row.data(), n, m, stride, inv_t, log,
                                         add);
                team_softmax_backward(g.data(), y.data(), d_team.data(), n, m, stride, inv_t, log,
                                      add, w);
                long double dot = 0;
                for (int64_t i = 0; i < m; ++i)
                  dot += log ? g[i * stride] : (long double)g[i * stride] * y[i * stride];
                for (int64_t i = 0; i < n; ++i) {
                  const size_t k = static_cast<size_t>(i * stride);
                  const long double r = i >= m ? 0
                                        : log  ? (g[k] - std::exp((long double)y[k]) * dot) / t
                                               : y[k] * (g[k] - dot) / t;
                  const double want = (add ? old[k] : 0.0) + double(r);
                  ASSERT_TRUE(close(d_team[k], d_row[k], 2e-6)) << d_team[k] << " vs " << d_row[k];
                  ASSERT_TRUE(close(d_team[k], want, 2e-5)) << d_team[k] << " vs " << want;
                }
                ++cases;
              }
  EXPECT_EQ(cases, 8 * 2 * 3 * 3 * 2 * 2 * 2);
}

TEST(NnRowPieces, SoftminTeamMatchesRowFunctions) {
  std::mt19937 rng(11);
  for (int64_t n : {1, 7, 32, 65, 2000})
    for (double t : {1.0, 0.3})
      for (bool add : {false, true})
        for (int w : {32, 256}) {
          const std::vector<float> x = random_row(rng, n, 2.f), g = random_row(rng, n, 1.f),
                                   old = random_row(rng, n, 1.f);
          const double nit = -1.0 / t;
          std::vector<float> y_row = old, y_team = old;
          nn::softmin_row_forward(x.data(), y_row.data(), n, 1, nit, add);
          std::vector<double> zm(static_cast<size_t>(w), -INFINITY), sm(static_cast<size_t>(w), 0);
          for (int64_t i = 0; i < n; ++i)
            zm[i % w] = nn::softmax_max_step(zm[i % w], nn::softmin_z(x[i], nit));
          const double zmax = team_max(zm);
          for (int64_t i = 0; i < n; ++i) sm[i % w] += nn::softmin_exp_term(x[i], nit, zmax);
          const double sum = team_sum(sm);
          for (int64_t i = 0; i < n; ++i)
            nn::softmin_st(y_team.data(), i, nn::softmin_value(x[i], nit, zmax, sum), add);
          long double s = 0;
          for (int64_t i = 0; i < n; ++i) s += std::exp((long double)x[i] * nit - zmax);
          for (int64_t i = 0; i < n; ++i) {
            const double want =
                (add ? old[i] : 0.0) + double(std::exp((long double)x[i] * nit - zmax) / s);
            ASSERT_TRUE(close(y_team[i], y_row[i], 1e-6)) << y_team[i] << " vs " << y_row[i];
            ASSERT_TRUE(close(y_team[i], want, 2e-6)) << y_team[i] << " vs " << want;
          }
          std::vector<float> y(static_cast<size_t>(n)), d_row = old, d_team = old;
          nn::softmin_row_forward(x.data(), y.data(), n, 1, nit, false);
          nn::softmin_row_backward(g.data(), y.data(), d_row.data(), n, 1, t, add);
          std::vector<double> dp(static_cast<size_t>(w), 0);
          for (int64_t i = 0; i < n; ++i) dp[i % w] += double(g[i]) * double(y[i]);
          const double dot = team_sum(dp);
          for (int64_t i = 0; i < n; ++i) {
            nn::softmin_st(d_team.data(), i, nn::softmin_grad_value(g[i], y[i], dot, t), add);
            const double want = (add ? old[i] : 0.0) - double(y[i]) * (g[i] - dot) / t;
            ASSERT_TRUE(close(d_team[i], d_row[i], 1e-6)) << d_team[i] << " vs " << d_row[i];
            ASSERT_TRUE(close(d_team[i], want, 2e-6)) << d_team[i] << " vs " << want;
          }
        }
}

TEST(NnRowPieces, SoftmaxOutputTeamAndElementGradient) {
  std::mt19937 rng(13);
  for (int64_t k : {1, 3, 32, 100, 1500})
    for (int64_t stride : {1, 4})
      for (bool add : {false, true})
        for (int w : {32, 256}) {
          const std::vector<float> x = random_row(rng, k * stride, 2.f),
                                   old = random_row(rng, k * stride, 1.f);
          std::vector<float> y_row = old, y_team = old;
          loss::softmax_strided(x.data(), y_row.data(), k, stride, add);
          std::vector<float> mx(static_cast<size_t>(w), -INFINITY), sm(static_cast<size_t>(w), 0);
          for (int64_t c = 0; c < k; ++c) mx[c % w] = loss::so_max_step(mx[c % w], x[c * stride]);
          const float rmx = team_max(mx);
          for (int64_t c = 0; c < k; ++c) sm[c % w] += loss::so_exp_term(x[c * stride], rmx);
          const float inv = 1.f / team_sum(sm);
          long double s = 0;
          for (int64_t c = 0; c < k; ++c) s += std::exp((long double)x[c * stride] - rmx);
          for (int64_t c = 0; c < k; ++c) {
            const size_t i = static_cast<size_t>(c * stride);
            math::assign_req(&y_team[i], add, loss::so_value(x[i], rmx, inv));
            const double want =
                (add ? old[i] : 0.0) + double(std::exp((long double)x[i] - rmx) / s);
            ASSERT_TRUE(close(y_team[i], y_row[i], 1e-4)) << y_team[i] << " vs " << y_row[i];
            ASSERT_TRUE(close(y_team[i], want, 1e-4)) << y_team[i] << " vs " << want;
          }
        }
  // The per-element gradient (locate + element) against the per-group function, every
  // parameter combination that changes it, on an (n, k, m) view.
  loss::SoftmaxOutputView v;
  v.n = 3, v.k = 5, v.m = 4, v.size = 60;
  const std::vector<float> y = random_row(rng, v.size, 1.f), hg = random_row(rng, v.size, 1.f);
  const std::vector<float> labels = {0, 4, 2, 1, 3, 3, 0, 2, 4, 1, 2, 0};
  for (bool use_ignore : {false, true})
    for (float alpha : {0.f, 0.2f})
      for (bool with_hg : {false, true})
        for (bool add : {false, true}) {
          loss::SoftmaxOutputParam p{1.5f, 2.f, false, use_ignore, false, "batch", with_hg, alpha};
          const loss::SoftmaxOutputGrad gr(p, v);
          const std::vector<float> old = random_row(rng, v.size, 1.f);
          std::vector<float> d_group = old, d_elem = old;
          for (int64_t g = 0; g < v.groups(); ++g)
            gr.group(v, g, y.data(), labels[g], with_hg ? hg.data() : nullptr, d_group.data(),
                     gr.scale, add);
          std::vector<int> seen(static_cast<size_t>(v.size), 0);
          for (int64_t i = 0; i < v.size; ++i) {
            int64_t g, ch;
            v.locate(i, &g, &ch);
            ASSERT_EQ(v.base(g) + ch * v.m, i);  // locate inverts base
            ++seen[static_cast<size_t>(i)];
            float val = gr.element(y[i], ch, loss::class_of(labels[g]), gr.scale);
            if (with_hg) val *= hg[i];
            math::assign_req(&d_elem[i], add, val);
            // Closed form: (y − target) · scale, 0 for an ignored label.
            const int64_t c = static_cast<int64_t>(labels[g]);
            const float tgt = ch == c ? 1.f - alpha : alpha / 4.f;
            const double want =
                (add ? old[i] : 0.0) +
                (use_ignore && c == 2 ? 0.0 : (y[i] - tgt) * gr.scale * (with_hg ? hg[i] : 1.f));
            EXPECT_NEAR(d_elem[i], want, 1e-6);
          }
          for (int64_t i = 0; i < v.size; ++i)  // the same float operations (up to FMA)
            EXPECT_NEAR(d_elem[i], d_group[i], 1e-6 * (1 + std::fabs(d_group[i])));
        }
}

TEST(NnRowPieces, SoftmaxCrossEntropyLogSumExpPieces) {
  std::mt19937 rng(17);
  for (int64_t k : {1, 2, 31, 33, 1000, 3000})
    for (int w : {32, 256}) {
      const std::vector<float> row = random_row(rng, k, 4.f);
      std::vector<float> mx(static_cast<size_t>(w), -INFINITY);
      std::vector<double> sm(static_cast<size_t>(w), 0);
      for (int64_t j = 0; j < k; ++j) mx[j % w] = loss::sce_max_step(mx[j % w], row[j]);
      const float rmx = team_max(mx);
      for (int64_t j = 0; j < k; ++j) sm[j % w] += loss::sce_exp_term(row[j], rmx);
      const double lse = loss::sce_lse(rmx, team_sum(sm));
      long double s = 0;
      for (float x : row) s += std::exp((long double)x - rmx);
      EXPECT_NEAR(lse, loss::sce_log_sum_exp(row.data(), k), 1e-12 * (1 + std::fabs(lse)));
      EXPECT_NEAR(lse, double(rmx + std::log(s)), 1e-12 * (1 + std::fabs(lse)));
      // The gradient from it: softmax − onehot, summing to zero over the row.
      double total = 0;
      for (int64_t j = 0; j < k; ++j) total += loss::sce_grad(row[j], lse, j == 0, 1.f);
      EXPECT_NEAR(total, 0.0, 1e-5);
    }
}

nn::GroupNormLayout layout(int64_t outer, int64_t reduce, int64_t inner, bool by_reduce,
                           int64_t gc) {
  nn::GroupNormLayout l;
  l.outer = outer, l.reduce = reduce, l.inner = inner, l.gamma_by_reduce = by_reduce;
  l.gamma_count = gc, l.eps = 1e-5;
  return l;
}

TEST(NnRowPieces, GroupNormTeamStatsGradSumsAndGammaColumns) {
  std::mt19937 rng(19);
  // LayerNorm over the last axis and over a middle axis, GroupNorm, InstanceNorm (gamma per
  // channel, outer = N·C), a group count not dividing outer, and a group larger than a warp.
  const nn::GroupNormLayout layouts[] = {layout(4, 37, 1, true, 1),  layout(3, 5, 4, true, 1),
                                         layout(6, 50, 1, false, 3), layout(8, 9, 1, false, 4),
                                         layout(7, 3, 2, false, 3),  layout(2, 1500, 1, false, 1)};
  for (const nn::GroupNormLayout& l : layouts)
    for (int w : {32, 256}) {
      const int64_t n = l.outer * l.reduce * l.inner;
      const std::vector<float> x = random_row(rng, n, 2.f), g = random_row(rng, n, 1.f),
                               gamma = random_row(rng, l.gamma_size(), 1.f);
      std::vector<nn::GroupStats> st;
      for (int64_t gi = 0; gi < l.outer * l.inner; ++gi) {
        const int64_t o = gi / l.inner, i = gi % l.inner, b = l.group_base(gi);
        ASSERT_EQ(b, l.at(o, 0, i));
        std::vector<double> s1(static_cast<size_t>(w), 0), s2 = s1, gh = s1, ghx = s1;
        for (int64_t r = 0; r < l.reduce; ++r) s1[r % w] += x[b + r * l.inner];
        const double mean = nn::group_mean(l, team_sum(s1));
        for (int64_t r = 0; r < l.reduce; ++r)
          s2[r % w] += nn::group_sq_dev(x[b + r * l.inner], mean);
        const nn::GroupStats s = nn::group_stats_of(l, mean, team_sum(s2));
        const nn::GroupStats whole = nn::group_stats(l, x.data(), o, i);
        EXPECT_NEAR(s.mean, whole.mean, 1e-12 * (1 + std::fabs(whole.mean)));
        EXPECT_NEAR(s.sd, whole.sd, 1e-12 * whole.sd);
        long double nm = 0, nv = 0;  // naive
        for (int64_t r = 0; r < l.reduce; ++r) nm += x[l.at(o, r, i)];
        nm /= l.reduce;
        for (int64_t r = 0; r < l.reduce; ++r)
          nv += (x[l.at(o, r, i)] - nm) * (x[l.at(o, r, i)] - nm);
        EXPECT_NEAR(s.mean, double(nm), 1e-12);
        EXPECT_NEAR(s.sd, double(std::sqrt(nv / l.reduce + l.eps)), 1e-12);
        st.push_back(s);
        for (int64_t r = 0; r < l.reduce; ++r) {
          const int64_t k = b + r * l.inner;
          const nn::GroupGradSums t =
              nn::group_grad_terms(g[k], x[k], gamma[l.gamma_index(o, r)], s);
          gh[r % w] += t.gh;
          ghx[r % w] += t.ghx;
        }
        const nn::GroupGradSums ws =
            nn::group_grad_sums(l, g.data(), x.data(), gamma.data(), whole, o, i);
        EXPECT_NEAR(team_sum(gh), ws.gh, 1e-11 * (1 + std::fabs(ws.gh)));
        EXPECT_NEAR(team_sum(ghx), ws.ghx, 1e-11 * (1 + std::fabs(ws.ghx)));
      }
      // gamma_elem enumerates exactly gamma element c's elements, in ascending order, and
      // the chunked column sums (norms.cu's two passes) equal a naive sum per element.
      for (int64_t slots : {int64_t(1), int64_t(7), int64_t(65536)}) {
        const int64_t chunk = l.gamma_chunk(slots), gs = l.gamma_size();
        ASSERT_GE(chunk, 1);
        const int64_t chunks = (l.gamma_elems(0) + chunk - 1) / chunk;
        for (int64_t c = 0; c < gs; ++c) {
          std::vector<int64_t> want;
          long double dg = 0, db = 0;
          for (int64_t o = 0; o < l.outer; ++o)
            for (int64_t r = 0; r < l.reduce; ++r)
              for (int64_t i = 0; i < l.inner; ++i)
                if (l.gamma_index(o, r) == c) {
                  const int64_t k = l.at(o, r, i);
                  want.push_back(k);
                  dg += (long double)g[k] * (x[k] - st[o * l.inner + i].mean) /
                        st[o * l.inner + i].sd;
                  db += g[k];
                }
          std::sort(want.begin(), want.end());
          ASSERT_EQ(l.gamma_elems(c), static_cast<int64_t>(want.size()));
          double pdg = 0, pdb = 0;
          for (int64_t p = 0; p < chunks; ++p) {
            double cdg = 0, cdb = 0;
            for (int64_t t = p * chunk; t < std::min(l.gamma_elems(c), (p + 1) * chunk); ++t) {
              int64_t k, gi;
              l.gamma_elem(c, t, &k, &gi);
              ASSERT_EQ(k, want[static_cast<size_t>(t)]);
              ASSERT_EQ(gi, (k / (l.reduce * l.inner)) * l.inner + k % l.inner);
              cdg += double(g[k]) * nn::group_xhat(x[k], st[gi]);
              cdb += double(g[k]);
            }
            pdg += cdg;
            pdb += cdb;
          }
          EXPECT_NEAR(pdg, double(dg), 1e-10);
          EXPECT_NEAR(pdb, double(db), 1e-10);
        }
      }
    }
}

TEST(NnRowPieces, L2NormalizationTeamMatchesGroupFunctions) {
  std::mt19937 rng(23);
  for (int64_t reduced : {1, 9, 40, 1100})
    for (int64_t stride : {1, 3})
      for (bool add : {false, true})
        for (int w : {32, 256}) {
          const int64_t n = reduced * stride;
          const std::vector<float> x = random_row(rng, n, 1.f), g = random_row(rng, n, 1.f),
                                   old = random_row(rng, n, 1.f);
          const double eps = 1e-10;
          std::vector<float> y_whole = old, y_team = old, d_whole = old, d_team = old;
          nn::l2norm_group_forward(x.data(), y_whole.data(), 0, stride, reduced, eps, add);
          nn::l2norm_group_backward(x.data(), g.data(), d_whole.data(), 0, stride, reduced, eps,
                                    add);
          std::vector<double> ss(static_cast<size_t>(w), 0), gx = ss;
          for (int64_t r = 0; r < reduced; ++r) {
            ss[r % w] += nn::l2_sq_term(x[r * stride]);
            gx[r % w] += nn::l2_gx_term(g[r * stride], x[r * stride]);
          }
          const float inv = nn::l2_inv_norm<float>(team_sum(ss), eps);
          const auto c = nn::l2_grad_coeffs<float>(team_sum(ss), team_sum(gx), eps);
          long double nss = 0, ngx = 0;
          for (int64_t r = 0; r < reduced; ++r) {
            nss += (long double)x[r * stride] * x[r * stride];
            ngx += (long double)g[r * stride] * x[r * stride];
          }
          const long double nrm = std::sqrt(nss + eps);
          for (int64_t r = 0; r < reduced; ++r) {
            const size_t k = static_cast<size_t>(r * stride);
            math::assign_req(&y_team[k], add, x[k] * inv);
            math::assign_req(&d_team[k], add, nn::l2_grad_value(g[k], x[k], c));
            ASSERT_TRUE(close(y_team[k], y_whole[k], 1e-6));
            ASSERT_TRUE(close(d_team[k], d_whole[k], 1e-6));
            ASSERT_TRUE(close(y_team[k], (add ? old[k] : 0.0) + double(x[k] / nrm), 1e-5));
            const double dwant =
                (add ? old[k] : 0.0) + double(g[k] / nrm - x[k] * ngx / (nrm * nrm * nrm));
            ASSERT_TRUE(close(d_team[k], dwant, 1e-5)) << d_team[k] << " vs " << dwant;
          }
        }
}

TEST(NnRowPieces, MomentsTeamMatchesStats) {
  std::mt19937 rng(29);
  const Shape s{3, 4, 5, 6};
  for (std::vector<bool> red :
       {std::vector<bool>{false, false, false, true}, std::vector<bool>{true, false, true, true},
        std::vector<bool>{false, true, false, false}})
    for (int w : {32, 256}) {
      const nn::MomentsView v = nn::moments_view(s, red, "moments");
      EXPECT_EQ(v.contiguous(), bool(red[3]));
      const std::vector<float> x = random_row(rng, s.numel(), 3.f);
      for (int64_t o = 0; o < v.n_out; ++o) {
        std::vector<double> s1(static_cast<size_t>(w), 0), s2 = s1;
        for (int64_t r = 0; r < v.count; ++r) s1[r % w] += x[v.element(o, r)];
        const double m = v.mean_of(team_sum(s1));
        for (int64_t r = 0; r < v.count; ++r) {
          const double d = x[v.element(o, r)] - m;
          s2[r % w] += d * d;
        }
        const double var = v.var_of(team_sum(s2));
        double wm, wv;
        v.stats(x.data(), o, wm, wv);
        EXPECT_NEAR(m, wm, 1e-12 * (1 + std::fabs(wm)));
        EXPECT_NEAR(var, wv, 1e-12 * (1 + wv));
        // Naive: the elements whose slot is o.
        long double nm = 0, nv = 0;
        int64_t cnt = 0;
        for (int64_t i = 0; i < s.numel(); ++i)
          if (v.slot(i) == o) nm += x[i], ++cnt;
        nm /= cnt;
        for (int64_t i = 0; i < s.numel(); ++i)
          if (v.slot(i) == o) nv += (x[i] - nm) * (x[i] - nm);
        EXPECT_EQ(cnt, v.count);
        EXPECT_NEAR(m, double(nm), 1e-12);
        EXPECT_NEAR(var, double(nv / cnt), 1e-11);
      }
    }
}

// BatchNorm's chunks: every element in exactly one chunk, bounded chunk counts, and the
// statistics summed as batch_norm.cu does (each block: 256 strided lanes and a shared-memory
// tree; then a channel's partials in chunk order) against a naive long-double sum.
TEST(NnRowPieces, BatchNormSplitAndChunkedStatistics) {
  for (int64_t min_chunk : {nn::BNSplit::kMinChunk, int64_t(4)})  // 4: LOOM_CUDA_ROW_KERNELS=block
    for (int64_t m : {0, 1, 5, 50, 255, 256, 257, 1000, 65536, 65537, 1000003}) {
      const nn::BNSplit sp = nn::bn_split(m, min_chunk);
      ASSERT_GE(sp.chunks, 1);
      ASSERT_LE(sp.chunks, nn::BNSplit::kMaxChunks);
      if (m == 0) continue;
      EXPECT_GE(sp.chunks * sp.chunk, m) << m;
      EXPECT_LT((sp.chunks - 1) * sp.chunk, m) << m;  // no empty chunk
      EXPECT_TRUE(sp.chunk >= min_chunk || sp.chunks == 1) << m;
      if (min_chunk == 4 && m == 50) {
        EXPECT_GT(sp.chunks, 1);  // a sample's channel splits
      }
    }
  std::mt19937 rng(31);
  for (int64_t m : {7, 300, 5000, 70000}) {
    const std::vector<float> x = random_row(rng, m, 2.f);
    const nn::BNSplit sp = nn::bn_split(m);
    auto chunked = [&](auto f) {
      double total = 0;
      for (int64_t p = 0; p < sp.chunks; ++p) {
        std::vector<double> lane(256, 0.0);
        for (int64_t k = p * sp.chunk; k < std::min(m, (p + 1) * sp.chunk); ++k)
          lane[static_cast<size_t>((k - p * sp.chunk) % 256)] += f(x[k]);
        for (size_t s = 128; s > 0; s >>= 1)
          for (size_t t = 0; t < s; ++t) lane[t] += lane[t + s];
        total += lane[0];
      }
      return total;
    };
    const double mu = chunked([](float v) { return double(v); }) / m;
    const double var = chunked([&](float v) { return (v - mu) * (v - mu); }) / m;
    long double nm = 0, nv = 0;
    for (float v : x) nm += v;
    nm /= m;
    for (float v : x) nv += (v - nm) * (v - nm);
    EXPECT_NEAR(mu, double(nm), 1e-12);
    EXPECT_NEAR(var, double(nv / m), 1e-12 * (1 + var));
    EXPECT_NEAR(nn::bn_invstd(var, 1e-3), double(1 / std::sqrt(nv / m + 1e-3L)), 1e-12);
  }
}

// The launch rules (row_launch.h): the shape per row length, stride and count, the switch, and
// that a grid from row_grid with RowTeamIndex's rows gives every row to exactly one team, all
// of whose lanes visit it once (the kernels' reductions rely on it).
TEST(NnRowPieces, RowLaunchRulesAndTeamCoverage) {
  using cuda::RowLaunch;
  unsetenv("LOOM_CUDA_ROW_KERNELS");
  EXPECT_EQ(cuda::row_launch(64, 1000, 1), RowLaunch::kWarp);
  EXPECT_EQ(cuda::row_launch(64, 1024, 1), RowLaunch::kWarp);
  EXPECT_EQ(cuda::row_launch(64, 1025, 1), RowLaunch::kBlock);
  EXPECT_EQ(cuda::row_launch(100000, 5, 1), RowLaunch::kWarp);
  EXPECT_EQ(cuda::row_launch(100, 32, 7), RowLaunch::kThread);  // short strided rows
  EXPECT_EQ(cuda::row_launch(100, 33, 7), RowLaunch::kWarp);
  EXPECT_EQ(cuda::row_launch(4096, 500, 7), RowLaunch::kThread);  // many strided rows
  EXPECT_EQ(cuda::row_launch(10, 5000, 7), RowLaunch::kBlock);
  EXPECT_TRUE(cuda::cooperative_rows());
  setenv("LOOM_CUDA_ROW_KERNELS", "0", 1);
  EXPECT_EQ(cuda::row_launch(64, 1000, 1), RowLaunch::kThread);
  EXPECT_FALSE(cuda::cooperative_rows());
  setenv("LOOM_CUDA_ROW_KERNELS", "block", 1);
  EXPECT_EQ(cuda::row_launch(100, 5, 3), RowLaunch::kBlock);
  EXPECT_EQ(cuda::row_mode(), cuda::RowMode::kBlocks);
  unsetenv("LOOM_CUDA_ROW_KERNELS");

  const int64_t bd = cuda::kRowBlock;
  for (RowLaunch how : {RowLaunch::kWarp, RowLaunch::kBlock})
    for (int64_t rows : {int64_t(1), int64_t(7), int64_t(8), int64_t(9), int64_t(1000),
                         int64_t(65535) * (how == RowLaunch::kWarp ? 8 : 1) + 5}) {
      const bool warp = how == RowLaunch::kWarp;
      const int64_t grid = cuda::row_grid(how, rows);
      ASSERT_GE(grid, 1);
      ASSERT_LE(grid, 65535);
      std::vector<int32_t> visits(static_cast<size_t>(rows), 0);  // lanes that visit each row
      std::vector<int64_t> lane_sum(static_cast<size_t>(rows), 0);
      for (int64_t b = 0; b < grid; ++b)
        for (int64_t t = 0; t < bd; ++t) {
          const cuda::RowTeamIndex ix{warp, b, bd, t, grid};
          const cuda::RowTeamIndex leader{warp, b, bd, warp ? t - t % 32 : 0, grid};
          ASSERT_EQ(ix.first(), leader.first());  // a team shares its rows
          ASSERT_EQ(ix.step(), leader.step());
          ASSERT_LT(ix.lane(), ix.size());
          for (int64_t r = ix.first(); r < rows; r += ix.step()) {
            ++visits[static_cast<size_t>(r)];
            lane_sum[static_cast<size_t>(r)] += ix.lane();
          }
        }
      const int64_t size = warp ? 32 : bd;
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(visits[static_cast<size_t>(r)], size) << "row " << r << " of " << rows;
        ASSERT_EQ(lane_sum[static_cast<size_t>(r)], size * (size - 1) / 2);  // lanes 0..size-1
      }
    }
}

}  // namespace
}  // namespace loom
