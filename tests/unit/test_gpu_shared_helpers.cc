// Shared __host__ __device__ helpers that the GPU kernels run and whose edge cases the op
// sweep does not reach: index rules on non-finite values, AdamW's skip rule, the use_length
// clamp, prelu's gamma index, the cross-entropy row functions, and _loom_lr's schedule struct
// against the closed forms of lr_schedule.cc's header.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/loss/sce_svm_math.h"
#include "ops/nn/leaky_relu_math.h"
#include "ops/nn/pad_math.h"
#include "ops/nn/softmax_common.h"
#include "ops/tensor/gamma_math.h"
#include "ops/tensor/index_map.h"
#include "ops/tensor/index_util.h"
#include "ops/update/lr_math.h"
#include "ops/update/more_steps.h"
#include "runtime/imperative.h"

namespace loom {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(GpuSharedHelpers, IndexRulesOnNonFiniteAndNegativeValues) {
  EXPECT_EQ(tensor::wrap_index(kInf, 5), 0);
  EXPECT_EQ(tensor::wrap_index(-kInf, 5), 0);
  EXPECT_EQ(tensor::wrap_index(kNaN, 5), 0);
  EXPECT_EQ(tensor::wrap_index(-1.5f, 5), 4);  // trunc(-1.5) = -1 -> 4
  EXPECT_EQ(tensor::wrap_index(12.9f, 5), 2);
  EXPECT_EQ(tensor::clip_index(kNaN, 5), 0);
  EXPECT_EQ(tensor::clip_index(kInf, 5), 4);
  EXPECT_EQ(tensor::clip_index(-3.f, 5), 0);
  EXPECT_EQ(tensor::clip_index(2.7f, 5), 2);
}

TEST(GpuSharedHelpers, AdamWSkipsOnNonFiniteOrZeroScale) {
  EXPECT_TRUE(update::adamw_skips(0.f));
  EXPECT_TRUE(update::adamw_skips(kInf));
  EXPECT_TRUE(update::adamw_skips(-kInf));
  EXPECT_TRUE(update::adamw_skips(kNaN));
  EXPECT_FALSE(update::adamw_skips(1e-30f));
  EXPECT_FALSE(update::adamw_skips(-2.f));
}

TEST(GpuSharedHelpers, SoftmaxRowLengthClamps) {
  const int32_t len[] = {-2, 0, 3, 9};
  EXPECT_EQ(nn::softmax_row_len(len, 0, 5), 0);
  EXPECT_EQ(nn::softmax_row_len(len, 1, 5), 0);
  EXPECT_EQ(nn::softmax_row_len(len, 2, 5), 3);
  EXPECT_EQ(nn::softmax_row_len(len, 3, 5), 5);
  EXPECT_EQ(nn::softmax_row_len(static_cast<const int32_t*>(nullptr), 3, 5), 5);
}

// A masked row: entries past the length are 0 and the rest sum to 1; exps against a naive
// softmax in double.
TEST(GpuSharedHelpers, SoftmaxRowWithLengthMatchesNaive) {
  const float x[] = {0.5f, -1.f, 2.f, 7.f, 3.f};
  float y[5];
  nn::softmax_row_forward(x, y, 5, 3, 1, 1.f, false, false);
  double s = 0;
  for (int i = 0; i < 3; ++i) s += std::exp(double(x[i]));
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(y[i], std::exp(double(x[i])) / s, 1e-7);
  EXPECT_EQ(y[3], 0.f);
  EXPECT_EQ(y[4], 0.f);
}

TEST(GpuSharedHelpers, PreluGammaIndexMatchesNestedLoops) {
  const int64_t N = 2, C = 3, inner = 4;
  for (int64_t gn : {int64_t{1}, N})
    for (int64_t gc : {int64_t{1}, C})
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t p = 0; p < inner; ++p) {
            const int64_t i = (n * C + c) * inner + p;
            const int64_t want = (gn == 1 ? 0 : n) * gc + (gc == 1 ? 0 : c);
            EXPECT_EQ(nn::prelu_gamma_index(i, inner, C, gn, gc), want);
          }
}

TEST(GpuSharedHelpers, CrossEntropyRowAgainstClosedForm) {
  const float row[] = {1.f, 2.f, 3.f};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(loss::sce_log_sum_exp(row, 3), lse, 1e-12);
  // Gradients of a row sum to 0 (softmax sums to 1, minus the one-hot).
  double sum = 0;
  for (int j = 0; j < 3; ++j) sum += loss::sce_grad(row[j], lse, j == 1, 2.f);
  EXPECT_NEAR(sum, 0.0, 1e-6);
  EXPECT_NEAR(loss::sce_grad(row[1], lse, true, 2.f), 2.0 * (std::exp(2.0 - lse) - 1.0), 1e-6);
}

