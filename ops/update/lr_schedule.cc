// _loom_lr(t) -> lr, shape (1,): the learning rate of real (optimizer) step t computed in the
// graph, so schedules and Adam's bias correction advance once per real step of a training-step
// graph (spec/ema-accumulation-dist.md B.1: LR and bias correction count real updates). t is
// MXNet's `num_update`: the number of updates including the current one (1 on the first).
//
// Schedules follow MXNet 1.9 python/mxnet/lr_scheduler.py, evaluated in closed form (MXNet's
// schedulers are stateful; the closed form equals the value a scheduler called at every step
// returns). With warmup (all schedules): t < warmup_steps -> linear
// warmup_begin_lr + (warmup_final_lr - warmup_begin_lr)·t/warmup_steps, or constant
// warmup_begin_lr. Otherwise:
//   constant:    lr
//   factor:      lr·factor^n, n = floor((t-1)/step) for t > step (else 0), multiplied one
//                factor at a time in double and clamped below at stop_factor_lr after each,
//                as FactorScheduler does
//   multifactor: lr·factor^n, n = number of entries s of `steps` with t > s
//   cosine:      final_lr + (lr - final_lr)·(1 + cos(pi·(min(t, max_update) - warmup_steps)
//                / (max_update - warmup_steps)))/2   (MXNet's base_lr_orig is `lr`)
//   poly:        final_lr + (lr - final_lr)·(1 - (min(t, max_update) - warmup_steps)
//                / (max_update - warmup_steps))^pwr
// warmup_final_lr < 0 means `lr` (MXNet's warmup_final_lr is the scheduler's base_lr at
// construction). Then lr *= scale (the parameter's lr_mult) and, with bias_correction = adam,
// lr *= sqrt(1 - beta2^t)/(1 - beta1^t) (MXNet's Adam optimizer). All in double, rounded to
// float32 once, as MXNet passes a Python float to the update op's float `lr`.
#include <cmath>

#include "ops/update/lr_math.h"
#include "ops/update/update_util.h"

