// GPU kernel of _loom_bucket (registered by bucket.cc): the inner update op's GPU kernel,
// created once per tensor at bind and launched tensor after tensor on the device's stream.
// A first version: one launch per tensor, not yet one multi-tensor kernel over the flat
// buffers (a table of per-tensor pointers and sizes on the device) — under CUDA Graph replay
// the launches are replayed without host work, but a bucket of many small tensors still pays
// one kernel per tensor. The inner kernels read their scalars and the node's predicate on the
// device, so the bucket does too when every inner kernel does.
#include <algorithm>

#include "ops/update/bucket.h"
#include "runtime/cuda/elementwise.cuh"

namespace loom {
namespace {

class BucketGpuKernel final : public Kernel {
 public:
  explicit BucketGpuKernel(const KernelArgs& a) : p_(a.attrs.param<update::BucketParam>()) {
    auto f = p_.inner->kernels.find(DeviceType::kGPU);
    if (f == p_.inner->kernels.end())
      throw Error("node '" + a.attrs.name + "' (op _loom_bucket): op '" + p_.inner->name +
                  "' has no GPU kernel");
    for (size_t i = 0; i < p_.n; ++i) {
      auto sub = [&](const auto& v, size_t b, size_t k) {
        return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin() + b,
                                                                           v.begin() + b + k);
      };
      std::vector<Shape> is = sub(a.in_shapes, i * p_.m, p_.m);
      std::vector<Shape> os = sub(a.out_shapes, i * p_.o, p_.o);
      std::vector<DType> it = sub(a.in_types, i * p_.m, p_.m);
      std::vector<DType> ot = sub(a.out_types, i * p_.o, p_.o);
      kernels_.push_back(f->second(KernelArgs{p_.attrs[i], is, os, it, ot, a.device}));
      workspace_ = std::max(workspace_, kernels_.back()->workspace_bytes());
      device_pred_ = device_pred_ && kernels_.back()->device_predicate();
      capturable_ = capturable_ && kernels_.back()->capturable();
    }
  }
  size_t workspace_bytes() const override { return workspace_; }
  bool device_predicate() const override { return device_pred_; }
  bool capturable() const override { return capturable_; }

  // One stream: each inner kernel's use of the shared workspace ends before the next starts.
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    for (size_t i = 0; i < p_.n; ++i)
      kernels_[i]->forward(ctx, in.subspan(i * p_.m, p_.m), req.subspan(i * p_.o, p_.o),
                           out.subspan(i * p_.o, p_.o));
  }

 private:
  const update::BucketParam& p_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  size_t workspace_ = 0;
  bool device_pred_ = true, capturable_ = true;
};

LOOM_REGISTER_OP("_loom_bucket").kernel(DeviceType::kGPU, [](const KernelArgs& a) {
  return std::unique_ptr<Kernel>(std::make_unique<BucketGpuKernel>(a));
});

}  // namespace
}  // namespace loom
