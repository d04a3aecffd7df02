// Training-step state (see step_builder.h): which input of a step graph holds what,
// checkpoints of the whole training state, and evaluation with the EMA weights.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "graph/step_builder.h"
#include "runtime/dist/communicator.h"

namespace loom {
namespace {

const std::set<std::string> kUpdateOps = {
    "sgd_update",     "sgd_mom_update",     "nag_mom_update",     "adam_update",
    "adamw_update",   "_adamw_update",      "rmsprop_update",     "rmspropalex_update",
    "lamb_update_phase1", "lamb_update_phase2"};

/// One EMA shadow: the shadow variable, what it shadows, and its norm (zero_debias).
struct Shadow {
  std::string ema, target, norm;
};

/// A sharded EMA (DistOptions::shard_ema): its state variables, the weights whose
/// concatenation it shards (in order) and the job size it is sharded over.
struct ShardedShadow {
  std::string shard, norm;
  std::vector<std::string> targets;
  int world = 1;
};

/// Any state kept in shards (the sharded EMA's shadow, each sharded optimizer state): the
/// shard variable, the weights whose concatenation it shards (in order), the suffix and
/// checkpoint prefix of the unsharded per-weight names (`p_ema` under "ema:", `p_mom` under
/// "opt:"), and the job size.
struct ShardedState {
  std::string shard, suffix, prefix;
  std::vector<std::string> targets;
  int world = 1;
};

struct StepInfo {
  std::map<std::string, StepState> kind;
  std::vector<Shadow> shadows;
  std::optional<ShardedShadow> sharded;
  std::vector<ShardedState> opt_shards;  ///< DistOptions::shard_optimizer
  /// Every sharded state: the EMA's shadow, then the optimizer's.
  std::vector<ShardedState> all_shards() const {
    std::vector<ShardedState> v;
    if (sharded) v.push_back({sharded->shard, "_ema", "ema:", sharded->targets, sharded->world});
    v.insert(v.end(), opt_shards.begin(), opt_shards.end());
    return v;
  }
};

StepInfo analyse(const Symbol& step) {
  StepInfo info;
  IndexedGraph g(step.outputs());
  auto var_name = [&](uint32_t e) -> const std::string* {
    const Node* n = g.node(g.entry_node(e)).node;
    return n->is_variable() ? &n->name() : nullptr;
  };
  auto mark = [&](uint32_t e, StepState k) {
    if (auto* n = var_name(e)) info.kind[*n] = k;
  };
  // The weight an update output writes in place: its producer's first input of that tensor
  // (tensor idx of a bucket has inputs [idx*m, (idx+1)*m)).
  auto written_weight = [&](uint32_t e) -> const std::string* {
    const uint32_t nid = g.entry_node(e);
    const auto& u = g.node(nid);
    if (u.node->is_variable()) return var_name(e);
    const size_t idx = e - g.entry_id(nid, 0);
    const size_t m = op_kernel_inputs(u.node->attrs) / u.node->num_outputs();
    return var_name(u.inputs[idx * m]);
  };
  // What the inputs x of one (inner) op hold; aux = the op's mutated input positions.
  auto classify = [&](const std::string& op, const std::vector<uint32_t>& x,
                      const std::vector<int>& aux) {
    if (op == "_loom_accumulate") {
      mark(x[0], StepState::kAcc);
    } else if (op == "_loom_counter") {
      mark(x[0], StepState::kCounter);
    } else if (op == "_loom_ema_update" || op == "_loom_copy_state") {
      Shadow sh;
      if (auto* n = var_name(x[0])) sh.ema = *n;
      if (auto* w = written_weight(x[1])) sh.target = *w;
      mark(x[0], StepState::kEma);
      if (op == "_loom_ema_update" && x.size() > 3) {
        mark(x[3], StepState::kEma);
        if (auto* n = var_name(x[3])) sh.norm = *n;
      }
      if (!sh.ema.empty() && !sh.target.empty()) info.shadows.push_back(sh);
    } else if (kUpdateOps.count(op)) {
      for (int a : aux) mark(x[static_cast<size_t>(a)], StepState::kOpt);
    }
  };
  for (uint32_t nid = 0; nid < g.num_nodes(); ++nid) {
    const auto& in = g.node(nid);
    if (in.node->is_variable()) continue;
    const OpAttrs& attrs = in.node->attrs;
    const std::string& op = attrs.op->name;
    std::vector<uint32_t> x(in.inputs.begin(), in.inputs.begin() + static_cast<std::ptrdiff_t>(op_kernel_inputs(attrs)));
    if (op == "_loom_ema_shard_update") {
      const auto n = static_cast<size_t>(std::stoi(attrs.dict.at("num_tensors")));
      ShardedShadow sh;
      sh.world = std::stoi(attrs.dict.at("world_size"));
      mark(x[0], StepState::kEma);
      if (auto* v = var_name(x[0])) sh.shard = *v;
      for (size_t i = 1; i <= n; ++i)
        if (auto* w = written_weight(x[i])) sh.targets.push_back(*w);
      if (x.size() > n + 2) {
        mark(x[n + 2], StepState::kEma);
        if (auto* v = var_name(x[n + 2])) sh.norm = *v;
      }
      info.sharded = std::move(sh);
    } else if (op == "_loom_shard_update") {
      // Weights [0, n), the padded gradient, then the state shards (the op's aux inputs).
      const auto n = static_cast<size_t>(std::stoi(attrs.dict.at("num_tensors")));
      const int world = std::stoi(attrs.dict.at("world_size"));
      std::vector<std::string> targets;
      for (size_t i = 0; i < n; ++i)
        if (auto* w = written_weight(x[i])) targets.push_back(*w);
      const auto names = op_inputs(attrs);
      for (int a : op_aux(attrs)) {
        const auto pos = static_cast<size_t>(a);
        mark(x[pos], StepState::kOpt);
        if (auto* v = var_name(x[pos]))
          info.opt_shards.push_back({*v, "_" + names[pos], "opt:", targets, world});
      }
    } else if (op == "_loom_gradients") {
      size_t nw = in.node->num_outputs();
      for (size_t i = x.size() - nw; i < x.size(); ++i) mark(x[i], StepState::kParam);
    } else if (op == "_loom_bucket") {
      const size_t n = in.node->num_outputs(), m = x.size() / n;
      auto aux = op_aux(attrs);
      for (size_t i = 0; i < n; ++i) {
        std::vector<uint32_t> xi(x.begin() + static_cast<std::ptrdiff_t>(i * m),
                                 x.begin() + static_cast<std::ptrdiff_t>((i + 1) * m));
        std::vector<int> ai;
        for (int a : aux)
          if (static_cast<size_t>(a) / m == i) ai.push_back(a - static_cast<int>(i * m));
        classify(attrs.dict.at("op"), xi, ai);
      }
    } else {
      classify(op, x, op_aux(attrs));
    }
  }
  for (const auto& a : step.list_arguments())
    if (!info.kind.count(a)) info.kind[a] = StepState::kInput;
  for (const auto& a : step.list_auxiliary_states())
    if (!info.kind.count(a)) info.kind[a] = StepState::kAux;
  return info;
}

NDArray find_array(const Executor& e, const std::string& n) {
  const auto& an = e.arg_names();
  for (size_t i = 0; i < an.size(); ++i)
    if (an[i] == n) return e.arg_arrays()[i];
  const auto& xn = e.aux_names();
  for (size_t i = 0; i < xn.size(); ++i)
    if (xn[i] == n) return e.aux_arrays()[i];
  return NDArray();
}

/// The evaluation value of a shadow: the array itself, or ema/norm (as _loom_ema_debias).
NDArray eval_value(const NDArray& ema, const NDArray& norm) {
  if (norm.is_none()) return ema;
  NDArray out = ema.copy();
  const float q = norm.data<float>()[0];
  if (q != 0.f) {
    float* o = out.data<float>();
    for (int64_t i = 0; i < out.size(); ++i) o[i] = o[i] / q;
  }
  return out;
}

/// Rank `r` of `world`'s range [lo, hi) of `total` elements (as _loom_ema_shard_update).
std::pair<int64_t, int64_t> shard_range(int64_t total, int64_t world, int64_t r) {
  return {total * r / world, total * (r + 1) / world};
}

dist::Communicator& shard_comm(int world, const std::string& what) {
  dist::Communicator& comm = dist::init();
  if (comm.size() != world)
    throw dist::DistError(what + ": the step graph shards it over " + std::to_string(world) +
                          " ranks, this job has " + std::to_string(comm.size()));
  return comm;
}
dist::Communicator& shard_comm(const ShardedState& s) {
  return shard_comm(s.world, "sharded state '" + s.shard + "'");
}

ShardedState as_state(const ShardedShadow& s) {
  return {s.shard, "_ema", "ema:", s.targets, s.world};
}

/// The whole value of a sharded state, one array per target (shaped like it), in target
/// order: one all_gather of every rank's shard (every rank must call it).
std::vector<NDArray> gather_shards(const Executor& step, const ShardedState& s) {
  dist::Communicator& comm = shard_comm(s);
  const NDArray shard = find_array(step, s.shard);
  std::vector<NDArray> out;
  int64_t total = 0;
  for (const auto& t : s.targets) {
    out.emplace_back(find_array(step, t).shape(), DType::kFloat32);
    total += out.back().size();
  }
  const int64_t len = shard.size();
  std::vector<float> all(static_cast<size_t>(len * s.world)), flat(static_cast<size_t>(total));
  comm.all_gather(shard.data<float>(), all.data(), static_cast<size_t>(len), DType::kFloat32);
  for (int64_t q = 0; q < s.world; ++q) {
    auto [lo, hi] = shard_range(total, s.world, q);
    std::copy(all.begin() + q * len, all.begin() + q * len + (hi - lo), flat.begin() + lo);
  }
  int64_t off = 0;
  for (NDArray& a : out) {
    std::memcpy(a.data<float>(), flat.data() + off, static_cast<size_t>(a.size()) * sizeof(float));
    off += a.size();
  }
  return out;
}

/// The evaluation values (ema/norm) of a sharded shadow's targets, gathered, by target name.
std::map<std::string, NDArray> gathered_eval(const Executor& step, const ShardedShadow& s) {
  std::vector<NDArray> whole = gather_shards(step, as_state(s));
  NDArray norm = s.norm.empty() ? NDArray() : find_array(step, s.norm);
  std::map<std::string, NDArray> out;
  for (size_t i = 0; i < whole.size(); ++i) {
    if (!norm.is_none()) {
      const float q = norm.data<float>()[0];
      float* o = whole[i].data<float>();
      if (q != 0.f)
        for (int64_t j = 0; j < whole[i].size(); ++j) o[j] = o[j] / q;
    }
    out[s.targets[i]] = whole[i];
  }
  return out;
}

/// Writes this rank's range of the whole values `whole` (per target, in order) into the shard
/// (zero past the range).
void scatter_shard(Executor& step, const ShardedState& s, const std::vector<NDArray>& whole) {
  const dist::Communicator& comm = shard_comm(s);
  NDArray shard = find_array(step, s.shard);
  int64_t total = 0;
  for (const NDArray& a : whole) total += a.size();
  auto [lo, hi] = shard_range(total, s.world, comm.rank());
  float* dst = shard.data<float>();
  std::fill(dst, dst + shard.size(), 0.f);
  int64_t off = 0;
  for (const NDArray& a : whole) {
    const int64_t b = std::max(off, lo), e = std::min(off + a.size(), hi);
    if (b < e) std::copy(a.data<float>() + (b - off), a.data<float>() + (e - off), dst + (b - lo));
    off += a.size();
  }
}

}  // namespace

std::map<std::string, StepState> classify_step_inputs(const Symbol& step) {
  return analyse(step).kind;
}

const char* step_state_prefix(StepState k) {
  switch (k) {
    case StepState::kParam: return "arg:";
    case StepState::kAux: return "aux:";
    case StepState::kOpt: return "opt:";
    case StepState::kAcc: return "acc:";
    case StepState::kEma: return "ema:";
    case StepState::kCounter: return "step:";
    default: return "";
  }
}

NamedArrays training_state(const Executor& step) {
  NamedArrays out;
  StepInfo info = analyse(step.symbol());
  const ShardedShadow* sh = info.sharded ? &*info.sharded : nullptr;
  const std::vector<ShardedState> shards = info.all_shards();
  std::set<std::string> sharded_vars;
  for (const auto& s : shards) sharded_vars.insert(s.shard);
  if (sh) sharded_vars.insert(sh->norm);
  for (const auto& [n, k] : info.kind) {
    if (k == StepState::kInput || sharded_vars.count(n)) continue;
    NDArray a = find_array(step, n);
    if (!a.is_none()) out.add(std::string(step_state_prefix(k)) + n, a.copy(Device::cpu()));
  }
  // Sharded states whole, under the unsharded names (p_ema, p_mom, ...).
  for (const auto& s : shards) {
    std::vector<NDArray> whole = gather_shards(step, s);
    for (size_t i = 0; i < whole.size(); ++i) out.add(s.prefix + s.targets[i] + s.suffix, whole[i]);
  }
  if (sh && !sh->norm.empty()) {
    NDArray norm = find_array(step, sh->norm);
    for (const auto& t : sh->targets) out.add("ema:" + t + "_ema_norm", norm.copy(Device::cpu()));
  }
  return out;
}

void save_training_state(const std::string& path, const Executor& step) {
  StepInfo info = analyse(step.symbol());
  const std::vector<ShardedState> shards = info.all_shards();
  if (shards.empty()) {
    save_params(path, training_state(step));
    return;
  }
  // Every rank gathers; rank 0 writes; the barrier makes the file visible to every rank on
  // return (rank 0 joins it even when its write failed, then throws).
  dist::Communicator& comm = shard_comm(shards[0]);
  NamedArrays state = training_state(step);
  std::exception_ptr failed;
  if (comm.rank() == 0) {
    try {
      save_params(path, state);
    } catch (...) {
      failed = std::current_exception();
    }
  }
  comm.barrier();
  if (failed) std::rethrow_exception(failed);
}

void set_training_state(const NamedArrays& state, Executor& step, bool strict,
                        const std::string& what) {
  if (!state.has_names()) throw FormatError(what + ": not a training-state file (unnamed arrays)");
  StepInfo info = analyse(step.symbol());
  const auto& kinds = info.kind;
  std::set<std::string> seen;
  // Sharded states read the whole values under the unsharded names (`p_ema`, `p_mom`, ...)
  // and keep this rank's range; a sharded EMA's norm is `p_ema_norm` (the same for every p).
  const ShardedShadow* sh = info.sharded ? &*info.sharded : nullptr;
  const std::vector<ShardedState> shards = info.all_shards();
  std::map<std::string, std::pair<size_t, size_t>> whole_index;  // name -> (shard, target)
  std::vector<std::vector<NDArray>> whole(shards.size());
  for (size_t s = 0; s < shards.size(); ++s) {
    whole[s].resize(shards[s].targets.size());
    for (size_t i = 0; i < shards[s].targets.size(); ++i)
      whole_index[shards[s].targets[i] + shards[s].suffix] = {s, i};
  }
  NDArray whole_norm;
  for (size_t i = 0; i < state.size(); ++i) {
    const std::string& key = state.names[i];
    auto c = key.find(':');
    if (c == std::string::npos)
      throw FormatError(what + ": key '" + key + "' has no prefix (arg:, aux:, opt:, acc:, ema:, step:)");
    std::string n = key.substr(c + 1), prefix = key.substr(0, c + 1);
    if (!kinds.count(n)) {
      const bool is_norm = sh && !sh->norm.empty() && n.size() > 5 && n.ends_with("_norm") &&
                           whole_index.count(n.substr(0, n.size() - 5)) &&
                           shards[whole_index.at(n.substr(0, n.size() - 5)).first].shard == sh->shard;
      if (whole_index.count(n) || is_norm) {
        const auto [s, t] = whole_index.at(is_norm ? n.substr(0, n.size() - 5) : n);
        if (prefix != shards[s].prefix)
          throw FormatError(what + ": '" + key + "' should be '" + shards[s].prefix + n + "'");
        const NDArray& src = state.arrays[i];
        const NDArray want = is_norm ? find_array(step, sh->norm)
                                     : find_array(step, shards[s].targets[t]);
        if (src.is_none() || src.shape() != want.shape() || src.dtype() != DType::kFloat32)
          throw FormatError(what + ": '" + key + "' has shape " +
                            (src.is_none() ? std::string("none") : src.shape().str()) +
                            ", the executor's (whole, before sharding) is " + want.shape().str() +
                            " float32");
        (is_norm ? whole_norm : whole[s][t]) = src;
        continue;
      }
    }
    auto it = kinds.find(n);
    if (it == kinds.end() || it->second == StepState::kInput)
      throw FormatError(what + ": '" + key + "' is not training state of this step graph");
    if (prefix != step_state_prefix(it->second))
      throw FormatError(what + ": '" + key + "' should be '" + step_state_prefix(it->second) + n + "'");
    NDArray dst = find_array(step, n);
    const NDArray& src = state.arrays[i];
    if (src.is_none() || src.shape() != dst.shape() || src.dtype() != dst.dtype())
      throw FormatError(what + ": '" + key + "' has shape " +
                        (src.is_none() ? std::string("none") : src.shape().str()) + " " +
                        (src.is_none() ? "" : dtype_name(src.dtype())) + ", the executor's is " +
                        dst.shape().str() + " " + dtype_name(dst.dtype()));
    dst.copy_from(src);
    seen.insert(n);
  }
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string missing;
    size_t have = 0;
    for (size_t i = 0; i < whole[s].size(); ++i) {
      if (whole[s][i].is_none())
        missing += (missing.empty() ? "" : ", ") + shards[s].targets[i] + shards[s].suffix;
      else
        ++have;
    }
    if (have > 0 && !missing.empty())
      throw FormatError(what + ": the sharded state '" + shards[s].shard +
                        "' needs every parameter's; no values for " + missing);
    if (have > 0) {
      scatter_shard(step, shards[s], whole[s]);
      seen.insert(shards[s].shard);
    }
  }
  if (sh && !whole_norm.is_none()) {
    find_array(step, sh->norm).copy_from(whole_norm);
    seen.insert(sh->norm);
  }
  if (strict) {
    std::string missing;
    for (const auto& [n, k] : kinds)
      if (k != StepState::kInput && !seen.count(n)) missing += (missing.empty() ? "" : ", ") + n;
    if (!missing.empty()) throw FormatError(what + ": no values for " + missing);
  }
}

