// Which weights a kernel's derived copy of them (reordered, scaled by a folded BatchNorm,
// Winograd-transformed, packed) was made from: the array's storage, offset and write version,
// and the per-channel scale folded in. The copy is redone when any of them changes. Escaped
// storage (its pointer reached user code, which may write it without a version bump) never
// matches, so its copies are redone on every call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/ndarray.h"

namespace loom::nn {

struct WeightVersion {
  std::weak_ptr<Storage> owner;
  size_t offset = 0;
  uint64_t version = 0;
  std::vector<float> scale;
  bool valid = false;

  /// True when a copy made from `w` with `scale` folded in is still current.
  bool matches(const NDArray& w, std::span<const float> s = {}) const {
    const auto& st = w.storage();
    return valid && !st->escaped() && owner.lock() == st && offset == w.offset() &&
           version == st->version() && std::equal(s.begin(), s.end(), scale.begin(), scale.end());
  }
  /// Records that the copy now comes from `w` and `scale` (forgets for escaped storage).
  void remember(const NDArray& w, std::span<const float> s = {}) {
    const auto& st = w.storage();
    *this = {};
    if (!st->escaped()) *this = {st, w.offset(), st->version(), {s.begin(), s.end()}, true};
  }
};

}  // namespace loom::nn
