// Sharded optimizer state (ZeRO-1), make_step's DistOptions::shard_optimizer. The trained
// weights, in the update's order (that of the flat weight buffers), are one index space of T
// elements; of a job of W = world_size ranks, rank r owns [floor(rT/W), floor((r+1)T/W)), as
// the sharded EMA (ema.cc). A "padded" buffer of W*ceil(T/W) elements holds rank q's range at
// q*ceil(T/W) (then at most one padding element, zero): NCCL's in-place layouts, reduce-scatter
// with recv = send + r*count and all-gather with send = recv + r*count. Per real step:
//
//   _loom_shard_reduce_scatter(acc0..acc{n-1}) -> flat   (W*count,): packs the accumulated
//       gradients into the padded layout and reduce-scatters in place: this rank's chunk of
//       `flat` then holds the sum over ranks of its range.
//   _loom_shard_update(weight0..weight{n-1}, flat, state..., scalars...) -> flat:
//       the element-wise update op `op` (sgd_mom_update, adam_update, lamb_update_phase1, ...)
//       over this rank's range only: the inner kernel (the unsharded op's own code, so the
//       arithmetic is the same element for element) runs on views: weight = the tensor's
//       piece, grad = the chunk of `flat`, states = the rank's shards (shape (count,), one aux
//       state per state input of `op`); it writes its result (new weight, or LAMB's direction)
//       over the gradient chunk of `flat` (output 0 aliases input n).
//   _loom_shard_norms(weight0..weight{n-1}, flat) -> r1 (n,), r2 (n,): LAMB's per-tensor
//       norms of the weights and of the direction: partial sums of squares over the own range
//       (in double), one allreduce of 2n doubles, square roots.
//   _loom_shard_all_gather(weight0..weight{n-1}, flat) -> weight0..weight{n-1}, flat:
//       all-gathers the updated chunks in place and copies every range into the weights
//       (outputs alias the inputs).
//
// Scalar inputs of the inner op (its one-element inputs: lr, eta, t, r1, r2) come from the
// node's trailing inputs, by kind (`scalars`, one per inner scalar input, comma separated):
// "group": num_groups inputs, tensor i reads the one of its group (groups[i]; lr per lr_mult
// group); "shared": one input; "tensor": one input of shape (n,), tensor i reads element i.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "ops/float_tuple.h"
#include "ops/infer.h"
#include "ops/update/shard_plan.h"
#include "ops/update/update_util.h"
#include "runtime/dist/communicator.h"

namespace loom {
namespace {

int64_t shard_len(int64_t total, int64_t world) { return (total + world - 1) / world; }

using update::make_layout;
using update::Piece;
using update::ShardLayout;

/// Runs f(piece, first, last) over the pieces, their elements split evenly among the OpenMP
/// threads (f gets the part [first, last) of the piece, relative to the piece).
template <class F>
void for_pieces(const std::vector<Piece>& pieces, F f) {
  int64_t total = 0;
  for (const Piece& p : pieces) total += p.len;
  auto run = [&](int64_t lo, int64_t hi) {
    int64_t at = 0;
    for (const Piece& p : pieces) {
      const int64_t b = std::max(lo, at), e = std::min(hi, at + p.len);
      if (b < e) f(p, b - at, e - at);
      at += p.len;
    }
  };
  if (total < update::kParallelMin || omp_get_max_threads() == 1) {
    run(0, total);
    return;
  }
#pragma omp parallel
  {
    auto [lo, hi] = thread_share(0, total, omp_get_num_threads(), omp_get_thread_num());
    run(lo, hi);
  }
}

/// The communicator of a node, checked against the world size its graph was built for.
dist::Communicator& shard_comm(const KernelArgs& a, int world) {
  dist::Communicator& comm = dist::init();
  if (comm.size() != world)
    throw dist::DistError("node '" + a.attrs.name + "' (op " + a.attrs.op->name + ") on rank " +
                          std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) +
                          ": the step graph shards the optimizer over " + std::to_string(world) +
                          " ranks; rebuild it for this job");
  return comm;
}

std::vector<int64_t> sizes_of(const std::vector<Shape>& shapes, size_t n) {
  std::vector<int64_t> s;
  for (size_t i = 0; i < n; ++i) s.push_back(shapes[i].numel());
  return s;
}

/// Total elements of the first n shapes, or -1 while one is unknown.
int64_t known_total(const std::vector<Shape>& in, size_t n) {
  int64_t t = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!in[i].known()) return -1;
    t += in[i].numel();
  }
  return t;
}

