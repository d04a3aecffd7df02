// The executor: binds arrays to a symbol and runs a flat, precomputed plan of kernel calls.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "graph/exec_graph.h"
#include "graph/symbol.h"
#include "runtime/ndarray.h"
#include "runtime/step_capture.h"

namespace loom {

/// Options for binding. Missing names in `grad_req` default to `default_req`.
struct BindOptions {
  Device device = Device::cpu();
  Req default_req = Req::kWrite;
  std::map<std::string, Req> grad_req;
  std::map<std::string, DType> type_dict;
  /// Run consecutive element-wise steps (updates, EMA) chunk by chunk in one pass (CPU).
  bool fuse_chains = true;
  /// GPU binds: record each forward/backward call once as a CUDA Graph and replay it
  /// (runtime/step_capture.h; kAuto: step graphs only). LOOM_CUDA_GRAPH=0/1 overrides it.
  CudaGraphMode cuda_graph = CudaGraphMode::kAuto;
  /// Arrays to write outputs into, by output position (none or missing: the executor's
  /// own). Executor.reshape passes views of the old executor's outputs, as MXNet shares them.
  std::vector<NDArray> outputs;
};

/// Called after each backward node runs, once per gradient it computes for an input of its
/// forward node: (`<node>_backward_output`, with the input's position appended when the
/// node has several inputs; the array). An input whose gradient the node does not write
/// (grad_req null, labels) gets a zero array, so every node reports all of its inputs.
using BackwardMonitor = std::function<void(const std::string&, const NDArray&)>;

/// Called after each kernel call of forward/backward with (node name, op name, seconds), for
/// profiling (`loom bench --profile`). A call that fused two nodes (Convolution with its
/// BatchNorm or residual sum) reports "conv+bn" style names and ops; a chunked element-wise
/// chain reports its nodes joined by '+'. Backward calls append "_backward" to both. Device
/// kernels that run asynchronously are timed as launched.
using StepTimer = std::function<void(const std::string&, const std::string&, double)>;

class Executor {
 public:
  /// Infers every shape from `shapes` (normally data and label), allocates zero-filled
  /// arguments, gradients (req != null) and aux states.
  static std::unique_ptr<Executor> simple_bind(const Symbol& sym,
                                               const std::map<std::string, Shape>& shapes,
                                               const BindOptions& opts = {});
  /// Uses the given arrays by reference. Every argument and aux state must be given; a
  /// gradient array missing from `args_grad` forces that argument's req to null.
  static std::unique_ptr<Executor> bind(const Symbol& sym, const std::map<std::string, NDArray>& args,
                                        const std::map<std::string, NDArray>& args_grad,
                                        const std::map<std::string, NDArray>& aux,
                                        const BindOptions& opts = {});
  ~Executor();

  /// Runs the forward nodes. `is_train` reaches every kernel (Dropout, BatchNorm, ...).
  void forward(bool is_train = false);
  /// Copies `inputs` (name -> array, shapes must match) into the bound arguments, then runs
  /// forward.
  void forward(bool is_train, const std::map<std::string, NDArray>& inputs);
  /// Runs the backward nodes. `head_grads` has one array per output (none/empty entries are
  /// allowed for heads that need no gradient, e.g. loss heads); it may be empty when no
  /// head needs one.
  void backward(const std::vector<NDArray>& head_grads = {});

