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

#include "ops/update/update_util.h"

namespace loom {
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

double schedule(const LrParam& p, double t) {
  if (t < static_cast<double>(p.warmup_steps)) {
    if (p.warmup_mode == "constant") return p.warmup_begin_lr;
    const double fin = p.warmup_final_lr < 0 ? p.lr : p.warmup_final_lr;
    return p.warmup_begin_lr + (fin - p.warmup_begin_lr) * t / static_cast<double>(p.warmup_steps);
  }
  if (p.scheduler == "factor") {
    double lr = p.lr;
    const int64_t n = t > static_cast<double>(p.step)
                          ? static_cast<int64_t>(std::floor((t - 1) / static_cast<double>(p.step)))
                          : 0;
    for (int64_t i = 0; i < n; ++i) {
      lr *= p.factor;
      if (lr < p.stop_factor_lr) {
        lr = p.stop_factor_lr;
        if (p.factor <= 1) break;  // stays clamped
      }
    }
    return lr;
  }
  if (p.scheduler == "multifactor") {
    double lr = p.lr;
    for (auto s : p.steps.dims())
      if (t > static_cast<double>(s)) lr *= p.factor;
    return lr;
  }
  if (p.scheduler == "cosine" || p.scheduler == "poly") {
    const double u = std::min(t, static_cast<double>(p.max_update));
    const double frac = (u - static_cast<double>(p.warmup_steps)) /
                        static_cast<double>(p.max_update - p.warmup_steps);
    if (p.scheduler == "cosine")
      return p.final_lr + (p.lr - p.final_lr) * (1 + std::cos(M_PI * frac)) / 2;
    return p.final_lr + (p.lr - p.final_lr) * std::pow(1 - frac, p.pwr);
  }
  return p.lr;
}

class LrKernel final : public update::UpdateKernel<LrParam> {
 public:
  using UpdateKernel::UpdateKernel;
  void run(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
           std::span<const NDArray> out, update::Range r) override {
    const double t = std::round(static_cast<double>(in[0].data<float>()[0]));
    double lr = schedule(p_, t) * p_.scale;
    if (p_.bias_correction == "adam")
      lr *= std::sqrt(1. - std::pow(p_.beta2, t)) / (1. - std::pow(p_.beta1, t));
    const float v = static_cast<float>(lr);
    update::apply(out[0].data<float>(), req[0], 1, [=](int64_t) { return v; });
  }
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