// ---- the collectives' nodes ---------------------------------------------------------------

using update::ShardParam;
const auto kShardSchema =
    ParamSchema<ShardParam>()
        .required("num_tensors", &ShardParam::num_tensors, "Number of tensors.")
        .required("world_size", &ShardParam::world_size,
                  "Ranks the state is sharded over; bind refuses another job size.")
        .check([](ShardParam& p) {
          check_input_count(p.num_tensors, "num_tensors");
          if (p.world_size < 1) throw ParamError("world_size must be >= 1");
        });

std::vector<std::string> numbered(int n, const char* base, std::vector<std::string> tail) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(base + std::to_string(i));
  v.insert(v.end(), tail.begin(), tail.end());
  return v;
}

// The collective shard kernels' common state: parameters, communicator, this rank's layout.
class ShardKernel : public Kernel {
 public:
  explicit ShardKernel(const KernelArgs& a) : p_(a.attrs.param<ShardParam>()) {
    update::check_f32(a);
    comm_ = &shard_comm(a, p_.world_size);
    l_ = make_layout(sizes_of(a.in_shapes, static_cast<size_t>(p_.num_tensors)), p_.world_size,
                     comm_->rank());
  }

 protected:
  ShardParam p_;
  dist::Communicator* comm_;
  ShardLayout l_;
};

class ReduceScatterKernel final : public ShardKernel {
 public:
  using ShardKernel::ShardKernel;
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    float* flat = out[0].data<float>();
    const NDArray* acc = in.data();
    for_pieces(l_.all, [=](const Piece& p, int64_t b, int64_t e) {
      std::copy(acc[p.tensor].cdata<float>() + p.src + b, acc[p.tensor].cdata<float>() + p.src + e,
                flat + p.dst + b);
    });
    for (int64_t q : l_.padding) flat[q] = 0.f;
    float* mine = flat + l_.rank * l_.count;
    comm_->reduce_scatter(flat, mine, static_cast<size_t>(l_.count), DType::kFloat32);
  }
};

class AllGatherKernel final : public ShardKernel {
 public:
  using ShardKernel::ShardKernel;
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    const auto n = static_cast<size_t>(p_.num_tensors);
    const NDArray& flat = in[n];
    float* f = flat.data<float>();
    comm_->all_gather(f + l_.rank * l_.count, f, static_cast<size_t>(l_.count), DType::kFloat32);
    const NDArray* w = out.data();
    for_pieces(l_.all, [=](const Piece& p, int64_t b, int64_t e) {
      std::copy(f + p.dst + b, f + p.dst + e, w[p.tensor].data<float>() + p.src + b);
    });
    if (!out[n].same_memory(flat)) out[n].copy_from(flat);
  }
};

