// Bind-time arrays of an Executor (runtime/executor.cc): simple_bind's bucketed argument
// buffers and flat gradient buffers, and the checks that refuse a bind whose arrays cannot
// fit, naming the entry that needs most.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/exec_graph.h"
#include "runtime/ndarray.h"

namespace loom {

/// Arrays of the given shapes as views of one zero-filled buffer, back to back, each view
/// 64-byte aligned. The buffer starts at an offset modulo 4 KiB that differs per `index`
/// (page-aligned buffers would put element i of every bucket at the same offset: 4K
/// aliasing between the loads and stores of one update costs bandwidth).
std::vector<NDArray> flat_arrays(const std::vector<Shape>& shapes, DType t, Device dev,
                                 size_t index);

/// simple_bind's buckets: for every group of OpDef::contiguous_inputs whose inputs are
/// distinct variables of one dtype, not placed by an earlier group, one buffer holding them
/// back to back (flat_arrays). Returns entry -> view.
std::map<uint32_t, NDArray> bucket_views(const IndexedGraph& g, const ExecGraph& eg, Device dev);

/// Who computes entry e, for messages: "node 'fc1' (FullyConnected)", "the gradient pass of
/// node 'fc1' (FullyConnected)" or "variable 'data'".
std::string entry_owner(const IndexedGraph& g, const ExecGraph& eg, uint32_t e);

/// Refuses a bind whose arrays cannot fit before anything is allocated (zero-filling them
/// would have the kernel kill the process instead): `bytes` is what the next allocation
/// step needs in all, `largest` the entry that needs most. Throws OutOfMemoryError.
void check_fits(const IndexedGraph& g, const ExecGraph& eg, Device dev, uint64_t bytes,
                uint32_t largest, const char* what);

}  // namespace loom
