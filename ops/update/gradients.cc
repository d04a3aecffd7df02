// _loom_gradients(loss0..lossN-1, wrt0..wrtM-1) -> grad0..gradM-1: the gradient of the
// losses with respect to the other inputs, as a node of the graph itself, so a whole
// training step (forward, backward, update) is one serialisable graph. The graph pass
// (graph/exec_graph.cc) replaces it with the backward nodes of the graph below it: loss
// heads (SoftmaxOutput, MakeLoss, ...) seed their own gradient, any other loss input is
// seeded with ones (the gradient of its sum).
#include "ops/infer.h"
#include "ops/op.h"

namespace loom {
namespace {

struct GradientsParam {
  int num_args;
  int num_losses;
};

const auto kSchema = ParamSchema<GradientsParam>()
                         .required("num_args", &GradientsParam::num_args,
                                   "Number of inputs: losses then the inputs to differentiate.")
                         .optional("num_losses", &GradientsParam::num_losses, 1,
                                   "How many leading inputs are losses.")
                         .check([](GradientsParam& p) {
                           check_input_count(p.num_args, "num_args", 2);
                           if (p.num_losses < 1 || p.num_args <= p.num_losses)
                             throw ParamError("needs at least one loss and one input to "
                                              "differentiate (num_args > num_losses >= 1)");
                         });

LOOM_REGISTER_OP("_loom_gradients")
    .describe("Gradients of the leading loss inputs with respect to the remaining inputs, "
              "computed in the graph (training-step graphs).")
    .params(kSchema)
    .inputs([](const OpAttrs& a) {
      const auto& p = a.param<GradientsParam>();
      std::vector<std::string> v;
      for (int i = 0; i < p.num_losses; ++i) v.push_back("loss" + std::to_string(i));
      for (int i = 0; i < p.num_args - p.num_losses; ++i) v.push_back("wrt" + std::to_string(i));
      return v;
    })
    .outputs([](const OpAttrs& a) {
      const auto& p = a.param<GradientsParam>();
      std::vector<std::string> v;
      for (int i = 0; i < p.num_args - p.num_losses; ++i) v.push_back("grad" + std::to_string(i));
      return v;
    })
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      size_t nl = static_cast<size_t>(a.param<GradientsParam>().num_losses);
      for (size_t j = 0; j < out.size(); ++j) {
        merge_shape(out[j], in[nl + j], "output " + std::to_string(j));
        merge_shape(in[nl + j], out[j], input_label(a, nl + j));
      }
    })
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      size_t nl = static_cast<size_t>(a.param<GradientsParam>().num_losses);
      for (size_t j = 0; j < out.size(); ++j) {
        merge_type(out[j], in[nl + j], "output " + std::to_string(j));
        merge_type(in[nl + j], out[j], input_label(a, nl + j));
      }
    });

// Set outside the builder chain: the grad mode is what makes the graph pass expand it.
[[maybe_unused]] const bool mode_set = [] {
  register_op("_loom_gradients").grad_mode = GradMode::kGraphGradient;
  return true;
}();

}  // namespace
}  // namespace loom
