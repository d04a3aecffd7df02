// loom.dist's in-process groups (runtime/dist/local_group.h): one communicator per device of
// one process, for a Module with several contexts. The group reduces NDArrays in place, one
// collective per array (Module passes one flat gradient buffer per dtype), all ranks driven by
// one call (GIL released).
#include <mutex>

#include "common.h"
#include "runtime/device.h"
#include "runtime/dist/local_group.h"

namespace loom::pyb {
namespace {

namespace dist = loom::dist;

// Every rank holds the same list of arrays (shape and dtype position by position), each on
// its rank's device: host memory for "threads", gpu(devices[r]) for "nccl".
void check_arrays(const dist::LocalGroup& g, const std::vector<std::vector<NDArray>>& per_rank) {
  const std::string where = std::string("loom.dist: local group (") + g.backend() + ") allreduce";
  if (per_rank.size() != static_cast<size_t>(g.size()))
    throw dist::DistError(where + ": " + std::to_string(per_rank.size()) + " lists of arrays for " +
                          std::to_string(g.size()) + " ranks");
  const bool gpu = std::string(g.backend()) == "nccl";
  for (size_t r = 0; r < per_rank.size(); ++r) {
    if (per_rank[r].size() != per_rank[0].size())
      throw dist::DistError(where + ": rank " + std::to_string(r) + " has " +
                            std::to_string(per_rank[r].size()) + " arrays, rank 0 has " +
                            std::to_string(per_rank[0].size()));
    for (size_t k = 0; k < per_rank[r].size(); ++k) {
      const NDArray& a = per_rank[r][k];
      const NDArray& a0 = per_rank[0][k];
      if (a.shape() != a0.shape() || a.dtype() != a0.dtype())
        throw dist::DistError(where + ": array " + std::to_string(k) + " of rank " +
                              std::to_string(r) + " is " + a.shape().str() + " " +
                              dtype_name(a.dtype()) + ", rank 0's is " + a0.shape().str() + " " +
                              dtype_name(a0.dtype()));
      const Device d = a.device();
      const bool ok =
          gpu ? d.type == DeviceType::kGPU && d.id == g.devices()[r] : d.type == DeviceType::kCPU;
      if (!ok)
        throw dist::DistError(where + ": array " + std::to_string(k) + " of rank " +
                              std::to_string(r) + " is on " + d.str() + ", the rank drives " +
                              (gpu ? "gpu(" + std::to_string(g.devices()[r]) + ")" : "the host"));
    }
  }
}

}  // namespace

void init_dist_group(py::module_& m) {
  py::class_<dist::LocalGroup>(m, "_LocalGroup",
                               "Communicators of several devices of this process "
                               "(loom.dist.local_group).")
      .def_property_readonly("size", &dist::LocalGroup::size)
      .def_property_readonly("backend",
                             [](const dist::LocalGroup& g) { return std::string(g.backend()); })
      .def_property_readonly("devices", &dist::LocalGroup::devices)
      .def(
          "stats",
          [](dist::LocalGroup& g, int rank) {
            const dist::CommStats s = g.comm(rank).stats();
            py::dict d;
            d["allreduce"] = s.allreduce;
            d["broadcast"] = s.broadcast;
            d["barrier"] = s.barrier;
            d["collectives"] = s.collectives();
            d["bytes"] = s.bytes;
            return d;
          },
          py::arg("rank"))
      .def(
          "allreduce",
          [](dist::LocalGroup& g, const std::vector<std::vector<NDArray>>& per_rank, double scale) {
            check_arrays(g, per_rank);
            py::gil_scoped_release nogil;
            // after the work that wrote the arrays (backward on each device's stream) and
            // before what reads them next, ordered on the device where the back end can
            g.run_stream_ordered([&](int r, dist::Communicator& c) {
              dist::RankRequests reqs;
              for (const NDArray& a : per_rank[static_cast<size_t>(r)])
                reqs.push_back(c.iallreduce(a.raw(), a.raw(), static_cast<size_t>(a.size()),
                                            a.dtype(), dist::ReduceOp::kSum, scale));
              return reqs;
            });
          },
          py::arg("arrays"), py::arg("scale") = 1.0,
          "Sums arrays[r][k] over the ranks r into every arrays[r][k], times `scale`.");
  m.def("dist_local_group", &dist::make_local_group, py::arg("backend"), py::arg("devices"));
  m.def("dist_group_backends", &dist::group_backends);
}

}  // namespace loom::pyb
