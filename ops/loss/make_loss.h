// MakeLoss's parameters, shared by its CPU kernel (make_loss.cc) and GPU kernel
// (loss_heads.cu).
#pragma once

#include <string>

#include "ops/loss/loss_util.h"

namespace loom::loss {

/// MakeLoss: backward writes grad_scale, divided by the batch size or by the number of
/// elements above valid_thresh as `normalization` says.
struct MakeLossParam {
  float grad_scale;
  float valid_thresh;
  std::string normalization;
};

inline ParamSchema<MakeLossParam> make_loss_schema() {
  using P = MakeLossParam;
  return ParamSchema<P>()
      .optional("grad_scale", &P::grad_scale, 1.0f,
                "Gradient scale as a supplement to the "
                "unary and binary operators.")
      .optional("valid_thresh", &P::valid_thresh, 0.0f,
                "Elements greater than valid_thresh count as valid for normalization='valid'.")
      .choice("normalization", &P::normalization, normalization_choices(), "null",
              "Gradient normalisation: null (none), batch (divide by the first dimension), "
              "valid (divide by the number of elements above valid_thresh).");
}

}  // namespace loom::loss
