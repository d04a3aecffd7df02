// make_step: the training-step graph builder (see step_builder.h). Checkpoints and EMA
// evaluation helpers are in step_builder_state.cc.
#include "graph/step_builder.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "graph/infer.h"
#include "graph/json.h"
#include "ops/param.h"
#include "runtime/dist/communicator.h"

namespace loom {
namespace {

const char* kZeroInit = "[\"zero\", {}]";
/// The sharded EMA's state (DistOptions::shard_ema): this rank's shadow range and its norm.
const char* kEmaShard = "step_ema_shard";
const char* kEmaShardNorm = "step_ema_shard_norm";
/// The sharded optimizer's states (DistOptions::shard_optimizer): kOptShard + the update op's
/// state input name (mom, mean, var, n, g, delta), this rank's range of every parameter's.
const char* kOptShard = "step_opt_shard_";

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}
std::string num(double v) { return format_float(v); }
std::string inum(int64_t v) { return std::to_string(v); }

Symbol state_var(const std::string& name) { return Symbol::Variable(name, {{"__init__", kZeroInit}}); }

/// An op whose writes happen only when `pred` is nonzero, written in place into input 0.
Symbol switched(const std::string& op, std::vector<Symbol> in, Attrs a, const Symbol& pred,
                const std::string& name, bool inplace = true) {
  in.push_back(pred);
  a["__pred__"] = "1";
  if (inplace) a["__inplace__"] = "(0,)";
  return Symbol::Op(op, in, a, name);
}

/// lr_mult / wd_mult of one parameter: explicit override, then the variable attribute, then
/// MXNet's default (wd_mult 0 unless the name ends in _weight or _gamma).
double mult(const std::map<std::string, double>& over, const Attrs& attrs, const char* key,
            const std::string& name, bool is_wd) {
  if (auto it = over.find(name); it != over.end()) return it->second;
  if (auto it = attrs.find(key); it != attrs.end()) return parse_float(it->second);
  if (is_wd && !(ends_with(name, "_weight") || ends_with(name, "_gamma"))) return 0.0;
  return 1.0;
}

Attrs lr_attrs(const OptimizerSpec& opt) {
  const LrSchedulerSpec& s = opt.lr_scheduler;
  Attrs a{{"lr", num(opt.learning_rate)}, {"scheduler", s.type}};
  if (s.type == "factor") {
    a["step"] = inum(s.step);
    a["factor"] = num(s.factor);
    a["stop_factor_lr"] = num(s.stop_factor_lr);
  } else if (s.type == "multifactor") {
    std::string t = "(";
    for (size_t i = 0; i < s.steps.size(); ++i) t += (i ? ", " : "") + inum(s.steps[i]);
    a["steps"] = t + (s.steps.size() == 1 ? ",)" : ")");
    a["factor"] = num(s.factor);
  } else if (s.type == "cosine" || s.type == "poly") {
    a["max_update"] = inum(s.max_update);
    a["final_lr"] = num(s.final_lr);
    if (s.type == "poly") a["pwr"] = num(s.pwr);
    if (s.base_lr) a["lr"] = num(*s.base_lr);
  } else if (s.type != "constant") {
    throw Error("make_step: unknown lr_scheduler '" + s.type +
                "' (constant, factor, multifactor, cosine, poly)");
  }
  if (s.warmup_steps > 0) {
    a["warmup_steps"] = inum(s.warmup_steps);
    a["warmup_begin_lr"] = num(s.warmup_begin_lr);
    a["warmup_mode"] = s.warmup_mode;
    a["warmup_final_lr"] = num(s.warmup_final_lr < 0 ? opt.learning_rate : s.warmup_final_lr);
  }
  return a;
}

/// The job size a data-parallel step is built for (1 without dist).
int dist_world(const StepOptions& o) {
  if (!o.dist) return 1;
  const DistOptions& d = *o.dist;
  if (!o.gradient_suffix.empty())
    throw Error("make_step: an update-only graph (gradient_suffix) takes no dist options; "
                "Module reduces its gradients through its kvstore");
  if (d.world_size < 0) throw Error("make_step: dist world_size must be >= 0");
  if (d.bn_stats != "local" && d.bn_stats != "average")
    throw Error("make_step: dist bn_stats must be 'local' or 'average', got '" + d.bn_stats + "'");
  return d.world_size > 0 ? d.world_size : dist::init().size();
}

/// The accumulated gradients `acc` reduced over the ranks in place on the last micro-step:
/// one `_loom_allreduce` node taking them in reverse order (reverse topological: the
/// gradients backward writes first), which buckets them at bind.
std::vector<Symbol> allreduce_gradients(const std::vector<Symbol>& acc, const DistOptions& d,
                                        int world, const Symbol& last, const std::string& name) {
  std::vector<Symbol> in(acc.rbegin(), acc.rend());
  const auto n = static_cast<int64_t>(in.size());
  std::string alias = "(";
  for (int64_t i = 0; i < n; ++i) alias += (i ? ", " : "") + inum(i);
  Attrs a{{"num_tensors", inum(n)}, {"world_size", inum(world)},
          {"bucket_mb", num(d.bucket_mb)}, {"first_bucket_mb", num(d.first_bucket_mb)},
          {kInplaceAttr, alias + (n == 1 ? ",)" : ")")}};
  Symbol node = switched("_loom_allreduce", in, a, last, name, false);
  std::vector<Symbol> out;
  for (int64_t i = n - 1; i >= 0; --i) out.push_back(node[static_cast<size_t>(i)]);
  return out;
}

/// Accumulation and allreduce overlapped with backward (DistOptions::overlap): one
/// `_loom_accumulate` per tensor, so each runs as soon as its gradient exists; a
/// `_loom_allreduce_plan` over the accumulators (reverse order: the bucket plan of
/// `_loom_allreduce`, made at bind, and their flat layout); a `_loom_allreduce_start` per tensor
/// that starts a bucket's non-blocking collective once all its tensors are accumulated; one
/// `_loom_allreduce_wait` the update reads. Start and wait are switched by `last`. Returns the
/// reduced accumulators in `params` order.
std::vector<Symbol> accumulate_overlapped(const std::vector<std::string>& params,
                                          const std::vector<Symbol>& grads, double scale,
                                          const Symbol& first, const Symbol& last,
                                          const DistOptions& d, int world, const std::string& gs) {
  const auto n = static_cast<int64_t>(params.size());
  std::vector<Symbol> vars, started;
  for (const auto& p : params) vars.push_back(state_var(p + "_acc"));
  std::vector<Symbol> plan_in(vars.rbegin(), vars.rend());
  Symbol plan = Symbol::Op("_loom_allreduce_plan", plan_in,
                           {{"num_tensors", inum(n)}, {"world_size", inum(world)},
                            {"bucket_mb", num(d.bucket_mb)},
                            {"first_bucket_mb", num(d.first_bucket_mb)}},
                           "step_allreduce_plan" + gs);
  for (int64_t i = n - 1; i >= 0; --i) {  // plan order
    const auto u = static_cast<size_t>(i);
    Symbol acc = Symbol::Op("_loom_accumulate", {vars[u], grads[u], first},
                            {{"scale", num(scale)}, {kInplaceAttr, "(0,)"}},
                            params[u] + "_accumulate");
    started.push_back(switched("_loom_allreduce_start", {acc, plan},
                               {{"index", inum(n - 1 - i)}}, last, params[u] + "_allreduce_start"));
  }
  std::string alias = "(";
  for (int64_t i = 0; i < n; ++i) alias += (i ? ", " : "") + inum(i);
  std::vector<Symbol> wait_in = started;
  wait_in.push_back(plan);
  Symbol wait = switched("_loom_allreduce_wait", wait_in,
                         {{"num_tensors", inum(n)}, {kInplaceAttr, alias + (n == 1 ? ",)" : ")")}},
                         last, "step_allreduce_wait" + gs, false);
  std::vector<Symbol> out;
  for (int64_t i = n - 1; i >= 0; --i) out.push_back(wait[static_cast<size_t>(i)]);
  return out;
}

/// DistOptions::bn_stats "average": every float32 aux state of `loss` (BatchNorm's moving
/// mean and variance) replaced by its mean over the ranks, in place, once per real step after
/// the update (`when`), by one `_loom_allreduce` node (one bucket; simple_bind lays its
/// variable inputs out back to back). Returns name -> averaged value (empty without such
/// states).
std::map<std::string, Symbol> average_aux(const Symbol& loss, const Symbol& when, int world) {
  IndexedGraph g(loss.outputs());
  auto types = infer_types(g, {});
  auto internals = loss.get_internals();
  std::vector<std::string> names;
  std::vector<Symbol> in;
  for (uint32_t nid : g.aux_states()) {
    const DType t = types[g.entry_id(nid, 0)];
    if (t != DType::kFloat32 && t != DType::kUnknown) continue;
    names.push_back(g.node(nid).node->name());
    in.push_back(internals[names.back()]);
  }
  std::map<std::string, Symbol> out;
  if (in.empty()) return out;
  const auto n = static_cast<int64_t>(in.size());
  std::string alias = "(";
  for (int64_t i = 0; i < n; ++i) alias += (i ? ", " : "") + inum(i);
  Attrs a{{"num_tensors", inum(n)}, {"world_size", inum(world)}, {"scale", num(1.0 / world)},
          {"bucket_mb", "1e9"}, {"first_bucket_mb", "1e9"},
          {kInplaceAttr, alias + (n == 1 ? ",)" : ")")}};
  Symbol node = switched("_loom_allreduce", in, a, when, "step_bn_stats_average", false);
  for (size_t i = 0; i < names.size(); ++i) out.emplace(names[i], node[i]);
  return out;
}

/// The first-call broadcast of rank 0's weights (every non-input argument, trained or fixed)
/// and states (every aux state) of the step graph `heads`; its signature is a hash of the
/// graph, which every rank checks at bind. Sharded EMA and optimizer states (kEmaShard,
/// kOptShard*) are each rank's own and are not broadcast.
Symbol broadcast_state(const std::vector<Symbol>& heads, const std::vector<std::string>& weights) {
  Symbol body = Symbol::Group(heads);
  auto internals = body.get_internals();
  std::vector<Symbol> in;
  for (const auto& w : weights) in.push_back(internals[w]);
  for (const auto& a : body.list_auxiliary_states())
    if (a != kEmaShard && a.rfind(kOptShard, 0) != 0) in.push_back(internals[a]);
  const size_t h = std::hash<std::string>{}(save_json(body));
  return Symbol::Op("_loom_broadcast_once", in,
                    {{"num_args", inum(static_cast<int64_t>(in.size()))},
                     {"signature", std::to_string(h)}},
                    "step_broadcast_state");
}

/// The sharded EMA (DistOptions::shard_ema) of the updated weights: one node over all of
/// them, each rank updating its 1/N range of their concatenation, switched by `last`.
Symbol sharded_ema(const std::vector<std::pair<std::string, Symbol>>& new_weights,
                   const Symbol& t_real, const Symbol& last, Attrs a, int world) {
  std::vector<Symbol> in = {state_var(kEmaShard)};
  for (const auto& nw : new_weights) in.push_back(nw.second);
  in.push_back(t_real);
  if (a.at("init") == "zero_debias") in.push_back(state_var(kEmaShardNorm));
  a["num_tensors"] = inum(static_cast<int64_t>(new_weights.size()));
  a["world_size"] = inum(world);
  return switched("_loom_ema_shard_update", in, a, last, "step_ema_update");
}

/// One trained tensor of a sharded optimizer step (DistOptions::shard_optimizer).
struct ShardItem {
  Symbol weight, acc;  ///< the weight variable and its accumulated (unreduced) gradient
  double wd;
  size_t group;  ///< lr_mult group: index into the learning-rate nodes
};

/// The sharded optimizer update (ops/update/shard.cc), switched by `last`: reduce-scatter of
/// the accumulated gradients into the padded layout, the update of this rank's range (state
/// shards kOptShard + name), LAMB's norms from one small allreduce, and the all-gather of the
/// new weights into the weight arrays. Returns the updated weights (aliases of the weights).
/// The update ops and their attributes are those of make_step's unsharded path.
std::vector<Symbol> sharded_update(const std::vector<ShardItem>& items,
                                   const std::vector<Symbol>& lrs, const OptimizerSpec& opt,
                                   double eps, const Symbol& t_real, const Symbol& last,
                                   int world) {
  const auto n = static_cast<int64_t>(items.size());
  const std::string& name = opt.name;
  std::vector<Symbol> weights, accs;
  std::string wds = "(", groups = "(", alias = "(";
  for (int64_t i = 0; i < n; ++i) {
    const ShardItem& it = items[static_cast<size_t>(i)];
    weights.push_back(it.weight);
    accs.push_back(it.acc);
    wds += (i ? ", " : "") + num(it.wd);
    groups += (i ? ", " : "") + inum(static_cast<int64_t>(it.group));
  }
  for (int64_t i = 0; i <= n; ++i) alias += (i ? ", " : "") + inum(i);
  wds += n == 1 ? ",)" : ")";
  groups += n == 1 ? ",)" : ")";
  const Attrs shard{{"num_tensors", inum(n)}, {"world_size", inum(world)}};
  Symbol flat = switched("_loom_shard_reduce_scatter", accs, shard, last,
                         "step_shard_reduce_scatter", false);

  // One _loom_shard_update of `op` with the state inputs `states` (kOptShard + name) and the
  // one-element inputs `scalars` (Symbols, in the op's order) of the given kinds.
  auto update = [&](const std::string& op, Attrs a, const std::vector<std::string>& states,
                    const Symbol& grad, const std::vector<Symbol>& scalars,
                    const std::string& kinds, const std::string& node) {
    std::vector<Symbol> in = weights;
    in.push_back(grad);
    for (const auto& st : states) in.push_back(state_var(kOptShard + st));
    in.insert(in.end(), scalars.begin(), scalars.end());
    a.insert(shard.begin(), shard.end());
    a["op"] = op;
    a["wds"] = wds;
    a["num_groups"] = inum(static_cast<int64_t>(lrs.size()));
    a["groups"] = groups;
    a["scalars"] = kinds;
    a[kInplaceAttr] = "(" + inum(n) + ",)";
    return switched("_loom_shard_update", in, a, last, node, false);
  };
  const std::string clip = num(opt.clip_gradient < 0 ? -1.0 : opt.clip_gradient);
  Attrs common{{"rescale_grad", num(opt.rescale_grad)}, {"clip_gradient", clip},
               {"lr", num(opt.learning_rate)}, {"lr_input", "True"}};
  Symbol result;
  if (name == "lamb") {
    Attrs a1{{"beta1", num(opt.beta1)}, {"beta2", num(opt.beta2)}, {"epsilon", num(eps)},
             {"t", "1"}, {"t_input", "True"},
             {"bias_correction", opt.bias_correction ? "True" : "False"},
             {"rescale_grad", num(opt.rescale_grad)}, {"clip_gradient", clip}};
    Symbol g = update("lamb_update_phase1", a1, {"mean", "var"}, flat, {t_real}, "shared",
                      "step_shard_lamb_phase1");
    std::vector<Symbol> norm_in = weights;
    norm_in.push_back(g);
    Symbol norms = switched("_loom_shard_norms", norm_in, shard, last, "step_shard_lamb_norms",
                            false);
    Attrs a2{{"lr", num(opt.learning_rate)}, {"lr_input", "True"}};
    if (opt.lower_bound >= 0) a2["lower_bound"] = num(opt.lower_bound);
    if (opt.upper_bound >= 0) a2["upper_bound"] = num(opt.upper_bound);
    std::vector<Symbol> sc = {norms[0], norms[1]};
    sc.insert(sc.end(), lrs.begin(), lrs.end());
    result = update("lamb_update_phase2", a2, {}, g, sc, "tensor, tensor, group",
                    "step_shard_update");
  } else {
    std::string op;
    std::vector<std::string> states;
    Attrs a = common;
    if ((name == "sgd" || name == "nag") && opt.momentum == 0) {
      op = "sgd_update";
    } else if (name == "sgd" || name == "nag") {
      op = name == "sgd" ? "sgd_mom_update" : "nag_mom_update";
      a["momentum"] = num(opt.momentum);
      states = {"mom"};
    } else if (name == "adam" || name == "adamw") {
      op = name == "adam" ? "adam_update" : "adamw_update";
      a["beta1"] = num(opt.beta1);
      a["beta2"] = num(opt.beta2);
      a["epsilon"] = num(eps);
      if (name == "adamw") {  // MXNet 1.x AdamW: lr=1, eta = scheduled (bias-corrected) lr
        a["lr"] = "1";
        a["eta"] = num(opt.learning_rate);
      }
      states = {"mean", "var"};
    } else {  // rmsprop
      a["gamma1"] = num(opt.gamma1);
      a["epsilon"] = num(eps);
      a["clip_weights"] = num(opt.clip_weights < 0 ? -1.0 : opt.clip_weights);
      op = opt.centered ? "rmspropalex_update" : "rmsprop_update";
      states = {"n"};
      if (opt.centered) {
        a["gamma2"] = num(opt.gamma2);
        states = {"n", "g", "delta"};
      }
    }
    result = update(op, a, states, flat, lrs, "group", "step_shard_update");
  }
  std::vector<Symbol> in = weights;
  in.push_back(result);
  Attrs ag = shard;
  ag[kInplaceAttr] = alias + ")";
  Symbol gathered = switched("_loom_shard_all_gather", in, ag, last, "step_shard_all_gather", false);
  std::vector<Symbol> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(gathered[static_cast<size_t>(i)]);
  return out;
}

}  // namespace

