// Groups a bucket's tensors into runs that one collective can cover: tensors of one dtype
// lying back to back in one storage, with gaps below 64 bytes (the alignment of simple_bind's
// flat buffers; the gap bytes are zero and stay zero, so reducing them is harmless).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "runtime/ndarray.h"

namespace loom::dist_ops {

struct Run {
  void* data;
  size_t count;  // elements of `dtype`, gaps included
  DType dtype;
};

/// The runs over arrays[i] for i in `bucket` (empty arrays skipped), in storage order.
inline std::vector<Run> adjacent_runs(std::span<const NDArray> arrays,
                                      const std::vector<size_t>& bucket) {
  std::vector<const NDArray*> t;
  for (size_t i : bucket)
    if (arrays[i].size() > 0) t.push_back(&arrays[i]);
  std::sort(t.begin(), t.end(), [](const NDArray* x, const NDArray* y) {
    return x->storage() != y->storage() ? x->storage() < y->storage() : x->offset() < y->offset();
  });
  std::vector<Run> runs;
  for (size_t s = 0; s < t.size();) {
    const DType dt = t[s]->dtype();
    const size_t esz = dtype_size(dt), begin = t[s]->offset();
    size_t end = begin + t[s]->nbytes(), e = s + 1;
    for (; e < t.size(); ++e) {
      const NDArray& x = *t[e];
      if (x.storage() != t[s]->storage() || x.dtype() != dt || x.offset() < end ||
          x.offset() - end >= 64 || (x.offset() - begin) % esz)
        break;
      end = x.offset() + x.nbytes();
    }
    runs.push_back({t[s]->raw(), (end - begin) / esz, dt});
    s = e;
  }
  return runs;
}

}  // namespace loom::dist_ops
