// The operator registry. One operator = one OpDef, filled in by the op's own .cc (and its
// .cu twin adds a GPU kernel to the same OpDef, since registration is get-or-create by name).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ops/param.h"
#include "runtime/ndarray.h"

namespace loom {

struct OpDef;

/// A node's operator attributes as the op's functions see them: the string dict (as in
/// JSON) and the parsed parameter struct.
struct OpAttrs {
  const OpDef* op = nullptr;
  std::string name;  ///< node name, for error messages
  Attrs dict;
  std::shared_ptr<const void> parsed;
  /// The parsed parameter struct; P must be the type the op registered with `params`.
  template <class P>
  const P& param() const { return *static_cast<const P*>(parsed.get()); }
};

/// Everything a kernel invocation may use besides its arrays.
struct OpContext {
  bool is_train = false;
  Device device;
  void* stream = nullptr;          ///< device stream (cudaStream_t on GPU)
  std::mt19937_64* rng = nullptr;  ///< executor-owned generator (Dropout, rrelu)
  void* workspace = nullptr;       ///< scratch of at least Kernel::workspace_bytes()
  /// GPU binds, predicated nodes (`__pred__`) whose kernel says `device_predicate()`: the
  /// node's (1,) float32 predicate in device memory. The kernel's launches must leave every
  /// output and state as it is when it points to 0 (runtime/cuda/predicate.cuh). Null
  /// otherwise: the node runs.
  const float* pred = nullptr;
};

/// An element-wise activation a producer applies to its output as it writes it (inference
/// post-op fusion, Kernel::fused_activation).
struct FusedActivation {
  enum Kind : uint8_t { kNone, kRelu, kLeaky, kPrelu };
  Kind kind = kNone;
  float alpha = 0.f;              ///< kLeaky: the slope for x < 0
  std::span<const float> slope;   ///< kPrelu, per call: one slope per channel (axis 1)
};

/// What a producer applies to output 0, in this order: y * scale + shift per channel of
/// axis 1, then + the destination's old value, then the activation (Kernel::fuse_post_ops).
/// `pre`: an activation the producer applies to input 0 as it reads it, instead of the
/// activation node before it (which computed input 0 in place and is then skipped).
struct PostOps {
  bool affine = false;
  bool sum = false;
  FusedActivation act;
  std::span<const float> scale, shift;  ///< affine, per call
  FusedActivation pre;
};

/// A kernel instance, created once per bind for one node on one device. It may cache
/// primitives (oneDNN, cuDNN) built for the shapes it was created with.
class Kernel {
 public:
  virtual ~Kernel() = default;
  /// Scratch bytes the executor must provide in OpContext::workspace.
  virtual size_t workspace_bytes() const { return 0; }
  /// Device kernels of predicated nodes: true when forward reads OpContext::pred on the
  /// device and does nothing while it is 0. Otherwise the executor reads the predicate on
  /// the host (a copy and a wait per call, and no CUDA Graph capture).
  virtual bool device_predicate() const { return false; }
  /// False when a call depends on host state that changes from call to call or waits for
  /// the device (a seed drawn per call, host code such as Python custom ops): the executor
  /// then never records the graph it is in as a CUDA Graph.
  virtual bool capturable() const { return true; }
  /// Offered by the executor when output 0's only reader is `next`, a one-input node that
  /// computes in place over it: return true to apply `next` to output 0 from now on (the
  /// executor then skips `next`'s forward). Called at bind, after construction.
  virtual bool fuse_epilogue(const OpAttrs& next) { return false; }
  // ---- Inference post-op fusion ----
  // The executor may let a forward node (producer) whose output 0 only the next steps read
  // apply those steps itself while writing, as oneDNN post-ops, in this order: a per-channel
  // affine map (BatchNorm in inference), an add onto what the destination already holds (a
  // residual elemwise_add), an element-wise activation (ReLU, leaky, PReLU). Per call, when
  // every consumer agrees (BatchNorm: moving statistics), the producer writes the last
  // consumer's output 0 and the consumers' steps are skipped (BatchNorm still writes its
  // hidden outputs: forward_rest). Otherwise every step runs as usual (training calls).