TEST(GpuSharedHelpers, LrScheduleClosedForms) {
  update::LrSchedule s;
  s.lr = 0.1;
  s.kind = update::LrSchedule::kFactor;
  s.step = 3;
  s.factor = 0.5;
  // factor: lr·factor^floor((t-1)/step) for t > step.
  EXPECT_FLOAT_EQ(s.at(3.f), 0.1f);
  EXPECT_FLOAT_EQ(s.at(4.f), 0.05f);
  EXPECT_FLOAT_EQ(s.at(7.f), 0.025f);
  s.kind = update::LrSchedule::kMultiFactor;
  s.n_steps = 2;
  s.steps[0] = 2;
  s.steps[1] = 5;
  s.factor = 0.1;
  EXPECT_FLOAT_EQ(s.at(2.f), 0.1f);
  EXPECT_FLOAT_EQ(s.at(3.f), 0.01f);
  EXPECT_FLOAT_EQ(s.at(6.f), 0.001f);
  s.kind = update::LrSchedule::kCosine;
  s.max_update = 10;
  s.final_lr = 0.01;
  // Halfway: final + (lr - final)/2; past max_update: final.
  EXPECT_FLOAT_EQ(s.at(5.f), 0.055f);
  EXPECT_FLOAT_EQ(s.at(20.f), 0.01f);
  s.kind = update::LrSchedule::kConstant;
  s.adam_bias = true;
  s.scale = 2;
  const double t = 3;
  EXPECT_FLOAT_EQ(s.at(3.f), static_cast<float>(0.2 * std::sqrt(1 - std::pow(0.999, t)) /
                                                (1 - std::pow(0.9, t))));
  s.adam_bias = false;
  s.warmup_steps = 4;
  s.warmup_begin_lr = 0.02;  // linear warmup to lr (warmup_final_lr < 0)
  EXPECT_FLOAT_EQ(s.at(2.f), static_cast<float>(2 * (0.02 + (0.1 - 0.02) * 2 / 4)));
}

// digamma, now written without recursion for the device: known values (closed forms) and
// poles.
TEST(GpuSharedHelpers, DigammaKnownValuesAndPoles) {
  const double euler = 0.57721566490153286;
  const double kTol = 5e-11;  // the series stops at x >= 6: ~1e-11, far below float32's ulp
  EXPECT_NEAR(tensor::digamma(1.0), -euler, kTol);
  EXPECT_NEAR(tensor::digamma(0.5), -euler - 2 * std::log(2.0), kTol);
  EXPECT_NEAR(tensor::digamma(0.25), -euler - M_PI / 2 - 3 * std::log(2.0), kTol);  // reflection
  EXPECT_NEAR(tensor::digamma(-0.5), 0.03648997397857652, kTol);
  EXPECT_NEAR(tensor::digamma(10.0), 2.251752589066721, kTol);
  EXPECT_TRUE(std::isnan(tensor::digamma(0.0)));
  EXPECT_TRUE(std::isnan(tensor::digamma(-2.0)));
  EXPECT_NEAR(tensor::gamma_deriv(3.0, false), 2.0 * (1.5 - euler), kTol);  // Γ(3)ψ(3)
}

// The GPU runs transpose through transpose_index_map (the CPU kernel has its own row loop):
// the map's gather equals the CPU kernel's output, element for element.
TEST(GpuSharedHelpers, TransposeIndexMapEqualsCpuTranspose) {
  for (const char* axes : {"(2, 0, 1)", "()", "(1, 0, 2)"}) {
    ImperativeOp op("transpose", {{"axes", axes}}, {Shape{2, 3, 4}});
    NDArray x(Shape{2, 3, 4}, DType::kFloat32);
    for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = static_cast<float>(i);
    const NDArray y = op.forward({x})[0];
    const auto v =
        tensor::index_map_view(tensor::transpose_index_map(op.attrs(), Shape{2, 3, 4}), "test");
    for (int64_t o = 0; o < y.size(); ++o)
      EXPECT_EQ(y.data<float>()[o], x.data<float>()[v.source(o)]) << axes << " element " << o;
  }
}

// Crop likewise runs on the GPU through crop_index_map.
TEST(GpuSharedHelpers, CropIndexMapEqualsCpuCrop) {
  for (const char* center : {"False", "True"}) {
    ImperativeOp op(
        "Crop",
        {{"num_args", "1"}, {"h_w", "(2, 3)"}, {"offset", "(1, 2)"}, {"center_crop", center}},
        {Shape{2, 2, 4, 6}});
    NDArray x(Shape{2, 2, 4, 6}, DType::kFloat32);
    for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = static_cast<float>(i);
    const NDArray y = op.forward({x})[0];
    std::vector<Shape> in = op.in_shapes(), out = op.out_shapes();
    std::vector<DType> it = {DType::kFloat32}, ot = {DType::kFloat32};
    const auto v = tensor::index_map_view(
        tensor::crop_index_map(KernelArgs{op.attrs(), in, out, it, ot, Device::cpu()}), "test");
    for (int64_t o = 0; o < y.size(); ++o)
      EXPECT_EQ(y.data<float>()[o], x.data<float>()[v.source(o)]) << center << " element " << o;
  }
}

// Pad runs on the GPU through PadView::source (the CPU composes per-axis tables of the same
// per-axis rule): the view's gather equals the CPU Pad, every mode.
TEST(GpuSharedHelpers, PadViewEqualsCpuPad) {
  for (const char* mode : {"constant", "edge", "reflect"}) {
    const Attrs attrs = {{"mode", mode}, {"pad_width", "(0, 0, 0, 0, 1, 2, 2, 1)"},
                         {"constant_value", "-7"}};
    ImperativeOp op("Pad", attrs, {Shape{1, 2, 3, 4}});
    NDArray x(Shape{1, 2, 3, 4}, DType::kFloat32);
    for (int64_t i = 0; i < x.size(); ++i) x.data<float>()[i] = static_cast<float>(i);
    const NDArray y = op.forward({x})[0];
    const auto v = nn::pad_view(op.attrs().param<nn::PadParam>(), Shape{1, 2, 3, 4},
                                op.out_shapes()[0]);
    for (int64_t o = 0; o < y.size(); ++o) {
      const int64_t k = v.source(o);
      EXPECT_EQ(y.data<float>()[o], k < 0 ? -7.f : x.data<float>()[k]) << mode << " " << o;
    }
  }
}

}  // namespace
}  // namespace loom
