// _loom_broadcast_once(data0..dataN-1) -> done: on its executor's first call, overwrites every
// input with rank `root`'s values (the process's communicator, runtime/dist); later calls do
// nothing. The output is a (1,) float32 1 (it only keeps the node in the graph).
//
// Data-parallel training steps (graph/step_builder.h) give it every weight and state: a user
// who initialises or loads the model on rank 0 only trains every rank from rank 0's values.
// The op runs before every other node (OpDef::prologue), so the first forward already reads
// the broadcast weights. It writes into its inputs without declaring them mutated (that would
// make the weights auxiliary states); it is never fused or chained, and nothing reads its
// output. At bind every rank checks that all ranks bound the same graph (`signature`, a hash
// make_step computes) with the same shapes and dtypes (Communicator::check_same).
#include "ops/dist/allreduce_plan.h"
#include "ops/infer.h"
#include "ops/op.h"
#include "runtime/dist/communicator.h"

namespace loom {
namespace {

using dist_ops::BroadcastOnceParam;

const auto kBroadcastOnceSchema =
    ParamSchema<BroadcastOnceParam>()
        .required("num_args", &BroadcastOnceParam::num_args, "Number of inputs.")
        .optional("root", &BroadcastOnceParam::root, 0, "The rank whose values everyone takes.")
        .optional("signature", &BroadcastOnceParam::signature, std::string(),
                  "What every rank must agree on besides shapes and dtypes (make_step: a hash "
                  "of the step graph).")
        .check([](BroadcastOnceParam& p) {
          check_input_count(p.num_args, "num_args");
          if (p.root < 0) throw ParamError("root must be >= 0");
        });

class BroadcastOnceKernel final : public Kernel {
 public:
  explicit BroadcastOnceKernel(const KernelArgs& a)
      : p_(a.attrs.param<BroadcastOnceParam>()), comm_(dist::init()) {
    const std::string where = "node '" + a.attrs.name + "' (op _loom_broadcast_once)";
    if (p_.root >= comm_.size())
      throw dist::DistError(where + ": root " + std::to_string(p_.root) + " is not a rank of " +
                            std::to_string(comm_.size()));
    if (comm_.size() == 1) return;
    std::string mine = a.attrs.name + " " + p_.signature;
    for (size_t i = 0; i < a.in_shapes.size(); ++i) {
      mine += ' ';
      mine += a.in_shapes[i].str();
      mine += dtype_name(a.in_types[i]);
    }
    comm_.check_same("step graph, shapes and dtypes of " + where, mine.data(), mine.size());
  }

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (!done_ && comm_.size() > 1)
      for (const NDArray& x : in)
        if (x.size() > 0)
          comm_.broadcast(x.raw(), static_cast<size_t>(x.size()), x.dtype(), p_.root);
    done_ = true;
    if (req[0] != Req::kNull) out[0].fill(1.0);
  }

 private:
  BroadcastOnceParam p_;
  dist::Communicator& comm_;
  bool done_ = false;
};

LOOM_REGISTER_OP("_loom_broadcast_once")
    .describe(
        "On the executor's first call, overwrites every input with rank root's values (a "
        "data-parallel job's broadcast of the initial weights); runs before every other node. "
        "Output: (1,) = 1.")
    .params(kBroadcastOnceSchema)
    .inputs([](const OpAttrs& a) {
      std::vector<std::string> v;
      for (int i = 0; i < a.param<BroadcastOnceParam>().num_args; ++i)
        v.push_back("data" + std::to_string(i));
      return v;
    })
    .outputs({"done"})
    .shape_fn([](const OpAttrs&, std::vector<Shape>&, std::vector<Shape>& out) {
      merge_shape(out[0], Shape{1}, "output 0");
    })
    .type_fn([](const OpAttrs&, std::vector<DType>&, std::vector<DType>& out) {
      merge_type(out[0], DType::kFloat32, "output 0");
    })
    .zero_grad()
    .runs_first()
    .cpu<BroadcastOnceKernel>()
    .sample({.attrs = {{"num_args", "2"}}, .in_shapes = {{3, 4}, {5}}, .check_grad = false});

}  // namespace
}  // namespace loom
