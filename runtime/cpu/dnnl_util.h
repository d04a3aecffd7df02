// Shared oneDNN plumbing for CPU kernels: one engine, a per-thread stream, memory
// descriptors for Loom's plain (row-major) arrays, and a cached bridge between a plain array
// and the layout a primitive chose for it.
#pragma once

#include <dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/base.h"

namespace loom::dnnl_util {

using dnnl::memory;

/// The process-wide CPU engine.
const dnnl::engine& engine();
/// This thread's stream on `engine()` (in-order; CPU primitives finish before `wait`).
dnnl::stream& stream();

/// Dimensions of a Loom shape as oneDNN dims.
memory::dims to_dims(const Shape& s);
/// The row-major format tag for `ndim` dimensions (a, ab, abc, ... up to 6).
memory::format_tag plain_tag(int ndim);
/// A float32 descriptor for a row-major array of `dims`.
memory::desc plain_md(const memory::dims& dims);
/// A float32 descriptor of `dims` with layout left to the primitive (`format_tag::any`).
memory::desc any_md(const memory::dims& dims);
/// A float32 descriptor of a 4-D array of `dims` stored in `layout` (plain: row-major).
memory::desc layout_md(const memory::dims& dims, Layout layout);
/// Channels per block of the activation layout oneDNN's convolutions prefer on this CPU
/// (16 with AVX-512, 8 with AVX2; 1 when they want plain data).
int preferred_channel_block();

/// The instruction set oneDNN's JIT kernels use in this process: the CPU's own, capped by
/// ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA when set before the first primitive is created.
dnnl::cpu_isa effective_isa();
/// True when `effective_isa()` includes AVX-512 (avx512_core or a later extension).
bool isa_has_avx512();
/// A short name of `effective_isa()` as oneDNN spells it ("avx2", "avx512_core_bf16", ...).
std::string isa_name();
/// True when oneDNN has f32 Winograd convolution kernels for this ISA (a probe of a typical
/// 3x3 layer; oneDNN 2.x implements them for AVX-512 only).
bool has_winograd();

/// Runs `prim` with `args` on this thread's stream and waits for it.
void execute(const dnnl::primitive& prim, const std::unordered_map<int, memory>& args);

/// Throws Error naming `what` when a oneDNN call fails.
[[noreturn]] void rethrow(const dnnl::error& e, const std::string& what);

/// Records the implementation a kernel's primitives use (e.g. "Convolution fwd=gemm:jit").
/// Kernels call this at bind time; tests and `loom info` read it back.
void record_impl(const std::string& line);
/// Every line recorded so far, oldest first (capped to the last 256).
std::vector<std::string> recorded_impls();
/// How many lines were ever recorded (not capped): a mark for recorded_impls_since.
uint64_t recorded_impl_count();
/// The lines recorded after `mark` (a recorded_impl_count() value) that the cap kept.
std::vector<std::string> recorded_impls_since(uint64_t mark);

/// Adds n floats: dst[i] += src[i].
void add_to(float* dst, const float* src, int64_t n);

/// Moves one tensor between the layout of Loom's array (`plain` below: row-major, or the
/// channel-blocked layout the executor chose) and a primitive's chosen layout. The reorder
/// primitives are built once (at bind time); calls only execute them.
class LayoutBridge {
 public:
  LayoutBridge() = default;
  /// `to_only`: only plain -> chosen (inference weights in formats with no way back, e.g.
  /// Winograd's); from_chosen/finish must not be used then.
  LayoutBridge(const memory::desc& plain, const memory::desc& chosen, bool to_only = false);
  /// True when the chosen layout is the plain one (no reorder needed).
  bool same() const { return same_; }
  /// Bytes of the chosen-layout scratch buffer a caller must provide.
  size_t scratch_bytes() const { return chosen_.get_size(); }
  const memory::desc& chosen() const { return chosen_; }
  /// A chosen-layout memory holding the plain array at `plain`; reorders into `scratch`
  /// unless the layouts agree (then wraps `plain` directly).
  memory to_chosen(const float* plain, void* scratch) const;
  /// Stores the chosen-layout data at `src` into the plain array at `plain`, overwriting
  /// or (add) accumulating.
  void from_chosen(const void* src, float* plain, bool add) const;
  /// Where a primitive should write this tensor when Loom wants it in `plain` with an
  /// accumulate flag: `plain` itself when the layouts agree and `add` is false, else `scratch`.
  void* target(float* plain, void* scratch, bool add) const {
    return same_ && !add ? static_cast<void*>(plain) : scratch;
  }
  /// Completes a write begun with `target`: reorders / accumulates scratch into `plain`.
  void finish(const void* written, float* plain, bool add) const {
    if (written != plain) from_chosen(written, plain, add);
  }

 private:
  memory::desc plain_, chosen_;
  bool same_ = true;
  dnnl::reorder to_, from_write_, from_add_;
};

}  // namespace loom::dnnl_util