namespace loom {

using update::LrSchedule;

namespace {

struct LrParam {
  double lr;
  std::string scheduler;
  int64_t step;
  Shape steps;
  double factor, stop_factor_lr;
  int64_t max_update;
  double final_lr, pwr;
  int64_t warmup_steps;
  double warmup_begin_lr, warmup_final_lr;
  std::string warmup_mode;
  double scale;
  std::string bias_correction;
  double beta1, beta2;
};

const auto kLrSchema =
    ParamSchema<LrParam>()
        .required("lr", &LrParam::lr, "Base learning rate (the scheduler's base_lr).")
        .choice("scheduler", &LrParam::scheduler,
                {"constant", "factor", "multifactor", "cosine", "poly"}, "constant",
                "MXNet lr_scheduler: constant, FactorScheduler, MultiFactorScheduler, "
                "CosineScheduler, PolyScheduler.")
        .optional("step", &LrParam::step, 1, "factor: decay every `step` updates.")
        .optional("steps", &LrParam::steps, Shape{}, "multifactor: increasing update counts.")
        .optional("factor", &LrParam::factor, 1.0, "factor/multifactor: decay factor.")
        .optional("stop_factor_lr", &LrParam::stop_factor_lr, 1e-8,
                  "factor: the learning rate stops decaying below this.")
        .optional("max_update", &LrParam::max_update, 0, "cosine/poly: updates to reach final_lr.")
        .optional("final_lr", &LrParam::final_lr, 0.0, "cosine/poly: final learning rate.")
        .optional("pwr", &LrParam::pwr, 2.0, "poly: power.")
        .optional("warmup_steps", &LrParam::warmup_steps, 0, "Warmup updates.")
        .optional("warmup_begin_lr", &LrParam::warmup_begin_lr, 0.0, "Warmup start.")
        .optional("warmup_final_lr", &LrParam::warmup_final_lr, -1.0,
                  "Warmup end; negative = lr.")
        .choice("warmup_mode", &LrParam::warmup_mode, {"linear", "constant"}, "linear",
                "Warmup shape.")
        .optional("scale", &LrParam::scale, 1.0, "Multiplier (the parameter's lr_mult).")
        .choice("bias_correction", &LrParam::bias_correction, {"none", "adam"}, "none",
                "adam: multiply by sqrt(1-beta2^t)/(1-beta1^t).")
        .optional("beta1", &LrParam::beta1, 0.9, update::kDocBeta1)
        .optional("beta2", &LrParam::beta2, 0.999, update::kDocBeta2)
        .check([](LrParam& p) {
          if (p.scheduler == "factor" && p.step < 1)
            throw ParamError("step must be >= 1, got " + std::to_string(p.step));
          if ((p.scheduler == "cosine" || p.scheduler == "poly") && p.max_update <= p.warmup_steps)
            throw ParamError("max_update must be > warmup_steps");
          if (p.warmup_steps < 0) throw ParamError("warmup_steps must be >= 0");
        });

}  // namespace

update::LrSchedule update::lr_schedule(const OpAttrs& a) {
  const auto& p = a.param<LrParam>();
  LrSchedule s;
  s.kind = p.scheduler == "factor"        ? LrSchedule::kFactor
           : p.scheduler == "multifactor" ? LrSchedule::kMultiFactor
           : p.scheduler == "cosine"      ? LrSchedule::kCosine
           : p.scheduler == "poly"        ? LrSchedule::kPoly
                                          : LrSchedule::kConstant;
  s.lr = p.lr;
  s.step = p.step;
  if (p.steps.ndim() > LrSchedule::kMaxSteps)
    throw ParamError("node '" + a.name + "' (op _loom_lr): at most " +
                     std::to_string(LrSchedule::kMaxSteps) + " multifactor steps, got " +
                     std::to_string(p.steps.ndim()));
  s.n_steps = p.steps.ndim();
  for (int i = 0; i < s.n_steps; ++i) s.steps[i] = p.steps[i];
  s.factor = p.factor;
  s.stop_factor_lr = p.stop_factor_lr;
  s.max_update = p.max_update;
  s.final_lr = p.final_lr;
  s.pwr = p.pwr;
  s.warmup_steps = p.warmup_steps;
  s.warmup_begin_lr = p.warmup_begin_lr;
  s.warmup_final_lr = p.warmup_final_lr;
  s.warmup_constant = p.warmup_mode == "constant";
  s.scale = p.scale;
  s.adam_bias = p.bias_correction == "adam";
  s.beta1 = p.beta1;
  s.beta2 = p.beta2;
  return s;
}

namespace {

class LrKernel final : public update::UpdateKernel<LrParam> {
 public:
  explicit LrKernel(const KernelArgs& a) : UpdateKernel(a), s_(update::lr_schedule(a.attrs)) {}
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const float v = s_.at(in[0].data<float>()[0]);
    update::apply(out[0].data<float>(), req[0], 1, [=](int64_t) { return v; });
  }

 private:
  update::LrSchedule s_;
};

LOOM_REGISTER_OP("_loom_lr")
    .describe("Learning rate of real step t (1 on the first update): MXNet lr_scheduler "
              "(constant, factor, multifactor, cosine, poly; warmup), times scale, optionally "
              "with Adam's bias correction sqrt(1-beta2^t)/(1-beta1^t). Shape (1,).")
    .params(kLrSchema)
    .inputs({"t"})
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      update::infer_shape_with_scalars(a, in, out, 0);
      if (out[0].ndim() == 0) out[0] = Shape{1};
    })
    .zero_grad()
    .cpu<LrKernel>()
    .sample({.attrs = {{"lr", "0.1"}, {"scheduler", "factor"}, {"step", "3"}, {"factor", "0.5"}},
             .in_shapes = {{1}},
             .in_kinds = {"label:20"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.1"}, {"scheduler", "multifactor"}, {"steps", "(2, 5)"},
                       {"factor", "0.1"}, {"warmup_steps", "2"}},
             .in_shapes = {{1}},
             .in_kinds = {"label:9"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.1"}, {"scheduler", "cosine"}, {"max_update", "10"},
                       {"final_lr", "0.01"}, {"warmup_steps", "3"}, {"warmup_begin_lr", "0.02"}},
             .in_shapes = {{1}},
             .in_kinds = {"label:14"},
             .check_grad = false})
    .sample({.attrs = {{"lr", "0.001"}, {"bias_correction", "adam"}, {"scale", "2"}},
             .in_shapes = {{1}},
             .in_kinds = {"positive"},
             .check_grad = false});

}  // namespace
}  // namespace loom