class NormsKernel final : public ShardKernel {
 public:
  using ShardKernel::ShardKernel;
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    const auto n = static_cast<size_t>(p_.num_tensors);
    const float* g = in[n].cdata<float>() + l_.rank * l_.count;
    // Per thread and tensor: sums of squares of the weights [0, n) and the direction [n, 2n),
    // added in thread order afterwards, so the result does not depend on timing.
    const int nt = l_.hi - l_.lo < update::kParallelMin ? 1 : omp_get_max_threads();
    std::vector<double> part(static_cast<size_t>(nt) * 2 * n, 0.0);
    const NDArray* w = in.data();
    auto run = [&](int t, int64_t lo, int64_t hi) {
      double* s = part.data() + static_cast<size_t>(t) * 2 * n;
      for (const Piece& p : l_.own) {
        const int64_t b = std::max(lo, p.dst), e = std::min(hi, p.dst + p.len);
        if (b >= e) continue;
        const float* x = w[p.tensor].cdata<float>() + p.src + (b - p.dst);
        const float* y = g + b;
        double sx = 0, sy = 0;
        for (int64_t i = 0; i < e - b; ++i) {
          sx += double{x[i]} * x[i];
          sy += double{y[i]} * y[i];
        }
        s[p.tensor] += sx;
        s[n + p.tensor] += sy;
      }
    };
    const int64_t own = l_.hi - l_.lo;
    if (nt == 1) {
      run(0, 0, own);
    } else {
#pragma omp parallel num_threads(nt)
      {
        auto [lo, hi] = thread_share(0, own, omp_get_num_threads(), omp_get_thread_num());
        run(omp_get_thread_num(), lo, hi);
      }
    }
    std::vector<double> sum(2 * n, 0.0);
    for (int t = 0; t < nt; ++t)
      for (size_t i = 0; i < 2 * n; ++i) sum[i] += part[static_cast<size_t>(t) * 2 * n + i];
    comm_->allreduce(sum.data(), sum.data(), sum.size(), DType::kFloat64);
    float* r1 = out[0].data<float>();
    float* r2 = out[1].data<float>();
    for (size_t i = 0; i < n; ++i) {
      r1[i] = static_cast<float>(std::sqrt(sum[i]));
      r2[i] = static_cast<float>(std::sqrt(sum[n + i]));
    }
  }
};

const ShardParam& sp(const OpAttrs& a) { return a.param<ShardParam>(); }

/// The padded buffer's shape (W*ceil(T/W),) from the first n inputs' shapes, when known.
void merge_flat(const OpAttrs& a, std::vector<Shape>& in, Shape& flat, const std::string& what) {
  const int64_t t = known_total(in, static_cast<size_t>(sp(a).num_tensors));
  if (t >= 0) merge_shape(flat, Shape{sp(a).world_size * shard_len(t, sp(a).world_size)}, what);
}

LOOM_REGISTER_OP("_loom_shard_reduce_scatter")
    .describe(
        "Sharded optimizer: packs the n tensors' concatenation (T elements) into the padded "
        "layout (rank q's range [qT/W, (q+1)T/W) at q*ceil(T/W)) and reduce-scatters it in "
        "place over the job's world_size ranks; this rank's chunk then holds the sum of its "
        "range.")
    .params(kShardSchema)
    .inputs([](const OpAttrs& a) { return numbered(sp(a).num_tensors, "data", {}); })
    .outputs({"flat"})
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      merge_flat(a, in, out[0], "output 0");
    })
    .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
      for (auto& t : in) merge_type(t, DType::kFloat32, "input");
      merge_type(out[0], DType::kFloat32, "output 0");
    })
    .zero_grad()
    .cpu<ReduceScatterKernel>()
    .sample({.attrs = {{"num_tensors", "2"}, {"world_size", "1"}},
             .in_shapes = {{3, 4}, {40000}},
             .check_grad = false});

