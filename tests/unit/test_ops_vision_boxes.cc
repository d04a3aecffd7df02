// Box operators (Proposal, MultiProposal, box_iou, bipartite_matching, box_encode,
// box_decode, MultiBoxPrior): naive references for the op sweep (written from the
// definitions) and MXNet 1.9.1's values.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"
#include "tests/unit/vision_test_util.h"

namespace loom::test {
namespace {

using namespace vision_test;

// ---------------------------------------------------------------- Proposal / MultiProposal
// Per image: anchors over the grid, deltas applied, clipped, small / out-of-image boxes
// scored -1, stable sort, top pre_nms, greedy NMS, rows repeated cyclically.
std::vector<float> floats_of(const std::string& s) {
  std::vector<float> v;
  std::string t;
  for (char ch : s + ",") {
    if (ch == ',') {
      if (!t.empty()) v.push_back(static_cast<float>(std::stod(t)));
      t.clear();
    } else if (ch != '(' && ch != ')' && ch != ' ' && ch != '[' && ch != ']') {
      t += ch;
    }
  }
  return v;
}
std::vector<NDArray> ref_proposal(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const Shape& s = c.in[0].shape();
  const std::vector<float> scales = floats_of(attr(d, "scales", "(4, 8, 16, 32)"));
  const std::vector<float> ratios = floats_of(attr(d, "ratios", "(0.5, 1, 2)"));
  const float stride = static_cast<float>(parse_int(attr(d, "feature_stride", "16")));
  const int64_t post = parse_int(attr(d, "rpn_post_nms_top_n", "300"));
  int64_t pre = parse_int(attr(d, "rpn_pre_nms_top_n", "6000"));
  const float thr = static_cast<float>(parse_float(attr(d, "threshold", "0.7")));
  const float min_sz = static_cast<float>(parse_float(attr(d, "rpn_min_size", "16")));
  const int64_t A = s[1] / 2, H = s[2], W = s[3];
  if (pre <= 0 || pre > A * H * W) pre = A * H * W;
  NDArray rois(c.out_shapes[0]), score(c.out_shapes[1]);
  for (int64_t n = 0; n < s[0]; ++n) {
    const float ih = static_cast<float>(c.in[2].at(n * 3)),
                iw = static_cast<float>(c.in[2].at(n * 3 + 1));
    const float sc = static_cast<float>(c.in[2].at(n * 3 + 2));
    struct Box {
      float x1, y1, x2, y2, s;
    };
    std::vector<Box> boxes;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w)
        for (int64_t a = 0; a < A; ++a) {
          const float ratio = ratios[static_cast<size_t>(a) / scales.size()];
          const float scale = scales[static_cast<size_t>(a) % scales.size()];
          const float base = stride * stride, ctr = 0.5f * (stride - 1.f);
          const float nw = std::floor(std::sqrt(std::floor(base / ratio)) + 0.5f) * scale;
          const float nh = std::floor(nw / scale * ratio + 0.5f) * scale;
          const float ax1 = ctr - 0.5f * (nw - 1.f) + w * stride,
                      ay1 = ctr - 0.5f * (nh - 1.f) + h * stride;
          const float bw = nw, bh = nh, cx = ax1 + 0.5f * (bw - 1.f), cy = ay1 + 0.5f * (bh - 1.f);
          auto dl = [&](int k) { return static_cast<float>(at4(c.in[1], n, a * 4 + k, h, w)); };
          const float pcx = dl(0) * bw + cx, pcy = dl(1) * bh + cy;
          const float pw = std::exp(dl(2)) * bw, ph = std::exp(dl(3)) * bh;
          auto clip = [](float v, float hi) { return std::max(std::min(v, hi - 1.f), 0.f); };
          Box b{clip(pcx - 0.5f * (pw - 1.f), iw), clip(pcy - 0.5f * (ph - 1.f), ih),
                clip(pcx + 0.5f * (pw - 1.f), iw), clip(pcy + 0.5f * (ph - 1.f), ih),
                static_cast<float>(at4(c.in[0], n, A + a, h, w))};
          if (h >= static_cast<int64_t>(ih / stride) || w >= static_cast<int64_t>(iw / stride))
            b.s = -1;
          const float m = min_sz * sc;
          if (b.x2 - b.x1 + 1 < m || b.y2 - b.y1 + 1 < m)
            b = Box{b.x1 - m / 2, b.y1 - m / 2, b.x2 + m / 2, b.y2 + m / 2, -1.f};
          boxes.push_back(b);
        }
    std::stable_sort(boxes.begin(), boxes.end(),
                     [](const Box& x, const Box& y) { return x.s > y.s; });
    boxes.resize(static_cast<size_t>(pre));
    std::vector<Box> keep;
    std::vector<bool> sup(boxes.size(), false);
    for (size_t i = 0; i < boxes.size() && static_cast<int64_t>(keep.size()) < std::min(post, pre);
         ++i) {
      if (sup[i]) continue;
      keep.push_back(boxes[i]);
      for (size_t j = i + 1; j < boxes.size(); ++j) {
        const Box &p = boxes[i], &q = boxes[j];
        const float inter = std::max(0.f, std::min(p.x2, q.x2) - std::max(p.x1, q.x1) + 1) *
                            std::max(0.f, std::min(p.y2, q.y2) - std::max(p.y1, q.y1) + 1);
        const float ap = (p.x2 - p.x1 + 1) * (p.y2 - p.y1 + 1),
                    aq = (q.x2 - q.x1 + 1) * (q.y2 - q.y1 + 1);
        if (inter / (ap + aq - inter) > thr) sup[j] = true;
      }
    }
    for (int64_t r = 0; r < post; ++r) {
      const Box& b = keep[static_cast<size_t>(r) % keep.size()];
      float* o = rois.data<float>() + (n * post + r) * 5;
      o[0] = static_cast<float>(n), o[1] = b.x1, o[2] = b.y1, o[3] = b.x2, o[4] = b.y2;
      score.data<float>()[n * post + r] = b.s;
    }
  }
  return {rois, score};
}
LOOM_OP_REFERENCE("_contrib_Proposal", ref_proposal);
LOOM_OP_REFERENCE("_contrib_MultiProposal", ref_proposal);

// ---------------------------------------------------------------- bounding-box utilities
std::vector<NDArray> ref_box_iou(const RefCall& c) {
  const bool center = attr(c.attrs.dict, "format", "corner") == "center";
  const int64_t nl = c.in[0].size() / 4, nr = c.in[1].size() / 4;
  auto corners = [&](const NDArray& a, int64_t i) {
    std::array<double, 4> b{a.at(i * 4), a.at(i * 4 + 1), a.at(i * 4 + 2), a.at(i * 4 + 3)};
    if (center) b = {b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2};
    return b;
  };
  NDArray y(c.out_shapes[0]);
  for (int64_t i = 0; i < nl; ++i)
    for (int64_t j = 0; j < nr; ++j) {
      const auto a = corners(c.in[0], i), b = corners(c.in[1], j);
      const double w = std::max(0.0, std::min(a[2], b[2]) - std::max(a[0], b[0]));
      const double h = std::max(0.0, std::min(a[3], b[3]) - std::max(a[1], b[1]));
      const double area_a = std::max(0.0, a[2] - a[0]) * std::max(0.0, a[3] - a[1]);
      const double area_b = std::max(0.0, b[2] - b[0]) * std::max(0.0, b[3] - b[1]);
      y.data<float>()[i * nr + j] =
          w * h <= 0 ? 0.f : static_cast<float>(w * h / (area_a + area_b - w * h));
    }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_box_iou", ref_box_iou);

// Greedy: repeatedly take the best remaining (row, col) pair with both free.
std::vector<NDArray> ref_match(const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const bool asc = parse_bool(attr(c.attrs.dict, "is_ascend", "False"));
  const double thr = static_cast<float>(parse_float(c.attrs.dict.at("threshold")));
  const int64_t topk = parse_int(attr(c.attrs.dict, "topk", "-1"));
  const int64_t R = s[s.ndim() - 2], C = s[s.ndim() - 1], B = s.numel() / (R * C);
  NDArray rm = NDArray::full(c.out_shapes[0], -1.0), cm = NDArray::full(c.out_shapes[1], -1.0);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<std::pair<double, int64_t>> v;
    for (int64_t k = 0; k < R * C; ++k) v.push_back({c.in[0].at(b * R * C + k), k});
    std::stable_sort(v.begin(), v.end(), [&](const auto& x, const auto& y) {
      return asc ? x.first < y.first : x.first > y.first;
    });
    int64_t count = 0;
    for (const auto& [score, k] : v) {
      const int64_t r = k / C, col = k % C;
      if (rm.at(b * R + r) != -1 || cm.at(b * C + col) != -1) continue;
      if (asc ? !(score < thr) : !(score > thr)) break;
      rm.data<float>()[b * R + r] = static_cast<float>(col);
      cm.data<float>()[b * C + col] = static_cast<float>(r);
      if (topk > 0 && ++count > topk) break;
    }
  }
  return {rm, cm};
}
LOOM_OP_REFERENCE("_contrib_bipartite_matching", ref_match);

std::vector<NDArray> ref_encode(const RefCall& c) {
  const Shape& as = c.in[2].shape();
  const int64_t B = as[0], N = as[1], M = c.in[3].shape()[1];
  NDArray t = NDArray::zeros(c.out_shapes[0]), m = NDArray::zeros(c.out_shapes[1]);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t i = b * N + n;
      if (!(c.in[0].at(i) > 0.5)) continue;
      const int64_t j = static_cast<int64_t>(c.in[1].at(i));
      auto box = [&](const NDArray& a, int64_t k) {
        const double w = a.at(k * 4 + 2) - a.at(k * 4), h = a.at(k * 4 + 3) - a.at(k * 4 + 1);
        return std::array<double, 4>{a.at(k * 4) + w / 2, a.at(k * 4 + 1) + h / 2, w, h};
      };
      const auto r = box(c.in[3], b * M + j), a = box(c.in[2], i);
      const double v[4] = {(r[0] - a[0]) / a[2], (r[1] - a[1]) / a[3], std::log(r[2] / a[2]),
                           std::log(r[3] / a[3])};
      for (int k = 0; k < 4; ++k) {
        t.data<float>()[i * 4 + k] = static_cast<float>((v[k] - c.in[4].at(k)) / c.in[5].at(k));
        m.data<float>()[i * 4 + k] = 1.f;
      }
    }
  return {t, m};
}
LOOM_OP_REFERENCE("_contrib_box_encode", ref_encode);

