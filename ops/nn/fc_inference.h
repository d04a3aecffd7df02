// FullyConnected in inference with its weights kept in oneDNN's layout. The training kernel
// runs matmul on Loom's row-major weights, which oneDNN 2.6's brgemm matmul (AVX-512) copies
// into its blocked layout on every call: a network's classifier at batch 1 (1024 -> 1000)
// took 135 us that way against 27 us for an inner product on weights reordered once (one
// thread; 204 vs 124 us at batch 16). In inference the reordered weights are kept while the
// weight array provably has not changed (Storage::version, never escaped), like the
// convolutions' cached weight reorders. With AVX2 both run the same gemm kernel (no gain, no
// loss). Small products (a face embedding's 512 -> 128 at batch 1) build and run on one
// thread (dnnl_util::threads_for_work). LOOM_FC_CACHED_WEIGHTS=0 keeps the matmul path.
//
// A few rows (batch 1 to 4) are a matrix-vector product that streams the weights from memory
// once (a classifier's weights are long evicted by the rest of the network). Loom's own loop
// reads them packed as [o/16][k][16] (cached like the inner product's weights), one sequential
// stream per 16 outputs, where oneDNN 2.6's kernels are slower at the same bytes.
// LOOM_FC_GEMV=0 keeps the inner product.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "ops/nn/block_vec.h"
#include "ops/nn/dnnl_args.h"
#include "ops/nn/weight_version.h"
#include "runtime/cpu/dnnl_util.h"
#include "runtime/cpu/thread_cap.h"
#include "runtime/ndarray.h"