  const std::vector<NDArray>& outputs() const { return outputs_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  const std::vector<std::string>& arg_names() const { return arg_names_; }
  const std::vector<std::string>& aux_names() const { return aux_names_; }
  const std::vector<NDArray>& arg_arrays() const { return args_; }
  /// One per argument; none where grad_req is null.
  const std::vector<NDArray>& grad_arrays() const { return grads_; }
  const std::vector<NDArray>& aux_arrays() const { return aux_; }
  const std::vector<Req>& grad_reqs() const { return reqs_; }
  std::map<std::string, NDArray> arg_dict() const;
  std::map<std::string, NDArray> grad_dict() const;
  std::map<std::string, NDArray> aux_dict() const;
  /// True when backward needs a head gradient for output i.
  bool needs_head_grad(size_t i) const;
  const Symbol& symbol() const { return sym_; }
  /// The graph that runs: `symbol()` after common-subexpression elimination (graph/cse.h),
  /// which bind applies unless MXNET_ELIMINATE_COMMON_EXPR=0.
  const Symbol& optimized_symbol() const { return run_sym_; }
  /// Installs (or, with an empty function, removes) the backward monitor.
  void set_backward_monitor(BackwardMonitor fn);
  /// Installs (or, with an empty function, removes) the per-call timer.
  void set_step_timer(StepTimer fn);
  /// Bytes of intermediate buffers the memory plan allocated (and would without reuse).
  size_t planned_bytes() const { return plan_.total_bytes; }
  size_t unplanned_bytes() const { return plan_.naive_bytes; }
  /// Element-wise steps joined to the one before them in chunked chains (fuse_chains).
  size_t fused_steps() const { return fused_chains_; }
  /// Producer/consumer pairs (Convolution -> BatchNorm) fused in inference calls.
  size_t fused_affine_pairs() const { return fused_affine_; }
  /// Producers (Convolution) adding their output onto a residual sum in inference calls.
  size_t fused_sum_pairs() const { return fused_sum_; }
  /// Producers (Convolution) applying a following activation node (ReLU after a sum, leaky,
  /// PReLU) as a post-op in inference calls.
  size_t fused_activation_pairs() const { return fused_act_; }
  /// Activation nodes a following layer applies to its input as it reads it in inference
  /// calls (PReLU before Loom's own depthwise kernel).
  size_t fused_pre_activations() const { return fused_pre_; }
  /// Inference in sample chunks (runtime/infer_chunk.cc): the number of samples each
  /// inference forward of this executor runs at a time, or 0 when it runs the whole batch.
  /// Decided at the first inference forward (0 before it).
  int64_t inference_chunk() const { return chunk_ ? chunk_size_ : 0; }
  /// Why inference runs the whole batch (empty when it runs in chunks or nothing was decided).
  const std::string& inference_chunk_note() const { return chunk_note_; }
  /// One line: whether calls are recorded as CUDA Graphs and why (not), with the counts of
  /// recordings and replays and a failed recording's reason.
  std::string cuda_graph_status() const;
  /// True when calls of this executor are recorded and replayed (decide_capture).
  bool records_cuda_graphs() const { return record_; }
  /// Copies values of same-named arguments / aux states (as MXNet's copy_params_from).
  void copy_params_from(const std::map<std::string, NDArray>& arg_params,
                        const std::map<std::string, NDArray>& aux_params = {},
                        bool allow_extra = true);

 private:
  Executor() = default;
  void setup(const Symbol& sym, const std::map<std::string, Shape>& shapes,
             const std::map<std::string, NDArray>* args,
             const std::map<std::string, NDArray>* args_grad,
             const std::map<std::string, NDArray>* aux, const BindOptions& opts);
  struct Step;
  void run(std::vector<Step>& steps, bool is_train);
  void run_steps(std::vector<Step>& steps, bool is_train);
  void plan_capture(const BindOptions& opts);
  void fuse_chains(std::vector<Step>& steps);
  void run_chain(Step& s, const OpContext& ctx);
  bool run_post_ops(std::vector<Step>& steps, size_t k, const OpContext& ctx,
                    const Step* pre = nullptr);
  void report_backward(const Step& s) const;
  void report_time(const std::vector<Step>& steps, size_t first, size_t last, double sec) const;
  /// Inference in sample chunks: decides once (plan_chunks) and runs (forward_chunks).
  bool plan_chunks();
  void forward_chunks();
  Symbol sym_, run_sym_;
  Device dev_;
  BackwardMonitor bwd_monitor_;
  std::unique_ptr<IndexedGraph> graph_;
  ExecGraph eg_;
  MemoryPlan plan_;
  std::vector<std::string> arg_names_, aux_names_, output_names_;
  std::vector<NDArray> args_, grads_, aux_, outputs_, head_grads_;
  std::vector<Req> reqs_;
  std::vector<NDArray> entries_;  // per entry: the array it lives in (none if unused)
  std::vector<Step> fwd_steps_, bwd_steps_;
  std::vector<std::unique_ptr<Kernel>> kernels_;  // one per op node; steps point into these
  std::vector<NDArray> zero_grads_;  // add-req args whose gradient is identically zero
  NDArray workspace_;
  std::mt19937_64 rng_;
  size_t fused_chains_ = 0;
  size_t fused_affine_ = 0, fused_sum_ = 0, fused_act_ = 0, fused_pre_ = 0;
  std::vector<float> affine_scale_, affine_shift_;  // per call, for channel-affine pairs
  StepTimer step_timer_;
  std::vector<uint32_t> epilogue_of_;         // per exec node: the node it absorbed, or kNoEntry
  std::map<std::string, Shape> bind_shapes_;  // simple_bind's given shapes (data, labels)
  BindOptions bind_opts_;
  bool chunk_planned_ = false;
  std::unique_ptr<Executor> chunk_;  // bound at chunk_size_ samples, sharing the weights
  int64_t chunk_size_ = 0;
  std::vector<std::pair<size_t, size_t>> chunk_args_;  // (this arg, chunk_'s arg) per sample input
  std::string chunk_note_;
  bool record_ = false;  // decide_capture's answer
  std::string capture_note_;
  CaptureCache captures_;
};

}  // namespace loom
