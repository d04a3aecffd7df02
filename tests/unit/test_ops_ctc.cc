// CTCLoss: a naive reference for the op sweep (forward sum over alignments in probability
// space, from Graves et al.'s definition as MXNet 1.9.1 documents it), values from MXNet's
// own tests (Torch WarpCTC results) and the edge cases MXNet defines.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/param.h"
#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

std::string attr(const Attrs& d, const std::string& k, const std::string& def) {
  return d.count(k) ? d.at(k) : def;
}
bool truthy(const std::string& s) { return s == "True" || s == "true" || s == "1"; }

// -log p(labels | data) for one sample, or 0 when no alignment fits (MXNet's convention).
double naive_ctc(const NDArray& x, int64_t b, int64_t T, const std::vector<int>& lab, int blank) {
  const int64_t N = x.shape()[1], A = x.shape()[2];
  std::vector<int> ext{blank};
  int64_t repeats = 0;
  for (size_t i = 0; i < lab.size(); ++i) {
    ext.push_back(lab[i]);
    ext.push_back(blank);
    repeats += i > 0 && lab[i] == lab[i - 1];
  }
  if (static_cast<int64_t>(lab.size()) + repeats > T) return 0;
  const int64_t S = static_cast<int64_t>(ext.size());
  auto prob = [&](int64_t t, int k) {
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < A; ++j) mx = std::max(mx, x.at((t * N + b) * A + j));
    for (int64_t j = 0; j < A; ++j) sum += std::exp(x.at((t * N + b) * A + j) - mx);
    return std::exp(x.at((t * N + b) * A + k) - mx) / sum;
  };
  std::vector<double> a(static_cast<size_t>(S), 0.0);
  a[0] = prob(0, blank);
  if (S > 1) a[1] = prob(0, ext[1]);
  for (int64_t t = 1; t < T; ++t) {
    std::vector<double> n(static_cast<size_t>(S), 0.0);
    for (int64_t s = 0; s < S; ++s) {
      double v = a[s] + (s > 0 ? a[s - 1] : 0.0);
      if (s > 1 && ext[s] != blank && ext[s] != ext[s - 2]) v += a[s - 2];
      n[s] = v * prob(t, ext[s]);
    }
    a = n;
  }
  return -std::log(a[S - 1] + (S > 1 ? a[S - 2] : 0.0));
}

LOOM_OP_REFERENCE("CTCLoss", [](const RefCall& c) {
  const NDArray& x = c.in[0];
  const int64_t T = x.shape()[0], N = x.shape()[1], A = x.shape()[2];
  const int64_t Lmax = c.in[1].shape()[1];
  const bool first = attr(c.attrs.dict, "blank_label", "first") == "first";
  const bool use_dl = truthy(attr(c.attrs.dict, "use_data_lengths", "False"));
  const bool use_ll = truthy(attr(c.attrs.dict, "use_label_lengths", "False"));
  NDArray loss(Shape{N});
  for (int64_t b = 0; b < N; ++b) {
    const int64_t steps = use_dl ? static_cast<int64_t>(c.in[2].at(b)) : T;
    const int64_t n = use_ll ? static_cast<int64_t>(c.in[use_dl ? 3 : 2].at(b)) : Lmax;
    std::vector<int> lab;
    for (int64_t j = 0; j < n; ++j) {
      const int v = static_cast<int>(c.in[1].at(b * Lmax + j));
      if (!use_ll && v == (first ? 0 : -1)) break;
      lab.push_back(v);
    }
    loss.data<float>()[b] =
        static_cast<float>(naive_ctc(x, b, steps, lab, first ? 0 : static_cast<int>(A - 1)));
  }
  return std::vector<NDArray>{loss};
});

NDArray array3(const Shape& s, const std::vector<float>& v) {
  NDArray a(s);
  std::copy(v.begin(), v.end(), a.data<float>());
  return a;
}