void load_training_state(const std::string& path, Executor& step, bool strict) {
  set_training_state(load_params(path), step, strict, path);
}

EmaParams ema_params(const Executor& step) {
  EmaParams out;
  StepInfo info = analyse(step.symbol());
  for (const auto& s : info.shadows) {
    NDArray ema = find_array(step, s.ema);
    NDArray norm = s.norm.empty() ? NDArray() : find_array(step, s.norm);
    auto k = info.kind.at(s.target);
    (k == StepState::kAux ? out.aux : out.arg)[s.target] = eval_value(ema, norm);
  }
  if (info.sharded)
    for (auto& [n, a] : gathered_eval(step, *info.sharded)) out.arg[n] = a;
  return out;
}

std::unique_ptr<Executor> bind_ema(const Symbol& net, const Executor& step,
                                   const std::map<std::string, Shape>& shapes, BindOptions opts) {
  auto shaped = Executor::simple_bind(net, shapes, opts);
  StepInfo info = analyse(step.symbol());
  EmaParams ema = ema_params(step);
  // Parameters and model aux states come from the step: the EMA value, else the live array.
  auto pick = [&](const std::map<std::string, NDArray>& src, std::map<std::string, NDArray> dst) {
    for (auto& [n, a] : dst) {
      auto k = info.kind.find(n);
      if (k == info.kind.end() || (k->second != StepState::kParam && k->second != StepState::kAux))
        continue;
      auto it = src.find(n);
      a = it != src.end() ? it->second : find_array(step, n);
    }
    return dst;
  };
  auto args = pick(ema.arg, shaped->arg_dict()), aux = pick(ema.aux, shaped->aux_dict());
  auto grads = shaped->grad_dict();
  for (auto it = grads.begin(); it != grads.end();)
    it = it->second.is_none() ? grads.erase(it) : std::next(it);
  return Executor::bind(net, args, grads, aux, opts);
}

