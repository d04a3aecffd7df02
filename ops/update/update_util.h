// Helpers shared by the optimizer update kernels (MXNet's src/operator/optimizer_op-inl.h
// family): the fused element loop with its output request, gradient clipping, the common
// parameter docs and the kernel base class. Internal to ops/update/.
//
// Conventions of every update op, as in MXNet: inputs are (weight, grad, states...); the
// states are mutable inputs (`.aux`, MXNet's FMutateInputs) updated in place; the output is
// the new weight and may alias `weight` (`.inplace_pairs({{0, 0}})`, Python's `out=weight`).
// The ops are not differentiable.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "ops/infer.h"
#include "ops/op.h"

namespace loom::update {

/// Below this many elements the loop runs on the calling thread (no OpenMP region).
constexpr int64_t kParallelMin = 1 << 15;

/// The bound clip() uses for an MXNet `clip_gradient` (or `clip_weights`) value. MXNet clips
/// when the value is >= 0 (so 0 clips to zero, although its docs say "<= 0 turns clipping
/// off") and not when it is negative; +inf makes the disabled case branch-free and exact.
inline float clip_bound(double c) {
  return c >= 0 ? static_cast<float>(c) : std::numeric_limits<float>::infinity();
}
/// Parameters are parsed as double (so defaults print as MXNet's, "0.9"); MXNet's kernels
/// compute in float, and so do these.
inline float f32(double v) { return static_cast<float>(v); }
/// min(max(v, -b), b), passing NaN through as mshadow's clip does.
inline float clip(float v, float b) { return v > b ? b : (v < -b ? -b : v); }

/// A range of elements an update runs over: all of them (`parallel`: split among OpenMP
/// threads when large) or one piece of a bucket (the caller already runs in parallel).
struct Range {
  int64_t begin = 0, end = 0;
  bool parallel = true;
};

/// The fused update over the elements of `r`. step(i) updates element i of the states in
/// place and returns the new weight, which is then stored per req: kWrite/kInplace store,
/// kAdd adds, kNull drops it (the states are updated regardless, as MXNet's kernels do).
/// Under kInplace `out` aliases `weight`: step(i) reads weight[i] before out[i] is written.
template <class Step>
void apply(float* out, Req req, Range r, Step step) {
  const int64_t b = r.begin, e = r.end;
  auto loop = [&](auto body) {
    if (r.parallel && e - b >= kParallelMin) {
#pragma omp parallel for simd schedule(static)
      for (int64_t i = b; i < e; ++i) body(i);
    } else {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) body(i);
    }
  };
  switch (req) {
    case Req::kNull: loop([&](int64_t i) { (void)step(i); }); break;
    case Req::kAdd: loop([&](int64_t i) { out[i] += step(i); }); break;
    default: loop([&](int64_t i) { out[i] = step(i); }); break;
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

/// An element-wise update kernel that can run over part of its elements, so that the
/// bucket op (`_loom_bucket`, ops/update/bucket.cc) can update many parameters in one
/// parallel pass. run() covers the elements of `r` and may be called concurrently for
/// disjoint ranges; once() holds what must happen exactly once per call (one-element
/// states such as the EMA's debias norm) and runs after every range.
class RangeKernel : public Kernel {
 public:
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) final {
    run(ctx, in, req, out, Range{0, elements(in), true});
    once(ctx, in, req, out);
  }
  virtual void run(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
                   std::span<const NDArray> out, Range r) = 0;
  virtual void once(const OpContext&, std::span<const NDArray>, std::span<const Req>,
                    std::span<const NDArray>) {}
  /// The number of elements the update runs over (the first input's).
  static int64_t elements(std::span<const NDArray> in) { return in[0].size(); }
};

/// Base of the update kernels: keeps the parsed parameters and checks the dtypes.
template <class P>
class UpdateKernel : public RangeKernel {
 public:
  explicit UpdateKernel(const KernelArgs& a) : p_(a.attrs.param<P>()) { check_f32(a); }

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
