// Model EMA: _loom_ema_update (one fused pass over a shadow) and _loom_ema_debias (the
// evaluation weights of a zero-initialised shadow). Semantics chosen from the reference
// libraries surveyed in shared/spec/ema-accumulation-dist.md, section A.
//
// _loom_ema_update(ema, weight, t[, norm]): ema and norm are mutable; the output is the new
// ema and may alias it. t is a one-element input: the number of REAL (optimizer) steps
// including the current one, so t = 1 on the first update (integer-valued float32, exact to
// 2^24). With d = decay(t) below, in float32 with weights d and 1 − d summing to one exactly:
//   ema ← d·ema + (1 − d)·weight            (d = 0 is a pure copy: ema's old value is not read)
//   norm ← d·norm + (1 − d)                 (init = zero_debias only)
//
// decay(t), in order:
//   t <= update_after_step            -> 0   copy phase: the shadow follows the weights
//   init == copy and t <= 1           -> 0   the first real step copies (AveragedModel)
//   t < start_step                    -> 0   TF Model Garden's start_step
//   otherwise, with the schedule's counter c = t - start_step:
//   constant: decay
//       PyTorch AveragedModel + get_ema_multi_avg_fn, timm ModelEmaV2, optax.ema, Keras use_ema.
//   tf: min(decay, (1 + c) / (10 + c))
//       TF Model Garden ExponentialMovingAverage(dynamic_decay=True). It reads the optimizer's
//       `iterations` after the wrapped apply_gradients incremented it, so c = t and the first
//       update uses 2/11 = 0.182 (spec A.2, row t = 1). Spec A.1's "first update uses 0.1" is
//       c = 0, which happens only at t = start_step >= 1 (or in TF1's
//       tf.train.ExponentialMovingAverage fed a not-yet-incremented num_updates).
//   yolov5: decay * (1 - exp(-c / tau))
//       ultralytics YOLOv5 ModelEMA; its `updates` is incremented before use, so x = c = t.
//   timm: s = c - 1; s <= 0 -> 0; else max(min(1 - (1 + s/gamma)^-power, decay), min_decay)
//       timm ModelEmaV3(use_warmup=True): s = max(0, step - update_after_step - 1) with
//       step = t, so timm's update_after_step U is start_step = U here. (timm's default power
//       is 2/3; Loom's default is 3/4, crowsonkb's choice for runs under ~1M steps.)
//
// Init modes. copy: the shadow equals the weights after the first real step (and after every
// step of the copy phase) and averages from there on. zero_debias: the shadow starts at zero
// (the `ema` input's __init__ is zero) and holds the raw zero-initialised average, as optax.ema
// and Paddle (TF Model Garden too, which never debiases: read `ema` itself to mirror it). The
// fourth input `norm` (one element, zero-initialised) is the total weight of that average,
// 1 − ∏d, kept as its own EMA of the constant 1 rather than as ∏d: in float32, 1 − ∏d for d
// near 1 loses most digits (1 − 0.9999f is 1.00017e-4), while norm is exactly what the shadow
// accumulated, so ema/norm is bitwise w for a constant power-of-two w and within a few ulps
// otherwise. A copy-phase step sets norm to 1. Evaluation weights: _loom_ema_debias.
//
// _loom_ema_debias(ema, norm): output = ema / norm, or ema when norm == 0 (no update yet).
//
// _loom_ema_shard_update(shard, weight0..weightN-1, t[, norm]): the same EMA of only this
// rank's part of the model (ZeRO-1 style sharding, make_step's DistOptions::shard_ema). The
// weights, in input order, are one index space of T elements (their concatenation: the
// order of the flat weight buffers); of a job of W = world_size ranks, rank r owns elements
// [floor(r*T/W), floor((r+1)*T/W)), a contiguous range of floor(T/W) or ceil(T/W) elements,
// and keeps their shadow in `shard`, shape (ceil(T/W),) on every rank (so every rank binds
// the same shapes; a short range leaves its last element unused at zero). Element for element
// the arithmetic is _loom_ema_update's, so a gathered shard equals the whole shadow bitwise;
// `norm` (zero_debias) is the same one-element total weight on every rank.
//
// Mapping the libraries: optax.ema(d, debias=True) = constant + zero_debias + debias;
// AveragedModel+get_ema_multi_avg_fn(d) = constant + copy; TF Model Garden(average_decay=d,
// start_step=S) = tf + zero_debias + start_step=S, read raw; timm ModelEmaV3(use_warmup=True,
// update_after_step=U) = timm + copy + start_step=U; timm ModelEmaV3(use_warmup=False, U) =
// constant + copy + update_after_step=U+1; YOLOv5 = yolov5 + copy (YOLOv5's own first update
// mixes in the pre-training weights with d ≈ decay/tau; copy init replaces that by w_1).
#include <algorithm>
#include <cmath>

