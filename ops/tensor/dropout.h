// Dropout's parameters and keep decision, shared by the CPU kernel (dropout.cc) and the CUDA
// kernel (dropout.cu).
#pragma once

#include <cstdint>
#include <string>

#include "ops/elemwise_math.h"
#include "ops/param.h"

namespace loom::tensor {

struct DropoutParam {
  float p;
  std::string mode;
  Shape axes;
  bool cudnn_off;
};
inline ParamSchema<DropoutParam> dropout_schema() {
  return ParamSchema<DropoutParam>()
      .optional("p", &DropoutParam::p, 0.5f, "Fraction of the input that gets dropped.")
      .choice("mode", &DropoutParam::mode, {"training", "always"}, "training",
              "Drop only in training, or always.")
      .optional("axes", &DropoutParam::axes, Shape(), "Axes that share one mask value.")
      .optional("cudnn_off", &DropoutParam::cudnn_off, false, "Ignored on CPU.")
      .check([](DropoutParam& p) {
        if (!(p.p >= 0.f && p.p <= 1.f)) throw ParamError("p must be in [0, 1]");
      });
}

/// The mask value of one element from a 24-bit uniform draw u24 in [0, 2^24): kept (scale =
/// 1/(1-p)) when u24 / 2^24 >= p, else dropped (0).
LOOM_HD float dropout_mask(uint32_t u24, float p, float scale) {
  return static_cast<float>(u24) * (1.f / 16777216.f) >= p ? scale : 0.f;
}

}  // namespace loom::tensor
