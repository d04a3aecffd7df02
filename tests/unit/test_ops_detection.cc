// Detection operators (_contrib_box_nms, legacy BatchNorm_v1 / Convolution_v1,
// IdentityAttachKLSparseReg): naive sweep references written from the definitions and
// hand-checked values, including MXNet 1.9.1's outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

std::string attr(const Attrs& d, const std::string& k, const std::string& def) {
  return d.count(k) ? d.at(k) : def;
}
NDArray from(const Shape& s, const std::vector<float>& v) {
  NDArray a(s);
  for (size_t i = 0; i < v.size(); ++i) a.data<float>()[i] = v[i];
  return a;
}
std::vector<float> values(const NDArray& a) {
  std::vector<float> v;
  for (int64_t i = 0; i < a.size(); ++i) v.push_back(static_cast<float>(a.at(i)));
  return v;
}

// ---------------------------------------------------------------------------- box_nms
// Per batch: candidates (score > valid_thresh, class != background), sorted by score
// (stable), the first topk; a candidate survives unless an earlier survivor of its class
// (any class with force_suppress) overlaps it by IoU > overlap_thresh.
float iou_ref(const float* a, const float* b, bool corner) {
  auto corners = [&](const float* c, float* o) {
    if (corner) {
      std::copy(c, c + 4, o);
    } else {
      o[0] = c[0] - c[2] / 2, o[1] = c[1] - c[3] / 2, o[2] = c[0] + c[2] / 2,
      o[3] = c[1] + c[3] / 2;
    }
  };
  float p[4], q[4];
  corners(a, p);
  corners(b, q);
  const float iw = std::max(0.f, std::min(p[2], q[2]) - std::max(p[0], q[0]));
  const float ih = std::max(0.f, std::min(p[3], q[3]) - std::max(p[1], q[1]));
  auto area = [&](const float* c, const float* o) {
    const float w = corner ? o[2] - o[0] : c[2], h = corner ? o[3] - o[1] : c[3];
    return (w < 0 || h < 0) ? 0.f : w * h;
  };
  const float inter = iw * ih;
  return inter / (area(a, p) + area(b, q) - inter);
}
std::vector<NDArray> ref_box_nms(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const float thresh = static_cast<float>(parse_float(attr(d, "overlap_thresh", "0.5")));
  const float valid = static_cast<float>(parse_float(attr(d, "valid_thresh", "0")));
  const int64_t topk_p = parse_int(attr(d, "topk", "-1"));
  const int64_t cs = parse_int(attr(d, "coord_start", "2"));
  const int64_t si = parse_int(attr(d, "score_index", "1"));
  const int64_t id = parse_int(attr(d, "id_index", "-1"));
  const float bg = static_cast<float>(parse_int(attr(d, "background_id", "-1")));
  const bool force = parse_bool(attr(d, "force_suppress", "False"));
  const bool corner = attr(d, "in_format", "corner") == "corner";
  const std::string outf = attr(d, "out_format", "corner");
  const Shape& s = c.in[0].shape();
  const int64_t n = s[s.ndim() - 2], w = s[s.ndim() - 1], nb = s.numel() / (n * w);
  const int64_t topk = topk_p < 0 ? n : std::min(n, topk_p);
  std::vector<float> x = values(c.in[0]), y(x.size(), -1.f), rec(nb * n, -1.f);
  for (int64_t b = 0; b < nb; ++b) {
    auto at = [&](int64_t j, int64_t k) { return x[(b * n + j) * w + k]; };
    if (topk < 1) {
      for (int64_t j = 0; j < n; ++j) {
        rec[b * n + j] = static_cast<float>(b * n + j);
        for (int64_t k = 0; k < w; ++k) y[(b * n + j) * w + k] = at(j, k);
      }
      continue;
    }
    std::vector<int64_t> cand;
    for (int64_t j = 0; j < n; ++j)
      if (at(j, si) > valid && (id < 0 || at(j, id) != bg)) cand.push_back(j);
    std::stable_sort(cand.begin(), cand.end(),
                     [&](int64_t l, int64_t r) { return at(l, si) > at(r, si); });
    if (static_cast<int64_t>(cand.size()) > topk) cand.resize(topk);
    std::vector<int64_t> kept;
    for (int64_t j : cand) {
      bool ok = true;
      for (int64_t k : kept) {
        if (!force && id >= 0 && static_cast<int>(at(j, id)) != static_cast<int>(at(k, id)))
          continue;
        if (iou_ref(&x[(b * n + k) * w + cs], &x[(b * n + j) * w + cs], corner) > thresh)
          ok = false;
      }
      if (ok) kept.push_back(j);
    }
    for (size_t r = 0; r < kept.size(); ++r) {
      float* o = &y[(b * n + r) * w];
      for (int64_t k = 0; k < w; ++k) o[k] = at(kept[r], k);
      rec[b * n + r] = static_cast<float>(b * n + kept[r]);
    }
    if ((outf == "corner") != corner)
      for (int64_t r = 0; r < n; ++r) {
        float* o = &y[(b * n + r) * w + cs];
        if (o[0] < 0) continue;
        float v[4];
        if (corner)
          v[0] = (o[0] + o[2]) / 2, v[1] = (o[1] + o[3]) / 2, v[2] = o[2] - o[0],
          v[3] = o[3] - o[1];
        else
          v[0] = o[0] - o[2] / 2, v[1] = o[1] - o[3] / 2, v[2] = o[0] + o[2] / 2,
          v[3] = o[1] + o[3] / 2;
        std::copy(v, v + 4, o);
      }
  }
  return {from(c.out_shapes[0], y), from(c.out_shapes[1], rec)};
}
LOOM_OP_REFERENCE("_contrib_box_nms", ref_box_nms);