#include "ops/update/ema_math.h"
#include "ops/update/shard_plan.h"
#include "ops/update/update_util.h"
#include "runtime/dist/communicator.h"

namespace loom {
namespace {

using update::f32;

using update::EmaParam;

/// The EMA's parameters, declared once for _loom_ema_update and _loom_ema_shard_update (any
/// P with EmaParam's members).
template <class P>
ParamSchema<P> ema_schema(ParamSchema<P> s) {
  s.optional("decay", &P::decay, 0.999, "Target decay, in [0, 1].")
      .choice("schedule", &P::schedule, {"constant", "tf", "yolov5", "timm"}, "constant",
              "Decay schedule: constant; tf = min(decay, (1+c)/(10+c)) (TF Model Garden); "
              "yolov5 = decay*(1-exp(-c/tau)); timm = 1-(1+(c-1)/gamma)^-power clamped to "
              "[min_decay, decay] (timm ModelEmaV3 warmup), with c = t - start_step.")
      .choice("init", &P::init, {"copy", "zero_debias"}, "copy",
              "copy: the first real step copies the weights (d = 0). zero_debias: the shadow "
              "starts at zero; a 4th input `norm` tracks 1 - prod(d) for ema/norm.")
      .optional("tau", &P::tau, 2000.0, "Ramp length of the yolov5 schedule.")
      .optional("gamma", &P::gamma, 1.0, "Warmup gamma of the timm schedule.")
      .optional("power", &P::power, 0.75, "Warmup power of the timm schedule.")
      .optional("min_decay", &P::min_decay, 0.0, "Lower clamp of the timm schedule.")
      .optional("update_after_step", &P::update_after_step, 0,
                "Real steps t <= update_after_step copy the weights (d = 0).")
      .optional("start_step", &P::start_step, 0,
                "Steps t < start_step copy the weights; schedules count c = t - start_step.");
  return s;
}

template <class P>
void check_ema(P& p) {
  auto in01 = [](double v, const char* n) {
    if (!(v >= 0 && v <= 1))
      throw ParamError(std::string(n) + " must be in [0, 1], got " + format_float(v));
  };
  in01(p.decay, "decay");
  in01(p.min_decay, "min_decay");
  if (!(p.tau > 0)) throw ParamError("tau must be > 0, got " + format_float(p.tau));
  if (!(p.gamma > 0)) throw ParamError("gamma must be > 0, got " + format_float(p.gamma));
  if (!(p.power > 0)) throw ParamError("power must be > 0, got " + format_float(p.power));
}

const auto kEmaSchema = ema_schema(ParamSchema<EmaParam>()).check(check_ema<EmaParam>);

/// The decay for real step t (see the file header), in double: update::EmaSchedule, which the
/// CUDA kernel (updates.cu) evaluates on the device.
template <class P>
double ema_decay(const P& p, double t) {
  return update::ema_schedule(p).decay(t);
}

using update::ema_step;

bool zero_debias(const OpAttrs& a) { return a.param<EmaParam>().init == "zero_debias"; }

class EmaKernel final : public update::UpdateKernel<EmaParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    float* ema = in[0].data<float>();
    const float* w = in[1].data<float>();
    // Schedules are evaluated on the host, once per call: t is a CPU scalar.
    const float d = f32(ema_decay(p_, static_cast<double>(in[2].data<float>()[0])));
    const float om = 1.f - d;  // exact (Sterbenz): d + om == 1, so a constant stays put
    float* o = out[0].data<float>();
    if (d == 0.f) {
      update::apply(o, req[0], r, [=](int64_t i) { return ema[i] = w[i]; });
    } else {
      update::apply(o, req[0], r,
                    [=](int64_t i) { return ema[i] = ema_step(d, om, ema[i], w[i]); });
    }
  }
  // The debias norm (zero_debias) is one element: once per call, not per range.
  void once(const OpContext&, std::span<const NDArray> in, std::span<const Req>,
            std::span<const NDArray>) override {
    if (in.size() <= 3) return;
    const float d = f32(ema_decay(p_, static_cast<double>(in[2].data<float>()[0])));
    float* norm = in[3].data<float>();
    norm[0] = update::ema_norm_step(d, norm[0]);
  }
};

struct DebiasNoParam {};
const auto kNoSchema = ParamSchema<DebiasNoParam>();

class DebiasKernel final : public update::UpdateKernel<DebiasNoParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float* ema = in[0].data<float>();
    const float q = in[1].data<float>()[0];
    update::apply(out[0].data<float>(), req[0], r,
                  [=](int64_t i) { return update::ema_debias(ema[i], q); });
  }
};

