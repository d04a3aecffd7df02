// SequenceMask / SequenceLast / SequenceReverse: naive references for the op sweep and
// hand-checked values (MXNet 1.9.1's test_sequence_reverse examples).
#include <gtest/gtest.h>

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

// Index of element (t, b, r) for the data shape and axis.
struct View {
  int64_t T, B, R = 1;
  int axis;
  int64_t at(int64_t t, int64_t b, int64_t r) const {
    return axis == 0 ? (t * B + b) * R + r : (b * T + t) * R + r;
  }
};
View view_of(const RefCall& c) {
  const Shape& s = c.in[0].shape();
  View v{0, 0, 1, static_cast<int>(parse_int(attr(c.attrs.dict, "axis", "0")))};
  v.T = v.axis == 0 ? s[0] : s[1];
  v.B = v.axis == 0 ? s[1] : s[0];
  for (int d = 2; d < s.ndim(); ++d) v.R *= s[d];
  return v;
}
int64_t length(const RefCall& c, const View& v, int64_t b, int64_t lo) {
  if (!parse_bool(attr(c.attrs.dict, "use_sequence_length", "False"))) return v.T;
  const int64_t n = static_cast<int64_t>(std::trunc(c.in[1].at(b)));
  return std::min(v.T, std::max(lo, n));
}

std::vector<NDArray> ref_mask(const RefCall& c) {
  const View v = view_of(c);
  const float value = static_cast<float>(parse_float(attr(c.attrs.dict, "value", "0")));
  NDArray y = c.in[0].copy();
  for (int64_t b = 0; b < v.B; ++b)
    for (int64_t t = length(c, v, b, 0); t < v.T; ++t)
      for (int64_t r = 0; r < v.R; ++r) y.data<float>()[v.at(t, b, r)] = value;
  return {y};
}
LOOM_OP_REFERENCE("SequenceMask", ref_mask);

std::vector<NDArray> ref_last(const RefCall& c) {
  const View v = view_of(c);
  NDArray y(c.out_shapes[0]);
  for (int64_t b = 0; b < v.B; ++b)
    for (int64_t r = 0; r < v.R; ++r)
      y.data<float>()[b * v.R + r] =
          static_cast<float>(c.in[0].at(v.at(length(c, v, b, 1) - 1, b, r)));
  return {y};
}
LOOM_OP_REFERENCE("SequenceLast", ref_last);

std::vector<NDArray> ref_reverse(const RefCall& c) {
  const View v = view_of(c);
  NDArray y(c.in[0].shape());
  for (int64_t b = 0; b < v.B; ++b) {
    const int64_t n = length(c, v, b, 0);
    for (int64_t t = 0; t < v.T; ++t)
      for (int64_t r = 0; r < v.R; ++r)
        y.data<float>()[v.at(t, b, r)] =
            static_cast<float>(c.in[0].at(v.at(t < n ? n - 1 - t : t, b, r)));
  }
  return {y};
}
LOOM_OP_REFERENCE("SequenceReverse", ref_reverse);

std::vector<float> values(const NDArray& a) {
  std::vector<float> v;
  for (int64_t i = 0; i < a.size(); ++i) v.push_back(static_cast<float>(a.at(i)));
  return v;
}

// MXNet's check_sequence_reverse: (3, 2, 3) with lengths [2, 3].
TEST(OpsSequence, ReverseMatchesMXNetExample) {
  std::vector<float> x;
  for (int i = 1; i <= 18; ++i) x.push_back(static_cast<float>(i));
  ImperativeOp op("SequenceReverse", {{"use_sequence_length", "True"}}, {{3, 2, 3}, {2}});
  auto y = op.forward({from({3, 2, 3}, x), from({2}, {2, 3})});
  EXPECT_EQ(values(y[0]),
            (std::vector<float>{7, 8, 9, 16, 17, 18, 1, 2, 3, 10, 11, 12, 13, 14, 15, 4, 5, 6}));
}

TEST(OpsSequence, LengthsMayBeInt32) {
  ImperativeOp op("SequenceLast", {{"use_sequence_length", "True"}, {"axis", "1"}}, {{2, 3}, {2}},
                  {DType::kFloat32, DType::kInt32});
  NDArray len({2}, DType::kInt32);
  len.data<int32_t>()[0] = 1, len.data<int32_t>()[1] = 3;
  auto y = op.forward({from({2, 3}, {1, 2, 3, 4, 5, 6}), len});
  EXPECT_EQ(values(y[0]), (std::vector<float>{1, 6}));
}

TEST(OpsSequence, MaskAxis1AndGradient) {
  ImperativeOp op("SequenceMask", {{"use_sequence_length", "True"}, {"axis", "1"}, {"value", "-1"}},
                  {{2, 3}, {2}});
  NDArray x = from({2, 3}, {1, 2, 3, 4, 5, 6}), l = from({2}, {2, 1});
  auto y = op.forward({x, l});
  EXPECT_EQ(values(y[0]), (std::vector<float>{1, 2, -1, 4, -1, -1}));
  NDArray g = NDArray::full({2, 3}, 5.f);
  op.backward({from({2, 3}, {1, 1, 1, 1, 1, 1})}, {x, l}, y, {Req::kAdd, Req::kNull},
              {g, NDArray()});
  EXPECT_EQ(values(g), (std::vector<float>{6, 6, 5, 6, 5, 5}));
}

TEST(OpsSequence, BadAxisIsAnError) {
  EXPECT_THROW(ImperativeOp("SequenceReverse", {{"axis", "1"}}, {{2, 3}}), Error);
  EXPECT_THROW(ImperativeOp("SequenceMask", {{"axis", "2"}}, {{2, 3, 4}}), Error);
}

}  // namespace
}  // namespace loom::test