void refresh_ema(const Executor& step, Executor& eval) {
  EmaParams ema = ema_params(step);
  auto copy_in = [](const std::map<std::string, NDArray>& src, std::map<std::string, NDArray> dst) {
    for (const auto& [n, a] : src)
      if (auto it = dst.find(n); it != dst.end() && !it->second.same_memory(a)) it->second.copy_from(a);
  };
  copy_in(ema.arg, eval.arg_dict());
  copy_in(ema.aux, eval.aux_dict());
}

EmaSwap::EmaSwap(Executor& step) {
  StepInfo info = analyse(step.symbol());
  for (const auto& s : info.shadows) {
    Item it{find_array(step, s.target), find_array(step, s.ema),
            s.norm.empty() ? NDArray() : find_array(step, s.norm), NDArray()};
    if (it.live.dtype() != DType::kFloat32) continue;  // copied states: nothing to evaluate
    it.swap = it.norm.is_none();
    if (it.swap) {
      float* a = it.live.data<float>();
      float* b = it.ema.data<float>();
      for (int64_t i = 0; i < it.live.size(); ++i) std::swap(a[i], b[i]);
    } else {
      it.backup = it.live.copy();
      it.live.copy_from(eval_value(it.ema, it.norm));
    }
    items_.push_back(std::move(it));
  }
  if (info.sharded) {  // the gathered EMA in, the live weights kept
    for (auto& [n, a] : gathered_eval(step, *info.sharded)) {
      Item it{find_array(step, n), a, NDArray(), NDArray(), false};
      it.backup = it.live.copy();
      it.live.copy_from(a);
      items_.push_back(std::move(it));
    }
  }
  active_ = true;
}

void EmaSwap::restore() {
  if (!active_) return;
  for (auto& it : items_) {
    if (it.swap) {
      float* a = it.live.data<float>();
      float* b = it.ema.data<float>();
      for (int64_t i = 0; i < it.live.size(); ++i) std::swap(a[i], b[i]);
    } else {
      it.live.copy_from(it.backup);
    }
  }
  active_ = false;
}

EmaSwap::~EmaSwap() {
  try {
    restore();
  } catch (...) {
  }
}

}  // namespace loom
