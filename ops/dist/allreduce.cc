// _loom_allreduce(data0..dataN-1) -> out0..outN-1: the sum over the ranks of a data-parallel
// job (runtime/dist, the process's communicator) of every input, times `scale`, written in
// place (outputs alias their inputs under `__inplace__`). Training-step graphs use it for the
// accumulated gradients (graph/step_builder.h), switched by the same predicate as the
// optimizer update, so a job communicates once per real step.
//
// Buckets: at bind the tensors, in input order (make_step passes them in reverse topological
// order, last layers first), are cut into buckets of about `bucket_mb` MiB, the first one of
// `first_bucket_mb` (PyTorch DDP's rule). Each bucket is one collective per run of tensors
// adjacent in memory: simple_bind lays a step's accumulators out back to back in one flat
// buffer (ops/update/bucket.cc), so a bucket is normally one allreduce over its byte range
// (the 64-byte alignment gaps between views are zero and stay zero). Every rank checks at bind
// that all ranks have the same plan (Communicator::check_same).
#include <algorithm>
#include <chrono>

#include "ops/dist/adjacent_runs.h"
#include "ops/dist/allreduce_plan.h"
#include "ops/dtype_policy.h"
#include "ops/infer.h"
#include "ops/op.h"
#include "runtime/dist/communicator.h"

namespace loom {
namespace {

using dist_ops::AllreduceParam;

const auto kSchema =
    ParamSchema<AllreduceParam>()
        .required("num_tensors", &AllreduceParam::num_tensors, "Number of tensors.")
        .optional("world_size", &AllreduceParam::world_size, 0,
                  "Ranks the graph was built for (its scales assume it); 0: any. Bind "
                  "refuses a job of another size.")
        .optional("bucket_mb", &AllreduceParam::bucket_mb, 25.0,
                  "MiB per bucket (one collective each) after the first.")
        .optional("first_bucket_mb", &AllreduceParam::first_bucket_mb, 1.0,
                  "MiB of the first bucket (the last gradients of backward).")
        .optional("scale", &AllreduceParam::scale, 1.0, "Multiplies the sum.")
        .check([](AllreduceParam& p) {
          check_input_count(p.num_tensors, "num_tensors");
          if (p.world_size < 0) throw ParamError("world_size must be >= 0");
          if (!(p.bucket_mb > 0) || !(p.first_bucket_mb > 0))
            throw ParamError("bucket_mb and first_bucket_mb must be > 0");
        });

class AllreduceKernel final : public Kernel {
 public:
  explicit AllreduceKernel(const KernelArgs& a)
      : p_(a.attrs.param<AllreduceParam>()), comm_(dist::init()) {
    where_ = dist_ops::where(a.attrs.name, "_loom_allreduce", comm_);
    if (p_.world_size > 0 && p_.world_size != comm_.size())
      throw dist::DistError(where_ + ": the step graph was built for " +
                            std::to_string(p_.world_size) +
                            " ranks (its gradient scale assumes it); rebuild it for this job");
    // The bucket plan: tensors in input order, a bucket closes once it holds its cap.
    dist_ops::BucketPlan plan = dist_ops::plan_buckets(
        a.attrs.name, a.in_shapes, a.in_types, dist_ops::mib(p_.first_bucket_mb),
        dist_ops::mib(p_.bucket_mb));
    buckets_ = std::move(plan.buckets);
    if (comm_.size() > 1)
      comm_.check_same("bucket plan of " + where_, plan.text.data(), plan.text.size());
  }

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    // In place in training steps; otherwise the input is copied into the output first.
    for (size_t i = 0; i < in.size(); ++i)
      if (!out[i].same_memory(in[i])) out[i].copy_from(in[i]);
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& b : buckets_) reduce_bucket(out, b);
    comm_.add_exposed(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }

 private:
  void reduce_bucket(std::span<const NDArray> arrays, const std::vector<size_t>& b) {
    for (const dist_ops::Run& r : dist_ops::adjacent_runs(arrays, b))
      comm_.allreduce(r.data, r.data, r.count, r.dtype, dist::ReduceOp::kSum, p_.scale);
  }

  AllreduceParam p_;
  dist::Communicator& comm_;
  std::string where_;
  std::vector<std::vector<size_t>> buckets_;  ///< input positions per bucket
};

std::vector<std::string> numbered(const OpAttrs& a, const char* base) {
  std::vector<std::string> v;
  for (int i = 0; i < a.param<AllreduceParam>().num_tensors; ++i)
    v.push_back(base + std::to_string(i));
  return v;
}

LOOM_REGISTER_OP("_loom_allreduce")
    .describe(
        "Sum over the ranks of a data-parallel job (times scale) of every input, in place; "
        "bucketed (first_bucket_mb, then bucket_mb), one collective per bucket of adjacent "
        "tensors. World size 1: the identity (times scale).")
    .params(kSchema)
    .inputs([](const OpAttrs& a) { return numbered(a, "data"); })
    .outputs([](const OpAttrs& a) { return numbered(a, "output"); })
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      for (size_t i = 0; i < in.size(); ++i) {
        merge_shape(out[i], in[i], "output " + std::to_string(i));
        merge_shape(in[i], out[i], input_label(a, i));
      }
    })
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      for (size_t i = 0; i < in.size(); ++i) {
        merge_type(out[i], in[i], "output " + std::to_string(i));
        merge_type(in[i], out[i], input_label(a, i));
      }
    })
    .inplace_fn([](const OpAttrs& a) {
      std::vector<std::pair<int, int>> v;
      for (int i = 0; i < a.param<AllreduceParam>().num_tensors; ++i) v.emplace_back(i, i);
      return v;
    })
    // Variables reduced directly (the BatchNorm statistics of bn_stats "average") are laid
    // out back to back by simple_bind: one collective. Gradient inputs are node outputs.
    .contiguous([](const OpAttrs& a) {
      std::vector<int> all;
      for (int i = 0; i < a.param<AllreduceParam>().num_tensors; ++i) all.push_back(i);
      return std::vector<std::vector<int>>{all};
    })
    .zero_grad()
    .cpu<AllreduceKernel>()
    .sample({.attrs = {{"num_tensors", "3"}, {"first_bucket_mb", "0.0001"}},
             .in_shapes = {{3, 4}, {5}, {40}},
             .check_grad = false})
    .sample({.attrs = {{"num_tensors", "1"}, {"scale", "0.5"}, {"world_size", "1"}},
             .in_shapes = {{2, 3}},
             .check_grad = false});

// Reductions are of floats (gradients); the communicator sums them in their own dtype.
LOOM_CPU_DTYPES("_loom_allreduce", kDTypePolicyFloats);

}  // namespace
}  // namespace loom
