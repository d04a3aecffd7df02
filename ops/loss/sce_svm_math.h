// The per-row and per-element arithmetic of softmax_cross_entropy and SVMOutput, shared by
// their CPU kernels (softmax_cross_entropy.cc, svm_output.cc) and the CUDA kernels
// (loss_heads.cu): the CPU tests check the code the GPU runs.
#pragma once

#include <cstdint>

#include "ops/elemwise_math.h"

namespace loom::loss {

/// SVMOutput's parameters (svm_output.cc declares the schema).
struct SVMOutputParam {
  float margin;
  float regularization_coefficient;
  bool use_linear;
};

/// log Σ_j exp(row[j]) over k floats, shifted by the row's maximum; the sum in double.
LOOM_HD double sce_log_sum_exp(const float* row, int64_t k) {
  float mx = row[0];
  for (int64_t j = 1; j < k; ++j) mx = mx < row[j] ? row[j] : mx;  // std::max's rule
  double s = 0;
  for (int64_t j = 0; j < k; ++j) s += math::fn::exp(double(row[j]) - mx);
  return mx + math::fn::log(s);
}

/// d x_j of softmax_cross_entropy: g · (softmax(x)_j − [j is the label]), lse = the row's
/// sce_log_sum_exp.
LOOM_HD float sce_grad(float x, double lse, bool target, float g) {
  return g * static_cast<float>(math::fn::exp(x - lse) - (target ? 1.0 : 0.0));
}

/// SVMOutput's gradient of output v (one of a row's k scores): the squared hinge
/// (L2-SVM), or the hinge with `linear`, of the label's score against `margin`, scaled by
/// `lambda` (regularization_coefficient).
LOOM_HD float svm_grad(float v, bool target, float margin, float lambda, bool linear) {
  if (target) return margin > v ? -lambda * (linear ? 1.f : 2.f * (margin - v)) : 0.f;
  return margin > -v ? lambda * (linear ? 1.f : 2.f * (margin + v)) : 0.f;
}

}  // namespace loom::loss