void scalars_after(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out, size_t n) {
  update::infer_shape_with_scalars(a, in, out, n);
}

LOOM_REGISTER_OP("_loom_ema_update")
    .describe(
        "Model EMA in one pass: ema = d*ema + (1-d)*weight with d from the schedule at "
        "real step t (1 on the first update). init=zero_debias adds a mutable `norm` "
        "input (1 - prod d) for the debiased weights ema/norm (_loom_ema_debias).")
    .params(kEmaSchema)
    .inputs([](const OpAttrs& a) {
      return zero_debias(a) ? std::vector<std::string>{"ema", "weight", "t", "norm"}
                            : std::vector<std::string>{"ema", "weight", "t"};
    })
    .aux([](const OpAttrs& a) {
      return zero_debias(a) ? std::vector<int>{0, 3} : std::vector<int>{0};
    })
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      scalars_after(a, in, out, 2);
    })
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .init_input(0, "[\"zero\", {}]")
    .init_input(3, "[\"zero\", {}]")
    .cpu<EmaKernel>()
    .sample({.attrs = {{"decay", "0.9"}},
             .in_shapes = {{3, 4}, {3, 4}, {1}},
             .in_kinds = {"normal", "normal", "label:20"},
             .check_grad = false})
    .sample({.attrs = {{"decay", "0.99"}, {"schedule", "tf"}, {"init", "zero_debias"}},
             .in_shapes = {{5}, {5}, {1}, {1}},
             .in_kinds = {"normal", "normal", "label:40", "unit"},
             .check_grad = false})
    .sample({.attrs = {{"decay", "0.999"}, {"schedule", "yolov5"}, {"tau", "10"}},
             .in_shapes = {{2, 3}, {2, 3}, {1}},
             .in_kinds = {"normal", "normal", "label:50"},
             .check_grad = false})
    .sample({.attrs = {{"decay", "0.999"},
                       {"schedule", "timm"},
                       {"power", "0.6667"},
                       {"min_decay", "0.1"},
                       {"start_step", "2"}},
             .in_shapes = {{7}, {7}, {1}},
             .in_kinds = {"normal", "normal", "label:30"},
             .check_grad = false})
    .sample({.attrs = {{"init", "zero_debias"}, {"update_after_step", "5"}},
             .in_shapes = {{4}, {4}, {1}, {1}},
             .in_kinds = {"normal", "normal", "ones", "unit"},
             .check_grad = false});

LOOM_REGISTER_OP("_loom_ema_debias")
    .describe("Debiased EMA weights for init=zero_debias: ema / norm (ema when norm == 0).")
    .params(kNoSchema)
    .inputs({"ema", "norm"})
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      scalars_after(a, in, out, 1);
    })
    .zero_grad()
    .cpu<DebiasKernel>()
    .sample({.in_shapes = {{3, 4}, {1}}, .in_kinds = {"normal", "positive"}, .check_grad = false})
    .sample({.in_shapes = {{5}, {1}}, .in_kinds = {"normal", "zeros"}, .check_grad = false});

using update::EmaShardParam;

const auto kEmaShardSchema =
    ema_schema(ParamSchema<EmaShardParam>()
                   .required("num_tensors", &EmaShardParam::num_tensors,
                             "Number of weight tensors (their concatenation is sharded).")
                   .required("world_size", &EmaShardParam::world_size,
                             "Ranks of the job; bind refuses another size."))
        .check([](EmaShardParam& p) {
          check_input_count(p.num_tensors, "num_tensors");
          if (p.world_size < 1) throw ParamError("world_size must be >= 1");
          check_ema(p);
        });

bool shard_zero_debias(const OpAttrs& a) { return a.param<EmaShardParam>().init == "zero_debias"; }

/// Elements of one rank's shard: ceil(total / world).
int64_t shard_len(int64_t total, int world) { return (total + world - 1) / world; }

