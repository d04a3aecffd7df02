// Step-state ops for training steps run as graphs (spec/ema-accumulation-dist.md B.1, B.7):
// a step counter, the predicates computed from it, gradient accumulation that overwrites on
// the first micro-step (no zeroing pass) and a plain state copy. Each is one fused pass; the
// mutable input (`.aux`) is updated in place and the output, its new value, may alias it.
// Skipping a node on some micro-steps is the executor's job (predicated nodes); these ops
// always compute.
//
//   _loom_counter(t):               t <- t + step; output = the new t.
//   _loom_step_predicate(t):        output (1,) = 1 if (round(t) + offset) mod k == r else 0
//                                   (mod is non-negative). With t = micro-steps done before
//                                   this one (offset 0): first = (k, r=0), last = (k, r=k-1).
//                                   If t already counts the current micro-step (the counter's
//                                   output), use offset = -1.
//   _loom_accumulate(acc, grad, first):
//                                   acc <- (first != 0 ? 0 : acc) + scale * grad. On the first
//                                   micro-step acc's old value is not read (garbage or NaN in
//                                   it cannot leak); scale = 1/k gives the mean over k steps.
//   _loom_copy_state(dst, src):     dst <- src, any dtype (integer states are copied, never
//                                   averaged); kAdd outputs need float32.
//   _loom_after(data, deps...):     output = data (a copy); the deps are read by nothing but
//                                   make this node run after their producers (e.g. EMA of
//                                   BatchNorm statistics, which BatchNorm updates in backward,
//                                   after the whole update).
// Counters are float32: integer-valued and exact up to 2^24 (16.7M micro-steps). The
// arithmetic of the counter, the predicate and the accumulation is in step_math.h, shared
// with their CUDA kernels (updates.cu).
#include <cmath>
#include <cstring>

#include "ops/update/step_math.h"
#include "ops/update/update_util.h"

namespace loom {
namespace {

using update::AccumulateParam;
using update::CounterParam;
using update::f32;
using update::PredicateParam;

/// Shape rule for ops whose inputs are all one-element scalars and whose output is one too.
void infer_scalars(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  update::infer_shape_with_scalars(a, in, out, 0);
  Shape& o = out[0];
  if (o.ndim() == 0) o = Shape{1};
  if (o.numel() != 1)
    throw ShapeError("output 0: expected one element, shape (1,), got " + o.str());
}

// ---- _loom_counter ----

const auto kCounterSchema = ParamSchema<CounterParam>().optional(
    "step", &CounterParam::step, 1, "Added to the counter on every call.");

class CounterKernel final : public update::UpdateKernel<CounterParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    float* t = in[0].data<float>();
    const float s = static_cast<float>(p_.step);
    update::apply(out[0].data<float>(), req[0], 1,
                  [=](int64_t) { return update::counter_step(t[0], s); });
  }
};

LOOM_REGISTER_OP("_loom_counter")
    .describe("Step counter: t += step in place; the output is the new t.")
    .params(kCounterSchema)
    .inputs({"t"})
    .aux(std::vector<int>{0})
    .shape_fn(infer_scalars)
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .init_input(0, "[\"zero\", {}]")
    .cpu<CounterKernel>()
    .sample({.in_shapes = {{1}}, .in_kinds = {"label:100"}, .check_grad = false})
    .sample(
        {.attrs = {{"step", "3"}}, .in_shapes = {{1}}, .in_kinds = {"zeros"}, .check_grad = false});

// ---- _loom_step_predicate ----

const auto kPredicateSchema =
    ParamSchema<PredicateParam>()
        .required("k", &PredicateParam::k, "Period (micro-steps per real step), >= 1.")
        .optional("r", &PredicateParam::r, 0, "Residue that is true, in [0, k).")
        .optional("offset", &PredicateParam::offset, 0,
                  "Added to t before the modulo. 0 when t counts the micro-steps done before "
                  "this one; -1 when t already counts the current one.")
        .check([](PredicateParam& p) {
          if (p.k < 1) throw ParamError("k must be >= 1, got " + std::to_string(p.k));
          if (p.r < 0 || p.r >= p.k)
            throw ParamError("r must be in [0, k) = [0, " + std::to_string(p.k) + "), got " +
                             std::to_string(p.r));
        });

