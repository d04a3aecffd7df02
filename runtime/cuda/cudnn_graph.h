// A small layer over the cuDNN 9 backend (graph) API for GPU kernels: the library opened on
// first use (dlopen, like cuBLAS: a machine without cuDNN still runs CPU work), one handle
// per device bound to that device's stream, RAII descriptors, and execution plans chosen by
// the engine heuristics under a workspace limit. A kernel builds its plans once at bind and
// keeps them (ops/nn/conv_cudnn.cu); per call it only fills a variant pack and executes.
// Plain C++ (no device code).
#pragma once

#include <cudnn_graph.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/cuda_context.h"

namespace loom::cuda::dnn {

/// Throws Error("cuDNN error in <what>: <status name> (<cuDNN's last error message>)")
/// unless `s` is CUDNN_STATUS_SUCCESS.
void check(cudnnStatus_t s, const std::string& what);

/// The cuDNN handle of device `id`, bound to `cuda::stream(id)`; created on first use (the
/// first call loads libcudnn and requires version 9 or later). Use it only from the thread
/// that queues work for the device.
cudnnHandle_t handle(int id);

/// Largest workspace, in bytes, an execution plan may ask for: LOOM_CUDNN_WORKSPACE_MB
/// (default 256 MB) megabytes.
size_t workspace_limit();

/// An owned backend descriptor (cudnnBackendDescriptor_t), destroyed with the object.
class Desc {
 public:
  Desc() = default;
  /// Creates a descriptor of type `t`; `what` names the caller in errors.
  Desc(cudnnBackendDescriptorType_t t, const std::string& what);
  ~Desc();
  Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)), what_(std::move(o.what_)) {}
  Desc& operator=(Desc&& o) noexcept;
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  bool empty() const { return d_ == nullptr; }

  /// cudnnBackendSetAttribute with `count` values of type `type` at `values`.
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
            const void* values);
  Desc& set_i64(cudnnBackendAttributeName_t name, int64_t v) {
    return set(name, CUDNN_TYPE_INT64, 1, &v);
  }
  Desc& set_i64s(cudnnBackendAttributeName_t name, const std::vector<int64_t>& v) {
    return set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(v.size()), v.data());
  }
  Desc& set_float(cudnnBackendAttributeName_t name, float v) {
    return set(name, CUDNN_TYPE_FLOAT, 1, &v);
  }
  Desc& set_desc(cudnnBackendAttributeName_t name, const Desc& d) {
    cudnnBackendDescriptor_t p = d.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p);
  }
  /// cudnnBackendFinalize; throws with `what_` and the status.
  Desc& finalize();

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  std::string what_;
};

/// A float32 tensor descriptor of a packed row-major array with `dims` (at least 3; cuDNN's
/// convolutions want 4 or 5), unique id `uid`, whose pointers will be aligned to
/// `alignment` bytes (4 takes any float offset: Loom hands kernels views, e.g. weights laid
/// out back to back in one buffer; 16 lets cuDNN use engines with vector loads).
Desc tensor(int64_t uid, const std::vector<int64_t>& dims, const std::string& what,
            int64_t alignment = 4);

/// A cross-correlation descriptor (what MXNet and cuDNN call convolution) over
/// `stride.size()` spatial dims, float32 accumulation; pre/post paddings may differ.
Desc convolution(const std::vector<int64_t>& pre_pad, const std::vector<int64_t>& post_pad,
                 const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                 const std::string& what);

/// The three convolution passes: forward (writes y), backward data (writes x from y's
/// gradient), backward filter (writes w).
enum class ConvPass { kForward, kBackwardData, kBackwardFilter };

/// A finalised convolution operation of `pass` over the forward convolution's data x,
/// filter w and output y (tensor descriptors) with descriptor `conv`: the written tensor
/// becomes 1·result + beta·(its old value).
Desc conv_operation(ConvPass pass, const Desc& x, const Desc& w, const Desc& y, const Desc& conv,
                    float beta, const std::string& what);

/// An execution plan for a one-operation graph, built once and executed many times.
class Plan {
 public:
  Plan() = default;
  /// Finalises an operation graph holding `op` on device `id`'s handle, asks the heuristics
  /// (CUDNN_HEUR_MODE_A, then the fallback list) for engine configurations and keeps the
  /// first whose plan finalises with a workspace under workspace_limit(). Throws Error naming
  /// `what` (op and node) when none does. `parts` are the descriptors `op` refers to
  /// (tensors, convolution), kept alive with the plan.
  Plan(int id, Desc op, std::vector<Desc> parts, const std::string& what);

  bool empty() const { return plan_.empty(); }
  /// Workspace bytes execute() needs.
  size_t workspace() const { return workspace_; }
  /// Runs the plan on its device's stream with the tensors of the given unique ids at the
  /// given device pointers and `workspace` (at least workspace() bytes); errors name `what`
  /// (the calling node: a plan may be shared by several).
  void execute(int id, const std::vector<int64_t>& uids, const std::vector<void*>& ptrs,
               void* workspace, const std::string& what) const;

 private:
  std::vector<Desc> parts_;
  Desc op_, graph_, cfg_, plan_;
  size_t workspace_ = 0;
};

}  // namespace loom::cuda::dnn
