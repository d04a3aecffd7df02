// _loom_bucket's parsed parameters (bucket.cc parses them), shared with its GPU kernel
// (bucket.cu).
#pragma once

#include <cstddef>
#include <vector>

#include "ops/op.h"

namespace loom::update {

struct BucketParam {
  const OpDef* inner = nullptr;
  size_t n = 0;                ///< tensors
  size_t m = 0;                ///< inputs per tensor
  size_t o = 0;                ///< outputs per tensor
  std::vector<OpAttrs> attrs;  ///< per tensor
};

}  // namespace loom::update