std::vector<NDArray> ref_decode(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const double st[4] = {parse_float(attr(d, "std0", "1")), parse_float(attr(d, "std1", "1")),
                        parse_float(attr(d, "std2", "1")), parse_float(attr(d, "std3", "1"))};
  const double clip = parse_float(attr(d, "clip", "-1"));
  const bool corner = attr(d, "format", "center") == "corner";
  const int64_t N = c.in[0].shape()[1];
  NDArray y(c.out_shapes[0]);
  for (int64_t i = 0; i < c.in[0].size() / 4; ++i) {
    const int64_t k = i % N;
    double ax = c.in[1].at(k * 4), ay = c.in[1].at(k * 4 + 1), aw = c.in[1].at(k * 4 + 2),
           ah = c.in[1].at(k * 4 + 3);
    if (corner) aw -= ax, ah -= ay, ax += aw / 2, ay += ah / 2;
    double dw = c.in[0].at(i * 4 + 2) * st[2], dh = c.in[0].at(i * 4 + 3) * st[3];
    if (clip > 0) dw = std::min(dw, clip), dh = std::min(dh, clip);
    const double ox = c.in[0].at(i * 4) * st[0] * aw + ax,
                 oy = c.in[0].at(i * 4 + 1) * st[1] * ah + ay;
    const double ow = std::exp(dw) * aw / 2, oh = std::exp(dh) * ah / 2;
    const double v[4] = {ox - ow, oy - oh, ox + ow, oy + oh};
    for (int j = 0; j < 4; ++j) y.data<float>()[i * 4 + j] = static_cast<float>(v[j]);
  }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_box_decode", ref_decode);

std::vector<NDArray> ref_prior(const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  const std::vector<float> sizes = floats_of(attr(d, "sizes", "(1,)"));
  const std::vector<float> ratios = floats_of(attr(d, "ratios", "(1,)"));
  const std::vector<float> steps = floats_of(attr(d, "steps", "(-1, -1)"));
  const std::vector<float> off = floats_of(attr(d, "offsets", "(0.5, 0.5)"));
  const bool clip = parse_bool(attr(d, "clip", "False"));
  const int64_t H = c.in[0].shape()[2], W = c.in[0].shape()[3];
  const double sy = steps[0] > 0 && steps[1] > 0 ? steps[0] : 1.0 / H;
  const double sx = steps[0] > 0 && steps[1] > 0 ? steps[1] : 1.0 / W;
  NDArray y(c.out_shapes[0]);
  int64_t k = 0;
  auto put = [&](double cx, double cy, double size, double ratio) {
    const double bw = size * H / W * ratio / 2, bh = size / ratio / 2;
    for (double v : {cx - bw, cy - bh, cx + bw, cy + bh})
      y.data<float>()[k++] = static_cast<float>(clip ? std::min(1.0, std::max(0.0, v)) : v);
  };
  for (int64_t r = 0; r < H; ++r)
    for (int64_t col = 0; col < W; ++col) {
      const double cy = (r + off[0]) * sy, cx = (col + off[1]) * sx;
      for (float s : sizes) put(cx, cy, s, std::sqrt(ratios[0]));
      for (size_t j = 1; j < ratios.size(); ++j) put(cx, cy, sizes[0], std::sqrt(ratios[j]));
    }
  return {y};
}
LOOM_OP_REFERENCE("_contrib_MultiBoxPrior", ref_prior);

// ---------------------------------------------------------------- hand-checked values
// MXNet 1.9.1's test_box_encode_op / test_box_decode_op / test_bipartite_matching_op.
TEST(OpsVision, BoxEncodeDecodeMatchMXNet) {
  const std::vector<float> boxes = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f};
  ImperativeOp enc("_contrib_box_encode", {}, {{1, 2}, {1, 2}, {1, 2, 4}, {1, 2, 4}, {4}, {4}});
  auto e = enc.forward({from({1, 2}, {0, 1}), from({1, 2}, {0, 1}), from({1, 2, 4}, boxes),
                        from({1, 2, 4}, boxes), from({4}, {0, 0, 0, 0}),
                        from({4}, {0.1f, 0.1f, 0.2f, 0.2f})});
  expect_near(e[0], {0, 0, 0, 0, 0, 0, 0, 0}, 1e-5);
  expect_near(e[1], {0, 0, 0, 0, 1, 1, 1, 1});
  ImperativeOp dec("_contrib_box_decode",
                   {{"std0", "0.1"}, {"std1", "0.1"}, {"std2", "0.2"}, {"std3", "0.2"}},
                   {{1, 2, 4}, {1, 2, 4}});
  expect_near(dec.forward({from({1, 2, 4}, boxes), from({1, 2, 4}, boxes)})[0],
              {-0.0562755f, -0.00865743f, 0.26227552f, 0.42465743f, 0.13240421f, 0.17859563f,
               0.93759584f, 1.1174043f},
              1e-5);
  ImperativeOp m("_contrib_bipartite_matching", {{"threshold", "1e-12"}}, {{3, 2}});
  auto y = m.forward({from({3, 2}, {0.5f, 0.6f, 0.1f, 0.2f, 0.3f, 0.4f})});
  expect_near(y[0], {1, -1, 0});
  expect_near(y[1], {2, 0});
}

}  // namespace
}  // namespace loom::test
