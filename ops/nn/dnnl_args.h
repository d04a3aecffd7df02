// The memory arguments of a oneDNN primitive kept between calls. Creating a dnnl::memory
// (~0.2 us) and the argument map (~0.1 us) for every tensor of every call adds up to a few
// percent of a small network at batch 1; a kernel instead declares its primitive's arguments
// once, when it builds the primitive, and per call only points them at this call's buffers
// (set_data_handle, skipped while the pointer is unchanged). LOOM_DNNL_CACHED_ARGS=0 (read
// when the kernel is built) makes fresh memory objects on every call instead.
#pragma once

#include <dnnl.hpp>
#include <string>
#include <vector>

#include "ops/op.h"
#include "runtime/base.h"
#include "runtime/cpu/dnnl_util.h"

namespace loom::nn {

/// The oneDNN post-ops of `ops` after its affine map (which the caller folds into the weights
/// and bias): the sum, then ReLU or leaky as an eltwise relu with a slope, and with
/// `with_prelu` PReLU as a prelu post-op with one slope per output channel (without, a PReLU
/// is the caller's to apply or refuse).
inline dnnl::post_ops make_post_ops(const PostOps& ops, bool with_prelu) {
  dnnl::post_ops po;
  if (ops.sum) po.append_sum(1.f);
  switch (ops.act.kind) {
    case FusedActivation::kRelu:
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      break;
    case FusedActivation::kLeaky:
      po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, ops.act.alpha, 0.f);
      break;
    case FusedActivation::kPrelu:
      if (with_prelu) po.append_prelu(1 << 1);
      break;
    case FusedActivation::kNone:
      break;
  }
  return po;
}

/// One primitive's arguments. Not thread-safe: a kernel running the same primitive on
/// several threads at once keeps one PrimitiveArgs per thread. Copies make memory objects of
/// their own, so two kernels never share one.
class PrimitiveArgs {
 public:
  PrimitiveArgs() = default;
  PrimitiveArgs(const PrimitiveArgs& o) : cached_(o.cached_) {
    for (const auto& s : o.slots_) add(s.arg, s.md);
  }
  PrimitiveArgs& operator=(const PrimitiveArgs& o) {
    if (this != &o) {
      slots_.clear();
      c_args_.clear();
      cached_ = o.cached_;
      for (const auto& s : o.slots_) add(s.arg, s.md);
    }
    return *this;
  }
  PrimitiveArgs(PrimitiveArgs&&) = default;
  PrimitiveArgs& operator=(PrimitiveArgs&&) = default;

  /// Declares argument `arg` (DNNL_ARG_SRC, ...) described by `md`; a zero-size `md`
  /// (an absent bias or scratchpad) declares nothing. Every declared argument must be `set`
  /// before each `execute`.
  void add(int arg, const dnnl::memory::desc& md) {
    if (md.get_size() == 0) return;
    Slot s{arg, md, dnnl::memory(), nullptr, padded(md), false};
    if (cached_) s.mem = dnnl::memory(md, dnnl_util::engine(), DNNL_MEMORY_NONE);
    slots_.push_back(s);
    c_args_.push_back({arg, cached_ ? s.mem.get() : nullptr});
  }
  /// True when `arg` was declared.
  bool has(int arg) const { return find(arg) != nullptr; }
  /// Points `arg` at `ptr` for the next call.
  void set(int arg, const void* ptr) {
    Slot* s = find(arg);
    if (!s) throw Error("oneDNN arguments: argument " + std::to_string(arg) + " was not declared");
    s->next = ptr;
    s->is_set = true;
  }
  /// Runs `prim` on this thread's stream with the arguments set since the last call, and
  /// waits for it.
  void execute(const dnnl::primitive& prim) {
    for (auto& s : slots_) {
      if (!s.is_set)
        throw Error("oneDNN arguments: argument " + std::to_string(s.arg) + " was not set");
      s.is_set = false;
    }
    if (!cached_) {
      std::unordered_map<int, dnnl::memory> args;
      for (const auto& s : slots_)
        args[s.arg] = dnnl::memory(s.md, dnnl_util::engine(), const_cast<void*>(s.next));
      dnnl_util::execute(prim, args);
      return;
    }
    // A padded layout is zero-padded whenever its handle is set (as when a memory object is
    // created), so those are set on every call, exactly as fresh objects would be.
    for (auto& s : slots_)
      if (s.next != s.current || s.pads) {
        s.mem.set_data_handle(const_cast<void*>(s.next));
        s.current = s.next;
      }
    auto& st = dnnl_util::stream();
    dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), st.get(),
                                                   static_cast<int>(c_args_.size()),
                                                   c_args_.data()),
                            "could not execute a primitive");
    st.wait();
  }

 private:
  struct Slot {
    int arg;
    dnnl::memory::desc md;
    dnnl::memory mem;     // cached mode: the one memory object of this argument
    const void* current;  // its data handle
    bool pads;            // the layout has padding (zeroed whenever the handle is set)
    bool is_set;
    const void* next = nullptr;
  };
  Slot* find(int arg) {
    for (auto& s : slots_)
      if (s.arg == arg) return &s;
    return nullptr;
  }
  const Slot* find(int arg) const { return const_cast<PrimitiveArgs*>(this)->find(arg); }
  static bool padded(const dnnl::memory::desc& md) {
    const auto& d = md.data;
    for (int i = 0; i < d.ndims; ++i)
      if (d.padded_dims[i] != d.dims[i] || d.padded_offsets[i] != 0) return true;
    return false;
  }

  std::vector<Slot> slots_;
  std::vector<dnnl_exec_arg_t> c_args_;  // cached mode: the arguments as oneDNN's C API takes them
  bool cached_ = !env_off("LOOM_DNNL_CACHED_ARGS");  // read when the kernel is built
};

}  // namespace loom::nn
