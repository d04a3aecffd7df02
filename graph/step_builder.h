// Training-step graphs: make_step turns a loss symbol into one graph whose every execution is
// one micro-step — forward, in-graph gradients, gradient accumulation and, on the last
// micro-step of k, the optimizer update, the real-step count (learning-rate schedule, Adam's
// bias correction) and the model EMA. Predicates computed in the graph switch the writes
// (ops/op.h kPredAttr); updates write into the weights' and states' own arrays
// (graph/exec_graph.h kInplaceAttr). Semantics: ../shared/spec/ema-accumulation-dist.md.
//
// Every piece of training state is an auxiliary state of the step graph, named after its
// parameter p (MXNet's update-op input names for optimizer states):
//   p_acc                     accumulated gradient (sum or mean of the k micro-steps)
//   p_mom                     sgd (momentum != 0), nag
//   p_mean, p_var             adam, adamw, lamb
//   p_n  (+ p_g, p_delta)     rmsprop (centered)
//   p_ema (+ p_ema_norm)      EMA shadow (zero_debias: total weight 1 - prod d)
//   step_ema_shard (+ step_ema_shard_norm)   instead, with DistOptions::shard_ema: this
//                             rank's range of every trained parameter's shadow
//   step_opt_shard_<state>    instead of p_<state>, with DistOptions::shard_optimizer: this
//                             rank's range of every trained parameter's optimizer state
//   step_micro, step_real     micro-steps done, real (optimizer) steps done
// All of them start at zero (simple_bind zero-fills), which is their correct initial value.
//
// Heads of the step symbol: the loss outputs first, then the update and EMA outputs (those
// alias the weights and shadows; they keep the update nodes in the graph), with
// DistOptions::bn_stats "average" one output of the statistics' allreduce, and with
// StepOptions::dist last the (1,) output of the first-call broadcast.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "graph/symbol.h"
#include "runtime/executor.h"
#include "runtime/params_io.h"