  /// Consumer, at bind: whether some calls reduce to y = x * scale + shift per channel of
  /// axis 1 of input 0 (then `relu`: followed by max(y, 0)).
  virtual bool channel_affine_capable(bool* /*relu*/) const { return false; }
  /// Consumer, per call: true and scale/shift (one per channel) when this call's forward of
  /// output 0 is that affine map of input 0.
  virtual bool channel_affine(const OpContext&, std::span<const NDArray> /*in*/,
                              std::vector<float>& /*scale*/, std::vector<float>& /*shift*/) {
    return false;
  }
  /// Consumer: everything forward does besides output 0, after the producer applied the
  /// affine map (BatchNorm: its hidden per-channel outputs).
  virtual void forward_rest(const OpContext&, std::span<const NDArray>, std::span<const Req>,
                            std::span<const NDArray>) {}
  /// Consumer, at bind: output 0 is input 0 + input 1 (elemwise_add).
  virtual bool is_binary_sum() const { return false; }
  /// Consumer, at bind (kind, alpha) and per call (slopes, read from `in`): whether output 0
  /// is an element-wise activation of input 0 that a producer may apply as a post-op.
  virtual bool fused_activation(std::span<const NDArray> /*in*/, FusedActivation* /*act*/) {
    return false;
  }
  /// Producer, at bind: prepare to apply `ops` (kinds only; no per-call values) to output 0.
  virtual bool fuse_post_ops(const PostOps& /*ops*/) { return false; }
  /// Producer, per call: computes post_ops(output 0) into `dst` (instead of out[0], which is
  /// left as it was; with `sum`, dst holds the other operand); false when it cannot this
  /// call (nothing written, everything runs unfused).
  virtual bool forward_post_ops(const OpContext&, std::span<const NDArray> /*in*/,
                                const NDArray& /*dst*/, const PostOps& /*ops*/) {
    return false;
  }