namespace loom::nn {

class FcInference {
 public:
  /// y (m x o) = x (m x k) · wᵀ + b, w row-major (o x k). Builds nothing (and `ready()` is
  /// false) when switched off or when oneDNN refuses.
  FcInference(int64_t m, int64_t k, int64_t o, bool bias) {
    using dnnl::memory;
    if (env_off("LOOM_FC_CACHED_WEIGHTS") || m <= 0 || k <= 0 || o <= 0) return;
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(k) * o;
    threads_ = dnnl_util::threads_for_work(flops, 4.0 * static_cast<double>(m * k + k * o + m * o));
    m_ = m, k_ = k, o_ = o;
    if (m <= kGemvMaxRows && !env_off("LOOM_FC_GEMV")) {
      gemv_ = true;
      impl_ = "loom_gemv";
      return;
    }
    dnnl_util::ThreadCap cap(threads_);
    const auto tag = memory::format_tag::ab;
    const auto f32 = memory::data_type::f32;
    x_ = memory::desc({m, k}, f32, tag);
    y_ = memory::desc({m, o}, f32, tag);
    if (bias) b_ = memory::desc({o}, f32, memory::format_tag::a);
    try {
      auto w_any = memory::desc({o, k}, f32, memory::format_tag::any);
      auto d = bias ? dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, x_,
                                                        w_any, b_, y_)
                    : dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, x_,
                                                        w_any, y_);
      dnnl::inner_product_forward::primitive_desc pd(d, dnnl_util::engine());
      const std::string impl = pd.impl_info_str();
      if (impl.find("ref") != std::string::npos) return;  // never oneDNN's reference kernel
      w_ = dnnl_util::LayoutBridge(memory::desc({o, k}, f32, tag), pd.weights_desc(),
                                   /*to_only=*/true);
      prim_ = dnnl::inner_product_forward(pd);
      impl_ = impl;
      args_.add(DNNL_ARG_SRC, x_);
      args_.add(DNNL_ARG_WEIGHTS, w_.chosen());
      if (bias) args_.add(DNNL_ARG_BIAS, b_);
      args_.add(DNNL_ARG_DST, y_);
    } catch (const dnnl::error&) {
      prim_.reset();
    }
  }

  bool ready() const { return gemv_ || prim_.has_value(); }
  /// True when forward can accumulate (req=add): the matrix-vector loop.
  bool accumulates() const { return gemv_; }
  const std::string& impl_info() const { return impl_; }

  /// Runs the product when the weights can be cached (CPU storage that never handed out a
  /// mutable pointer) or, for the matrix-vector loop, on any CPU weights; returns false
  /// otherwise (the caller runs its own path). `add` (req=add: y += the product) only where
  /// `accumulates()`.
  bool forward(const float* x, const NDArray& w, const float* b, float* y, bool add = false) {
    if (!ready() || w.device().type != DeviceType::kCPU || (add && !gemv_)) return false;
    const auto& st = w.storage();
    if (!st) return false;
    dnnl_util::ThreadCap cap(threads_);
    if (gemv_ && !st->escaped()) {
      gemv<true>(x, static_cast<const float*>(cached_weights(w)), b, y, add);
      return true;
    }
    if (gemv_ && k_ * o_ <= kGemvMaxGather) {  // escaped: read in place, the same arithmetic
      gemv<false>(x, w.cdata<float>(), b, y, add);
      return true;
    }
    if (st->escaped()) return false;
    args_.set(DNNL_ARG_WEIGHTS, w_.same() ? w.cdata<float>() : cached_weights(w));
    args_.set(DNNL_ARG_SRC, x);
    if (b) args_.set(DNNL_ARG_BIAS, b);
    args_.set(DNNL_ARG_DST, y);
    args_.execute(*prim_);
    return true;
  }

 private:
  static constexpr int64_t kGemvMaxRows = 4;
  static constexpr int64_t kGemvBlock = 16;  // output rows per block of the packed weights
  // Escaped weights up to this many elements are gathered in place (ResNet-18's 512 x 1000:
  // 1.7x faster than the matmul path); larger ones take the matmul path (gathering ResNet-50's
  // 2048 x 1000, one scalar load per weight, was 1.8x slower than it).
  static constexpr int64_t kGemvMaxGather = int64_t{1} << 20;

  // The weights in the kernel's layout, redone when the array's version changed.
  const void* cached_weights(const NDArray& w) {
    if (cache_.buffer.is_none() || !cache_.from.matches(w)) {
      const int64_t bytes = gemv_ ? (o_ + kGemvBlock - 1) / kGemvBlock * kGemvBlock * k_ * 4
                                  : static_cast<int64_t>(w_.scratch_bytes());
      if (cache_.buffer.is_none()) cache_.buffer = NDArray(Shape{bytes}, DType::kUint8);
      if (gemv_)
        pack(w.cdata<float>(), static_cast<float*>(cache_.buffer.raw()));
      else
        w_.to_chosen(w.cdata<float>(), cache_.buffer.raw());
      cache_.from.remember(w);
    }
    return cache_.buffer.raw();
  }

  // (o, k) row-major -> [o / 16][k][16], rows past o zero: a block of 16 outputs is one
  // sequential stream, one vector per input element.
  void pack(const float* w, float* p) const {
    const int64_t k = k_, o = o_, blocks = (o_ + kGemvBlock - 1) / kGemvBlock;
#pragma omp parallel for schedule(static)
    for (int64_t jb = 0; jb < blocks; ++jb)
      for (int64_t q = 0; q < k; ++q)
        for (int64_t i = 0; i < kGemvBlock; ++i) {
          const int64_t j = jb * kGemvBlock + i;
          p[(jb * k + q) * kGemvBlock + i] = j < o ? w[j * k + q] : 0.f;
        }
  }

  // y = x · wᵀ + b: per block of 16 outputs, 16-wide accumulators over k (four of them, for
  // independent adds), on the packed weights or (kPacked false) gathered from the row-major
  // array: the same operations in the same order, so both give the same bits.
  template <bool kPacked>
  void gemv(const float* x, const float* pw, const float* b, float* y, bool add) const {
    using V = block_vec::Vec<kGemvBlock>;
    const int64_t m = m_, k = k_, o = o_, blocks = (o_ + kGemvBlock - 1) / kGemvBlock;
#pragma omp parallel for schedule(static) if (threads_ != 1)
    for (int64_t jb = 0; jb < blocks; ++jb) {
      const int64_t rows = std::min(kGemvBlock, o - jb * kGemvBlock);
      const float* wb = kPacked ? pw + jb * k * kGemvBlock : pw + jb * kGemvBlock * k;
      auto ld = [&](int64_t q) {  // weights of input q for the block's 16 outputs
        if constexpr (kPacked) return block_vec::load<kGemvBlock>(wb + q * kGemvBlock);
        V v{};
        for (int64_t i = 0; i < rows; ++i) v[i] = wb[i * k + q];
        return v;
      };
      for (int64_t r = 0; r < m; ++r) {
        const float* xr = x + r * k;
        V a0{}, a1{}, a2{}, a3{};
        int64_t q = 0;
        for (; q + 4 <= k; q += 4) {
          a0 += xr[q] * ld(q);
          a1 += xr[q + 1] * ld(q + 1);
          a2 += xr[q + 2] * ld(q + 2);
          a3 += xr[q + 3] * ld(q + 3);
        }
        for (; q < k; ++q) a0 += xr[q] * ld(q);
        const V acc = (a0 + a1) + (a2 + a3);
        for (int64_t i = 0; i < kGemvBlock && jb * kGemvBlock + i < o; ++i) {
          const int64_t j = jb * kGemvBlock + i;
          const float v = acc[i] + (b ? b[j] : 0.f);
          y[r * o + j] = add ? y[r * o + j] + v : v;
        }
      }
    }
  }

  bool gemv_ = false;
  int64_t m_ = 0, k_ = 0, o_ = 0;
  dnnl::memory::desc x_, y_, b_;
  dnnl_util::LayoutBridge w_;
  std::optional<dnnl::inner_product_forward> prim_;
  PrimitiveArgs args_;
  std::string impl_;
  int threads_ = 0;
  struct {
    WeightVersion from;
    NDArray buffer;
  } cache_;
};

}  // namespace loom::nn
