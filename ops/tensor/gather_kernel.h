// A kernel whose every output element copies one input element, or is zero, by a table built at
// bind time (diag, depth_to_space, space_to_depth). The table must be injective (no input read
// twice); the gradient scatters the head gradient back through it.
#pragma once

#include <vector>

#include "ops/tensor/dtype_kernels.h"

namespace loom::tensor {

class GatherKernel : public Kernel {
 public:
  /// src[o]: the flat input index output o copies, or -1 for a zero.
  GatherKernel(const KernelArgs& a, std::vector<int64_t> src)
      : src_(std::move(src)), t_(a.in_types[0]), what_(node_label(a)) {
    if (a.out_types[0] != t_)
      throw Error(what_ + ": output dtype " + dtype_name(a.out_types[0]) +
                  " differs from input dtype " + dtype_name(t_));
    dispatch_dtype(
        t_, [](auto) {}, what_);
  }
  /// The table, for the GPU kernel (index_map.cu), which runs the same gather.
  const std::vector<int64_t>& table() const { return src_; }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    dispatch_dtype(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* x = in[0].cdata<T>();
          const int64_t* s = src_.data();
          const T zero = convert_value<T>(0);
          write_t<T>(out[0].data<T>(), req[0], out[0].size(),
                     [=](int64_t o) { return s[o] < 0 ? zero : x[s[o]]; });
        },
        what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          if (req[0] != Req::kAdd) fill_req(ig[0], req[0], 0.f);
          const T* g = og[0].cdata<T>();
          T* dx = ig[0].data<T>();
          const int64_t n = og[0].size();
          for (int64_t o = 0; o < n; ++o)
            if (src_[static_cast<size_t>(o)] >= 0) {
              T& d = dx[src_[static_cast<size_t>(o)]];
              d = add_value<T>(d, g[o]);
            }
        },
        what_);
  }

 private:
  std::vector<int64_t> src_;
  DType t_;
  std::string what_;
};

}  // namespace loom::tensor