// MXNet's test_ctc_loss, Test 2: losses from Torch WarpCTC.
TEST(CTCLossOp, MatchesWarpCtcValues) {
  NDArray x = array3({3, 2, 5}, {-5,  -4,  -3,  -2,  -1,  1.2f, 3.4f,   1.2f,   -0.1f,  -2.34f,
                                 -10, -9,  -8,  -7,  -6,  0.1f, 0.2f,   0.3f,   0.22f,  0.123f,
                                 -15, -14, -13, -12, -11, -15,  -14.2f, -13.5f, -12.2f, -11.22f});
  NDArray label = array3({2, 3}, {2, 3, 1, 2, 0, 0});
  ImperativeOp op("ctc_loss", {}, {{3, 2, 5}, {2, 3}});
  auto out = op.forward({x, label}, true);
  EXPECT_NEAR(out[0].at(0), 7.3557, 1e-3);
  EXPECT_NEAR(out[0].at(1), 5.4091, 1e-3);
  // The hidden output holds d loss / d data: per step it sums to 0 over the alphabet
  // (softmax minus an occupancy that sums to 1).
  for (int64_t r = 0; r < 6; ++r) {
    double s = 0;
    for (int64_t k = 0; k < 5; ++k) s += out[1].at(r * 5 + k);
    EXPECT_NEAR(s, 0.0, 1e-5) << "row " << r;
  }
}

// MXNet's test_ctc_loss_with_large_classes: 6000 classes, padding 0 ends the second label
// sequence early (5000 after it is ignored).
TEST(CTCLossOp, LargeAlphabetAndPadding) {
  const int64_t A = 6000, T = 8, N = 2;
  // The test builds a (classes, 16) array whose column i is arange(classes) rolled by i,
  // divided by 13, and reshapes it (row-major) to (T, N, classes).
  NDArray x(Shape{T, N, A});
  for (int64_t f = 0; f < T * N * A; ++f) {
    const int64_t c = f / (T * N), i = f % (T * N);
    x.data<float>()[f] = static_cast<float>(((c - i) % A + A) % A) / 13.f;
  }
  NDArray label =
      array3({2, 8}, {100, 200, 300, 400, 500, 0, 0, 0, 1000, 2000, 3000, 4000, 0, 5000, 0, 0});
  ImperativeOp op("CTCLoss", {}, {{T, N, A}, {2, 8}});
  auto out = op.forward({x, label});
  EXPECT_NEAR(out[0].at(0), 688.02826, 688.02826 * 1e-5);
  EXPECT_NEAR(out[0].at(1), 145.34462, 145.34462 * 1e-5);
}

TEST(CTCLossOp, InfeasibleLabelsGiveZeroLossAndGradient) {
  // Labels 1 1 1 need 5 steps (blanks between repeats); only 3 are given.
  NDArray x(Shape{3, 1, 4});
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = 0.1f * static_cast<float>(i);
  ImperativeOp op("CTCLoss", {}, {{3, 1, 4}, {1, 3}});
  auto out = op.forward({x, array3({1, 3}, {1, 1, 1})}, true);
  EXPECT_EQ(out[0].at(0), 0.0);
  for (int64_t i = 0; i < out[1].size(); ++i) EXPECT_EQ(out[1].at(i), 0.0);
}

TEST(CTCLossOp, DataLengthsMaskTheGradientAndBadLabelsAreNamed) {
  NDArray x(Shape{4, 1, 3});
  for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = std::sin(float(i));
  ImperativeOp op("CTCLoss", {{"use_data_lengths", "True"}}, {{4, 1, 3}, {1, 2}, {1}});
  auto out = op.forward({x, array3({1, 2}, {1, 2}), array3({1}, {2})}, true);
  ImperativeOp shorter("CTCLoss", {}, {{2, 1, 3}, {1, 2}});
  NDArray x2(Shape{2, 1, 3});
  std::copy(x.data<float>(), x.data<float>() + 6, x2.data<float>());
  EXPECT_NEAR(out[0].at(0), shorter.forward({x2, array3({1, 2}, {1, 2})})[0].at(0), 1e-6);
  for (int64_t i = 6; i < 12; ++i) EXPECT_EQ(out[1].at(i), 0.0) << i;
  try {
    op.forward({x, array3({1, 2}, {1, 7}), array3({1}, {2})});
    FAIL() << "label 7 accepted with 3 classes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CTCLoss"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("label[0, 1]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom::test