LOOM_REGISTER_OP("_loom_shard_all_gather")
    .describe(
        "Sharded optimizer: all-gathers the padded buffer `flat` in place (this rank's chunk "
        "at rank*ceil(T/W)) and copies every rank's range into the n weights (outputs alias "
        "the weights and flat).")
    .params(kShardSchema)
    .inputs([](const OpAttrs& a) { return numbered(sp(a).num_tensors, "weight", {"flat"}); })
    .outputs([](const OpAttrs& a) { return numbered(sp(a).num_tensors, "output", {"flat"}); })
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      const auto n = static_cast<size_t>(sp(a).num_tensors);
      for (size_t i = 0; i < n; ++i) {
        merge_shape(out[i], in[i], "output " + std::to_string(i));
        merge_shape(in[i], out[i], input_label(a, i));
      }
      merge_flat(a, in, in[n], input_label(a, n));
      merge_shape(out[n], in[n], "output " + std::to_string(n));
    })
    .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
      for (auto& t : in) merge_type(t, DType::kFloat32, "input");
      for (auto& t : out) merge_type(t, DType::kFloat32, "output");
    })
    .inplace_fn([](const OpAttrs& a) {
      std::vector<std::pair<int, int>> v;
      for (int i = 0; i <= sp(a).num_tensors; ++i) v.emplace_back(i, i);
      return v;
    })
    .zero_grad()
    .cpu<AllGatherKernel>()
    .sample({.attrs = {{"num_tensors", "2"}, {"world_size", "1"}},
             .in_shapes = {{3, 4}, {5}, {17}},
             .check_grad = false});

LOOM_REGISTER_OP("_loom_shard_norms")
    .describe(
        "Sharded LAMB: the L2 norms of each of the n weights (r1) and of each tensor's part of "
        "the direction in `flat` (r2), from this rank's range and one allreduce of the "
        "partial sums of squares.")
    .params(kShardSchema)
    .inputs([](const OpAttrs& a) { return numbered(sp(a).num_tensors, "weight", {"flat"}); })
    .outputs({"r1", "r2"})
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      const auto n = static_cast<size_t>(sp(a).num_tensors);
      merge_flat(a, in, in[n], input_label(a, n));
      merge_shape(out[0], Shape{sp(a).num_tensors}, "output 0");
      merge_shape(out[1], Shape{sp(a).num_tensors}, "output 1");
    })
    .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
      for (auto& t : in) merge_type(t, DType::kFloat32, "input");
      for (auto& t : out) merge_type(t, DType::kFloat32, "output");
    })
    .zero_grad()
    .cpu<NormsKernel>()
    .sample({.attrs = {{"num_tensors", "2"}, {"world_size", "1"}},
             .in_shapes = {{3, 4}, {5}, {17}},
             .check_grad = false});

// ---- the update of the own range -----------------------------------------------------------

using update::ScalarKind;
using update::ShardUpdateParam;