  /// Computes outputs from inputs (args then aux; aux arrays may be updated in place).
  /// req[i] is kWrite, kInplace (out[i] aliases an input) or kAdd, or kNull (skip).
  virtual void forward(const OpContext& ctx, std::span<const NDArray> in,
                       std::span<const Req> req, std::span<const NDArray> out) = 0;
  /// Element-wise kernels (the update ops, buckets) can run over part of their elements, so
  /// the executor can run a chain of them chunk by chunk while the chunk is in cache: the
  /// element count of each tensor they update, in order (empty: not element-wise).
  virtual std::vector<int64_t> range_partition() const { return {}; }
  /// Elements [begin, end) of the concatenated partition; serial, and called concurrently
  /// for disjoint ranges. forward() == every range, then forward_once().
  virtual void forward_range(const OpContext&, std::span<const NDArray>, std::span<const Req>,
                             std::span<const NDArray>, int64_t /*begin*/, int64_t /*end*/) {}
  /// What must happen once per call, after every range (one-element states).
  virtual void forward_once(const OpContext&, std::span<const NDArray>, std::span<const Req>,
                            std::span<const NDArray>) {}
  /// Computes input gradients. Arrays the op did not declare in `GradDeps` are none.
  /// req has one entry per input (aux and no-grad inputs are kNull).
  virtual void backward(const OpContext& ctx, std::span<const NDArray> out_grad,
                        std::span<const NDArray> in_data, std::span<const NDArray> out_data,
                        std::span<const Req> req, std::span<const NDArray> in_grad);
};

/// One tensor slot of a node: forward input/output i, or the gradient of input/output i.
struct LayoutSlot {
  enum Kind : uint8_t { kIn, kOut, kInGrad, kOutGrad };
  Kind kind;
  int index;
};

/// Which slots an op's kernel can take in a blocked layout. Slots in one group always get
/// the same layout; slots in no group stay plain. The executor blocks an entry only when
/// every node touching it (forward and backward) allows it.
struct LayoutRule {
  std::vector<std::vector<LayoutSlot>> groups;
  /// The op is faster on blocked data (convolution, pooling): only entries connected to
  /// such an op are blocked at all.
  bool prefers_blocked = false;
};
/// Given the node's attributes and input shapes.
using LayoutRuleFn = std::function<LayoutRule(const OpAttrs&, const std::vector<Shape>& in)>;
/// Rule for element-wise ops whose kernels index every operand alike: all inputs, outputs
/// and their gradients share one layout.
LayoutRule elementwise_layout_rule(int n_in, int n_out);

/// Layouts of one node's tensors, by slot (empty vectors = all plain).
struct NodeLayouts {
  std::vector<Layout> in, out, in_grad, out_grad;
  Layout get(LayoutSlot::Kind k, size_t i) const {
    const auto& v = k == LayoutSlot::kIn ? in : k == LayoutSlot::kOut ? out
                    : k == LayoutSlot::kInGrad ? in_grad : out_grad;
    return i < v.size() ? v[i] : Layout::kPlain;
  }
};

/// What a kernel factory is given: attributes, inferred shapes/types and the device.
struct KernelArgs {
  const OpAttrs& attrs;
  const std::vector<Shape>& in_shapes;
  const std::vector<Shape>& out_shapes;
  const std::vector<DType>& in_types;
  const std::vector<DType>& out_types;
  Device device;
  /// Layouts the executor chose for this node's tensors; null = all plain. Only ops with a
  /// `layout_rule` ever see a blocked layout, and only in slots the rule allows.
  const NodeLayouts* layouts = nullptr;
  Layout layout(LayoutSlot::Kind k, size_t i) const {
    return layouts ? layouts->get(k, i) : Layout::kPlain;
  }
};
using KernelFactory = std::function<std::unique_ptr<Kernel>(const KernelArgs&)>;

/// Which forward values the backward needs. Ops whose backward ignores the output gradient
/// (loss heads) need no head gradient from the user.
struct GradDeps {
  bool out_grad = true;
  bool in_data = true;
  bool out_data = true;
  /// With out_data: bit i set = output i is read (BatchNorm reads only its saved batch
  /// statistics, not its output, so ReLU can then overwrite that output in place).
  uint32_t out_data_mask = 0xFFFFFFFFu;
};

/// How the gradient pass treats an op.
enum class GradMode {
  kKernel,  ///< Kernel::backward computes the input gradients.
  kZero,    ///< Not differentiable (or BlockGrad): input gradients are zero.
  /// `_loom_gradients`: the node stands for the gradient of its loss inputs with respect
  /// to its other inputs; the graph pass replaces it with backward nodes.
  kGraphGradient,
};

/// A sample configuration for the registry-driven op tests.
struct OpSample {
  Attrs attrs;
  std::vector<Shape> in_shapes;  ///< arguments then aux
  /// Input values: "normal" (default, N(0,1)), "positive" (0.5..2), "label:K" (integers in
  /// [0,K)), "unit" (-0.9..0.9), "above1" (1.2..2.7), "index:K", "zeros", "ones", per input;
  /// missing = normal.
  std::vector<std::string> in_kinds;
  bool check_grad = true;  ///< finite-difference check (off for loss heads, random ops)
  bool is_train = false;
  double grad_rtol = 2e-2, grad_atol = 2e-3;
};

using ListFn = std::function<std::vector<std::string>(const OpAttrs&)>;
using IndexListFn = std::function<std::vector<int>(const OpAttrs&)>;
/// Fills unknown shapes from known ones (in and out may both be updated). Returns normally
/// when nothing more can be inferred; throws ShapeError on inconsistency.
using InferShapeFn =
    std::function<void(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out)>;
using InferTypeFn =
    std::function<void(const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out)>;

/// One registered operator.
struct OpDef {
  std::string name;
  std::vector<std::string> aliases;
  std::string doc;
  std::vector<ParamInfo> param_info;
  std::function<std::shared_ptr<const void>(const Attrs&)> parse;
  ListFn list_inputs;           ///< arguments then aux, in order (default {"data"})
  IndexListFn mutate_inputs;    ///< aux positions (default none)
  ListFn list_outputs;          ///< all outputs incl. hidden (default {"output"})
  std::function<int(const OpAttrs&)> num_visible_outputs;  ///< default: all
  InferShapeFn infer_shape;     ///< default: all inputs and outputs share one shape
  InferTypeFn infer_type;       ///< default: all inputs and outputs share one dtype
  std::function<GradDeps(const OpAttrs&)> grad_deps;  ///< default: everything
  IndexListFn nograd_inputs;    ///< inputs whose gradient is never written (labels)
  GradMode grad_mode = GradMode::kKernel;
  /// Pairs (input, output) that may share memory (output computed in place).
  std::function<std::vector<std::pair<int, int>>(const OpAttrs&)> inplace;
  /// Pairs (output j, input i): the backward may write input i's gradient over output j's
  /// gradient (element-wise backward kernels that read each gradient cell before writing it).
  std::vector<std::pair<int, int>> backward_inplace;
  /// `__init__` attribute given to auto-created input variables, by input position
  /// (MXNet's FSetInputVarAttrOnCompose: BatchNorm moving stats, PReLU gamma).
  std::map<int, std::string> input_init;
  /// Groups of inputs whose variables simple_bind lays out back to back in one buffer, in
  /// group order (a bucket's weights, momenta, EMA shadows: one flat array, per-parameter
  /// views). A group applies only when its inputs are distinct variables of one dtype that
  /// no earlier group placed.
  std::function<std::vector<std::vector<int>>(const OpAttrs&)> contiguous_inputs;
  /// Runs before every other node of its graph (graph/exec_graph.cc orders it first): a node
  /// that prepares the arrays the others read, e.g. the first-call broadcast of rank 0's
  /// weights in data-parallel training steps. Its outputs must feed no other node.
  bool prologue = false;
  std::map<DeviceType, KernelFactory> kernels;
  std::vector<OpSample> samples;
  /// Blocked layouts the CPU kernel handles (default none: every tensor plain).
  LayoutRuleFn layout_rule;

