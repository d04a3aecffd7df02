// Inference in sample chunks. A batch-16 pass of a mobile network streams activations of tens
// of megabytes through memory at every layer (MobileNet v1: 77 MB out of its 112x112 layers),
// while its weights (17 MB) would be read once per pass anyway. Run in chunks of a few
// samples, each layer's activations stay in the caches, at the price of reading the weights
// once per chunk. The executor then binds a second executor at the chunk's batch that shares
// this one's weights and aux states, and runs it over the batch chunk by chunk, copying the
// sample inputs in and the outputs out.
//
// Only where it is sound: CPU executors that compute no gradient, inference calls only, graphs
// of ops known to compute each sample from that sample alone, and every batch-sized entry of
// the graph keeps the batch as its leading axis at the chunk's size. LOOM_INFER_CHUNK=0 turns
// it off, =N forces chunks of N samples (the largest divisor of the batch not above N).
#include <algorithm>
#include <cstdlib>
#include <set>
#include <string>

#include "graph/node.h"
#include "runtime/base.h"
#include "runtime/executor.h"

namespace loom {
namespace {

// Ops whose inference output for sample i reads sample i of its batch-sized inputs only (axis 0
// the batch); the attribute checks reject the forms that reduce or move axis 0.
bool per_sample_op(const OpAttrs& a, const std::vector<Shape>& in_shapes) {
  // clang-format off
  static const std::set<std::string> kAlways = {
      "Convolution", "Deconvolution", "BatchNorm", "Activation", "LeakyReLU", "Pooling",
      "FullyConnected", "Flatten", "Dropout", "elemwise_add", "elemwise_sub", "elemwise_mul",
      "elemwise_div", "_plus", "_minus", "_mul", "_div", "_Plus", "_Minus", "_Mul", "_Div",
      "broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_plus",
      "broadcast_minus", "_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar",
      "_div_scalar", "_rdiv_scalar", "_PlusScalar", "_MinusScalar", "_RMinusScalar",
      "_MulScalar", "_DivScalar", "_RDivScalar", "relu", "sigmoid", "tanh", "clip", "exp",
      "sqrt", "square", "abs", "negative", "SoftmaxOutput", "Softmax", "SoftmaxActivation",
      "LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput", "SVMOutput",
      "L2Normalization", "InstanceNorm", "LRN", "BlockGrad", "stop_gradient", "identity",
      "_copy", "add_n", "ElementWiseSum", "Reshape", "reshape", "Embedding"};
  // clang-format on
  const std::string& op = a.op->name;
  if (kAlways.count(op)) return true;
  auto attr = [&](const char* k, const char* dflt) {
    auto it = a.dict.find(k);
    return it == a.dict.end() ? std::string(dflt) : it->second;
  };
  // Along an axis other than the batch's (negative axes counted from the input's rank).
  auto other_axis = [&](const std::string& v) {
    if (in_shapes.empty()) return false;
    const long ax = std::strtol(v.c_str(), nullptr, 10);
    const long nd = static_cast<long>(in_shapes[0].ndim());
    return nd >= 2 && (ax < 0 ? ax + nd : ax) != 0;
  };
  if (op == "Concat" || op == "concat") return other_axis(attr("dim", "1"));
  if (op == "softmax" || op == "log_softmax") return other_axis(attr("axis", "-1"));
  if (op == "SliceChannel" || op == "split") return other_axis(attr("axis", "1"));
  return false;
}

bool named_like_a_parameter(const std::string& n) {
  for (const char* suffix : {"_weight", "_bias", "_gamma", "_beta", "_alpha", "_moving_mean",
                             "_moving_var", "_running_mean", "_running_var"}) {
    const std::string s(suffix);
    if (n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}

}  // namespace

bool Executor::plan_chunks() {
  if (chunk_planned_) return chunk_ != nullptr;
  chunk_planned_ = true;
  auto refuse = [&](std::string why) {
    chunk_note_ = "inference runs the whole batch: " + std::move(why);
    return false;
  };
  const char* env = std::getenv("LOOM_INFER_CHUNK");
  long forced = -1;  // automatic
  if (env && *env) {
    char* end = nullptr;
    forced = std::strtol(env, &end, 10);
    if (*end || forced < 0)
      return refuse(std::string("LOOM_INFER_CHUNK='") + env +
                    "' is not a number of samples (0: whole batches)");
  }
  if (forced == 0) return refuse("LOOM_INFER_CHUNK=0");
  if (dev_.type != DeviceType::kCPU) return refuse("not a CPU executor");
  for (Req r : reqs_)
    if (r != Req::kNull) return refuse("the executor computes gradients");
  for (size_t i = 0; i < eg_.num_forward_nodes; ++i) {
    const ExecNode& n = eg_.nodes[i];
    if (!n.attrs) continue;
    if (n.kind != ExecNode::Kind::kForward || n.pred != kNoEntry || !n.alias.empty())
      return refuse("node '" + n.attrs->name + "' updates state");
    std::vector<Shape> in_shapes;
    for (auto e : n.in) in_shapes.push_back(e == kNoEntry ? Shape() : eg_.shapes[e]);
    if (!per_sample_op(*n.attrs, in_shapes))
      return refuse("op " + n.attrs->op->name + " (node '" + n.attrs->name + "') may mix samples");
  }
  // The sample inputs: the arguments not named as parameters (among simple_bind's given
  // shapes, which may name weights too); they must agree on the batch, the leading axis.
  std::vector<size_t> sample_args;
  int64_t batch = -1;
  for (size_t i = 0; i < args_.size(); ++i) {
    if (named_like_a_parameter(arg_names_[i])) continue;
    if (!bind_shapes_.empty() && !bind_shapes_.count(arg_names_[i])) continue;
    const Shape& s = args_[i].shape();
    if (s.ndim() == 0 || (batch >= 0 && s[0] != batch))
      return refuse("the inputs do not share a leading batch axis");
    batch = s[0];
    sample_args.push_back(i);
  }
  if (sample_args.empty()) return refuse("no sample input");
  if (batch < 2) return refuse("a batch of one");
  // The chunk: only when the largest layer's activations (input and output) for the whole
  // batch are more than twice kCacheBudget, and then as many samples as keep that layer within
  // it; and never for networks whose weights outweigh 4 samples' activations (ResNets), where
  // larger GEMMs and Winograd tiles pay more than the cache saves and each chunk reads the
  // weights again. Zen 4, 2 threads, batch 16 (DESIGN.md has the figures): MobileNet v1
  // (103 MB, chunks of 4) ran 5-12% faster with 30% less peak memory; MobileFaceNet (51 MB)
  // ran as fast whole as in chunks of 4 and 10% slower in chunks of 2 (8x the kernel calls);
  // ResNet-18 ran 10-40% slower in chunks of 8 or 4.
  constexpr double kCacheBudget = 32.0 * (1 << 20);  // a last-level cache slice (Zen 2-5)
  double weight_bytes = 0, act_bytes = 0;
  std::set<size_t> sample_set(sample_args.begin(), sample_args.end());
  for (size_t i = 0; i < args_.size(); ++i)
    if (!sample_set.count(i)) weight_bytes += static_cast<double>(args_[i].nbytes());
  for (const auto& a : aux_) weight_bytes += static_cast<double>(a.nbytes());
  for (size_t i = 0; i < eg_.num_forward_nodes; ++i) {
    const ExecNode& n = eg_.nodes[i];
    if (!n.attrs || n.in.empty() || n.out.empty()) continue;
    double b = 0;
    for (uint32_t e : {n.in[0], n.out[0]})
      if (e != kNoEntry && eg_.shapes[e].ndim() > 0 && eg_.shapes[e][0] == batch)
        b += static_cast<double>(eg_.shapes[e].bytes(eg_.types[e]));
    act_bytes = std::max(act_bytes, b / static_cast<double>(batch));
  }
  auto mb = [](double b) { return format_bytes(static_cast<uint64_t>(b)); };
  int64_t want = 0;
  if (forced > 0) {
    want = forced;
  } else {
    if (act_bytes * static_cast<double>(batch) <= 2 * kCacheBudget)
      return refuse("the largest layer's activations for the batch (" +
                    mb(act_bytes * static_cast<double>(batch)) + ") are within twice " +
                    mb(kCacheBudget));
    if (weight_bytes > 4 * act_bytes)
      return refuse("weights " + mb(weight_bytes) + " outweigh 4 samples' largest layer (" +
                    mb(act_bytes) + " each)");
    want = std::max<int64_t>(2, static_cast<int64_t>(kCacheBudget / act_bytes));
  }
  int64_t c = std::min(want, batch);
  while (batch % c) --c;
  if (c >= batch) return refuse("the chunk would be the whole batch");

  // Bind at c samples: new sample inputs, this executor's weights and aux states.
  std::map<std::string, NDArray> args, aux;
  for (size_t i = 0; i < args_.size(); ++i) {
    if (!sample_set.count(i)) {
      args[arg_names_[i]] = args_[i];
      continue;
    }
    Shape s = args_[i].shape();
    s[0] = c;
    args[arg_names_[i]] = NDArray::zeros(s, args_[i].dtype(), dev_);
  }
  for (size_t i = 0; i < aux_.size(); ++i) aux[aux_names_[i]] = aux_[i];
  std::unique_ptr<Executor> inner;
  try {
    inner = bind(sym_, args, {}, aux, bind_opts_);
  } catch (const std::exception& e) {
    return refuse(std::string("binding at the chunk's batch failed: ") + e.what());
  }
  // The entries computed from a sample input carry the batch: at c samples their leading
  // axis must be c and the rest unchanged, so each sample's rows stay its own through every
  // node. Their other outputs (BatchNorm's mean and variance) must keep their shape, and
  // nothing may read them.
  const IndexedGraph& g = *graph_;
  const auto arg_ids = g.arguments();
  const size_t ne = eg_.num_forward_entries;
  if (inner->eg_.num_forward_entries != ne) return refuse("the graph differs at the chunk's batch");
  std::vector<bool> carry(ne, false), side(ne, false);
  for (size_t i : sample_args) carry[g.entry_id(arg_ids[i], 0)] = true;
  for (size_t i = 0; i < eg_.num_forward_nodes; ++i) {
    const ExecNode& n = eg_.nodes[i];
    bool any = false;
    for (auto e : n.in) {
      if (e != kNoEntry && side[e])
        return refuse("node '" + n.attrs->name + "' reads a statistic of the batch");
      any = any || (e != kNoEntry && carry[e]);
    }
    for (auto e : n.out) {
      if (e == kNoEntry || e >= ne) continue;
      const Shape& a = eg_.shapes[e];
      const Shape& b = inner->eg_.shapes[e];
      Shape scaled = a;
      if (a.ndim() > 0 && a[0] == batch) scaled[0] = c;
      if (any && a.ndim() > 0 && a[0] == batch && b == scaled) {
        carry[e] = true;
      } else if (b == a) {
        side[e] = any;
      } else {
        return refuse("the output of node '" + n.attrs->name + "' has shape " + a.str() + " at " +
                      std::to_string(batch) + " samples but " + b.str() + " at " +
                      std::to_string(c) + ": it does not keep the batch as its leading axis");
      }
    }
  }
  for (size_t k = 0; k < eg_.heads.size(); ++k)
    if (!carry[eg_.heads[k]])
      return refuse("output " + std::to_string(k) + " does not have the batch as its leading axis");
  for (size_t i : sample_args) {
    const size_t j = static_cast<size_t>(
        std::find(inner->arg_names_.begin(), inner->arg_names_.end(), arg_names_[i]) -
        inner->arg_names_.begin());
    chunk_args_.emplace_back(i, j);
  }
  if (step_timer_) inner->set_step_timer(step_timer_);
  chunk_ = std::move(inner);
  chunk_size_ = c;
  chunk_note_.clear();
  return true;
}

void Executor::forward_chunks() {
  const int64_t batch = args_[chunk_args_[0].first].shape()[0];
  for (int64_t s = 0; s < batch; s += chunk_size_) {
    for (auto [i, j] : chunk_args_) chunk_->args_[j].copy_from(args_[i].slice(s, s + chunk_size_));
    chunk_->run(chunk_->fwd_steps_, false);
    for (size_t k = 0; k < outputs_.size(); ++k)
      outputs_[k].slice(s, s + chunk_size_).copy_from(chunk_->outputs_[k]);
  }
}

}  // namespace loom