class EmaShardKernel final : public Kernel {
 public:
  explicit EmaShardKernel(const KernelArgs& a) : p_(a.attrs.param<EmaShardParam>()) {
    update::check_f32(a);
    const dist::Communicator& comm = dist::init();
    if (comm.size() != p_.world_size)
      throw dist::DistError("node '" + a.attrs.name + "' (op _loom_ema_shard_update) on rank " +
                            std::to_string(comm.rank()) + " of " + std::to_string(comm.size()) +
                            ": the step graph shards the EMA over " +
                            std::to_string(p_.world_size) + " ranks; rebuild it for this job");
    std::vector<int64_t> sizes;
    for (size_t i = 1; i <= static_cast<size_t>(p_.num_tensors); ++i)
      sizes.push_back(a.in_shapes[i].numel());
    // The pieces of tensors inside the own range (update::shard_range, shard_plan.h).
    update::ShardRange range = update::shard_range(sizes, comm.rank(), p_.world_size, 1);
    segs_ = std::move(range.segs);
    own_ = range.hi - range.lo;
  }

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const size_t n = static_cast<size_t>(p_.num_tensors);
    const float d = f32(ema_decay(p_, static_cast<double>(in[n + 1].data<float>()[0])));
    const float om = 1.f - d;
    float* ema = in[0].data<float>();
    // Shard elements [b, e) of this thread: the overlapping part of every segment. Captures
    // by value, so the loops keep d and om in registers (see update::apply_serial).
    const std::vector<Seg>& segs = segs_;
    const NDArray* arrays = in.data();
    auto run = [=, &segs](int64_t b, int64_t e) {
      for (const Seg& s : segs) {
        const int64_t x = std::max(b, s.dst), y = std::min(e, s.dst + s.len);
        if (x >= y) continue;
        float* out = ema + x;
        const float* wt = arrays[s.tensor].data<float>() + s.src + (x - s.dst);
        const int64_t m = y - x;
        if (d == 0.f) {
#pragma omp simd
          for (int64_t i = 0; i < m; ++i) out[i] = wt[i];
        } else {
#pragma omp simd
          for (int64_t i = 0; i < m; ++i) out[i] = ema_step(d, om, out[i], wt[i]);
        }
      }
    };
    if (own_ < update::kParallelMin) {
      run(0, own_);
    } else {
#pragma omp parallel
      {
        auto [lo, hi] = thread_share(0, own_, omp_get_num_threads(), omp_get_thread_num());
        run(lo, hi);
      }
    }
    if (in.size() > n + 2) {
      float* norm = in[n + 2].data<float>();
      norm[0] = update::ema_norm_step(d, norm[0]);
    }
    float* o = out[0].data<float>();
    if (o != ema) update::apply(o, req[0], in[0].size(), [=](int64_t i) { return ema[i]; });
  }

 private:
  using Seg = update::ShardSeg;
  EmaShardParam p_;
  std::vector<Seg> segs_;
  int64_t own_ = 0;
};

LOOM_REGISTER_OP("_loom_ema_shard_update")
    .describe(
        "Sharded model EMA: this rank's contiguous 1/world_size range of the concatenated "
        "weights, shard = d*shard + (1-d)*weights[range], as _loom_ema_update (same "
        "schedules and init modes; zero_debias adds the one-element `norm`).")
    .params(kEmaShardSchema)
    .inputs([](const OpAttrs& a) {
      const int n = a.param<EmaShardParam>().num_tensors;
      std::vector<std::string> v = {"shard"};
      for (int i = 0; i < n; ++i) v.push_back("weight" + std::to_string(i));
      v.emplace_back("t");
      if (shard_zero_debias(a)) v.emplace_back("norm");
      return v;
    })
    .aux([](const OpAttrs& a) {
      const int n = a.param<EmaShardParam>().num_tensors;
      return shard_zero_debias(a) ? std::vector<int>{0, n + 2} : std::vector<int>{0};
    })
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      const auto& p = a.param<EmaShardParam>();
      const auto n = static_cast<size_t>(p.num_tensors);
      merge_shape(in[0], out[0], input_label(a, 0));
      for (size_t i = n + 1; i < in.size(); ++i) merge_shape(in[i], Shape{1}, input_label(a, i));
      int64_t total = 0;
      for (size_t i = 1; i <= n; ++i) {
        if (!in[i].known()) return;
        total += in[i].numel();
      }
      merge_shape(in[0], Shape{shard_len(total, p.world_size)}, input_label(a, 0));
      merge_shape(out[0], in[0], "output 0");
    })
    .inplace_pairs({{0, 0}})
    .zero_grad()
    .init_input(0, "[\"zero\", {}]")
    .cpu<EmaShardKernel>()
    .sample({.attrs = {{"num_tensors", "2"}, {"world_size", "1"}, {"decay", "0.9"}},
             .in_shapes = {{17}, {3, 4}, {5}, {1}},
             .in_kinds = {"normal", "normal", "normal", "label:20"},
             .check_grad = false})
    .sample({.attrs = {{"num_tensors", "1"},
                       {"world_size", "1"},
                       {"schedule", "tf"},
                       {"init", "zero_debias"}},
             .in_shapes = {{6}, {2, 3}, {1}, {1}},
             .in_kinds = {"normal", "normal", "label:40", "unit"},
             .check_grad = false});

}  // namespace
}  // namespace loom