  // ---- builder-style setters, used by registrations ----
  OpDef& describe(std::string d) { doc = std::move(d); return *this; }
  OpDef& alias(std::string a);
  template <class P>
  OpDef& params(const ParamSchema<P>& schema) {
    param_info = schema.info();
    parse = [schema](const Attrs& a) -> std::shared_ptr<const void> {
      return std::make_shared<P>(schema.parse(a));
    };
    return *this;
  }
  /// Parameters parsed by hand (attribute sets that depend on other attributes); `info`
  /// documents them.
  OpDef& params_custom(std::function<std::shared_ptr<const void>(const Attrs&)> fn,
                       std::vector<ParamInfo> info) {
    parse = std::move(fn);
    param_info = std::move(info);
    return *this;
  }
  OpDef& inputs(std::vector<std::string> names);
  OpDef& inputs(ListFn fn) { list_inputs = std::move(fn); return *this; }
  OpDef& outputs(std::vector<std::string> names);
  OpDef& outputs(ListFn fn) { list_outputs = std::move(fn); return *this; }
  OpDef& visible_outputs(std::function<int(const OpAttrs&)> fn) {
    num_visible_outputs = std::move(fn); return *this;
  }
  OpDef& aux(std::vector<int> positions);
  OpDef& aux(IndexListFn fn) { mutate_inputs = std::move(fn); return *this; }
  OpDef& shape_fn(InferShapeFn fn) { infer_shape = std::move(fn); return *this; }
  OpDef& type_fn(InferTypeFn fn) { infer_type = std::move(fn); return *this; }
  OpDef& deps(GradDeps d);
  OpDef& deps(std::function<GradDeps(const OpAttrs&)> fn) { grad_deps = std::move(fn); return *this; }
  OpDef& no_grad(std::vector<int> inputs);
  OpDef& zero_grad() { grad_mode = GradMode::kZero; return *this; }
  OpDef& inplace_pairs(std::vector<std::pair<int, int>> pairs);
  OpDef& inplace_fn(std::function<std::vector<std::pair<int, int>>(const OpAttrs&)> fn) {
    inplace = std::move(fn);
    return *this;
  }
  OpDef& contiguous(std::function<std::vector<std::vector<int>>(const OpAttrs&)> fn) {
    contiguous_inputs = std::move(fn);
    return *this;
  }
  OpDef& runs_first() { prologue = true; return *this; }
  OpDef& init_input(int pos, std::string init) { input_init[pos] = std::move(init); return *this; }
  OpDef& kernel(DeviceType dev, KernelFactory f) { kernels[dev] = std::move(f); return *this; }
  /// Registers a kernel class K constructible from KernelArgs.
  template <class K>
  OpDef& cpu() {
    return kernel(DeviceType::kCPU, [](const KernelArgs& a) { return std::make_unique<K>(a); });
  }
  OpDef& sample(OpSample s) { samples.push_back(std::move(s)); return *this; }
  OpDef& layouts(LayoutRuleFn fn) { layout_rule = std::move(fn); return *this; }
  OpDef& backward_inplace_pairs(std::vector<std::pair<int, int>> p) {
    backward_inplace = std::move(p);
    return *this;
  }
};

/// Get-or-create by canonical name (the .cc and .cu of one op share the OpDef).
OpDef& register_op(const std::string& name);
/// Looks up a name or alias; nullptr when unknown.
const OpDef* find_op(const std::string& name);
/// Looks up a name or alias; throws UnknownOpError naming `where` (e.g. the node).
const OpDef& get_op(const std::string& name, const std::string& where = "");
/// Every registered op, sorted by name.
std::vector<const OpDef*> all_ops();

/// Builds OpAttrs for an op from string attributes (parses and validates). Errors name the
/// node and op.
OpAttrs make_op_attrs(const OpDef& op, const std::string& node_name, Attrs dict);

/// Hidden node attribute that makes a node predicated: its last input is a (1,) float32
/// predicate computed in the graph, and the node's writes are skipped while it is 0
/// (gradient accumulation, optimizer and EMA updates switched by first/last micro-step).
inline constexpr const char* kPredAttr = "__pred__";
/// True when the node carries `__pred__` (any value but "0"/"False").
bool op_is_predicated(const OpAttrs& a);

/// Convenience queries with the defaults applied. op_inputs includes the trailing
/// "pred" input of a predicated node; op_kernel_inputs excludes it.
std::vector<std::string> op_inputs(const OpAttrs& a);
size_t op_kernel_inputs(const OpAttrs& a);
std::vector<std::string> op_outputs(const OpAttrs& a);
int op_num_visible(const OpAttrs& a);
std::vector<int> op_aux(const OpAttrs& a);
GradDeps op_grad_deps(const OpAttrs& a);

#define LOOM_CONCAT_INNER(a, b) a##b
#define LOOM_CONCAT(a, b) LOOM_CONCAT_INNER(a, b)
/// Registers (or extends) an operator at static-initialisation time:
///   LOOM_REGISTER_OP("exp").describe("...").cpu<ExpKernel>();
#define LOOM_REGISTER_OP(name)                                                     \
  [[maybe_unused]] static ::loom::OpDef& LOOM_CONCAT(loom_op_registrar_, __COUNTER__) = \
      ::loom::register_op(name)

}  // namespace loom
