// RNN (fused recurrent layers): a naive reference for the op sweep, written from MXNet
// 1.9.1's documented formulas and parameter layout (one time step and one element at a
// time, in double), plus values MXNet 1.9.1 gives and the parameter checks.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/infer.h"
#include "ops/param.h"
#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

std::string attr(const Attrs& d, const std::string& k, const std::string& def) {
  return d.count(k) ? d.at(k) : def;
}
bool truthy(const std::string& s) { return s == "True" || s == "true" || s == "1"; }
double sig(double x) { return 1 / (1 + std::exp(-x)); }

// Runs the whole stack; returns out (T, N, D*H), hy, cy flattened.
struct RefResult {
  std::vector<double> y, hy, cy;
};
RefResult reference_rnn(const Attrs& a, const std::vector<std::vector<double>>& in, int64_t T,
                        int64_t N, int64_t I) {
  const std::string mode = attr(a, "mode", "lstm");
  const int64_t H = std::stoll(a.at("state_size")), L = std::stoll(a.at("num_layers"));
  const int64_t D = truthy(attr(a, "bidirectional", "False")) ? 2 : 1;
  const int64_t G = mode == "lstm" ? 4 : mode == "gru" ? 3 : 1;
  const std::vector<double>& w = in[1];
  // Offsets: all weights (layer, direction, i2h then h2h), then all biases.
  std::vector<int64_t> woff, boff;
  int64_t pos = 0;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t d = 0; d < D; ++d) {
      woff.push_back(pos);
      pos += G * H * ((l ? D * H : I) + H);
    }
  for (int64_t k = 0; k < L * D; ++k) {
    boff.push_back(pos);
    pos += 2 * G * H;
  }
  std::vector<double> x = in[0];
  RefResult r;
  r.hy.assign(L * D * N * H, 0);
  r.cy.assign(L * D * N * H, 0);
  int64_t C = I;
  for (int64_t l = 0; l < L; ++l) {
    std::vector<double> y(T * N * D * H, 0);
    for (int64_t d = 0; d < D; ++d) {
      const int64_t s = l * D + d;
      const double* Wx = &w[woff[s]];
      const double* Wh = Wx + G * H * C;
      const double* bx = &w[boff[s]];
      const double* bh = bx + G * H;
      for (int64_t n = 0; n < N; ++n) {
        std::vector<double> h(H), c(H, 0);
        for (int64_t j = 0; j < H; ++j) {
          h[j] = in[2][(s * N + n) * H + j];
          if (mode == "lstm") c[j] = in[3][(s * N + n) * H + j];
        }
        for (int64_t step = 0; step < T; ++step) {
          const int64_t t = d ? T - 1 - step : step;
          // ax[g*H+j] = Wx x + bx, ah = Wh h + bh, per gate row.
          std::vector<double> ax(G * H), ah(G * H);
          for (int64_t row = 0; row < G * H; ++row) {
            double sx = bx[row], sh = bh[row];
            for (int64_t k = 0; k < C; ++k) sx += Wx[row * C + k] * x[(t * N + n) * C + k];
            for (int64_t k = 0; k < H; ++k) sh += Wh[row * H + k] * h[k];
            ax[row] = sx, ah[row] = sh;
          }
          std::vector<double> hn(H);
          for (int64_t j = 0; j < H; ++j) {
            if (mode == "lstm") {
              double i = sig(ax[j] + ah[j]), f = sig(ax[H + j] + ah[H + j]);
              double g = std::tanh(ax[2 * H + j] + ah[2 * H + j]);
              double o = sig(ax[3 * H + j] + ah[3 * H + j]);
              c[j] = f * c[j] + i * g;
              hn[j] = o * std::tanh(c[j]);
            } else if (mode == "gru") {
              double rr = sig(ax[j] + ah[j]), z = sig(ax[H + j] + ah[H + j]);
              double nn = std::tanh(ax[2 * H + j] + rr * ah[2 * H + j]);
              hn[j] = (1 - z) * nn + z * h[j];
            } else if (mode == "rnn_tanh") {
              hn[j] = std::tanh(ax[j] + ah[j]);
            } else {
              hn[j] = std::max(0.0, ax[j] + ah[j]);
            }
          }
          h = hn;
          for (int64_t j = 0; j < H; ++j) y[(t * N + n) * D * H + d * H + j] = h[j];
        }
        for (int64_t j = 0; j < H; ++j) {
          r.hy[(s * N + n) * H + j] = h[j];
          r.cy[(s * N + n) * H + j] = c[j];
        }
      }
    }
    x = y;
    C = D * H;
  }
  r.y = x;
  return r;
}

LOOM_OP_REFERENCE("RNN", [](const RefCall& c) {
  const Shape& ds = c.in[0].shape();
  std::vector<std::vector<double>> in;
  for (const auto& a : c.in) {
    std::vector<double> v(static_cast<size_t>(a.size()));
    for (int64_t i = 0; i < a.size(); ++i) v[i] = a.at(i);
    in.push_back(std::move(v));
  }
  RefResult r = reference_rnn(c.attrs.dict, in, ds[0], ds[1], ds[2]);
  std::vector<NDArray> out;
  const std::vector<double>* src[] = {&r.y, &r.hy, &r.cy};
  for (size_t k = 0; k < c.out_shapes.size(); ++k) {
    NDArray o(c.out_shapes[k]);
    for (int64_t i = 0; i < o.size(); ++i) o.data<float>()[i] = static_cast<float>((*src[k])[i]);
    out.push_back(o);
  }
  return out;
});