std::shared_ptr<const void> parse_shard_update(const Attrs& dict) {
  auto p = std::make_shared<ShardUpdateParam>();
  auto get = [&](const char* k) -> const std::string& {
    auto it = dict.find(k);
    if (it == dict.end())
      throw ParamError(std::string("required parameter '") + k + "' is missing");
    return it->second;
  };
  const std::string& op = get("op");
  p->inner = find_op(op);
  if (!p->inner) throw ParamError("op '" + op + "' is not a registered operator");
  if (p->inner->grad_mode != GradMode::kZero || p->inner->name.rfind("_loom_shard", 0) == 0 ||
      p->inner->name == "_loom_bucket")
    throw ParamError("op '" + op + "' is not an element-wise update op");
  const int64_t n = parse_int(get("num_tensors"));
  check_input_count(n, "num_tensors");
  p->n = static_cast<size_t>(n);
  p->world = static_cast<int>(parse_int(get("world_size")));
  if (p->world < 1) throw ParamError("world_size must be >= 1");
  std::vector<double> wds;
  if (auto it = dict.find("wds"); it != dict.end()) {
    wds = parse_double_tuple(it->second, "wds");
    if (wds.size() != p->n)
      throw ParamError("wds has " + std::to_string(wds.size()) + " values for " +
                       std::to_string(p->n) + " tensors");
  }
  p->group.assign(p->n, 0);
  if (auto it = dict.find("num_groups"); it != dict.end()) {
    const int64_t g = parse_int(it->second);
    check_input_count(g, "num_groups");
    p->groups_n = static_cast<size_t>(g);
  }
  if (auto it = dict.find("groups"); it != dict.end()) {
    Shape g = parse_shape(it->second);
    if (static_cast<size_t>(g.ndim()) != p->n)
      throw ParamError("groups has " + std::to_string(g.ndim()) + " values for " +
                       std::to_string(p->n) + " tensors");
    for (size_t i = 0; i < p->n; ++i) {
      if (g[static_cast<int>(i)] < 0 || static_cast<size_t>(g[static_cast<int>(i)]) >= p->groups_n)
        throw ParamError("groups: tensor " + std::to_string(i) + " names group " +
                         std::to_string(g[static_cast<int>(i)]) + " of " +
                         std::to_string(p->groups_n));
      p->group[i] = static_cast<size_t>(g[static_cast<int>(i)]);
    }
  }
  Attrs base;
  static const std::set<std::string> kOwn = {"op",     "num_tensors", "world_size", "wds",
                                             "groups", "num_groups",  "scalars"};
  for (const auto& [k, v] : dict)
    if (!kOwn.count(k) && k.rfind("__", 0) != 0) base[k] = v;
  for (size_t i = 0; i < p->n; ++i) {
    Attrs d = base;
    if (!wds.empty()) d["wd"] = format_float(wds[i]);
    p->attrs.push_back(make_op_attrs(*p->inner, "tensor " + std::to_string(i), std::move(d)));
  }
  const OpAttrs& a0 = p->attrs[0];
  const auto names = op_inputs(a0);
  p->m = names.size();
  if (op_outputs(a0).size() != 1)
    throw ParamError("op '" + op + "' has " + std::to_string(op_outputs(a0).size()) +
                     " outputs; a sharded update takes ops with one");
  // Which inner inputs are weight-shaped: infer with a weight of 7 elements.
  std::vector<Shape> is(p->m), os(1);
  is[0] = Shape{7};
  run_infer_shape(a0, is, os);
  while (p->full < p->m && is[p->full] == Shape{7}) ++p->full;
  for (size_t j = p->full; j < p->m; ++j)
    if (is[j] == Shape{7})
      throw ParamError("op '" + op + "': input '" + names[j] + "' is weight-shaped after a scalar");
  if (p->full < 2) throw ParamError("op '" + op + "' has no gradient input shaped as the weight");
  for (size_t j = 2; j < p->full; ++j) p->state_names.push_back(names[j]);
  auto aux = op_aux(a0);
  for (int x : aux)
    if (x < 2 || static_cast<size_t>(x) >= p->full)
      throw ParamError("op '" + op + "' mutates input '" + names[static_cast<size_t>(x)] +
                       "', which is not a weight-shaped state");
  std::string kinds;
  if (auto it = dict.find("scalars"); it != dict.end()) kinds = it->second;
  std::stringstream ss(kinds);
  for (std::string k; std::getline(ss, k, ',');) {
    k.erase(0, k.find_first_not_of(' '));
    k.erase(k.find_last_not_of(' ') + 1);
    if (k == "group")
      p->scalars.push_back(ScalarKind::kGroup);
    else if (k == "shared")
      p->scalars.push_back(ScalarKind::kShared);
    else if (k == "tensor")
      p->scalars.push_back(ScalarKind::kTensor);
    else if (!k.empty())
      throw ParamError("scalars: unknown kind '" + k + "' (group, shared, tensor)");
  }
  if (p->scalars.size() != p->m - p->full)
    throw ParamError("scalars gives " + std::to_string(p->scalars.size()) + " kinds; op '" + op +
                     "' has " + std::to_string(p->m - p->full) + " one-element inputs");
  return p;
}

const ShardUpdateParam& up(const OpAttrs& a) { return a.param<ShardUpdateParam>(); }

using update::scalar_starts;
using update::view;