class PredicateKernel final : public update::UpdateKernel<PredicateParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float v = update::step_predicate(in[0].data<float>()[0], p_.k, p_.r, p_.offset);
    update::apply(out[0].data<float>(), req[0], 1, [=](int64_t) { return v; });
  }
};

LOOM_REGISTER_OP("_loom_step_predicate")
    .describe(
        "Micro-step predicate: 1 if (t + offset) mod k == r else 0, shape (1,). "
        "first = (k, r=0), last = (k, r=k-1) for t = micro-steps done before this one.")
    .params(kPredicateSchema)
    .inputs({"t"})
    .shape_fn(infer_scalars)
    .zero_grad()
    .cpu<PredicateKernel>()
    .sample(
        {.attrs = {{"k", "4"}}, .in_shapes = {{1}}, .in_kinds = {"label:12"}, .check_grad = false})
    .sample({.attrs = {{"k", "3"}, {"r", "2"}, {"offset", "-1"}},
             .in_shapes = {{1}},
             .in_kinds = {"label:9"},
             .check_grad = false})
    .sample(
        {.attrs = {{"k", "1"}}, .in_shapes = {{1}}, .in_kinds = {"label:5"}, .check_grad = false});

// ---- _loom_accumulate ----

const auto kAccumulateSchema = ParamSchema<AccumulateParam>().optional(
    "scale", &AccumulateParam::scale, 1.0,
    "Multiplies each contribution: 1 sums, 1/k averages over k micro-steps.");

class AccumulateKernel final : public update::UpdateKernel<AccumulateParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    float* acc = in[0].data<float>();
    const float* g = in[1].data<float>();
    const bool first = in[2].data<float>()[0] != 0.f;
    const float s = f32(p_.scale);
    float* o = out[0].data<float>();
    if (first)
      update::apply(o, req[0], r,
                    [=](int64_t i) { return update::accumulate_step(acc[i], g[i], s, true); });
    else
      update::apply(o, req[0], r,
                    [=](int64_t i) { return update::accumulate_step(acc[i], g[i], s, false); });
  }
};

LOOM_REGISTER_OP("_loom_accumulate")
    .describe(
        "Gradient accumulation: acc = (first ? 0 : acc) + scale*grad in place (first is "
        "a one-element input, nonzero = true); the output is the new acc.")
    .params(kAccumulateSchema)
    .inputs({"acc", "grad", "first"})
    .aux(std::vector<int>{0})
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      update::infer_shape_with_scalars(a, in, out, 2);
    })
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .init_input(0, "[\"zero\", {}]")
    .cpu<AccumulateKernel>()
    .sample({.in_shapes = {{3, 4}, {3, 4}, {1}},
             .in_kinds = {"normal", "normal", "zeros"},
             .check_grad = false})
    .sample({.in_shapes = {{3, 4}, {3, 4}, {1}},
             .in_kinds = {"normal", "normal", "ones"},
             .check_grad = false})
    .sample({.attrs = {{"scale", "0.25"}},
             .in_shapes = {{6}, {6}, {1}},
             .in_kinds = {"normal", "normal", "label:2"},
             .check_grad = false});

// ---- _loom_copy_state ----

/// dst = src (where the optional third input, pred, is nonzero), element ranges of any dtype
/// (so buckets and chains can hold it): _assign and _loom_copy_state.
class AssignKernel final : public update::RangeKernel {
 public:
  explicit AssignKernel(const KernelArgs& a) : RangeKernel(a), op_(a.attrs.op->name) {
    if (a.in_types[0] != a.in_types[1])
      throw Error("node '" + a.attrs.name + "' (op " + op_ + "): dst is " +
                  dtype_name(a.in_types[0]) + ", src is " + dtype_name(a.in_types[1]));
  }
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const NDArray &dst = in[0], &src = in[1];
    const size_t esz = dtype_size(dst.dtype());
    const size_t b = static_cast<size_t>(r.begin) * esz, n = static_cast<size_t>(r.end - r.begin) * esz;
    auto* d = static_cast<char*>(dst.raw());
    const bool on = in.size() < 3 || in[2].cdata<float>()[0] != 0.f;
    if (on && !dst.same_memory(src))
      std::memcpy(d + b, static_cast<const char*>(src.craw()) + b, n);
    if (req[0] == Req::kNull || (req[0] != Req::kAdd && out[0].same_memory(dst))) return;
    if (req[0] == Req::kAdd) {
      if (dst.dtype() != DType::kFloat32)
        throw Error(op_ + ": req=add needs float32, got " + std::string(dtype_name(dst.dtype())));
      const float* v = dst.data<float>();
      update::apply(out[0].data<float>(), Req::kAdd, r, [=](int64_t i) { return v[i]; });
      return;
    }
    std::memcpy(static_cast<char*>(out[0].raw()) + b, d + b, n);
  }

 private:
  std::string op_;
};

