// Host-side planning shared by the CPU kernels of _loom_allreduce and _loom_broadcast_once
// (allreduce.cc, broadcast_once.cc) and their GPU kernels (dist_ops.cu): the parameter
// structs (one type, so both devices read the same attrs) and the bucket plan.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/dist/communicator.h"
#include "runtime/base.h"

namespace loom::dist_ops {

struct AllreduceParam {
  int num_tensors;
  int world_size;
  double bucket_mb, first_bucket_mb, scale;
};

struct BroadcastOnceParam {
  int num_args;
  int root;
  std::string signature;
};

/// Tensors cut into buckets in input order: a bucket closes once it holds its cap (the first
/// `first_cap` bytes, every later one `cap` bytes). `text` describes the plan (node name,
/// shapes and dtypes, ';' between buckets) for Communicator::check_same.
struct BucketPlan {
  std::vector<std::vector<size_t>> buckets;  ///< input positions per bucket
  std::string text;
};

inline BucketPlan plan_buckets(const std::string& name, const std::vector<Shape>& shapes,
                               const std::vector<DType>& types, size_t first_cap, size_t cap) {
  BucketPlan p{{}, name};
  size_t bytes = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    if (p.buckets.empty() || bytes >= (p.buckets.size() == 1 ? first_cap : cap)) {
      p.buckets.emplace_back();
      bytes = 0;
      p.text += ";";
    }
    p.buckets.back().push_back(i);
    bytes += static_cast<size_t>(shapes[i].bytes(types[i]));
    p.text += ' ';  // appended piecewise: GCC 12 warns (-Wrestrict) on " " + string&&
    p.text += shapes[i].str();
    p.text += dtype_name(types[i]);
  }
  return p;
}

/// MiB to bytes, as the bucket caps are given.
inline size_t mib(double m) { return static_cast<size_t>(m * 1048576.0); }

/// "node 'x' (op y) on rank r of n": how the data-parallel ops name themselves in errors.
inline std::string where(const std::string& node, const char* op, const dist::Communicator& c) {
  return "node '" + node + "' (op " + op + ") on rank " + std::to_string(c.rank()) + " of " +
         std::to_string(c.size());
}

}  // namespace loom::dist_ops