class ShardUpdateKernel final : public Kernel {
 public:
  explicit ShardUpdateKernel(const KernelArgs& a) : p_(up(a.attrs)) {
    update::check_f32(a);
    comm_ = &shard_comm(a, p_.world);
    l_ = make_layout(sizes_of(a.in_shapes, p_.n), p_.world, comm_->rank());
    auto f = p_.inner->kernels.find(DeviceType::kCPU);
    if (f == p_.inner->kernels.end())
      throw Error("node '" + a.attrs.name + "' (op _loom_shard_update): op '" + p_.inner->name +
                  "' has no CPU kernel");
    starts_ = scalar_starts(p_);
    for (const Piece& pc : l_.own) {
      std::vector<Shape> is(p_.m, Shape{1}), os = {Shape{pc.len}};
      for (size_t j = 0; j < p_.full; ++j) is[j] = Shape{pc.len};
      std::vector<DType> it(p_.m, DType::kFloat32), ot = {DType::kFloat32};
      auto k = f->second(KernelArgs{p_.attrs[pc.tensor], is, os, it, ot, a.device});
      if (k->range_partition().size() != 1 || k->workspace_bytes() != 0)
        throw Error("node '" + a.attrs.name + "' (op _loom_shard_update): op '" + p_.inner->name +
                    "' is not an element-wise update");
      kernels_.push_back(std::move(k));
    }
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req>,
               std::span<const NDArray> out) override {
    // Views of every piece: the inner op's inputs and its output (the gradient's chunk).
    const update::PieceViews pv = update::piece_views(p_, l_, starts_, in, out[0]);
    const auto& ins = pv.in;
    const auto& outs = pv.out;
    static const Req kWrite[1] = {Req::kWrite};
    const int64_t own = l_.hi - l_.lo;
    auto run = [&](int64_t lo, int64_t hi) {
      for (size_t s = 0; s < l_.own.size(); ++s) {
        const Piece& pc = l_.own[s];
        const int64_t b = std::max(lo, pc.dst), e = std::min(hi, pc.dst + pc.len);
        if (b < e)
          kernels_[s]->forward_range(ctx, ins[s], kWrite, std::span<const NDArray>(&outs[s], 1),
                                     b - pc.dst, e - pc.dst);
      }
    };
    if (own < update::kParallelMin || omp_get_max_threads() == 1) {
      run(0, own);
    } else {
#pragma omp parallel
      {
        auto [lo, hi] = thread_share(0, own, omp_get_num_threads(), omp_get_thread_num());
        run(lo, hi);
      }
    }
    for (size_t s = 0; s < l_.own.size(); ++s)
      kernels_[s]->forward_once(ctx, ins[s], kWrite, std::span<const NDArray>(&outs[s], 1));
  }

 private:
  const ShardUpdateParam& p_;
  dist::Communicator* comm_;
  ShardLayout l_;
  std::vector<size_t> starts_;
  std::vector<std::unique_ptr<Kernel>> kernels_;  ///< per own piece
};

