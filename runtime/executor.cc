#include "runtime/executor.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <mutex>
#include <set>

#include <cstdlib>
#include <cstring>

#include "graph/cse.h"
#include "graph/infer.h"
#include "graph/layout_plan.h"
#include "ops/dtype_policy.h"
#include "runtime/bind_arrays.h"
#include "runtime/fusion.h"
#include "runtime/imperative.h"

namespace loom {

// One precomputed kernel call. `arrays` holds every NDArray the call passes, laid out as
// the spans below view it, so running the plan allocates nothing.
struct Executor::Step {
  Kernel* kernel = nullptr;
  bool backward = false;
  std::vector<NDArray> arrays;
  std::vector<Req> req;
  size_t n_in = 0, n_out = 0;  // forward: in, out; backward: out_grad/in_data/out_data sizes
  size_t n_og = 0, n_id = 0, n_od = 0, n_ig = 0;
  NDArray pred;  // predicated nodes: skipped while pred[0] == 0
  bool pred_on_device = false;  // the kernel reads `pred` on the device (OpContext::pred)
  std::vector<int> mutated;  // forward: inputs the kernel writes in place (op_aux)
  // A chain of element-wise steps run chunk by chunk (kernel == nullptr): see fuse_chains.
  std::vector<Step> chain;
  std::vector<int64_t> partition;  // the element-wise kernel's range_partition()
  // Producer of inference post-ops: applies the next post.n steps itself when it can.
  PostOpPlan post;
  size_t node = 0;  // its ExecNode (for the backward monitor and the step timer)
};

Executor::~Executor() = default;

std::unique_ptr<Executor> Executor::simple_bind(const Symbol& sym,
                                                const std::map<std::string, Shape>& shapes,
                                                const BindOptions& opts) {
  std::unique_ptr<Executor> ex(new Executor);
  ex->setup(sym, shapes, nullptr, nullptr, nullptr, opts);
  ex->bind_shapes_ = shapes;
  return ex;
}

std::unique_ptr<Executor> Executor::bind(const Symbol& sym,
                                         const std::map<std::string, NDArray>& args,
                                         const std::map<std::string, NDArray>& args_grad,
                                         const std::map<std::string, NDArray>& aux,
                                         const BindOptions& opts) {
  std::unique_ptr<Executor> ex(new Executor);
  std::map<std::string, Shape> shapes;
  for (const auto& [k, v] : args)
    if (!v.is_none()) shapes[k] = v.shape();
  ex->setup(sym, shapes, &args, &args_grad, &aux, opts);
  return ex;
}

void Executor::setup(const Symbol& sym, const std::map<std::string, Shape>& shapes,
                     const std::map<std::string, NDArray>* args,
                     const std::map<std::string, NDArray>* args_grad,
                     const std::map<std::string, NDArray>* aux, const BindOptions& opts) {
  sym_ = sym;
  bind_opts_ = opts;
  bind_opts_.outputs.clear();
  run_sym_ = env_off("MXNET_ELIMINATE_COMMON_EXPR") ? sym : eliminate_common_expr(sym);
  dev_ = opts.device;
  check_device(dev_);  // "no CUDA device: gpu(0) is not available (...)" before anything else
  {
    // Executors may be bound from several threads at once.
    static std::mutex seed_mu;
    std::lock_guard<std::mutex> lk(seed_mu);
    rng_.seed(global_rng()());
  }
  graph_ = std::make_unique<IndexedGraph>(run_sym_.outputs());
  const IndexedGraph& g = *graph_;
  for (const auto& [name, s] : shapes) {
    bool found = false;
    for (auto v : g.variables()) found = found || g.node(v).node->name() == name;
    if (!found) throw BindError("bind: '" + name + "' is not an input of this symbol");
  }
  std::map<std::string, DType> types = opts.type_dict;
  if (args)
    for (const auto& [k, v] : *args)
      if (!v.is_none() && !types.count(k)) types[k] = v.dtype();
  auto ent_shapes = infer_shapes(g, shapes);
  auto ent_types = infer_types(g, types);

  auto arg_ids = g.arguments();
  auto aux_ids = g.aux_states();
  std::vector<bool> need_grad;
  for (auto id : arg_ids) {
    const std::string& name = g.node(id).node->name();
    arg_names_.push_back(name);
    Req r = opts.default_req;
    auto it = opts.grad_req.find(name);
    if (it != opts.grad_req.end()) r = it->second;
    if (args_grad && (!args_grad->count(name) || args_grad->at(name).is_none())) r = Req::kNull;
    if (r == Req::kInplace) r = Req::kWrite;
    reqs_.push_back(r);
    need_grad.push_back(r != Req::kNull);
  }
  for (auto id : aux_ids) aux_names_.push_back(g.node(id).node->name());
  {
    // Arrays are bound by name: two different variables with one name would silently share.
    std::set<std::string> seen;
    for (const auto* names : {&arg_names_, &aux_names_})
      for (const auto& n : *names)
        if (!seen.insert(n).second)
          throw BindError("bind: two different variables are named '" + n +
                          "'; arrays are bound by name, so inputs must have unique names");
  }
  output_names_ = sym.list_outputs();

  eg_ = build_exec_graph(g, ent_shapes, ent_types, need_grad);
  size_t ne = eg_.shapes.size();
  {
    // Every entry's size must be countable, and what bind allocates for the user-visible
    // arrays (plus the largest intermediate, which the plan cannot shrink) must fit.
    uint64_t user_bytes = 0, largest_bytes = 0;
    uint32_t largest = 0;
    std::vector<bool> user(ne, false);
    if (!args)
      for (auto id : arg_ids) user[g.entry_id(id, 0)] = true;
    if (!aux)
      for (auto id : aux_ids) user[g.entry_id(id, 0)] = true;
    for (size_t i = 0; i < arg_ids.size(); ++i)
      if (!args_grad && reqs_[i] != Req::kNull && eg_.arg_grad[i] != kNoEntry) user[eg_.arg_grad[i]] = true;
    for (auto e : eg_.head_grad)
      if (e != kNoEntry) user[e] = true;
    for (uint32_t e = 0; e < ne; ++e) {
      int64_t b = 0;
      try {
        b = eg_.shapes[e].bytes(eg_.types[e]);
      } catch (const ShapeError& err) {
        throw ShapeError("bind: the output of " + entry_owner(g, eg_, e) + ": " + err.what());
      }
      auto ub = static_cast<uint64_t>(b);
      if (user[e] && __builtin_add_overflow(user_bytes, ub, &user_bytes)) user_bytes = UINT64_MAX;
      if (ub > largest_bytes) largest_bytes = ub, largest = e;
    }
    if (ne) check_fits(g, eg_, dev_, std::max(user_bytes, largest_bytes), largest, "the executor's arrays");
  }
  entries_.assign(ne, NDArray());
  std::vector<bool> external(ne, false), pinned(ne, false);

  auto check_array = [&](const NDArray& a, uint32_t e, const std::string& what) {
    if (a.shape() != eg_.shapes[e])
      throw BindError("bind: " + what + " has shape " + a.shape().str() + ", expected " +
                      eg_.shapes[e].str());
    if (a.dtype() != eg_.types[e])
      throw BindError("bind: " + what + " has dtype " + dtype_name(a.dtype()) + ", expected " +
                      dtype_name(eg_.types[e]));
    // Any CPU context is the one host memory (MXNet's group2ctx places nodes on cpu(0),
    // cpu(1), ...); other devices must match exactly.
    const bool both_cpu = a.device().type == DeviceType::kCPU && dev_.type == DeviceType::kCPU;
    if (a.device() != dev_ && !both_cpu)
      throw BindError("bind: " + what + " is on " + a.device().str() + ", executor on " +
                      dev_.str());
  };
  // Arguments and aux states (simple_bind: bucketed ones are views of one buffer).
  std::map<uint32_t, NDArray> bucketed;
  if (!args && !aux) bucketed = bucket_views(g, eg_, dev_);
  auto fresh = [&](uint32_t e) {
    auto it = bucketed.find(e);
    return it != bucketed.end() ? it->second : NDArray::zeros(eg_.shapes[e], eg_.types[e], dev_);
  };
  for (size_t i = 0; i < arg_ids.size(); ++i) {
    uint32_t e = g.entry_id(arg_ids[i], 0);
    NDArray a;
    if (args) {
      auto it = args->find(arg_names_[i]);
      if (it == args->end() || it->second.is_none())
        throw BindError("bind: argument '" + arg_names_[i] + "' is missing");
      a = it->second;
      check_array(a, e, "argument '" + arg_names_[i] + "'");
    } else {
      a = fresh(e);
    }
    args_.push_back(a);
    entries_[e] = a;
    external[e] = true;
  }
  for (size_t i = 0; i < aux_ids.size(); ++i) {
    uint32_t e = g.entry_id(aux_ids[i], 0);
    NDArray a;
    if (aux) {
      auto it = aux->find(aux_names_[i]);
      if (it == aux->end() || it->second.is_none())
        throw BindError("bind: auxiliary state '" + aux_names_[i] + "' is missing");
      a = it->second;
      check_array(a, e, "auxiliary state '" + aux_names_[i] + "'");
    } else {
      a = fresh(e);
    }
    aux_.push_back(a);
    entries_[e] = a;
    external[e] = true;
  }
  // Gradient arrays (simple_bind: one flat buffer per dtype, per-argument views).
  std::map<size_t, NDArray> flat_grads;
  if (!args_grad) {
    std::map<DType, std::vector<size_t>> by_type;
    for (size_t i = 0; i < arg_ids.size(); ++i)
      if (reqs_[i] != Req::kNull) by_type[eg_.types[g.entry_id(arg_ids[i], 0)]].push_back(i);
    size_t index = 0;
    for (const auto& [t, idx] : by_type) {
      std::vector<Shape> shapes;
      for (size_t i : idx) shapes.push_back(eg_.shapes[g.entry_id(arg_ids[i], 0)]);
      auto arrays = flat_arrays(shapes, t, dev_, 8 + index++);
      for (size_t k = 0; k < idx.size(); ++k) flat_grads[idx[k]] = arrays[k];
    }
  }
  std::vector<Req> entry_req(ne, Req::kWrite);
  for (size_t i = 0; i < arg_ids.size(); ++i) {
    uint32_t src = g.entry_id(arg_ids[i], 0);
    if (reqs_[i] == Req::kNull) {
      grads_.emplace_back();
      continue;
    }
    NDArray gr;
    if (args_grad) {
      gr = args_grad->at(arg_names_[i]);
      check_array(gr, src, "gradient of '" + arg_names_[i] + "'");
    } else {
      gr = flat_grads.at(i);
    }
    grads_.push_back(gr);
    uint32_t e = eg_.arg_grad[i];
    if (external[e] || !entries_[e].is_none()) {
      // The gradient entry is shared (e.g. one backward output feeds two arguments): keep
      // it internal and copy out through an identity step.
      throw BindError("bind: gradient of '" + arg_names_[i] + "' aliases another array");
    }
    entries_[e] = gr;
    external[e] = true;
    entry_req[e] = eg_.arg_grad_zero[i] && reqs_[i] == Req::kAdd ? Req::kNull : reqs_[i];
  }
  // Head gradients live in executor-owned arrays the user's values are copied into.
  head_grads_.assign(eg_.head_grad.size(), NDArray());
  for (size_t h = 0; h < eg_.head_grad.size(); ++h) {
    uint32_t e = eg_.head_grad[h];
    if (e == kNoEntry) continue;
    head_grads_[h] = NDArray::zeros(eg_.shapes[e], eg_.types[e], dev_);
    entries_[e] = head_grads_[h];
    external[e] = true;
  }
  for (auto h : eg_.heads) pinned[h] = true;
  // Outputs given by the caller (reshape: views of the old executor's outputs), except those
  // that are already some other array (an argument, an output written into an input).
  for (size_t k = 0; k < std::min(opts.outputs.size(), eg_.heads.size()); ++k) {
    const uint32_t e = eg_.heads[k];
    bool aliased = false;
    for (const ExecNode& n : eg_.nodes)
      for (auto [o, i] : n.alias) aliased = aliased || n.out[static_cast<size_t>(o)] == e;
    if (opts.outputs[k].is_none() || external[e] || aliased) continue;
    check_array(opts.outputs[k], e, "output " + std::to_string(k) + " ('" + output_names_[k] + "')");
    entries_[e] = opts.outputs[k];
    external[e] = true;
  }

  plan_ = plan_memory(eg_, external, pinned);
  {
    uint32_t largest = kNoEntry;
    int64_t largest_bytes = -1;
    for (uint32_t e = 0; e < ne; ++e)
      if (plan_.storage[e] != kNoEntry && eg_.shapes[e].bytes(eg_.types[e]) > largest_bytes)
        largest = e, largest_bytes = eg_.shapes[e].bytes(eg_.types[e]);
    if (largest != kNoEntry)
      check_fits(g, eg_, dev_, plan_.total_bytes, largest, "the executor's intermediate arrays");
  }
  std::vector<std::shared_ptr<Storage>> blocks;
  for (auto b : plan_.block_bytes) blocks.push_back(std::make_shared<Storage>(dev_, b));
  for (size_t e = 0; e < ne; ++e)
    if (plan_.storage[e] != kNoEntry)
      entries_[e] = NDArray(blocks[plan_.storage[e]], 0, eg_.shapes[e], eg_.types[e]);
  // Outputs written into an input's array (`__inplace__`) are that array, even a user's.
  for (const ExecNode& n : eg_.nodes)
    for (auto [o, i] : n.alias) {
      uint32_t out = n.out[static_cast<size_t>(o)], src = n.in[static_cast<size_t>(i)];
      if (entries_[src].is_none())
        throw BindError("bind: node '" + n.attrs->name +
                        "' writes in place into an array "
                        "that has no storage");
      entries_[out] = entries_[src];
    }
  for (auto h : eg_.heads) outputs_.push_back(entries_[h]);

  // Layouts: intermediates may stay channel-blocked between ops that handle it
  // (LOOM_LAYOUT_PROPAGATION=0 keeps every entry plain).
  std::vector<bool> fixed_plain(ne);
  for (size_t e = 0; e < ne; ++e) fixed_plain[e] = external[e] || pinned[e];
  int block = env_off("LOOM_LAYOUT_PROPAGATION") ? 1 : device_backend(dev_.type).channel_block();
  Layout blocked = block == 16 ? Layout::kNChw16c : block == 8 ? Layout::kNChw8c : Layout::kPlain;
  std::vector<NodeLayouts> node_layouts =
      kernel_layouts(eg_, plan_layouts(eg_, fixed_plain, blocked));

  // Kernels: one per op node; backward nodes reuse their forward node's kernel.
  std::vector<Kernel*> kernel_of(eg_.nodes.size(), nullptr);
  std::vector<Kernel*> kernel_of_graph_node(g.num_nodes(), nullptr);
  std::vector<std::unique_ptr<Kernel>> kernels;
  size_t ws = 0;
  for (size_t i = 0; i < eg_.nodes.size(); ++i) {
    const ExecNode& n = eg_.nodes[i];
    if (!n.attrs || n.kind != ExecNode::Kind::kForward) continue;
    auto it = n.attrs->op->kernels.find(dev_.type);
    if (it == n.attrs->op->kernels.end())
      throw BindError("bind: op " + n.attrs->op->name + " (node '" + n.attrs->name +
                      "') has no kernel for " + dev_.str());
    std::vector<Shape> is, os;
    std::vector<DType> it_, ot;
    for (auto e : n.in) is.push_back(eg_.shapes[e]), it_.push_back(eg_.types[e]);
    for (auto e : n.out) os.push_back(eg_.shapes[e]), ot.push_back(eg_.types[e]);
    check_dtype_policy(*n.attrs, dev_, it_, ot);
    KernelArgs ka{*n.attrs, is, os, it_, ot, dev_, &node_layouts[i]};
    kernels.push_back(it->second(ka));
    kernel_of[i] = kernels.back().get();
    if (n.graph_node != kNoEntry) kernel_of_graph_node[n.graph_node] = kernel_of[i];
    ws = std::max(ws, kernels.back()->workspace_bytes());
  }

  // Fusions (runtime/fusion.cc): BatchNorm absorbs a following ReLU; a producer
  // (Convolution) applies the BatchNorm, residual add and activation after it as post-ops in
  // inference calls.
  const FusionInput fin{eg_, kernel_of, node_layouts, entries_, external, pinned};
  const std::vector<bool> absorbed = fuse_epilogues(fin);
  // Per node, the node whose work it took over (its absorbed epilogue), for profile labels.
  epilogue_of_.assign(eg_.nodes.size(), kNoEntry);
  {
    std::vector<uint32_t> producer(entries_.size(), kNoEntry);
    for (size_t i = 0; i < eg_.num_forward_nodes; ++i)
      for (auto e : eg_.nodes[i].out)
        if (e != kNoEntry) producer[e] = static_cast<uint32_t>(i);
    for (size_t j = 0; j < eg_.nodes.size(); ++j)
      if (absorbed[j] && !eg_.nodes[j].in.empty() && eg_.nodes[j].in[0] != kNoEntry &&
          producer[eg_.nodes[j].in[0]] != kNoEntry)
        epilogue_of_[producer[eg_.nodes[j].in[0]]] = static_cast<uint32_t>(j);
  }
  const std::vector<PostOpPlan> post = plan_post_ops(fin, absorbed);
  for (const auto& p : post) {
    fused_affine_ += p.ops.affine;
    fused_sum_ += p.ops.sum;
    fused_act_ += p.act >= 0;
    fused_pre_ += p.into_next;
  }
  for (const auto& k : kernels) ws = std::max(ws, k->workspace_bytes());
  if (ws) workspace_ = NDArray(Shape{static_cast<int64_t>(ws)}, DType::kUint8, dev_);

  auto array_of = [&](uint32_t e) { return e == kNoEntry ? NDArray() : entries_[e]; };
  for (size_t i = 0; i < eg_.nodes.size(); ++i) {
    const ExecNode& n = eg_.nodes[i];
    if (!n.attrs || absorbed[i]) continue;
    Step s;
    if (n.kind == ExecNode::Kind::kForward) {
      s.kernel = kernel_of[i];
      for (auto e : n.in) s.arrays.push_back(array_of(e));
      for (auto e : n.out) {
        s.arrays.push_back(array_of(e));
        Req r = external[e] ? entry_req[e] : Req::kWrite;
        if (!external[e])
          for (auto in_e : n.in)
            if (entries_[e].same_memory(entries_[in_e]) && !entries_[e].is_none()) r = Req::kInplace;
        s.req.push_back(r);
      }
      s.n_in = n.in.size();
      s.n_out = n.out.size();
      s.node = i;
      s.mutated = op_aux(*n.attrs);
      s.post = post[i];
      s.partition = s.kernel->range_partition();
      if (n.pred != kNoEntry) {
        s.pred = entries_[n.pred];
        s.pred_on_device = predicate_path(dev_.type, true, s.kernel->device_predicate()) ==
                           PredicatePath::kDevice;
      }
    } else {
      s.backward = true;
      s.node = i;
      s.kernel = kernel_of_graph_node[n.forward_of];
      size_t nin = n.out.size();
      size_t nout = (n.in.size() - nin) / 2;
      s.n_og = nout, s.n_id = nin, s.n_od = nout, s.n_ig = nin;
      for (auto e : n.in) s.arrays.push_back(array_of(e));
      for (auto e : n.out) {
        s.arrays.push_back(array_of(e));
        s.req.push_back(e == kNoEntry ? Req::kNull : (external[e] ? entry_req[e] : Req::kWrite));
      }
    }
    (i < eg_.num_forward_nodes ? fwd_steps_ : bwd_steps_).push_back(std::move(s));
  }
  kernels_ = std::move(kernels);
  if (dev_.type == DeviceType::kCPU && opts.fuse_chains) fuse_chains(fwd_steps_);
  plan_capture(opts);
}

// Whether calls are recorded as CUDA Graphs (runtime/step_capture.h): every step's kernel
// must be recordable and read its predicate, if any, on the device.
void Executor::plan_capture(const BindOptions& opts) {
  CaptureFacts f;
  f.device = dev_.type;
  f.mode = opts.cuda_graph;
  if (const char* env = std::getenv("LOOM_CUDA_GRAPH")) f.env = env;
  for (const ExecNode& n : eg_.nodes)
    f.step_graph = f.step_graph || n.pred != kNoEntry || !n.alias.empty();
  auto check = [&](const Step& s) {
    const OpAttrs& a = *eg_.nodes[s.node].attrs;
    const std::string who = "node '" + a.name + "' (" + a.op->name + ")";
    if (!s.kernel->capturable())
      f.blockers.push_back(who + " runs host code or reads host values per call");
    else if (!s.pred.is_none() && !s.pred_on_device && dev_.type != DeviceType::kCPU)
      f.blockers.push_back(who + " reads its predicate on the host (no device predicate)");
  };
  for (const auto* list : {&fwd_steps_, &bwd_steps_})
    for (const Step& s : *list) {
      if (s.chain.empty()) check(s);
      for (const Step& m : s.chain) check(m);  // chunked chains (CPU)
    }
  const CaptureDecision d = decide_capture(f);
  record_ = d.record;
  capture_note_ = d.note;
  if (d.blocked) std::cerr << "loom: note: " << d.note << "\n";
}

std::string Executor::cuda_graph_status() const {
  std::string s = capture_note_;
  if (record_)
    s += "; " + std::to_string(captures_.recordings()) + " recorded, " +
         std::to_string(captures_.replays()) + " replayed";
  if (!captures_.failure().empty()) s += "; " + captures_.failure();
  return s;
}

// Consecutive element-wise steps (Kernel::range_partition) over the same partition and
// predicate become one chain, run chunk by chunk so each chunk is still in cache for the
// next step (an optimizer update then the EMA of the new weights: one pass over memory).
// A later step may read what an earlier one wrote only element for element: the same array
// as an earlier output of the same tensor. Any other overlap of written and read arrays
// (a one-element state written once per call, a shifted view) keeps the steps apart.
void Executor::fuse_chains(std::vector<Step>& steps) {
  auto tensor_of = [](const Step& s, size_t k, size_t n) {
    return k / std::max<size_t>(1, n / s.partition.size());
  };
  // Arrays step s writes: outputs (with their tensor) and mutated inputs.
  auto writes = [&](const Step& s, auto f) {
    for (size_t j = 0; j < s.n_out; ++j) f(s.arrays[s.n_in + j], true, tensor_of(s, j, s.n_out));
    for (int k : s.mutated)
      f(s.arrays[static_cast<size_t>(k)], false, tensor_of(s, static_cast<size_t>(k), s.n_in));
  };
  // True when `x` (tensor t) may follow writes of `a` in a chunked chain.
  auto safe_after = [&](const Step& a, const NDArray& x, size_t t) {
    bool touched = false, aligned = false;
    writes(a, [&](const NDArray& y, bool is_out, size_t ty) {
      if (!x.overlaps(y)) return;
      touched = true;
      aligned = aligned || (is_out && x.same_memory(y) && x.nbytes() == y.nbytes() && ty == t);
    });
    return !touched || aligned;
  };
  auto can_follow = [&](const Step& a, const Step& b) {
    for (size_t k = 0; k < b.n_in; ++k)
      if (!safe_after(a, b.arrays[k], tensor_of(b, k, b.n_in))) return false;
    bool ok = true;  // b's writes against a's reads and writes
    writes(b, [&](const NDArray& y, bool, size_t ty) {
      for (size_t k = 0; k < a.n_in + a.n_out; ++k) {
        const NDArray& x = a.arrays[k];
        size_t tx = k < a.n_in ? tensor_of(a, k, a.n_in) : tensor_of(a, k - a.n_in, a.n_out);
        if (x.overlaps(y) && !(x.same_memory(y) && x.nbytes() == y.nbytes() && tx == ty)) ok = false;
      }
    });
    return ok;
  };
  std::vector<Step> out;
  for (auto& s : steps) {
    Step* prev = out.empty() ? nullptr : &out.back();
    const Step* tail = prev ? (prev->chain.empty() ? prev : &prev->chain.back()) : nullptr;
    bool fuse = tail && !s.backward && !tail->backward && !s.partition.empty() &&
                s.partition == tail->partition &&
                (s.pred.is_none() ? tail->pred.is_none()
                                  : !tail->pred.is_none() && s.pred.same_memory(tail->pred));
    if (fuse) {
      if (prev->chain.empty()) fuse = can_follow(*prev, s);
      for (const auto& m : prev->chain) fuse = fuse && can_follow(m, s);
    }
    if (!fuse) {
      out.push_back(std::move(s));
      continue;
    }
    if (prev->chain.empty()) {
      Step group;
      group.pred = prev->pred;
      group.partition = prev->partition;
      group.chain.push_back(std::move(*prev));
      *prev = std::move(group);
    }
    prev->chain.push_back(std::move(s));
    ++fused_chains_;
  }
  steps = std::move(out);
}

void Executor::run_chain(Step& s, const OpContext& ctx) {
  int64_t total = 0;
  for (int64_t n : s.partition) total += n;
  auto range = [&](int64_t lo, int64_t hi) {
    // Chunks of 8192 elements (32 KiB per array) stay in L1/L2 from one step to the next.
    for (int64_t c = lo; c < hi; c += 8192)
      for (auto& m : s.chain) {
        std::span<const NDArray> a(m.arrays);
        m.kernel->forward_range(ctx, a.subspan(0, m.n_in), m.req, a.subspan(m.n_in, m.n_out), c,
                                std::min(hi, c + 8192));
      }
  };
  if (total < (1 << 15) || omp_get_max_threads() == 1) {
    range(0, total);
  } else {
#pragma omp parallel
    {
      auto [lo, hi] = thread_share(0, total, omp_get_num_threads(), omp_get_thread_num());
      range(lo, hi);
    }
  }
  for (auto& m : s.chain) {
    std::span<const NDArray> a(m.arrays);
    m.kernel->forward_once(ctx, a.subspan(0, m.n_in), m.req, a.subspan(m.n_in, m.n_out));
  }
}

// Step k applies its post.n consumers itself when each agrees for this call (BatchNorm: in
// inference) and the producer can; the BatchNorm then writes its hidden outputs. `pre`: the
// activation step before k, applied by step k to its input (it computed it in place).
bool Executor::run_post_ops(std::vector<Step>& steps, size_t k, const OpContext& ctx,
                            const Step* pre) {
  Step& s = steps[k];
  PostOps ops = s.post.ops;
  auto in_of = [&](const Step& t) {
    return std::span<const NDArray>(t.arrays).subspan(0, t.n_in);
  };
  if (pre && !pre->kernel->fused_activation(in_of(*pre), &ops.pre)) return false;
  if (s.post.affine >= 0) {
    Step& t = steps[k + 1 + static_cast<size_t>(s.post.affine)];
    if (!t.kernel->channel_affine(ctx, in_of(t), affine_scale_, affine_shift_)) return false;
    ops.scale = affine_scale_;
    ops.shift = affine_shift_;
  }
  if (s.post.act >= 0) {
    Step& t = steps[k + 1 + static_cast<size_t>(s.post.act)];
    if (!t.kernel->fused_activation(in_of(t), &ops.act)) return false;
  }
  const Step& last = steps[k + static_cast<size_t>(s.post.n)];
  if (!s.kernel->forward_post_ops(ctx, in_of(s), last.arrays[last.n_in], ops)) return false;
  if (s.post.affine >= 0) {
    Step& t = steps[k + 1 + static_cast<size_t>(s.post.affine)];
    std::span<const NDArray> b(t.arrays);
    t.kernel->forward_rest(ctx, b.subspan(0, t.n_in), t.req, b.subspan(t.n_in, t.n_out));
  }
  return true;
}

void Executor::run(std::vector<Step>& steps, bool is_train) {
  // Profiling and the backward monitor need each kernel call on the host: run eagerly.
  if (!record_ || step_timer_ || bwd_monitor_) return run_steps(steps, is_train);
  const int key = (&steps == &bwd_steps_ ? 2 : 0) + (is_train ? 1 : 0);
  captures_.run(key, device_backend(dev_.type), dev_.id, [&] { run_steps(steps, is_train); });
}

void Executor::run_steps(std::vector<Step>& steps, bool is_train) {
  OpContext ctx;
  ctx.is_train = is_train;
  ctx.device = dev_;
  ctx.stream = device_backend(dev_.type).stream(dev_.id);
  ctx.rng = &rng_;
  ctx.workspace = workspace_.is_none() ? nullptr : workspace_.raw();
  // Profiling only: reports each call's time when it ends (at any `continue` below).
  struct Clock {
    const Executor* ex;
    const std::vector<Step>& steps;
    const size_t& k;
    size_t first;
    std::chrono::steady_clock::time_point t0;
    ~Clock() {
      if (!ex) return;
      std::chrono::duration<double> d = std::chrono::steady_clock::now() - t0;
      ex->report_time(steps, first, k, d.count());
    }
  };
  for (size_t k = 0; k < steps.size(); ++k) {
    Step& s = steps[k];
    ctx.pred = nullptr;
    if (s.pred_on_device) {
      ctx.pred = s.pred.data<float>();  // the kernel exits early on the device while it is 0
    } else if (!s.pred.is_none()) {
      float p = 0.f;  // CPU: a plain read; a device without a device predicate: copy and wait
      device_copy(&p, Device::cpu(), s.pred.craw(), s.pred.device(), sizeof(float));
      if (p == 0.f) continue;
    }
    Clock clock{step_timer_ ? this : nullptr, steps, k, k,
                step_timer_ ? std::chrono::steady_clock::now()
                            : std::chrono::steady_clock::time_point()};
    if (!s.chain.empty()) {
      run_chain(s, ctx);
      continue;
    }
    std::span<const NDArray> a(s.arrays);
    if (s.post.into_next && k + 1 < steps.size() && steps[k + 1].chain.empty() &&
        k + 1 + static_cast<size_t>(steps[k + 1].post.n) < steps.size() &&
        run_post_ops(steps, k + 1, ctx, &s)) {
      k += 1 + static_cast<size_t>(steps[k + 1].post.n);
      continue;
    }
    if (s.post.n > 0 && k + s.post.n < steps.size() && run_post_ops(steps, k, ctx)) {
      k += static_cast<size_t>(s.post.n);
      continue;
    }
    if (!s.backward) {
      s.kernel->forward(ctx, a.subspan(0, s.n_in), s.req, a.subspan(s.n_in, s.n_out));
      continue;
    }
    s.kernel->backward(ctx, a.subspan(0, s.n_og), a.subspan(s.n_og, s.n_id),
                       a.subspan(s.n_og + s.n_id, s.n_od), s.req,
                       a.subspan(s.n_og + s.n_id + s.n_od, s.n_ig));
    if (bwd_monitor_ && &steps == &bwd_steps_) report_backward(s);
  }
}

void Executor::set_backward_monitor(BackwardMonitor fn) { bwd_monitor_ = std::move(fn); }

void Executor::set_step_timer(StepTimer fn) {
  if (chunk_) chunk_->set_step_timer(fn);
  step_timer_ = std::move(fn);
}

void Executor::report_time(const std::vector<Step>& steps, size_t first, size_t last,
                           double sec) const {
  std::string name, op;
  auto add_node = [&](size_t node) {
    const OpAttrs* a = eg_.nodes[node].attrs;
    name += (name.empty() ? "" : "+") + a->name;
    op += (op.empty() ? "" : "+") + a->op->name;
  };
  auto add = [&](const Step& s) {
    add_node(s.node);
    // A node that absorbed its epilogue (BatchNorm its ReLU) ran that one's work too.
    if (!s.backward && s.node < epilogue_of_.size() && epilogue_of_[s.node] != kNoEntry)
      add_node(epilogue_of_[s.node]);
  };
  for (size_t j = first; j <= last && j < steps.size(); ++j) {
    if (steps[j].chain.empty()) add(steps[j]);
    for (const Step& c : steps[j].chain) add(c);
  }
  if (steps[first].backward) name += "_backward", op += "_backward";
  step_timer_(name, op, sec);
}

void Executor::report_backward(const Step& s) const {
  const ExecNode& n = eg_.nodes[s.node];
  const IndexedGraph::INode& fwd = graph_->node(n.forward_of);
  const std::string base = fwd.node->name() + "_backward_output";
  for (size_t j = 0; j < s.n_ig; ++j) {
    NDArray a = s.arrays[s.n_og + s.n_id + s.n_od + j];
    if (a.is_none() || s.req[j] == Req::kNull) {
      const uint32_t e = fwd.inputs.at(j);
      a = NDArray::zeros(eg_.shapes[e], eg_.types[e], dev_);
    }
    bwd_monitor_(s.n_ig > 1 ? base + std::to_string(j) : base, a);
  }
}

void Executor::forward(bool is_train) {
  if (!is_train && plan_chunks()) return forward_chunks();
  run(fwd_steps_, is_train);
}

void Executor::forward(bool is_train, const std::map<std::string, NDArray>& inputs) {
  for (const auto& [name, arr] : inputs) {
    auto it = std::find(arg_names_.begin(), arg_names_.end(), name);
    if (it == arg_names_.end()) {
      auto jt = std::find(aux_names_.begin(), aux_names_.end(), name);
      if (jt == aux_names_.end()) throw BindError("forward: '" + name + "' is not an argument");
      aux_[static_cast<size_t>(jt - aux_names_.begin())].copy_from(arr);
      continue;
    }
    const NDArray& dst = args_[static_cast<size_t>(it - arg_names_.begin())];
    if (arr.shape() != dst.shape())
      throw BindError("forward: input '" + name + "' has shape " + arr.shape().str() +
                      ", the executor was bound with " + dst.shape().str());
    dst.copy_from(arr);
  }
  forward(is_train);
}

bool Executor::needs_head_grad(size_t i) const {
  return i < eg_.head_grad.size() && eg_.head_grad[i] != kNoEntry;
}

void Executor::backward(const std::vector<NDArray>& head_grads) {
  for (size_t h = 0; h < head_grads_.size(); ++h) {
    if (head_grads_[h].is_none()) continue;
    if (h >= head_grads.size() || head_grads[h].is_none())
      throw BindError("backward: output " + std::to_string(h) + " ('" + output_names_[h] +
                      "') needs a head gradient (it is not a loss head); pass one, or wrap "
                      "the output in MakeLoss/BlockGrad");
    if (head_grads[h].shape() != head_grads_[h].shape())
      throw BindError("backward: head gradient " + std::to_string(h) + " has shape " +
                      head_grads[h].shape().str() + ", expected " + head_grads_[h].shape().str());
    head_grads_[h].copy_from(head_grads[h]);
  }
  run(bwd_steps_, true);
}

std::map<std::string, NDArray> Executor::arg_dict() const {
  std::map<std::string, NDArray> m;
  for (size_t i = 0; i < args_.size(); ++i) m[arg_names_[i]] = args_[i];
  return m;
}
std::map<std::string, NDArray> Executor::grad_dict() const {
  std::map<std::string, NDArray> m;
  for (size_t i = 0; i < grads_.size(); ++i)
    if (!grads_[i].is_none()) m[arg_names_[i]] = grads_[i];
  return m;
}
std::map<std::string, NDArray> Executor::aux_dict() const {
  std::map<std::string, NDArray> m;
  for (size_t i = 0; i < aux_.size(); ++i) m[aux_names_[i]] = aux_[i];
  return m;
}

void Executor::copy_params_from(const std::map<std::string, NDArray>& arg_params,
                                const std::map<std::string, NDArray>& aux_params,
                                bool allow_extra) {
  auto copy_into = [&](const std::map<std::string, NDArray>& src,
                       const std::vector<std::string>& names, const std::vector<NDArray>& dst,
                       const char* kind) {
    for (const auto& [k, v] : src) {
      auto it = std::find(names.begin(), names.end(), k);
      if (it == names.end()) {
        if (!allow_extra) throw BindError(std::string("copy_params_from: no ") + kind + " named '" + k + "'");
        continue;
      }
      const NDArray& d = dst[static_cast<size_t>(it - names.begin())];
      if (d.shape() != v.shape())
        throw BindError(std::string("copy_params_from: ") + kind + " '" + k + "' has shape " +
                        v.shape().str() + ", expected " + d.shape().str());
      d.copy_from(v);
    }
  };
  copy_into(arg_params, arg_names_, args_, "argument");
  copy_into(aux_params, aux_names_, aux_, "auxiliary state");
}

}  // namespace loom
