// Helpers shared by the vision and sequence operators (ops/vision, ops/sequence): their
// kernels compute in float32 buffers whatever the arrays' dtype (float16/float64 arrays are
// converted on the way in and out), and apply the output request once at the end.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "ops/infer.h"
#include "runtime/dtype_traits.h"

namespace loom::vision {

/// "node 'x' (op ROIPooling)": the prefix of this family's error messages.
inline std::string label(const OpAttrs& a) {
  return "node '" + a.name + "' (op " + (a.op ? a.op->name : std::string("?")) + ")";
}

/// The values of `a` (any numeric dtype) as float32.
inline std::vector<float> load(const NDArray& a) {
  std::vector<float> v(static_cast<size_t>(a.size()));
  if (a.dtype() == DType::kFloat32) {
    std::copy_n(a.cdata<float>(), v.size(), v.data());
    return v;
  }
  dispatch_dtype(
      a.dtype(),
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = a.cdata<T>();
        for (size_t i = 0; i < v.size(); ++i) v[i] = convert_value<float>(p[i]);
      },
      "load");
  return v;
}

/// dst = v (kWrite/kInplace) or dst += v (kAdd), converting to dst's dtype; kNull: nothing.
inline void store(const NDArray& dst, Req req, const std::vector<float>& v) {
  if (req == Req::kNull || dst.is_none()) return;
  const size_t n = std::min(v.size(), static_cast<size_t>(dst.size()));
  dispatch_dtype(
      dst.dtype(),
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* p = dst.data<T>();
        if (req == Req::kAdd) {
          for (size_t i = 0; i < n; ++i) p[i] = convert_value<T>(convert_value<float>(p[i]) + v[i]);
        } else {
          for (size_t i = 0; i < n; ++i) p[i] = convert_value<T>(v[i]);
        }
      },
      "store");
}

/// Writes zeros honouring req (kAdd leaves dst as it is).
inline void store_zero(const NDArray& dst, Req req) {
  if (req == Req::kNull || req == Req::kAdd || dst.is_none()) return;
  store(dst, req, std::vector<float>(static_cast<size_t>(dst.size()), 0.f));
}

/// Throws Error naming the node when input/output dtypes are not floating point.
inline void check_float(const KernelArgs& a, size_t n_in) {
  for (size_t i = 0; i < n_in && i < a.in_types.size(); ++i)
    if (!dtype_is_float(a.in_types[i]))
      throw Error(label(a.attrs) + ": input " + std::to_string(i) + " has dtype " +
                  dtype_name(a.in_types[i]) + "; the CPU kernel supports float16/32/64");
}

/// Type rule: inputs [0, n_same) and every output but those in `fixed` share one dtype
/// (from whichever is known; float32 when none is); fixed outputs get their given dtype.
inline void infer_type_shared(std::vector<DType>& in, std::vector<DType>& out, size_t n_same,
                              const std::vector<std::pair<size_t, DType>>& fixed = {}) {
  auto is_fixed = [&](size_t k) {
    for (auto& f : fixed)
      if (f.first == k) return true;
    return false;
  };
  DType t = DType::kUnknown;
  for (size_t i = 0; i < n_same && i < in.size(); ++i)
    if (in[i] != DType::kUnknown) {
      if (t == DType::kUnknown) t = in[i];
      merge_type(t, in[i], "input " + std::to_string(i));
    }
  for (size_t k = 0; k < out.size(); ++k)
    if (!is_fixed(k) && out[k] != DType::kUnknown) {
      if (t == DType::kUnknown) t = out[k];
      merge_type(t, out[k], "output " + std::to_string(k));
    }
  if (t == DType::kUnknown) t = DType::kFloat32;
  for (size_t i = 0; i < n_same && i < in.size(); ++i) in[i] = t;
  for (size_t k = 0; k < out.size(); ++k)
    if (!is_fixed(k)) out[k] = t;
  for (auto& f : fixed)
    if (f.first < out.size())
      merge_type(out[f.first], f.second, "output " + std::to_string(f.first));
}

}  // namespace loom::vision