// MXNet 1.9.1 (test_contrib_operator.py test_box_nms_op, case 4):
//   boxes [[0, 0.5, 0.1, 0.1, 0.2, 0.2], [1, 0.4, 0.1, 0.1, 0.2, 0.2],
//          [0, 0.3, 0.1, 0.1, 0.14, 0.14], [2, 0.6, 0.5, 0.5, 0.7, 0.8]], thresh 0.1
//   -> [[2, 0.6, 0.5, 0.5, 0.7, 0.8], [0, 0.5, 0.1, 0.1, 0.2, 0.2],
//       [1, 0.4, 0.1, 0.1, 0.2, 0.2], -1 row]
TEST(BoxNMS, MatchesMXNetExample) {
  const std::vector<float> boxes = {0, 0.5, 0.1, 0.1, 0.2,  0.2,  1, 0.4, 0.1, 0.1, 0.2, 0.2,
                                    0, 0.3, 0.1, 0.1, 0.14, 0.14, 2, 0.6, 0.5, 0.5, 0.7, 0.8};
  ImperativeOp op("_contrib_box_nms",
                  {{"overlap_thresh", "0.1"},
                   {"coord_start", "2"},
                   {"score_index", "1"},
                   {"id_index", "0"},
                   {"force_suppress", "False"}},
                  {{4, 6}});
  auto out = op.forward({from(Shape{4, 6}, boxes)});
  const std::vector<float> want = {2, 0.6, 0.5, 0.5, 0.7, 0.8, 0,  0.5, 0.1, 0.1, 0.2, 0.2,
                                   1, 0.4, 0.1, 0.1, 0.2, 0.2, -1, -1,  -1,  -1,  -1,  -1};
  const std::vector<float> got = values(out[0]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  EXPECT_EQ(values(out[1]), (std::vector<float>{3, 0, 1, -1}));
  // force_suppress (case 3): the class-1 box is suppressed by the class-0 one too.
  ImperativeOp f("_contrib_box_nms",
                 {{"overlap_thresh", "0.1"}, {"id_index", "0"}, {"force_suppress", "True"}},
                 {{4, 6}});
  EXPECT_EQ(values(f.forward({from(Shape{4, 6}, boxes)})[1]), (std::vector<float>{3, 0, -1, -1}));
}

TEST(BoxNMS, ShapeErrorsNameTheNode) {
  try {
    ImperativeOp("_contrib_box_nms", {{"score_index", "3"}}, {{4, 6}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("score_index 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("_contrib_box_nms"), std::string::npos) << e.what();
  }
  EXPECT_NE(find_op("_contrib_box_non_maximum_suppression"), nullptr);
}

// ---------------------------------------------------------------------------- MultiBoxDetection
std::vector<NDArray> ref_mbdet(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const float thr = static_cast<float>(parse_float(attr(d, "threshold", "0.01")));
  const float nms = static_cast<float>(parse_float(attr(d, "nms_threshold", "0.5")));
  const bool clip = parse_bool(attr(d, "clip", "True"));
  const bool force = parse_bool(attr(d, "force_suppress", "False"));
  const int64_t topk = parse_int(attr(d, "nms_topk", "-1"));
  std::vector<float> var;
  {
    std::string t, sv = attr(d, "variances", "(0.1, 0.1, 0.2, 0.2)");
    for (char ch : sv + ",") {
      if (ch == ',') {
        if (!t.empty()) var.push_back(static_cast<float>(std::stod(t)));
        t.clear();
      } else if (ch != '(' && ch != ')' && ch != ' ') {
        t += ch;
      }
    }
  }
  const Shape& cs = c.in[0].shape();
  const int64_t nb = cs[0], nk = cs[1], na = cs[2];
  std::vector<float> y(static_cast<size_t>(nb * na * 6), -1.f);
  for (int64_t b = 0; b < nb; ++b) {
    std::vector<std::array<float, 6>> rows;
    for (int64_t i = 0; i < na; ++i) {
      float score = -1;
      int64_t id = 0;
      for (int64_t j = 1; j < nk; ++j) {
        const float v = c.in[0].at((b * nk + j) * na + i);
        if (v > score) score = v, id = j;
      }
      if (id == 0 || score < thr) continue;
      const float* a = c.in[2].data<float>() + i * 4;
      const float* l = c.in[1].data<float>() + (b * na + i) * 4;
      const float aw = a[2] - a[0], ah = a[3] - a[1];
      const float cx = l[0] * var[0] * aw + (a[0] + a[2]) / 2,
                  cy = l[1] * var[1] * ah + (a[1] + a[3]) / 2;
      const float hw = std::exp(l[2] * var[2]) * aw / 2, hh = std::exp(l[3] * var[3]) * ah / 2;
      std::array<float, 6> r = {
          static_cast<float>(id - 1), score, cx - hw, cy - hh, cx + hw, cy + hh};
      if (clip)
        for (int k = 2; k < 6; ++k) r[k] = std::max(0.f, std::min(1.f, r[k]));
      rows.push_back(r);
    }
    float* o = y.data() + b * na * 6;
    for (size_t i = 0; i < rows.size(); ++i) std::copy(rows[i].begin(), rows[i].end(), o + i * 6);
    if (rows.empty() || nms <= 0 || nms > 1) continue;
    std::vector<std::array<float, 6>> sorted = rows;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& l, const auto& r) { return l[1] > r[1]; });
    size_t keep = rows.size();
    if (topk > 0 && static_cast<size_t>(topk) < keep) {
      keep = static_cast<size_t>(topk);
      for (size_t i = keep; i < rows.size(); ++i) o[i * 6] = -1;  // other values unsorted
    }
    for (size_t i = 0; i < keep; ++i) std::copy(sorted[i].begin(), sorted[i].end(), o + i * 6);
    auto iou = [](const float* p, const float* q) {
      const float w = std::max(0.f, std::min(p[2], q[2]) - std::max(p[0], q[0]));
      const float h = std::max(0.f, std::min(p[3], q[3]) - std::max(p[1], q[1]));
      const float u = (p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - w * h;
      return u <= 0 ? 0.f : w * h / u;
    };
    for (size_t i = 0; i < keep; ++i) {
      if (o[i * 6] < 0) continue;
      for (size_t j = i + 1; j < keep; ++j)
        if (o[j * 6] >= 0 && (force || o[i * 6] == o[j * 6]) &&
            iou(o + i * 6 + 2, o + j * 6 + 2) >= nms)
          o[j * 6] = -1;
    }
  }
  return {from(c.out_shapes[0], y)};
}
LOOM_OP_REFERENCE("_contrib_MultiBoxDetection", ref_mbdet);

// MXNet 1.9.1: two anchors of one class, the better one suppresses the other.
//   cls_prob [[[0.1, 0.2], [0.9, 0.8]]], loc_pred zeros, anchors [[0.1, 0.1, 0.5, 0.5],
//   [0.15, 0.1, 0.55, 0.5]] -> [[0, 0.9, 0.1, 0.1, 0.5, 0.5], [-1, 0.8, 0.15, 0.1, 0.55, 0.5]]
TEST(MultiBoxDetection, SuppressesOverlappingBoxOfSameClass) {
  ImperativeOp op("_contrib_MultiBoxDetection", {}, {{1, 2, 2}, {1, 8}, {1, 2, 4}});
  auto y = op.forward({from(Shape{1, 2, 2}, {0.1f, 0.2f, 0.9f, 0.8f}), NDArray::zeros(Shape{1, 8}),
                       from(Shape{1, 2, 4}, {0.1f, 0.1f, 0.5f, 0.5f, 0.15f, 0.1f, 0.55f, 0.5f})});
  const std::vector<float> want = {0,  0.9f, 0.1f,  0.1f, 0.5f,  0.5f,
                                   -1, 0.8f, 0.15f, 0.1f, 0.55f, 0.5f};
  const std::vector<float> got = values(y[0]);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
}

// ---------------------------------------------------------------------------- MultiBoxTarget
std::vector<NDArray> ref_mbtarget(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const float thr = static_cast<float>(parse_float(attr(d, "overlap_threshold", "0.5")));
  const float ign = static_cast<float>(parse_float(attr(d, "ignore_label", "-1")));
  const float ratio = static_cast<float>(parse_float(attr(d, "negative_mining_ratio", "-1")));
  const float nthr = static_cast<float>(parse_float(attr(d, "negative_mining_thresh", "0.5")));
  const float var[4] = {0.1f, 0.1f, 0.2f, 0.2f};  // the samples use the default variances
  const Shape& ls = c.in[1].shape();
  const int64_t na = c.in[0].shape()[1], nb = ls[0], nl = ls[1], lw = ls[2];
  const int64_t nk = c.in[2].shape()[1];
  std::vector<float> loc(nb * na * 4, 0.f), mask(nb * na * 4, 0.f), cls(nb * na, ign);
  auto A = [&](int64_t j, int k) { return static_cast<float>(c.in[0].at(j * 4 + k)); };
  for (int64_t b = 0; b < nb; ++b) {
    auto L = [&](int64_t r, int k) {
      return static_cast<float>(c.in[1].at((b * nl + r) * lw + k));
    };
    int64_t ngt = 0;
    while (ngt < nl && L(ngt, 0) != -1.f) ++ngt;
    if (ngt == 0) continue;
    auto iou = [&](int64_t j, int64_t k) {
      const float inter = std::max(0.f, std::min(A(j, 2), L(k, 3)) - std::max(A(j, 0), L(k, 1))) *
                          std::max(0.f, std::min(A(j, 3), L(k, 4)) - std::max(A(j, 1), L(k, 2)));
      const float u = (A(j, 2) - A(j, 0)) * (A(j, 3) - A(j, 1)) +
                      (L(k, 3) - L(k, 1)) * (L(k, 4) - L(k, 2)) - inter;
      return u == 0 ? 0.f : inter / u;
    };
    std::vector<int> flag(na, -1), gt_used(ngt, 0);
    std::vector<float> best(na, -1.f);
    std::vector<int64_t> bgt(na, -1);
    int64_t npos = 0;
    for (;;) {  // greedy global best pairs
      int64_t ba = -1, bg = -1;
      float m = 1e-6f;
      for (int64_t j = 0; j < na; ++j)
        for (int64_t k = 0; k < ngt; ++k)
          if (flag[j] != 1 && !gt_used[k] && iou(j, k) > m) ba = j, bg = k, m = iou(j, k);
      if (ba < 0) break;
      flag[ba] = 1, gt_used[bg] = 1, best[ba] = m, bgt[ba] = bg, ++npos;
    }
    for (int64_t j = 0; j < na; ++j) {
      if (flag[j] == 1) continue;
      for (int64_t k = 0; k < ngt; ++k)
        if (iou(j, k) > best[j]) best[j] = iou(j, k), bgt[j] = k;
      if (thr > 0 && best[j] > thr) flag[j] = 1, ++npos;
    }
    if (ratio > 0) {
      const int64_t nneg = std::min<int64_t>(static_cast<int64_t>(npos * ratio), na - npos);
      std::vector<std::pair<float, int64_t>> cand;
      for (int64_t j = 0; j < na; ++j) {
        if (flag[j] != -1 || !(best[j] < nthr)) continue;
        double mx = -1e30, sum = 0;
        for (int64_t k = 0; k < nk; ++k)
          mx = std::max(mx, double(c.in[2].at((b * nk + k) * na + j)));
        for (int64_t k = 0; k < nk; ++k) sum += std::exp(c.in[2].at((b * nk + k) * na + j) - mx);
        cand.push_back({static_cast<float>(std::exp(c.in[2].at(b * nk * na + j) - mx) / sum), j});
      }
      std::stable_sort(cand.begin(), cand.end(),
                       [](const auto& l, const auto& r) { return l.first < r.first; });
      for (int64_t i = 0; i < nneg && i < static_cast<int64_t>(cand.size()); ++i)
        flag[cand[i].second] = 0;
    } else {
      for (int64_t j = 0; j < na; ++j)
        if (flag[j] != 1) flag[j] = 0;
    }
    for (int64_t j = 0; j < na; ++j) {
      if (flag[j] == 0) cls[b * na + j] = 0;
      if (flag[j] != 1) continue;
      const int64_t g = bgt[j];
      cls[b * na + j] = L(g, 0) + 1;
      const float aw = A(j, 2) - A(j, 0), ah = A(j, 3) - A(j, 1);
      const float gw = L(g, 3) - L(g, 1), gh = L(g, 4) - L(g, 2);
      float* o = &loc[(b * na + j) * 4];
      o[0] = ((L(g, 1) + L(g, 3)) * 0.5f - (A(j, 0) + A(j, 2)) * 0.5f) / aw / var[0];
      o[1] = ((L(g, 2) + L(g, 4)) * 0.5f - (A(j, 1) + A(j, 3)) * 0.5f) / ah / var[1];
      o[2] = std::log(gw / aw) / var[2];
      o[3] = std::log(gh / ah) / var[3];
      std::fill(&mask[(b * na + j) * 4], &mask[(b * na + j) * 4] + 4, 1.f);
    }
  }
  return {from(c.out_shapes[0], loc), from(c.out_shapes[1], mask), from(c.out_shapes[2], cls)};
}
LOOM_OP_REFERENCE("_contrib_MultiBoxTarget", ref_mbtarget);

// MXNet 1.9.1 test_contrib_operator.py test_multibox_target_op.
TEST(MultiBoxTarget, MatchesMXNetExample) {
  ImperativeOp op("_contrib_MultiBoxTarget",
                  {{"overlap_threshold", "0.5"},
                   {"negative_mining_ratio", "3"},
                   {"negative_mining_thresh", "0.4"}},
                  {{1, 2, 4}, {1, 1, 5}, {1, 5, 2}});
  std::vector<float> pred(10);
  for (int i = 0; i < 10; ++i) pred[i] = static_cast<float>(i);
  auto out =
      op.forward({from(Shape{1, 2, 4}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f}),
                  from(Shape{1, 1, 5}, {1, 0.1f, 0.1f, 0.5f, 0.6f}), from(Shape{1, 5, 2}, pred)});
  const std::vector<float> want = {5.0f, 2.5000005f, 3.4657357f, 4.581454f, 0, 0, 0, 0};
  const std::vector<float> got = values(out[0]);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  EXPECT_EQ(values(out[1]), (std::vector<float>{1, 1, 1, 1, 0, 0, 0, 0}));
  EXPECT_EQ(values(out[2]), (std::vector<float>{2, 0}));
}

// ---------------------------------------------------------------------------- legacy v1
std::vector<NDArray> ref_bn_v1(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const double eps = parse_float(attr(d, "eps", "0.001"));
  const bool fix = parse_bool(attr(d, "fix_gamma", "True"));
  const bool global = parse_bool(attr(d, "use_global_stats", "False"));
  const Shape& s = c.in[0].shape();
  const int64_t n = s[0], ch = s[1], inner = s.numel() / (n * ch);
  NDArray y(s), mean(Shape{ch}), var(Shape{ch});
  for (int64_t k = 0; k < ch; ++k) {
    double mu = 0, v = 0;
    if (c.is_train && !global) {
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) mu += c.in[0].at((b * ch + k) * inner + i);
      mu /= n * inner;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) {
          const double e = c.in[0].at((b * ch + k) * inner + i) - mu;
          v += e * e;
        }
      v /= n * inner;
    } else {
      mu = c.in[3].at(k), v = c.in[4].at(k);
    }
    mean.data<float>()[k] = static_cast<float>(mu);
    var.data<float>()[k] = static_cast<float>(v);
    const double g = fix ? 1.0 : c.in[1].at(k);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t j = (b * ch + k) * inner + i;
        y.data<float>()[j] =
            static_cast<float>(g * (c.in[0].at(j) - mu) / std::sqrt(v + eps) + c.in[2].at(k));
      }
  }
  return {y, mean, var};
}
LOOM_OP_REFERENCE("BatchNorm_v1", ref_bn_v1);
LOOM_OP_REFERENCE("Convolution_v1", [](const RefCall& c) {
  const RefFn* conv = find_reference("Convolution");
  if (!conv) throw Error("no sweep reference for Convolution");
  return (*conv)(c);
});
// Pooling_v1 on an explicitly zero-padded copy: windows clipped to the padded extent.
std::vector<NDArray> ref_pool_v1(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const std::string type = attr(d, "pool_type", "max");
  const bool global = parse_bool(attr(d, "global_pool", "False"));
  const Shape& s = c.in[0].shape();
  const int64_t nc = s[0] * s[1], h = s[2], w = s[3];
  int64_t kh = h, kw = w, sh = 1, sw = 1, ph = 0, pw = 0;
  if (!global) {
    const Shape k = parse_shape(d.at("kernel"));
    kh = k[0], kw = k[1];
    if (d.count("stride")) sh = parse_shape(d.at("stride"))[0], sw = parse_shape(d.at("stride"))[1];
    if (d.count("pad")) ph = parse_shape(d.at("pad"))[0], pw = parse_shape(d.at("pad"))[1];
  }
  const int64_t H = h + 2 * ph, W = w + 2 * pw;
  const Shape& os = c.out_shapes[0];
  NDArray y(os);
  for (int64_t ch = 0; ch < nc; ++ch) {
    std::vector<float> pad(H * W, 0.f);
    for (int64_t r = 0; r < h; ++r)
      for (int64_t q = 0; q < w; ++q)
        pad[(r + ph) * W + q + pw] = static_cast<float>(c.in[0].at((ch * h + r) * w + q));
    for (int64_t i = 0; i < os[2]; ++i)
      for (int64_t j = 0; j < os[3]; ++j) {
        float m = -1e30f, sum = 0;
        for (int64_t r = i * sh; r < std::min(i * sh + kh, H); ++r)
          for (int64_t q = j * sw; q < std::min(j * sw + kw, W); ++q) {
            m = std::max(m, pad[r * W + q]);
            sum += pad[r * W + q];
          }
        y.data<float>()[(ch * os[2] + i) * os[3] + j] = type == "max" ? m
                                                        : type == "sum"
                                                            ? sum
                                                            : sum / static_cast<float>(kh * kw);
      }
  }
  return {y};
}
LOOM_OP_REFERENCE("Pooling_v1", ref_pool_v1);

