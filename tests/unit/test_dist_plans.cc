// Host-side planning shared by the CPU and GPU kernels of the data-parallel ops: the bucket
// plan of _loom_allreduce (ops/dist/allreduce_plan.h) and the sharded EMA's range pieces
// (ops/update/shard_plan.h), against element-by-element references written here.
#include <gtest/gtest.h>

#include <map>

#include "ops/dist/allreduce_plan.h"
#include "ops/dist/overlap_plan.h"
#include "ops/update/shard_plan.h"
#include "runtime/imperative.h"

namespace loom {
namespace {

TEST(DistPlans, BucketsCloseOnceTheyHoldTheirCap) {
  // float32 tensors of 100, 300, 50, 400, 10, 10 bytes... in elements: 25, 75, 12, 100, 3.
  const std::vector<Shape> shapes = {Shape{25}, Shape{75}, Shape{3, 4}, Shape{100}, Shape{3}};
  const std::vector<DType> types(shapes.size(), DType::kFloat32);
  // First cap 100 bytes: bucket 0 = {0} (100 bytes reach it); then cap 350: {1, 2} holds
  // 300 + 48 = 348 < 350, so tensor 3 joins it (748), and tensor 4 opens a new bucket.
  const auto p = dist_ops::plan_buckets("g", shapes, types, 100, 350);
  const std::vector<std::vector<size_t>> want = {{0}, {1, 2, 3}, {4}};
  EXPECT_EQ(p.buckets, want);
  EXPECT_EQ(p.text, "g; (25,)float32; (75,)float32 (3, 4)float32 (100,)float32; (3,)float32");
}

TEST(DistPlans, OneBucketWhenCapsAreLarge) {
  const std::vector<Shape> shapes = {Shape{2}, Shape{3}};
  const std::vector<DType> types = {DType::kFloat32, DType::kFloat64};
  const auto p = dist_ops::plan_buckets("x", shapes, types, dist_ops::mib(1), dist_ops::mib(25));
  ASSERT_EQ(p.buckets.size(), 1u);
  EXPECT_EQ(p.buckets[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(dist_ops::mib(0.5), 524288u);
}

TEST(DistPlans, ShardRangesCoverEveryElementOnce) {
  const std::vector<int64_t> sizes = {7, 0, 13, 1, 9};
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  for (int world : {1, 2, 3, 4, 7, 31, 40}) {
    std::map<std::pair<size_t, int64_t>, int> seen;  // (tensor, element) -> times covered
    int64_t next_lo = 0;
    for (int r = 0; r < world; ++r) {
      const auto range = update::shard_range(sizes, r, world, 1);
      EXPECT_EQ(range.lo, next_lo);
      EXPECT_EQ(range.hi, total * (r + 1) / world);
      EXPECT_LE(range.hi - range.lo, (total + world - 1) / world);
      next_lo = range.hi;
      // Walk the range element by element through the concatenation and compare.
      int64_t covered = 0;
      for (const auto& g : range.segs) {
        EXPECT_EQ(g.dst, covered);
        for (int64_t i = 0; i < g.len; ++i) {
          int64_t flat = range.lo + g.dst + i, t = 0;
          while (flat >= sizes[static_cast<size_t>(t)]) flat -= sizes[static_cast<size_t>(t++)];
          EXPECT_EQ(static_cast<size_t>(t) + 1, g.tensor);
          EXPECT_EQ(flat, g.src + i);
          ++seen[{g.tensor, g.src + i}];
        }
        covered += g.len;
      }
      EXPECT_EQ(covered, range.hi - range.lo);
    }
    EXPECT_EQ(next_lo, total);
    EXPECT_EQ(static_cast<int64_t>(seen.size()), total) << "world " << world;
    for (const auto& [k, n] : seen) EXPECT_EQ(n, 1);
  }
}

TEST(DistPlans, PaddedLayoutPlacesEveryElementOnce) {
  const std::vector<int64_t> sizes = {5, 11, 0, 2, 9};
  const int64_t total = 27;
  for (int world : {1, 2, 4, 5, 30}) {
    const int64_t count = (total + world - 1) / world;
    for (int rank = 0; rank < world; ++rank) {
      const update::ShardLayout l = update::make_layout(sizes, world, rank);
      EXPECT_EQ(l.count, count);
      // Element j of the concatenation belongs to the rank q with qT/W <= j < (q+1)T/W and
      // sits at q*count + (j - qT/W) of the padded buffer.
      std::vector<int> slot(static_cast<size_t>(world * count), -1);
      for (const auto& p : l.all)
        for (int64_t i = 0; i < p.len; ++i) {
          int64_t j = p.src + i;
          for (size_t t = 0; t < p.tensor; ++t) j += sizes[t];
          int q = 0;
          while (j >= total * (q + 1) / world) ++q;
          EXPECT_EQ(p.dst + i, q * count + (j - total * q / world));
          EXPECT_EQ(slot[static_cast<size_t>(p.dst + i)], -1);
          slot[static_cast<size_t>(p.dst + i)] = static_cast<int>(j);
        }
      for (int64_t q : l.padding) {
        EXPECT_EQ(slot[static_cast<size_t>(q)], -1);
        slot[static_cast<size_t>(q)] = -2;
      }
      for (int v : slot) EXPECT_NE(v, -1);
      // The own pieces are the sharded EMA's range (the same partition).
      const auto range = update::shard_range(sizes, rank, world);
      ASSERT_EQ(l.own.size(), range.segs.size());
      for (size_t k = 0; k < l.own.size(); ++k) {
        EXPECT_EQ(l.own[k].tensor, range.segs[k].tensor);
        EXPECT_EQ(l.own[k].src, range.segs[k].src);
        EXPECT_EQ(l.own[k].dst, range.segs[k].dst);
        EXPECT_EQ(l.own[k].len, range.segs[k].len);
      }
      EXPECT_EQ(l.lo, range.lo);
      EXPECT_EQ(l.hi, range.hi);
    }
  }
}

#ifdef LOOM_HAVE_CUDA
// The GPU kernels of the data-parallel ops (ops/dist/dist_ops.cu, ops/update/shard.cu) are
// constructed here without a device, from the ops' sweep samples (world size 1): their bind
// -time checks and predicate declarations. Running them needs a GPU (and NCCL for 2 ranks).
std::unique_ptr<Kernel> gpu_kernel(const std::string& op, size_t sample,
                                   std::map<std::string, std::string> extra = {},
                                   const Shape* first = nullptr) {
  const OpDef* def = find_op(op);
  EXPECT_NE(def, nullptr) << op;
  const OpSample& s = def->samples.at(sample);
  std::map<std::string, std::string> attrs(s.attrs.begin(), s.attrs.end());
  for (auto& [k, v] : extra) attrs[k] = v;
  std::vector<Shape> shapes = s.in_shapes;
  if (first) shapes[0] = *first;
  ImperativeOp cpu(op, attrs, shapes);
  const std::vector<DType> in_types(cpu.in_shapes().size(), DType::kFloat32);
  KernelArgs ka{cpu.attrs(), cpu.in_shapes(), cpu.out_shapes(), in_types, cpu.out_types(),
                Device::gpu(0)};
  return def->kernels.at(DeviceType::kGPU)(ka);
}

TEST(DistPlans, GpuKernelsBindAndDeclareTheirPredicatePath) {
  // The collective reads its predicate on the host (a collective cannot be skipped on the
  // device); the sharded EMA, which does not communicate, on the device.
  for (size_t i : {0, 1}) {
    auto k = gpu_kernel("_loom_allreduce", i);
    EXPECT_FALSE(k->device_predicate());
    EXPECT_TRUE(k->capturable());
    auto e = gpu_kernel("_loom_ema_shard_update", i);
    EXPECT_TRUE(e->device_predicate());
    EXPECT_TRUE(e->capturable());
    EXPECT_EQ(e->workspace_bytes(), sizeof(float));
  }
  EXPECT_FALSE(gpu_kernel("_loom_broadcast_once", 0)->device_predicate());
}

std::unique_ptr<Kernel> gpu_kernel_of(const std::string& op, const Attrs& attrs,
                                      const std::vector<Shape>& shapes) {
  ImperativeOp cpu(op, attrs, shapes);
  const std::vector<DType> in_types(cpu.in_shapes().size(), DType::kFloat32);
  KernelArgs ka{cpu.attrs(), cpu.in_shapes(), cpu.out_shapes(), in_types, cpu.out_types(),
                Device::gpu(0)};
  return find_op(op)->kernels.at(DeviceType::kGPU)(ka);
}

TEST(DistPlans, OverlapGpuPlanRegistersADevicePlan) {
  const size_t before = dist_ops::plans().size();
  {
    auto k = gpu_kernel_of("_loom_allreduce_plan", {{"num_tensors", "3"}, {"first_bucket_mb",
                           "0.00001"}}, {Shape{3}, Shape{5}, Shape{2, 2}});
    EXPECT_FALSE(k->capturable());  // per-call host bookkeeping decides what is issued
    ASSERT_EQ(dist_ops::plans().size(), before + 1);
    int on_device = 0;
    for (const auto& [h, plan] : dist_ops::plans())
      if (plan->on_device()) {
        ++on_device;
        EXPECT_EQ(plan->size(), 3u);
        EXPECT_NE(plan->where().find("op _loom_allreduce_plan"), std::string::npos);
      }
    EXPECT_EQ(on_device, 1);
    auto start = gpu_kernel_of("_loom_allreduce_start", {{"index", "1"}}, {Shape{5}, Shape{1}});
    EXPECT_FALSE(start->device_predicate());  // a collective reads its predicate on the host
    EXPECT_FALSE(start->capturable());
    auto wait = gpu_kernel_of("_loom_allreduce_wait", {{"num_tensors", "2"}},
                              {Shape{3}, Shape{5}, Shape{1}});
    EXPECT_FALSE(wait->device_predicate());
  }
  EXPECT_EQ(dist_ops::plans().size(), before);  // unregistered with its kernel
}

TEST(DistPlans, ShardOptimizerGpuKernelsBind) {
  // The collectives read their predicate on the host; the update (no communication) takes
  // the device predicate of its inner update kernels.
  for (const char* op : {"_loom_shard_reduce_scatter", "_loom_shard_all_gather",
                         "_loom_shard_norms"}) {
    auto k = gpu_kernel(op, 0);
    EXPECT_FALSE(k->device_predicate()) << op;
    EXPECT_TRUE(k->capturable()) << op;
  }
  EXPECT_EQ(gpu_kernel("_loom_shard_norms", 0)->workspace_bytes(), 2 * 2 * sizeof(double));
  const OpDef* up = find_op("_loom_shard_update");
  ASSERT_FALSE(up->samples.empty());
  for (size_t i = 0; i < up->samples.size(); ++i) {
    auto k = gpu_kernel("_loom_shard_update", i);
    EXPECT_TRUE(k->device_predicate()) << "sample " << i;
    EXPECT_TRUE(k->capturable()) << "sample " << i;
  }
}

TEST(DistPlans, GpuKernelsRefuseAnotherWorldSize) {
  try {
    gpu_kernel("_loom_allreduce", 1, {{"world_size", "2"}});
    ADD_FAILURE() << "a graph built for 2 ranks bound in a job of 1";
  } catch (const dist::DistError& e) {
    EXPECT_NE(std::string(e.what()).find("op _loom_allreduce"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("built for 2 ranks"), std::string::npos) << e.what();
  }
  const Shape third{6};  // ceil(17 / 3): the shard of a 3-rank graph
  EXPECT_THROW(gpu_kernel("_loom_ema_shard_update", 0, {{"world_size", "3"}}, &third),
               dist::DistError);
  EXPECT_THROW(gpu_kernel("_loom_broadcast_once", 0, {{"root", "1"}}), dist::DistError);
}
#endif

}  // namespace
}  // namespace loom