Symbol make_step(const Symbol& loss, const OptimizerSpec& opt, const StepOptions& o) {
  const std::string& name = opt.name;
  static const std::set<std::string> kOpts = {"sgd", "nag", "adam", "adamw", "rmsprop", "lamb"};
  if (!kOpts.count(name))
    throw Error("make_step: unknown optimizer '" + name + "' (sgd, nag, adam, adamw, rmsprop, lamb)");
  if (o.accumulate < 1) throw Error("make_step: accumulate must be >= 1");
  const int k = o.accumulate;
  const bool update_only = !o.gradient_suffix.empty();
  if (update_only && (k != 1 || o.ema))
    throw Error("make_step: an update-only graph (gradient_suffix) takes accumulate 1 and no EMA");

  const int world = dist_world(o);

  // Parameters: arguments that are not inputs and not fixed.
  std::vector<std::string> params, weights;
  const auto attrs = loss.attr_dict();
  std::set<std::string> fixed(o.fixed_param_names.begin(), o.fixed_param_names.end());
  for (const auto& a : loss.list_arguments()) {
    bool input = o.input_names.empty()
                     ? (a == "data" || ends_with(a, "label"))
                     : std::find(o.input_names.begin(), o.input_names.end(), a) != o.input_names.end();
    if (!input && !fixed.count(a)) params.push_back(a);
    if (!input) weights.push_back(a);
  }
  if (params.empty()) throw Error("make_step: the loss symbol has no parameters to train");
  auto internals = loss.get_internals();
  auto var = [&](const std::string& n) { return internals[n]; };
  auto attrs_of = [&](const std::string& n) {
    auto it = attrs.find(n);
    return it == attrs.end() ? Attrs{} : it->second;
  };

  // Counters and predicates.
  auto micro = Symbol::Op("_loom_counter", {state_var("step_micro")}, {{"__inplace__", "(0,)"}},
                          "step_micro_count");
  auto pred = [&](int r, const char* n) {
    return Symbol::Op("_loom_step_predicate", {micro},
                      {{"k", inum(k)}, {"r", inum(r)}, {"offset", "-1"}}, n);
  };
  Symbol first = pred(0, "step_first"), last = pred(k - 1, "step_last");
  Symbol t_real = switched("_loom_counter", {state_var("step_real")}, {}, last, "step_real_count");

  // Gradients of every loss output with respect to the parameters, accumulated (or, in an
  // update-only graph, the gradient inputs).
  std::vector<Symbol> grads;
  if (update_only) {
    for (const auto& p : params) grads.push_back(Symbol::Variable(p + o.gradient_suffix));
  } else {
    std::vector<Symbol> gin = {loss};
    for (const auto& p : params) gin.push_back(var(p));
    auto g = Symbol::Op("_loom_gradients", gin,
                        {{"num_losses", inum(static_cast<int64_t>(loss.num_outputs()))}},
                        "step_gradients");
    for (size_t i = 0; i < params.size(); ++i) grads.push_back(g[i]);
  }

  // Learning rates: one _loom_lr node per distinct lr_mult.
  std::map<double, Symbol> lr_nodes;
  const bool adam_bc = name == "adam" || (name == "adamw" && opt.bias_correction);
  auto lr_for = [&](double m) {
    auto it = lr_nodes.find(m);
    if (it != lr_nodes.end()) return it->second;
    Attrs a = lr_attrs(opt);
    a["scale"] = num(m);
    if (adam_bc) {
      a["bias_correction"] = "adam";
      a["beta1"] = num(opt.beta1);
      a["beta2"] = num(opt.beta2);
    }
    std::string n = "step_lr" + (lr_nodes.empty() ? std::string() : inum(static_cast<int64_t>(lr_nodes.size())));
    return lr_nodes[m] = Symbol::Op("_loom_lr", {t_real}, a, n);
  };

  const double eps = opt.epsilon ? *opt.epsilon : (name == "lamb" ? 1e-6 : 1e-8);
  const std::string clip = num(opt.clip_gradient < 0 ? -1.0 : opt.clip_gradient);
  std::vector<Symbol> heads;
  if (!update_only) heads.push_back(loss);

  // Parameters grouped by lr_mult (one learning-rate node each); with o.bucket each group's
  // accumulation, update and EMA are one _loom_bucket node each.
  std::vector<double> lms;
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < params.size(); ++i) {
    const double lm = mult(opt.lr_mult, attrs_of(params[i]), "__lr_mult__", params[i], false);
    auto it = std::find(lms.begin(), lms.end(), lm);
    if (it == lms.end()) {
      lms.push_back(lm);
      groups.emplace_back();
      it = lms.end() - 1;
    }
    groups[static_cast<size_t>(it - lms.begin())].push_back(i);
  }
  // One op over the tensors of a group: a node per tensor (named per_name[i]), or one bucket
  // (named group_name). `wds` (when given) is each tensor's wd; `pred` switches the writes;
  // `inplace` writes output i into the tensor's input 0. Returns each tensor's output.
  auto emit = [&](const std::string& op, const std::vector<std::vector<Symbol>>& ins, Attrs a,
                  const std::vector<double>* wds, const Symbol* pred, bool inplace,
                  const std::vector<std::string>& per_name, const std::string& group_name) {
    std::vector<Symbol> outs;
    if (!o.bucket) {
      for (size_t i = 0; i < ins.size(); ++i) {
        Attrs ai = a;
        if (wds) ai["wd"] = num((*wds)[i]);
        if (pred) {
          outs.push_back(switched(op, ins[i], ai, *pred, per_name[i], inplace));
        } else {
          if (inplace) ai[kInplaceAttr] = "(0,)";
          outs.push_back(Symbol::Op(op, ins[i], ai, per_name[i]));
        }
      }
      return outs;
    }
    std::vector<Symbol> flat;
    for (const auto& v : ins) flat.insert(flat.end(), v.begin(), v.end());
    a["op"] = op;
    a["num_tensors"] = inum(static_cast<int64_t>(ins.size()));
    if (wds) {
      std::string t = "(";
      for (size_t i = 0; i < wds->size(); ++i) t += (i ? ", " : "") + num((*wds)[i]);
      a["wds"] = t + (wds->size() == 1 ? ",)" : ")");
    }
    if (inplace) {  // output i -> input i*m (each tensor's first input)
      std::string t = "(";
      for (size_t i = 0; i < ins.size(); ++i)
        t += (i ? ", " : "") + inum(static_cast<int64_t>(i * ins[0].size()));
      a[kInplaceAttr] = t + (ins.size() == 1 ? ",)" : ")");
    }
    Symbol node = pred ? switched("_loom_bucket", flat, a, *pred, group_name, false)
                       : Symbol::Op("_loom_bucket", flat, a, group_name);
    for (size_t i = 0; i < ins.size(); ++i) outs.push_back(node[i]);
    return outs;
  };

  std::vector<std::pair<std::string, Symbol>> new_weights;  // param -> updated weight
  const bool shard_opt = o.dist && o.dist->shard_optimizer;
  std::vector<ShardItem> shard_items;  // with shard_opt: every group's tensors, in order
  std::vector<Symbol> shard_lrs;       // with shard_opt: the learning rate of each group
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& idx = groups[gi];
    const std::string gs = gi ? inum(static_cast<int64_t>(gi)) : std::string();
    auto names = [&](const std::string& suffix) {
      std::vector<std::string> v;
      for (size_t i : idx) v.push_back(params[i] + suffix);
      return v;
    };
    std::vector<double> wds;
    for (size_t i : idx) wds.push_back(opt.wd * mult(opt.wd_mult, attrs_of(params[i]), "__wd_mult__", params[i], true));
    Symbol lr = lr_for(lms[gi]);

    std::vector<Symbol> acc;
    if (update_only) {
      for (size_t i : idx) acc.push_back(grads[i]);
    } else {
      // The mean over k micro-steps and N ranks is one scale, 1/(k*N), before the sum.
      const double scale = o.grad_mean ? 1.0 / (static_cast<double>(k) * world) : 1.0;
      if (o.dist && !shard_opt && o.dist->overlap) {
        std::vector<Symbol> g;
        for (size_t i : idx) g.push_back(grads[i]);
        acc = accumulate_overlapped(names(""), g, scale, first, last, *o.dist, world, gs);
      } else {
        std::vector<std::vector<Symbol>> acc_in;
        for (size_t i : idx) acc_in.push_back({state_var(params[i] + "_acc"), grads[i], first});
        acc = emit("_loom_accumulate", acc_in, {{"scale", num(scale)}}, nullptr, nullptr, true,
                   names("_accumulate"), "step_accumulate" + gs);
        if (o.dist && !shard_opt)
          acc = allreduce_gradients(acc, *o.dist, world, last, "step_allreduce" + gs);
      }
    }

    if (shard_opt) {  // reduced and updated after the loop, all groups in one pass
      for (size_t j = 0; j < idx.size(); ++j)
        shard_items.push_back({var(params[idx[j]]), acc[j], wds[j], gi});
      shard_lrs.push_back(lr);
      continue;
    }

    // Per tensor: weight, accumulated gradient, the optimizer's states.
    auto inputs = [&](std::vector<std::string> states, bool with_lr) {
      std::vector<std::vector<Symbol>> v;
      for (size_t j = 0; j < idx.size(); ++j) {
        std::vector<Symbol> in = {var(params[idx[j]]), acc[j]};
        for (const auto& st : states) in.push_back(state_var(params[idx[j]] + st));
        if (with_lr) in.push_back(lr);
        v.push_back(in);
      }
      return v;
    };
    Attrs common{{"rescale_grad", num(opt.rescale_grad)}, {"clip_gradient", clip},
                 {"lr", num(opt.learning_rate)}, {"lr_input", "True"}};
    std::vector<Symbol> upd;
    const std::string un = "step_update" + gs;
    if ((name == "sgd" || name == "nag") && opt.momentum == 0) {
      upd = emit("sgd_update", inputs({}, true), common, &wds, &last, true, names("_update"), un);
    } else if (name == "sgd" || name == "nag") {
      Attrs a = common;
      a["momentum"] = num(opt.momentum);
      upd = emit(name == "sgd" ? "sgd_mom_update" : "nag_mom_update", inputs({"_mom"}, true), a,
                 &wds, &last, true, names("_update"), un);
    } else if (name == "adam" || name == "adamw") {
      Attrs a = common;
      a["beta1"] = num(opt.beta1);
      a["beta2"] = num(opt.beta2);
      a["epsilon"] = num(eps);
      if (name == "adamw") {  // MXNet 1.x AdamW: lr=1, eta = scheduled (bias-corrected) lr
        a["lr"] = "1";
        a["eta"] = num(opt.learning_rate);
      }
      upd = emit(name == "adam" ? "adam_update" : "adamw_update", inputs({"_mean", "_var"}, true),
                 a, &wds, &last, true, names("_update"), un);
    } else if (name == "rmsprop") {
      Attrs a = common;
      a["gamma1"] = num(opt.gamma1);
      a["epsilon"] = num(eps);
      a["clip_weights"] = num(opt.clip_weights < 0 ? -1.0 : opt.clip_weights);
      std::vector<std::string> st = {"_n"};
      if (opt.centered) {
        a["gamma2"] = num(opt.gamma2);
        st = {"_n", "_g", "_delta"};
      }
      upd = emit(opt.centered ? "rmspropalex_update" : "rmsprop_update", inputs(st, true), a, &wds,
                 &last, true, names("_update"), un);
    } else {  // lamb: phase1 -> per-tensor norms -> phase2, all switched by `last`
      Attrs a1{{"beta1", num(opt.beta1)}, {"beta2", num(opt.beta2)}, {"epsilon", num(eps)},
               {"t", "1"}, {"t_input", "True"}, {"bias_correction", opt.bias_correction ? "True" : "False"},
               {"rescale_grad", num(opt.rescale_grad)}, {"clip_gradient", clip}};
      auto in1 = inputs({"_mean", "_var"}, false);
      for (auto& v : in1) v.push_back(t_real);
      auto g = emit("lamb_update_phase1", in1, a1, &wds, &last, false, names("_lamb_phase1"),
                    "step_lamb_phase1" + gs);
      // MXNet's r1 = weight.norm(), r2 = g.norm(): one L2 `norm` node each (one pass), switched
      // by `last` like the phases around it. Its GPU kernel reads the predicate on the device,
      // so the step stays recordable as a CUDA Graph.
      auto norm = [&](const Symbol& x, const std::string& n) {
        return switched("norm", {x}, {}, last, n, false);
      };
      std::vector<std::vector<Symbol>> in2;
      for (size_t j = 0; j < idx.size(); ++j) {
        const std::string& p = params[idx[j]];
        in2.push_back({var(p), g[j], norm(var(p), p + "_lamb_r1"), norm(g[j], p + "_lamb_r2"), lr});
      }
      Attrs a2{{"lr", num(opt.learning_rate)}, {"lr_input", "True"}};
      if (opt.lower_bound >= 0) a2["lower_bound"] = num(opt.lower_bound);
      if (opt.upper_bound >= 0) a2["upper_bound"] = num(opt.upper_bound);
      upd = emit("lamb_update_phase2", in2, a2, nullptr, &last, true, names("_update"), un);
    }
    for (size_t j = 0; j < idx.size(); ++j) {
      heads.push_back(upd[j]);
      new_weights.emplace_back(params[idx[j]], upd[j]);
    }
  }

  if (shard_opt) {
    auto updated = sharded_update(shard_items, shard_lrs, opt, eps, t_real, last, world);
    size_t j = 0;
    for (const auto& idx : groups)
      for (size_t i : idx) {
        heads.push_back(updated[j]);
        new_weights.emplace_back(params[i], updated[j++]);
      }
  }

  // `last` after every update (which follows every gradient, so every BatchNorm backward that
  // updates moving statistics): switches what reads or writes the aux states.
  std::optional<Symbol> after_update;
  auto last_after_update = [&] {
    if (!after_update) {
      std::vector<Symbol> deps = {last};
      for (const auto& nw : new_weights) deps.push_back(nw.second);
      after_update = Symbol::Op("_loom_after", deps, {}, "step_last_after_update");
    }
    return *after_update;
  };
  std::map<std::string, Symbol> aux_avg;  // bn_stats "average": aux name -> averaged value
  if (o.dist && o.dist->bn_stats == "average") {
    aux_avg = average_aux(loss, last_after_update(), world);
    if (!aux_avg.empty()) heads.push_back(aux_avg.begin()->second);
  }

  // Model EMA on the last micro-step, reading the updated weights.
  if (o.ema) {
    const EmaOptions& e = *o.ema;
    Attrs ea{{"decay", num(e.decay)}, {"schedule", e.schedule}, {"init", e.init},
             {"tau", num(e.tau)}, {"gamma", num(e.gamma)}, {"power", num(e.power)},
             {"min_decay", num(e.min_decay)}, {"update_after_step", inum(e.update_after_step)},
             {"start_step", inum(e.start_step)}};
    const bool zd = e.init == "zero_debias";
    // Shadows of (name, value) pairs, switched by `when`, as one bucket (or node each).
    auto ema = [&](const std::vector<std::pair<std::string, Symbol>>& items, const Symbol& when,
                   const std::string& group_name) {
      if (items.empty()) return;
      std::vector<std::vector<Symbol>> in;
      std::vector<std::string> per;
      for (const auto& [n, value] : items) {
        std::vector<Symbol> v = {state_var(n + "_ema"), value, t_real};
        if (zd) v.push_back(state_var(n + "_ema_norm"));
        in.push_back(v);
        per.push_back(n + "_ema_update");
      }
      for (auto& h : emit("_loom_ema_update", in, ea, nullptr, &when, true, per, group_name))
        heads.push_back(h);
    };
    if (o.dist && o.dist->shard_ema) {
      heads.push_back(sharded_ema(new_weights, t_real, last, ea, world));
    } else {
      ema(new_weights, last, "step_ema_update");
    }
    if (e.include_aux) {
      // BatchNorm updates its moving statistics in backward: the aux EMA runs after every
      // update (which follows every gradient), switched by `last` passed through a barrier.
      Symbol last_after = last_after_update();
      IndexedGraph g(loss.outputs());
      auto types = infer_types(g, {});
      std::vector<std::pair<std::string, Symbol>> avg;
      for (uint32_t nid : g.aux_states()) {
        const std::string& n = g.node(nid).node->name();
        DType t = types[g.entry_id(nid, 0)];
        if (t == DType::kFloat32 || t == DType::kUnknown)  // the averaged value with bn_stats
          avg.emplace_back(n, aux_avg.count(n) ? aux_avg.at(n) : var(n));
        else  // integer (or other) states are copied, never averaged
          heads.push_back(switched("_loom_copy_state", {Symbol::Variable(n + "_ema"), var(n)}, {},
                                   last_after, n + "_ema_copy"));
      }
      ema(avg, last_after, "step_aux_ema_update");
    }
  }
  if (o.dist) heads.push_back(broadcast_state(heads, weights));
  return Symbol::Group(heads);
}

}  // namespace loom