LOOM_OP_REFERENCE("IdentityAttachKLSparseReg",
                  [](const RefCall& c) { return std::vector<NDArray>{c.in[0].copy()}; });

// BatchNorm_v1 in training: the moving statistics change in backward, not in forward, and
// the var output is the biased batch variance.
TEST(LegacyV1, BatchNormV1UpdatesMovingStatsInBackward) {
  ImperativeOp op("BatchNorm_v1", {{"fix_gamma", "False"}, {"momentum", "0.5"}},
                  {{2, 1, 2}, {1}, {1}, {1}, {1}});
  NDArray x = from(Shape{2, 1, 2}, {1, 2, 3, 6}), g = from(Shape{1}, {2}),
          b = from(Shape{1}, {0.5}), mm = from(Shape{1}, {0}), mv = from(Shape{1}, {1});
  auto out = op.forward({x, g, b, mm, mv}, /*is_train=*/true);
  EXPECT_NEAR(out[1].at(0), 3.0, 1e-6);  // mean
  EXPECT_NEAR(out[2].at(0), 3.5, 1e-6);  // (4 + 1 + 0 + 9) / 4
  EXPECT_EQ(mm.at(0), 0.f);              // untouched by forward
  NDArray dx(Shape{2, 1, 2}), dg(Shape{1}), db(Shape{1});
  op.backward(
      {from(Shape{2, 1, 2}, {1, 1, 1, 1}), NDArray::zeros(Shape{1}), NDArray::zeros(Shape{1})},
      {x, g, b, mm, mv}, out, {Req::kWrite, Req::kWrite, Req::kWrite}, {dx, dg, db});
  EXPECT_NEAR(mm.at(0), 1.5, 1e-6);   // 0.5 * 0 + 0.5 * 3
  EXPECT_NEAR(mv.at(0), 2.25, 1e-6);  // 0.5 * 1 + 0.5 * 3.5
  EXPECT_NEAR(db.at(0), 4.0, 1e-6);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(dx.at(i), 0.0, 1e-6);  // constant dy
}