LOOM_REGISTER_OP("_loom_shard_update")
    .describe(
        "Sharded optimizer: runs the element-wise update op `op` over this rank's range of the "
        "n weights' concatenation only, reading the gradient from the chunk of the padded "
        "buffer `flat` and keeping each state in a (ceil(T/W),) shard; writes the result over "
        "that chunk. `scalars` says where each one-element input of `op` comes from.")
    .params_custom(
        parse_shard_update,
        {{.name = "op", .type = "string", .required = true, .doc = "The element-wise update op."},
         {.name = "num_tensors", .type = "int", .required = true, .doc = "Number of weights."},
         {.name = "world_size",
          .type = "int",
          .required = true,
          .doc = "Ranks the state is sharded over."},
         {.name = "wds",
          .type = "tuple of float",
          .default_str = "None",
          .doc = "Per-tensor weight decay (replaces wd)."},
         {.name = "num_groups",
          .type = "int",
          .default_str = "1",
          .doc = "Inputs per 'group' scalar (lr_mult groups)."},
         {.name = "groups",
          .type = "Shape(tuple)",
          .default_str = "None",
          .doc = "Group of each tensor (default 0)."},
         {.name = "scalars",
          .type = "string",
          .default_str = "''",
          .doc = "Per one-element input of op: group, shared or tensor, comma separated."}})
    .inputs([](const OpAttrs& a) {
      const ShardUpdateParam& p = up(a);
      std::vector<std::string> v = numbered(static_cast<int>(p.n), "weight", {"flat"});
      for (const auto& s : p.state_names) v.push_back(s);
      const auto names = op_inputs(p.attrs[0]);
      for (size_t k = 0; k < p.scalars.size(); ++k) {
        const std::string& nm = names[p.full + k];
        if (p.scalars[k] == ScalarKind::kGroup)
          for (size_t g = 0; g < p.groups_n; ++g) v.push_back(nm + std::to_string(g));
        else
          v.push_back(nm);
      }
      return v;
    })
    .outputs({"flat"})
    .aux([](const OpAttrs& a) {
      const ShardUpdateParam& p = up(a);
      std::vector<int> v;
      for (size_t j = 0; j + 2 < p.full; ++j) v.push_back(static_cast<int>(p.n + 1 + j));
      return v;
    })
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      const ShardUpdateParam& p = up(a);
      const int64_t t = known_total(in, p.n);
      if (t >= 0) {
        const int64_t c = shard_len(t, p.world);
        merge_shape(in[p.n], Shape{p.world * c}, input_label(a, p.n));
        for (size_t j = 0; j + 2 < p.full; ++j)
          merge_shape(in[p.n + 1 + j], Shape{c}, input_label(a, p.n + 1 + j));
      }
      merge_shape(out[0], in[p.n], "output 0");
      merge_shape(in[p.n], out[0], input_label(a, p.n));
      auto starts = scalar_starts(p);
      for (size_t k = 0; k < p.scalars.size(); ++k)
        for (size_t i = starts[k]; i < starts[k + 1]; ++i)
          merge_shape(in[i],
                      Shape{p.scalars[k] == ScalarKind::kTensor ? static_cast<int64_t>(p.n) : 1},
                      input_label(a, i));
    })
    .type_fn([](const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
      for (auto& t : in) merge_type(t, DType::kFloat32, "input");
      merge_type(out[0], DType::kFloat32, "output 0");
    })
    .inplace_fn([](const OpAttrs& a) {
      return std::vector<std::pair<int, int>>{{static_cast<int>(up(a).n), 0}};
    })
    .zero_grad()
    .cpu<ShardUpdateKernel>()
    .sample({.attrs = {{"op", "sgd_mom_update"},
                       {"num_tensors", "2"},
                       {"world_size", "1"},
                       {"lr", "0.1"},
                       {"momentum", "0.9"},
                       {"wds", "(0.1, 0)"},
                       {"lr_input", "True"},
                       {"num_groups", "2"},
                       {"groups", "(1, 0)"},
                       {"scalars", "group"}},
             .in_shapes = {{3, 4}, {40000}, {40012}, {40012}, {1}, {1}},
             .in_kinds = {"normal", "normal", "normal", "normal", "positive", "positive"},
             .check_grad = false})
    .sample({.attrs = {{"op", "lamb_update_phase2"},
                       {"num_tensors", "2"},
                       {"world_size", "1"},
                       {"lr", "0.1"},
                       {"lr_input", "True"},
                       {"scalars", "tensor, tensor, shared"}},
             .in_shapes = {{3, 4}, {5}, {17}, {2}, {2}, {1}},
             .in_kinds = {"normal", "normal", "normal", "positive", "positive", "positive"},
             .check_grad = false});

}  // namespace
}  // namespace loom
