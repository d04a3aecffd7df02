// The math of the regression output heads (LinearRegressionOutput,
// LogisticRegressionOutput, MAERegressionOutput), shared by their CPU kernel
// (regression_output.h) and their CUDA kernel (loss_heads.cu). Plain declarations only, so
// .cu files include it without the CPU loops.
#pragma once

#include "ops/elemwise_math.h"
#include "runtime/base.h"

namespace loom::loss {

// forward(x) is the output, grad(y, label) the gradient before the scale grad_scale / K.

/// LinearRegressionOutput: identity; the gradient of 0.5 * (x - label)^2.
struct LinearRegression {
  LOOM_HD static float forward(float x) { return x; }
  LOOM_HD static float grad(float y, float label) { return y - label; }
};
/// LogisticRegressionOutput: sigmoid; the gradient of the binary cross-entropy.
struct LogisticRegression {
  LOOM_HD static float forward(float x) { return math::Sigmoid::f(x); }
  LOOM_HD static float grad(float y, float label) { return y - label; }
};
/// MAERegressionOutput: identity; the sign of y - label, -1 on an exact match (MXNet's
/// minus_sign).
struct MAERegression {
  LOOM_HD static float forward(float x) { return x; }
  LOOM_HD static float grad(float y, float label) { return y - label > 0.f ? 1.f : -1.f; }
};

/// Parameters of the three regression outputs.
struct RegressionOutputParam {
  float grad_scale;
};

/// K of the gradient scale grad_scale / K: outputs per sample, label.size / label.shape[0].
inline float regression_per_sample(const Shape& label) {
  return static_cast<float>(label.numel() / label[0]);
}

}  // namespace loom::loss