struct NoParam {};

LOOM_REGISTER_OP("_loom_copy_state")
    .describe(
        "State copy: dst = src in place (any dtype); the output is the new dst. For "
        "states that are copied, never averaged (integer buffers, counters).")
    .params(ParamSchema<NoParam>())
    .inputs({"dst", "src"})
    .aux(std::vector<int>{0})
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<AssignKernel>()
    .sample({.in_shapes = {{3, 4}, {3, 4}}, .check_grad = false})
    .sample({.in_shapes = {{5}, {5}}, .in_kinds = {"label:7", "label:9"}, .check_grad = false});

// ---- _assign ----

LOOM_REGISTER_OP("_assign")
    .describe(
        "Switched assignment: dst = src in place when pred (a one-element float32 input) is "
        "nonzero, else dst is left as it is; any dtype. The output is dst.")
    .params(ParamSchema<NoParam>())
    .inputs({"dst", "src", "pred"})
    .aux(std::vector<int>{0})
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      update::infer_shape_with_scalars(a, in, out, 2);
    })
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      DType t = DType::kUnknown;
      merge_type(t, in[0], input_label(a, 0));
      merge_type(t, in[1], input_label(a, 1));
      merge_type(t, out[0], "output 0");
      if (t == DType::kUnknown) return;
      in[0] = in[1] = out[0] = t;
      merge_type(in[2], DType::kFloat32, input_label(a, 2));
    })
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .cpu<AssignKernel>()
    .sample({.in_shapes = {{3, 4}, {3, 4}, {1}},
             .in_kinds = {"normal", "normal", "ones"},
             .check_grad = false})
    .sample({.in_shapes = {{5}, {5}, {1}},
             .in_kinds = {"normal", "normal", "zeros"},
             .check_grad = false});

// ---- _loom_after ----

struct AfterParam {
  int num_args;
};
const auto kAfterSchema =
    ParamSchema<AfterParam>()
        .required("num_args", &AfterParam::num_args, "Number of inputs: data then the dependencies.")
        .check([](AfterParam& p) { check_input_count(p.num_args, "num_args"); });

class AfterKernel final : public Kernel {
 public:
  explicit AfterKernel(const KernelArgs&) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull || out[0].same_memory(in[0])) return;
    if (req[0] == Req::kAdd) {
      const float* d = in[0].data<float>();
      update::apply(out[0].data<float>(), Req::kAdd, in[0].size(), [=](int64_t i) { return d[i]; });
      return;
    }
    std::memcpy(out[0].raw(), in[0].raw(), in[0].nbytes());
  }
};

LOOM_REGISTER_OP("_loom_after")
    .describe(
        "Ordering barrier: output = data; the other inputs only make this node run after "
        "the nodes that produce them.")
    .params(kAfterSchema)
    .inputs([](const OpAttrs& a) {
      std::vector<std::string> v = {"data"};
      for (int i = 1; i < a.param<AfterParam>().num_args; ++i) v.push_back("dep" + std::to_string(i - 1));
      return v;
    })
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      merge_shape(out[0], in[0], "output 0");
      merge_shape(in[0], out[0], input_label(a, 0));
    })
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      merge_type(out[0], in[0], "output 0");
      merge_type(in[0], out[0], input_label(a, 0));
    })
    .zero_grad()
    .cpu<AfterKernel>()
    .sample({.attrs = {{"num_args", "3"}}, .in_shapes = {{1}, {3, 4}, {5}}, .check_grad = false})
    .sample({.attrs = {{"num_args", "1"}}, .in_shapes = {{2, 3}}, .check_grad = false});

}  // namespace
}  // namespace loom