TEST(LegacyV1, KLSparseRegGradient) {
  ImperativeOp op("IdentityAttachKLSparseReg",
                  {{"momentum", "0.5"}, {"penalty", "0.1"}, {"sparseness_target", "0.2"}},
                  {{2, 2}, {2}});
  NDArray x = from(Shape{2, 2}, {0.2, 0.4, 0.6, 0.8}), avg = from(Shape{2}, {0.5, 0.5});
  auto y = op.forward({x, avg});
  EXPECT_EQ(values(y[0]), values(x));
  NDArray dx(Shape{2, 2});
  op.backward({NDArray::zeros(Shape{2, 2})}, {x, avg}, {}, {Req::kWrite, Req::kNull},
              {dx, NDArray()});
  // avg = 0.5 * 0.5 + 0.5 * (0.4, 0.6) = (0.45, 0.55)
  EXPECT_NEAR(avg.at(0), 0.45, 1e-6);
  EXPECT_NEAR(avg.at(1), 0.55, 1e-6);
  const double p0 = 0.1 * (-0.2 / 0.45 + 0.8 / 0.55), p1 = 0.1 * (-0.2 / 0.55 + 0.8 / 0.45);
  EXPECT_NEAR(dx.at(0), p0, 1e-5);
  EXPECT_NEAR(dx.at(3), p1, 1e-5);
}

}  // namespace
}  // namespace loom::test