namespace loom {

/// MXNet lr_scheduler (python/mxnet/lr_scheduler.py), evaluated by the `_loom_lr` op.
struct LrSchedulerSpec {
  std::string type = "constant";  ///< constant, factor, multifactor, cosine, poly
  int64_t step = 1;               ///< factor
  std::vector<int64_t> steps;     ///< multifactor
  double factor = 1, stop_factor_lr = 1e-8;
  int64_t max_update = 0;         ///< cosine, poly
  double final_lr = 0, pwr = 2;
  int64_t warmup_steps = 0;
  double warmup_begin_lr = 0;
  double warmup_final_lr = -1;    ///< < 0: the base learning rate
  std::string warmup_mode = "linear";
  /// cosine/poly: MXNet's base_lr_orig (the scheduler's own base_lr), else learning_rate.
  std::optional<double> base_lr;
};

/// An MXNet optimizer (mx.optimizer) with its argument names and defaults.
struct OptimizerSpec {
  std::string name = "sgd";  ///< sgd, nag, adam, adamw, rmsprop, lamb
  double learning_rate = 0.01, wd = 0, rescale_grad = 1;
  double clip_gradient = -1;  ///< < 0: off (MXNet's None)
  double momentum = 0;        ///< sgd, nag
  double beta1 = 0.9, beta2 = 0.999;
  std::optional<double> epsilon;  ///< default 1e-8 (adam, adamw, rmsprop), 1e-6 (lamb)
  double gamma1 = 0.9, gamma2 = 0.9;  ///< rmsprop
  bool centered = false;              ///< rmsprop
  double clip_weights = -1;           ///< rmsprop
  double lower_bound = -1, upper_bound = -1;  ///< lamb
  bool bias_correction = true;                ///< lamb, adamw
  LrSchedulerSpec lr_scheduler;
  /// Per-parameter overrides (set_lr_mult / set_wd_mult); variable attributes __lr_mult__ /
  /// __wd_mult__ apply otherwise; MXNet's default wd_mult is 0 for names not ending in
  /// _weight or _gamma.
  std::map<std::string, double> lr_mult, wd_mult;
};

/// Model EMA (ops/update/ema.cc `_loom_ema_update` parameters).
struct EmaOptions {
  double decay = 0.999;
  std::string schedule = "constant";  ///< constant, tf, yolov5, timm
  std::string init = "copy";          ///< copy, zero_debias
  bool include_aux = false;           ///< average aux states too (integer ones are copied)
  double tau = 2000, gamma = 1, power = 0.75, min_decay = 0;
  int64_t update_after_step = 0, start_step = 0;
};

/// Data-parallel training (runtime/dist): the step graph reduces the accumulated gradients
/// over the ranks of the job on the last micro-step (`_loom_allreduce` nodes, switched like
/// the update), averaging over ranks as over micro-steps when grad_mean (the 1/N is folded
/// into the accumulation's scale 1/(k*N)), and its first call broadcasts rank 0's weights and
/// states (`_loom_broadcast_once`, with the bind-time check that every rank has the same
/// graph, shapes and bucket plan).
struct DistOptions {
  /// Gradients are reduced in buckets (reverse topological order: the last layers' first):
  /// the first of first_bucket_mb MiB, then bucket_mb MiB each, one collective per bucket.
  double bucket_mb = 25, first_bucket_mb = 1;
  /// ZeRO-1 sharding of the model EMA: rank r of N keeps and updates the shadow of only its
  /// contiguous 1/N range of the trained weights' concatenation (`_loom_ema_shard_update`,
  /// aux states `step_ema_shard`, shape (ceil(T/N),), and `step_ema_shard_norm` for
  /// zero_debias) instead of `p_ema` per parameter. ema_params, bind_ema, refresh_ema, EmaSwap
  /// and training_state / save_training_state gather the shards (one all_gather: collectives
  /// every rank must call) and present the whole EMA under the unsharded names (`p_ema`,
  /// `p_ema_norm`), so checkpoints are the same for any world size and sharding;
  /// set_training_state takes this rank's range from them. Aux-state shadows (include_aux)
  /// stay whole and per rank, as the statistics they average.
  bool shard_ema = false;
  /// ZeRO-1 sharding of the optimizer state (every optimizer make_step supports), with the
  /// same contiguous 1/N ranges as shard_ema: on the last micro-step the accumulated gradients
  /// are reduce-scattered (`_loom_shard_reduce_scatter`: one collective, instead of the
  /// `_loom_allreduce` buckets), each rank updates only its range with states `step_opt_shard_`
  /// + the update op's state name (mom, mean, var, n, g, delta; shape (ceil(T/N),)), LAMB's
  /// per-tensor norms come from one allreduce of partial sums (`_loom_shard_norms`), and the
  /// new weights are all-gathered into the weight arrays (`_loom_shard_all_gather`); see
  /// ops/update/shard.cc. training_state / save_training_state gather the states under the
  /// unsharded names (`opt:p_mom`, ...), set_training_state takes this rank's range. The
  /// accumulators `p_acc` keep this rank's own (unreduced) sum.
  bool shard_optimizer = false;
  /// Each bucket's allreduce starts as soon as its gradients are accumulated, overlapped with
  /// the rest of backward (per-tensor accumulation, `_loom_allreduce_plan` / `_start` /
  /// `_wait`: ops/dist/allreduce_overlap.cc); false: one blocking `_loom_allreduce` after the
  /// whole accumulation. Both give bit-identical results.
  bool overlap = true;
  /// BatchNorm statistics (every float32 aux state): "local" (each rank keeps its own) or
  /// "average" (replaced by their mean over ranks once per real step, after the update: one
  /// `_loom_allreduce`).
  std::string bn_stats = "local";
  /// The job's size, baked into the gradient scale (bind refuses another); 0: the process's
  /// communicator (loom::dist::init()).
  int world_size = 0;
};

struct StepOptions {
  int accumulate = 1;     ///< k micro-steps per real step
  bool grad_mean = true;  ///< accumulate the mean (scale 1/k) rather than the sum
  std::optional<EmaOptions> ema;
  /// Arguments that are inputs, not parameters (MXNet Module's data_names + label_names).
  /// Empty: "data" and every argument whose name ends in "label".
  std::vector<std::string> input_names;
  /// Parameters left unchanged (MXNet Module's fixed_param_names).
  std::vector<std::string> fixed_param_names;
  /// Buckets: the accumulation, the optimizer update and the EMA of all parameters (of one
  /// lr_mult) are one `_loom_bucket` node each, a single pass over all of them, and
  /// simple_bind lays out each kind of state (weights, accumulators, momenta, shadows) in one
  /// flat buffer with per-parameter views. false: one node per parameter.
  bool bucket = true;
  /// Update-only graphs (MXNet Module.update): non-empty, the gradient of parameter p is the
  /// input `p + gradient_suffix` (bound to a training executor's gradient array) instead of
  /// the loss's in-graph gradient; there is no accumulation (accumulate must be 1, no
  /// `p_acc` state), no EMA, and the loss is not a head (it only names the parameters).
  std::string gradient_suffix;
  /// Data-parallel step (see DistOptions); not with gradient_suffix (Module reduces its own).
  std::optional<DistOptions> dist;
};

/// Builds the training-step symbol (see the file header). Throws Error for an unknown
/// optimizer or bad options.
Symbol make_step(const Symbol& loss, const OptimizerSpec& opt, const StepOptions& o = {});

/// What an input of a step graph holds, found from the ops that consume it (works on a step
/// graph loaded from JSON too).
enum class StepState { kInput, kParam, kAux, kOpt, kAcc, kEma, kCounter };
/// Name -> kind for every argument and aux state of `step`.
std::map<std::string, StepState> classify_step_inputs(const Symbol& step);
/// The checkpoint prefix of a kind: "arg:", "aux:", "opt:", "acc:", "ema:", "step:" ("" for
/// inputs, which are not saved).
const char* step_state_prefix(StepState k);

/// The whole training state of a bound step executor as prefixed named arrays (copies). A
/// sharded EMA is gathered (a collective: every rank calls it) and named as unsharded.
NamedArrays training_state(const Executor& step);
/// Writes training_state atomically (temp file, fsync, rename) as an MXNet .params file.
/// With a sharded EMA every rank must call it: all gather, rank 0 writes, and a barrier makes
/// the file visible to every rank on return.
void save_training_state(const std::string& path, const Executor& step);
/// Copies a saved state into the executor's arrays. Throws FormatError for a truncated or
/// corrupt file, a name the graph lacks, a wrong prefix, shape or dtype, and (strict) for
/// state the file lacks. A sharded EMA takes this rank's range of the whole shadows `p_ema`
/// (a checkpoint of any world size, sharded or not); every rank loads the file.
void load_training_state(const std::string& path, Executor& step, bool strict = true);
void set_training_state(const NamedArrays& state, Executor& step, bool strict = true,
                        const std::string& what = "training state");

/// Evaluation values of the EMA shadows, by the name of what they shadow: the shadow arrays
/// themselves for init=copy (shared, they follow training), ema/norm copies for zero_debias.
/// A sharded EMA is gathered into copies (a collective, as are bind_ema, refresh_ema and
/// EmaSwap: every rank calls them); its values are a snapshot: refresh_ema.
struct EmaParams {
  std::map<std::string, NDArray> arg, aux;
};
EmaParams ema_params(const Executor& step);
/// Binds `net` (the plain loss or inference symbol) on the EMA values; parameters and aux
/// states without a shadow use the step executor's live arrays; other inputs are allocated
/// from `shapes`. With zero_debias the debiased values are a snapshot: refresh_ema.
std::unique_ptr<Executor> bind_ema(const Symbol& net, const Executor& step,
                                   const std::map<std::string, Shape>& shapes,
                                   BindOptions opts = {.default_req = Req::kNull});
/// Copies the current EMA evaluation values into an executor bound by bind_ema.
void refresh_ema(const Executor& step, Executor& eval);

/// Swaps the live weights (and averaged aux states) of a step executor with their EMA
/// evaluation values in place, and back on restore() or destruction. init=copy swaps the
/// two arrays' contents (no extra memory); zero_debias keeps a copy of the live values and
/// writes ema/norm. Do not run the step while swapped.
class EmaSwap {
 public:
  explicit EmaSwap(Executor& step);
  ~EmaSwap();
  EmaSwap(const EmaSwap&) = delete;
  EmaSwap& operator=(const EmaSwap&) = delete;
  void restore();

 private:
  struct Item {
    NDArray live, ema, norm, backup;
    bool swap = true;  ///< swap live and ema; else copy ema/norm in and `backup` back
  };
  std::vector<Item> items_;
  bool active_ = false;
};

}  // namespace loom