// Inputs of the MXNet value tests: x = sin(0.7 i), w = 0.5 cos(0.37 i), h = 0.1 i,
// c = -0.2 i, in float64.
std::vector<NDArray> value_inputs(const ImperativeOp& op) {
  std::vector<NDArray> in;
  for (size_t k = 0; k < op.in_shapes().size(); ++k) {
    NDArray a(op.in_shapes()[k], DType::kFloat64);
    for (int64_t i = 0; i < a.size(); ++i) {
      const double v = k == 0   ? std::sin(0.7 * i)
                       : k == 1 ? 0.5 * std::cos(0.37 * i)
                       : k == 2 ? 0.1 * i
                                : -0.2 * i;
      a.data<double>()[i] = v;
    }
    in.push_back(a);
  }
  return in;
}

void expect_values(const NDArray& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.data<double>()[i], want[i], 1e-9) << "element " << i;
}

TEST(RNNOp, BidirectionalGruMatchesMXNetFloat64) {
  ImperativeOp op("RNN",
                  {{"mode", "gru"},
                   {"state_size", "2"},
                   {"num_layers", "1"},
                   {"bidirectional", "True"},
                   {"state_outputs", "True"}},
                  {{3, 1, 2}, {}, {}}, {DType::kFloat64, DType::kFloat64, DType::kFloat64});
  ASSERT_EQ(op.in_shapes()[1], Shape({72}));  // parameter length inferred from data
  auto out = op.forward(value_inputs(op));
  expect_values(out[0], {-0.0614285412, -0.036441804, 0.4077065937, 0.5353162131, -0.3326107177,
                         -0.3738700666, 0.4871466211, 0.5267647323, -0.0973312494, -0.1110011922,
                         0.157089096, 0.313488643});
  expect_values(out[1], {-0.0973312494, -0.1110011922, 0.4077065937, 0.5353162131});
}

TEST(RNNOp, TwoLayerLstmMatchesMXNetFloat64) {
  ImperativeOp op(
      "RNN",
      {{"mode", "lstm"}, {"state_size", "2"}, {"num_layers", "2"}, {"state_outputs", "True"}},
      {{3, 1, 2}, {}, {}, {}}, std::vector<DType>(4, DType::kFloat64));
  ASSERT_EQ(op.in_shapes()[1], Shape({96}));
  auto out = op.forward(value_inputs(op));
  expect_values(out[0], {-0.0999378796, -0.1701638267, 0.0127136697, -0.0227472434, 0.0315160312,
                         0.0105894206});
  expect_values(out[1], {-0.0915009046, -0.0700900069, 0.0315160312, 0.0105894206});
  expect_values(out[2], {-0.1864511428, -0.1571099749, 0.0620446968, 0.0217284915});
}

TEST(RNNOp, ParameterSizeFollowsMXNetRule) {
  // (I + H + 2) * G * H * D for layer 0, (D * H + H + 2) * G * H * D for the others.
  ImperativeOp op(
      "RNN",
      {{"mode", "rnn_relu"}, {"state_size", "8"}, {"num_layers", "3"}, {"bidirectional", "True"}},
      {{5, 4, 16}, {}, {}});
  EXPECT_EQ(op.in_shapes()[1], Shape({(16 + 8 + 2) * 8 * 2 + 2 * (16 + 8 + 2) * 8 * 2}));
  EXPECT_EQ(op.in_shapes()[2], Shape({6, 4, 8}));
  EXPECT_EQ(op.out_shapes()[0], Shape({5, 4, 16}));
  EXPECT_EQ(op.out_shapes().size(), 1u);
}

TEST(RNNOp, TrainingDropoutZeroesOrScalesLayerInputs) {
  // With p = 1 every second-layer input is dropped, so the output only depends on biases
  // and states: the same for any data.
  Attrs a{{"mode", "rnn_tanh"}, {"state_size", "3"}, {"num_layers", "2"}, {"p", "1"}};
  ImperativeOp op("RNN", a, {{2, 2, 3}, {}, {}});
  std::vector<NDArray> in;
  for (const auto& s : op.in_shapes()) in.push_back(NDArray::full(s, 0.3f));
  auto y1 = op.forward(in, true)[0].copy();
  in[0] = NDArray::full(op.in_shapes()[0], -0.7f);
  auto y2 = op.forward(in, true)[0];
  for (int64_t i = 0; i < y1.size(); ++i) EXPECT_FLOAT_EQ(y1.at(i), y2.at(i));
  auto y3 = op.forward(in, false)[0];  // no dropout in inference
  bool differs = false;
  for (int64_t i = 0; i < y1.size(); ++i)
    differs = differs || std::fabs(y1.at(i) - y3.at(i)) > 1e-6;
  EXPECT_TRUE(differs);
}

TEST(RNNOp, UnsupportedParametersAreRefusedByName) {
  try {
    ImperativeOp op(
        "RNN",
        {{"mode", "lstm"}, {"state_size", "4"}, {"num_layers", "1"}, {"projection_size", "2"}},
        {{2, 1, 3}, {}, {}, {}});
    FAIL() << "projection_size accepted";
  } catch (const ParamError& e) {
    EXPECT_NE(std::string(e.what()).find("projection_size"), std::string::npos) << e.what();
  }
  try {
    ImperativeOp op("RNN",
                    {{"mode", "gru"},
                     {"state_size", "4"},
                     {"num_layers", "1"},
                     {"use_sequence_length", "True"}},
                    {{2, 1, 3}, {}, {}});
    FAIL() << "use_sequence_length accepted";
  } catch (const ParamError& e) {
    EXPECT_NE(std::string(e.what()).find("use_sequence_length"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom::test
