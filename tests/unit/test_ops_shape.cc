// Shape-changing ops (broadcast_to/axis/like, squeeze, reshape_like): naive references for the op sweep and values checked against MXNet 1.9.1.
#include <gtest/gtest.h>

#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

// Broadcast by definition: output index (i_0..i_n) reads the input at i_d, or 0 where the
// (left-padded) input dimension is 1.
std::vector<NDArray> ref_broadcast(const RefCall& c) {
  const Shape& o = c.out_shapes[0];
  Shape s = c.in[0].shape();
  std::vector<int64_t> pad(static_cast<size_t>(o.ndim() - s.ndim()), 1);
  pad.insert(pad.end(), s.begin(), s.end());
  NDArray y(o);
  for (int64_t i = 0; i < o.numel(); ++i) {
    int64_t rem = i, src = 0, stride = 1;
    for (int d = o.ndim() - 1; d >= 0; --d) {
      int64_t idx = rem % o[d];
      rem /= o[d];
      src += (pad[static_cast<size_t>(d)] == 1 ? 0 : idx) * stride;
      stride *= pad[static_cast<size_t>(d)];
    }
    y.data<float>()[i] = static_cast<float>(c.in[0].at(src));
  }
  return {y};
}
LOOM_OP_REFERENCE("broadcast_to", ref_broadcast);
LOOM_OP_REFERENCE("broadcast_axis", ref_broadcast);
LOOM_OP_REFERENCE("broadcast_like", ref_broadcast);

// Views: the same elements in the same order.
std::vector<NDArray> ref_view(const RefCall& c) {
  NDArray y(c.out_shapes[0]);
  for (int64_t i = 0; i < y.size(); ++i) y.data<float>()[i] = static_cast<float>(c.in[0].at(i));
  return {y};
}
LOOM_OP_REFERENCE("squeeze", ref_view);
LOOM_OP_REFERENCE("reshape_like", ref_view);

TEST(OpsShape, ShapesMatchMXNet) {
  auto shape_of = [](const char* op, const Attrs& attrs, std::vector<Shape> in) {
    ImperativeOp o(op, attrs, in);
    std::vector<NDArray> args;
    for (const auto& s : in) args.push_back(NDArray::zeros(s));
    return o.forward(args).at(0).shape();
  };
  EXPECT_EQ(shape_of("squeeze", {}, {{1, 1}}), (Shape{1}));  // MXNet keeps one dimension
  EXPECT_EQ(shape_of("reshape_like", {{"lhs_begin", "1"}, {"rhs_begin", "0"}, {"rhs_end", "2"}},
                     {{5, 6}, {2, 3, 7}}),
            (Shape{5, 2, 3}));
  EXPECT_EQ(shape_of("broadcast_to", {{"shape", "(0, 3, 5)"}}, {{2, 1, 1}}), (Shape{2, 3, 5}));
  EXPECT_THROW(ImperativeOp("broadcast_to", {{"shape", "(3, 4)"}}, {{2, 4}}), ShapeError);
  // MXNet requires equal ranks (no NumPy-style left padding).
  EXPECT_THROW(ImperativeOp("broadcast_to", {{"shape", "(3, 2, 5)"}}, {{2, 1}}), ShapeError);
  EXPECT_THROW(ImperativeOp("squeeze", {{"axis", "(0,)"}}, {{2, 1}}), ShapeError);
}

// broadcast_like sends lhs the summed gradient and rhs zeros (MXNet 1.9.1: a (1, 3) lhs
// like a (4, 3) rhs gets 4 per element).
TEST(OpsShape, BroadcastLikeGradient) {
  ImperativeOp op("broadcast_like", {}, {{1, 3}, {4, 3}});
  std::vector<NDArray> in{NDArray::full({1, 3}, 1.0), NDArray::full({4, 3}, 1.0)};
  auto out = op.forward(in);
  std::vector<NDArray> grads{NDArray::full({1, 3}, 7.0), NDArray::full({4, 3}, 7.0)};
  op.backward({NDArray::full({4, 3}, 1.0)}, in, out, {Req::kWrite, Req::kWrite}, grads);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(grads[0].at(i), 4.0);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(grads[1].at(i), 0.0);
}

}  // namespace
}  // namespace loom::test
