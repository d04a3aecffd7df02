// Gradient allreduce overlapped with backward: three ops that together do what one
// `_loom_allreduce` node does after backward, but start each bucket's collective as soon as its
// last gradient is accumulated (graph/step_builder.cc, DistOptions::overlap).
//
//   _loom_allreduce_plan(acc0..accN-1) -> handle
//       Reads only the accumulator *variables* (available before the step starts). At bind
//       it cuts the tensors, in input order (reverse topological: the last layers' first),
//       into buckets of first_bucket_mb then bucket_mb MiB (the rule of `_loom_allreduce`),
//       checks that every rank has the same plan, and lays the accumulators out back to back
//       (contiguous inputs: a bucket is one byte range, one collective). Each call writes a
//       (1,) float32 handle naming the plan, which the other two ops read.
//   _loom_allreduce_start(acc_i, handle) -> acc_i (in place), attribute `index` = i
//       Marks tensor i as accumulated. Once every tensor of the next bucket (in plan order)
//       has arrived, the bucket's non-blocking allreduce starts, in place, so buckets start in
//       the same order on every rank whatever order backward produces gradients in. It also
//       tests the collectives in flight: Open MPI progresses a non-blocking collective only
//       inside MPI calls, and these nodes run between backward's nodes
//       (LOOM_DIST_OVERLAP_TEST=0 leaves all progress to the wait, for measurements).
//   _loom_allreduce_wait(acc0..accN-1, handle) -> acc0..accN-1 (in place)
//       Waits for every bucket (bounded by LOOM_DIST_TIMEOUT_S); the optimizer update reads
//       its outputs. Depending on every gradient, it runs after the whole backward.
//
// Start and wait nodes are switched by the last-micro-step predicate, like the update; the
// plan node runs on every call (it only writes the handle).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "ops/dist/adjacent_runs.h"
#include "ops/dist/overlap_plan.h"
#include "ops/dtype_policy.h"
#include "ops/infer.h"
#include "ops/op.h"
#include "runtime/dist/communicator.h"

namespace loom {
namespace {

using dist_ops::PlanParam;
using dist_ops::StartParam;
using dist_ops::WaitParam;


const auto kPlanSchema =
    ParamSchema<PlanParam>()
        .required("num_tensors", &PlanParam::num_tensors, "Number of tensors.")
        .optional("world_size", &PlanParam::world_size, 0,
                  "Ranks the graph was built for (its scales assume it); 0: any.")
        .optional("bucket_mb", &PlanParam::bucket_mb, 25.0, "MiB per bucket after the first.")
        .optional("first_bucket_mb", &PlanParam::first_bucket_mb, 1.0,
                  "MiB of the first bucket (the last gradients of backward).")
        .check([](PlanParam& p) {
          check_input_count(p.num_tensors, "num_tensors");
          if (p.world_size < 0) throw ParamError("world_size must be >= 0");
          if (!(p.bucket_mb > 0) || !(p.first_bucket_mb > 0))
            throw ParamError("bucket_mb and first_bucket_mb must be > 0");
        });

const auto kStartSchema = ParamSchema<StartParam>().required(
    "index", &StartParam::index, "Position of this tensor in its plan node's inputs.");

const auto kWaitSchema = ParamSchema<WaitParam>().required("num_tensors", &WaitParam::num_tensors,
                                                           "Number of tensors (the plan's).");

using dist_ops::Plan;

Plan& find_plan(const NDArray& handle, const std::string& node, const char* op) {
  return dist_ops::find_plan(static_cast<int>(*handle.cdata<float>()), node, op);
}

class PlanKernel final : public Kernel {
 public:
  explicit PlanKernel(const KernelArgs& a) : slot_(a) {}

  void forward(const OpContext&, std::span<const NDArray>, std::span<const Req> req,
               std::span<const NDArray> out) override {
    slot_.plan().begin_call();
    if (req[0] != Req::kNull) out[0].fill(static_cast<double>(slot_.handle()));
  }

 private:
  dist_ops::PlanSlot slot_;
};

class StartKernel final : public Kernel {
 public:
  explicit StartKernel(const KernelArgs& a)
      : name_(a.attrs.name), index_(static_cast<size_t>(a.attrs.param<StartParam>().index)) {}

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    Plan& plan = find_plan(in[1], name_, "_loom_allreduce_start");
    if (index_ >= plan.size())
      throw dist::DistError("node '" + name_ + "' (op _loom_allreduce_start): index " +
                            std::to_string(index_) + " but " + plan.where() + " has " +
                            std::to_string(plan.size()) + " tensors");
    if (!out[0].same_memory(in[0])) out[0].copy_from(in[0]);
    plan.arrive(index_, out[0], name_);
  }

