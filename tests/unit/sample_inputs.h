// Input values for an op's registered samples (ops/op.h, OpSample), drawn the same way by the
// CPU op sweep, the dtype audit and the GPU sweep: a sample names a kind per input.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "ops/op.h"
#include "runtime/ndarray.h"

namespace loom::test {

inline bool is_label_kind(const std::string& k) {
  return k.rfind("label:", 0) == 0 || k.rfind("index:", 0) == 0;
}

/// The kind of the sample's input i ("normal" when the sample names none).
inline std::string kind_of(const OpSample& s, size_t i) {
  return i < s.in_kinds.size() && !s.in_kinds[i].empty() ? s.in_kinds[i] : "normal";
}

/// float32 values of one kind: label:K / index:K integers in [0, K), positive, above1, unit,
/// zeros, ones, else normal(0, 1) times `scale`.
inline NDArray make_input(const Shape& s, const std::string& kind, std::mt19937& rng,
                          float scale = 1.f) {
  NDArray a(s);
  float* p = a.data<float>();
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> uni(0.f, 1.f);
  for (int64_t i = 0; i < a.size(); ++i) {
    if (is_label_kind(kind)) {
      int k = std::stoi(kind.substr(kind.find(':') + 1));
      p[i] = static_cast<float>(static_cast<int>(uni(rng) * static_cast<float>(k)) % k);
    } else if (kind == "positive") {
      p[i] = 0.5f + 1.5f * uni(rng);
    } else if (kind == "above1") {
      p[i] = 1.2f + 1.5f * uni(rng);
    } else if (kind == "unit") {
      p[i] = -0.9f + 1.8f * uni(rng);
    } else if (kind == "zeros") {
      p[i] = 0.f;
    } else if (kind == "ones") {
      p[i] = 1.f;
    } else {
      p[i] = scale * normal(rng);
    }
  }
  return a;
}

}  // namespace loom::test
