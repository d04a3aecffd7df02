// Helpers shared by the optimizer update kernels (MXNet's src/operator/optimizer_op-inl.h
// family): the fused element loop with its output request, gradient clipping, the common
// parameter docs and the kernel base class. Internal to ops/update/.
//
// Conventions of every update op, as in MXNet: inputs are (weight, grad, states...); the
// states are mutable inputs (`.aux`, MXNet's FMutateInputs) updated in place; the output is
// the new weight and may alias `weight` (`.inplace_pairs({{0, 0}})`, Python's `out=weight`).
// The ops are not differentiable.
#pragma once

#include <omp.h>

#include <algorithm>

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "ops/infer.h"
#include "ops/op.h"
#include "ops/update/update_math.h"

namespace loom::update {

/// Below this many elements the loop runs on the calling thread (no OpenMP region).
constexpr int64_t kParallelMin = 1 << 15;

/// Parameters are parsed as double (so defaults print as MXNet's, "0.9"); MXNet's kernels
/// compute in float, and so do these.
inline float f32(double v) { return static_cast<float>(v); }

/// A range of elements an update runs over: all of them (`parallel`: split among OpenMP
/// threads when large) or one piece of a bucket (the caller already runs in parallel).
struct Range {
  int64_t begin = 0, end = 0;
  bool parallel = true;
};

/// The serial loop of apply over [b, e). `step` is taken by value and called from flat
/// loops (no lambda captures it by reference), so the compiler keeps its captured pointers
/// and scalars in registers and vectorises; a by-reference capture made the stores look
/// like they could alias the closure and left the loop scalar (2x slower).
template <class Step>
void apply_serial(float* out, Req req, int64_t b, int64_t e, Step step) {
  if (req == Req::kNull) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) (void)step(i);
  } else if (req == Req::kAdd) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) out[i] += step(i);
  } else {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) out[i] = step(i);
  }
}

/// The fused update over the elements of `r`. step(i) updates element i of the states in
/// place and returns the new weight, which is then stored per req: kWrite/kInplace store,
/// kAdd adds, kNull drops it (the states are updated regardless, as MXNet's kernels do).
/// Under kInplace `out` aliases `weight`: step(i) reads weight[i] before out[i] is written.
template <class Step>
void apply(float* out, Req req, Range r, Step step) {
  if (!r.parallel || r.end - r.begin < kParallelMin) {
    apply_serial(out, req, r.begin, r.end, step);
    return;
  }
#pragma omp parallel
  {
    auto [lo, hi] = thread_share(r.begin, r.end, omp_get_num_threads(), omp_get_thread_num());
    apply_serial(out, req, lo, hi, step);
  }
}
/// apply over all n elements.
template <class Step>
void apply(float* out, Req req, int64_t n, Step step) {
  apply(out, req, Range{0, n, true}, step);
}

/// Copies weight into out per req (kInplace aliasing is a no-op): the result of a skipped update.
void keep_weight(const NDArray& weight, const NDArray& out, Req req, Range r);

/// Throws unless every input and output is float32, the only dtype these kernels support.
void check_f32(const KernelArgs& args);

/// Shape rule: inputs [0, n_full) and the output share one shape; inputs from n_full on are
/// one-element scalars (shape (1,) when unknown), e.g. LAMB's norms or AdamW's rescale_grad.
void infer_shape_with_scalars(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out,
                              size_t n_full);

/// Input names `base`, plus a trailing one-element input `extra` when `on` (the optional
/// learning-rate / step-count tensors of training-step graphs).
inline std::vector<std::string> names_with(std::vector<std::string> base, bool on,
                                           const char* extra = "lr") {
  if (on) base.emplace_back(extra);
  return base;
}
/// Shape rule for an update op whose first `n_full` inputs share the weight's shape and whose
/// remaining inputs (rescale_grad, lr, t tensors) are one-element scalars.
inline auto shapes_with_scalars(size_t n_full) {
  return [n_full](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
    infer_shape_with_scalars(a, in, out, n_full);
  };
}
/// in[idx][0] when `on` (a one-element float32 input read on the host), else `attr`.
inline float scalar_or(std::span<const NDArray> in, size_t idx, bool on, double attr) {
  return on ? in[idx].data<float>()[0] : static_cast<float>(attr);
}

/// An element-wise update kernel: run() covers the elements of `r` and may be called
/// concurrently for disjoint ranges (the bucket op, the executor's chunked chains: see
/// Kernel::range_partition); once() holds what must happen exactly once per call
/// (one-element states such as the EMA's debias norm) and runs after every range.
class RangeKernel : public Kernel {
 public:
  explicit RangeKernel(const KernelArgs& a) : n_(a.in_shapes.empty() ? 0 : a.in_shapes[0].numel()) {}
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) final {
    run(ctx, in, req, out, Range{0, n_, true});
    once(ctx, in, req, out);
  }
  std::vector<int64_t> range_partition() const final { return {n_}; }
  void forward_range(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
                     std::span<const NDArray> out, int64_t begin, int64_t end) final {
    run(ctx, in, req, out, Range{begin, end, false});
  }
  void forward_once(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
                    std::span<const NDArray> out) final {
    once(ctx, in, req, out);
  }

 protected:
  virtual void run(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
                   std::span<const NDArray> out, Range r) = 0;
  virtual void once(const OpContext&, std::span<const NDArray>, std::span<const Req>,
                    std::span<const NDArray>) {}

 private:
  int64_t n_;  ///< elements: the first input's
};

/// Base of the update kernels: keeps the parsed parameters and checks the dtypes.
template <class P>
class UpdateKernel : public RangeKernel {
 public:
  explicit UpdateKernel(const KernelArgs& a) : RangeKernel(a), p_(a.attrs.param<P>()) {
    check_f32(a);
  }

 protected:
  P p_;
};

// Parameter docs shared by the schemas (MXNet's wording).
inline constexpr const char* kDocLr = "Learning rate.";
inline constexpr const char* kDocWd =
    "Weight decay augments the objective function with a regularization term that penalizes "
    "large weights. The penalty scales with the square of the magnitude of each weight.";
inline constexpr const char* kDocRescale = "Rescale gradient to grad = rescale_grad*grad.";
inline constexpr const char* kDocClip =
    "Clip gradient to the range of [-clip_gradient, clip_gradient]; a negative value turns "
    "clipping off (0 clips to zero, as MXNet's kernels do).";
inline constexpr const char* kDocClipWeights =
    "Clip weights to the range of [-clip_weights, clip_weights]; negative = off.";
inline constexpr const char* kDocLrInput =
    "Read the learning rate from an extra trailing one-element input `lr` instead of the `lr` "
    "attribute (a schedule computed in a training-step graph). Off by default: MXNet's op.";
inline constexpr const char* kDocLazy =
    "Accepted for MXNet compatibility: only row_sparse gradients update lazily, and Loom's "
    "gradients are dense, so it has no effect.";
inline constexpr const char* kDocMomentum = "The decay rate of momentum estimates at each epoch.";
inline constexpr const char* kDocBeta1 = "The decay rate for the 1st moment estimates.";
inline constexpr const char* kDocBeta2 = "The decay rate for the 2nd moment estimates.";
inline constexpr const char* kDocEpsilon = "A small constant for numerical stability.";

}  // namespace loom::update
