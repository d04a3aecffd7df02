// LayerNorm, InstanceNorm, GroupNorm: references written from each op's definition (which
// elements share statistics, which gamma applies), checked by the op sweep with finite
// differences and req=add, plus values from MXNet 1.9.1.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

std::string attr(const Attrs& d, const std::string& k, const std::string& def) {
  return d.count(k) ? d.at(k) : def;
}

// y = (x - mean_G) / sqrt(var_G + eps) * gamma[c] + beta[c], G = group(i), c = channel(i);
// mean and std per group as outputs 1 and 2 in group order.
std::vector<NDArray> normalize(const RefCall& c, double eps, const std::function<int64_t(int64_t)>& group,
                               const std::function<int64_t(int64_t)>& param) {
  const NDArray& x = c.in[0];
  std::map<int64_t, std::vector<double>> members;
  for (int64_t i = 0; i < x.size(); ++i) members[group(i)].push_back(x.at(i));
  std::map<int64_t, std::pair<double, double>> st;
  for (auto& [g, v] : members) {
    double m = 0, var = 0;
    for (double a : v) m += a;
    m /= static_cast<double>(v.size());
    for (double a : v) var += (a - m) * (a - m);
    st[g] = {m, std::sqrt(var / static_cast<double>(v.size()) + eps)};
  }
  NDArray y(x.shape());
  for (int64_t i = 0; i < x.size(); ++i) {
    auto [m, sd] = st[group(i)];
    y.data<float>()[i] = static_cast<float>((x.at(i) - m) / sd * c.in[1].at(param(i)) + c.in[2].at(param(i)));
  }
  std::vector<NDArray> out{y};
  if (c.out_shapes.size() > 1) {
    NDArray mean(c.out_shapes[1]), sd(c.out_shapes[2]);
    int64_t k = 0;
    for (auto& [g, v] : st) {
      mean.data<float>()[k] = static_cast<float>(v.first);
      sd.data<float>()[k++] = static_cast<float>(v.second);
    }
    out.push_back(mean);
    out.push_back(sd);
  }
  return out;
}

LOOM_OP_REFERENCE("LayerNorm", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  int64_t ax = parse_int(attr(c.attrs.dict, "axis", "-1"));
  if (ax < 0) ax += s.ndim();
  int64_t inner = 1;
  for (int d = static_cast<int>(ax) + 1; d < s.ndim(); ++d) inner *= s[d];
  const int64_t n = s[static_cast<int>(ax)];
  // Elements sharing statistics differ only in their index along `axis`.
  return normalize(
      c, parse_float(attr(c.attrs.dict, "eps", "1e-5")),
      [=](int64_t i) { return (i / (n * inner)) * inner + i % inner; }, [=](int64_t i) { return i / inner % n; });
});
LOOM_OP_REFERENCE("InstanceNorm", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const int64_t sp = s.numel() / (s[0] * s[1]), ch = s[1];
  return normalize(c, parse_float(attr(c.attrs.dict, "eps", "1e-3")), [=](int64_t i) { return i / sp; },
                   [=](int64_t i) { return i / sp % ch; });
});
LOOM_OP_REFERENCE("GroupNorm", [](const RefCall& c) {
  const Shape& s = c.in[0].shape();
  const int64_t groups = parse_int(attr(c.attrs.dict, "num_groups", "1"));
  const int64_t per_group = s.numel() / (s[0] * groups);
  return normalize(c, parse_float(attr(c.attrs.dict, "eps", "1e-5")), [=](int64_t i) { return i / per_group; },
                   [=](int64_t i) { return i / per_group % groups; });
});

TEST(OpsNormLayers, ShapesAndStatisticsMatchMXNet) {
  ImperativeOp ln("LayerNorm", {{"axis", "1"}, {"output_mean_var", "True"}}, {{2, 3, 4}, {3}, {3}});
  EXPECT_EQ(ln.out_shapes()[1], (Shape{2, 1, 4}));
  ImperativeOp gn("GroupNorm", {{"num_groups", "2"}, {"output_mean_var", "True"}}, {{2, 4, 3}, {2}, {2}});
  EXPECT_EQ(gn.out_shapes()[1], (Shape{2, 2}));
  EXPECT_THROW(ImperativeOp("GroupNorm", {{"num_groups", "3"}}, {{2, 4, 3}, {3}, {3}}), ShapeError);
  // A row (1, 2, 3, 4): mean 2.5, std sqrt(1.25 + 1e-5), so x = 1 maps to -1.3416355.
  NDArray x(Shape{1, 4});
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = static_cast<float>(i + 1);
  ImperativeOp row("LayerNorm", {}, {{1, 4}, {4}, {4}});
  auto y = row.forward({x, NDArray::full({4}, 1.0), NDArray::zeros({4})})[0];
  EXPECT_NEAR(y.at(0), -1.5 / std::sqrt(1.25 + 1e-5), 1e-6);
}

}  // namespace
}  // namespace loom::test