 private:
  std::string name_;
  size_t index_;
};

class WaitKernel final : public Kernel {
 public:
  explicit WaitKernel(const KernelArgs& a) : name_(a.attrs.name) {}

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    const size_t n = out.size();
    Plan& plan = find_plan(in[n], name_, "_loom_allreduce_wait");
    if (plan.size() != n)
      throw dist::DistError("node '" + name_ + "' (op _loom_allreduce_wait): " + std::to_string(n) +
                            " tensors but " + plan.where() + " has " + std::to_string(plan.size()));
    for (size_t i = 0; i < n; ++i)
      if (!out[i].same_memory(in[i]))
        throw dist::DistError("node '" + name_ + "' (op _loom_allreduce_wait): output " +
                              std::to_string(i) + " must be written in place into input " +
                              std::to_string(i));
    plan.finish();
  }

 private:
  std::string name_;
};

std::vector<std::string> numbered(int n, const char* base) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(base + std::to_string(i));
  return v;
}

void handle_shape(std::vector<Shape>& s, size_t i, const std::string& what) {
  merge_shape(s[i], Shape{1}, what);
}

LOOM_REGISTER_OP("_loom_allreduce_plan")
    .describe(
        "The bucket plan of an overlapped gradient allreduce over its inputs (the "
        "accumulators, laid out back to back); outputs a handle read by "
        "_loom_allreduce_start and _loom_allreduce_wait.")
    .params(kPlanSchema)
    .inputs([](const OpAttrs& a) { return numbered(a.param<PlanParam>().num_tensors, "acc"); })
    .outputs({"handle"})
    .shape_fn([](const OpAttrs&, std::vector<Shape>&, std::vector<Shape>& out) {
      handle_shape(out, 0, "output 0");
    })
    .type_fn([](const OpAttrs&, std::vector<DType>&, std::vector<DType>& out) {
      merge_type(out[0], DType::kFloat32, "output 0");
    })
    .contiguous([](const OpAttrs& a) {
      std::vector<int> all;
      for (int i = 0; i < a.param<PlanParam>().num_tensors; ++i) all.push_back(i);
      return std::vector<std::vector<int>>{all};
    })
    .zero_grad()
    .cpu<PlanKernel>();

LOOM_REGISTER_OP("_loom_allreduce_start")
    .describe(
        "Tensor `index` of a _loom_allreduce_plan is accumulated: starts the non-blocking "
        "allreduce of each bucket whose tensors have all arrived (in plan order), in place.")
    .params(kStartSchema)
    .inputs({"data", "handle"})
    .outputs({"output"})
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      merge_shape(out[0], in[0], "output 0");
      merge_shape(in[0], out[0], input_label(a, 0));
      handle_shape(in, 1, input_label(a, 1));
    })
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      merge_type(out[0], in[0], "output 0");
      merge_type(in[0], out[0], input_label(a, 0));
      merge_type(in[1], DType::kFloat32, input_label(a, 1));
    })
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<StartKernel>();

LOOM_REGISTER_OP("_loom_allreduce_wait")
    .describe(
        "Waits for the allreduce of every bucket of a _loom_allreduce_plan; outputs alias the "
        "reduced inputs.")
    .params(kWaitSchema)
    .inputs([](const OpAttrs& a) {
      auto v = numbered(a.param<WaitParam>().num_tensors, "data");
      v.push_back("handle");
      return v;
    })
    .outputs([](const OpAttrs& a) { return numbered(a.param<WaitParam>().num_tensors, "output"); })
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      for (size_t i = 0; i < out.size(); ++i) {
        merge_shape(out[i], in[i], "output " + std::to_string(i));
        merge_shape(in[i], out[i], input_label(a, i));
      }
      handle_shape(in, out.size(), input_label(a, out.size()));
    })
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      for (size_t i = 0; i < out.size(); ++i) {
        merge_type(out[i], in[i], "output " + std::to_string(i));
        merge_type(in[i], out[i], input_label(a, i));
      }
      merge_type(in[out.size()], DType::kFloat32, input_label(a, out.size()));
    })
    .inplace_fn([](const OpAttrs& a) {
      std::vector<std::pair<int, int>> v;
      for (int i = 0; i < a.param<WaitParam>().num_tensors; ++i) v.emplace_back(i, i);
      return v;
    })
    .zero_grad()
    .cpu<WaitKernel>();

LOOM_CPU_DTYPES("_loom_allreduce_plan", kDTypePolicyFloats);
LOOM_CPU_DTYPES("_loom_allreduce_start", kDTypePolicyFloats);
LOOM_CPU_DTYPES("_loom_allreduce_wait", kDTypePolicyFloats);

}  // namespace
}  // namespace loom
