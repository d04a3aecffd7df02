// SVMOutput: identity forward; hinge-loss gradient backward (spec 4.3). L2-SVM (squared
// hinge) by default, L1-SVM with use_linear. No batch normalisation; head gradient ignored.
#include "ops/infer.h"
#include "ops/loss/loss_util.h"
#include "ops/loss/sce_svm_math.h"

namespace loom {
namespace {

using loss::SVMOutputParam;

ParamSchema<SVMOutputParam> svm_output_schema() {
  using P = SVMOutputParam;
  return ParamSchema<P>()
      .optional("margin", &P::margin, 1.0f,
                "The loss function penalizes outputs that lie "
                "outside this margin.")
      .optional("regularization_coefficient", &P::regularization_coefficient, 1.0f,
                "Regularization parameter for the SVM; scales the gradient.")
      .optional("use_linear", &P::use_linear, false,
                "Use the L1-SVM (hinge) gradient instead of the L2-SVM (squared hinge).");
}

// Label = data shape without its last axis: one class index per row of (size/K, K).
void infer_svm_output_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  Shape& d = in[0];
  merge_shape(d, out[0], "output 0 (output)");
  if (d.ndim() == 0) return;
  if (d.ndim() < 2)
    throw ShapeError(input_label(a, 0) +
                     ": SVMOutput needs data of at least 2 dimensions, "
                     "got " +
                     d.str());
  merge_shape(in[1], Shape(std::vector<int64_t>(d.begin(), d.end() - 1)), input_label(a, 1));
  out[0] = d;
}

class SVMOutputKernel final : public Kernel {
 public:
  explicit SVMOutputKernel(const KernelArgs& a) : p_(a.attrs.param<SVMOutputParam>()) {
    loss::require_float32(a);
    const Shape& d = a.in_shapes[0];
    k_ = d[d.ndim() - 1];
    rows_ = d.numel() / k_;
  }

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const float* x = in[0].data<float>();
    float* y = out[0].data<float>();
    const Req r = req[0];
    if (r != Req::kAdd && x == y) return;  // in place
    for (int64_t i = 0; i < rows_ * k_; ++i) loss::store(y + i, r, x[i]);
  }

  // MXNet writes this gradient regardless of req; Loom honours req like every other op.
  void backward(const OpContext&, std::span<const NDArray>, std::span<const NDArray> in_data,
                std::span<const NDArray> out_data, std::span<const Req> req,
                std::span<const NDArray> in_grad) override {
    if (req[0] == Req::kNull) return;
    const float* y = out_data[0].data<float>();
    const float* l = in_data[1].data<float>();
    float* dx = in_grad[0].data<float>();
    const Req r = req[0];
    const float margin = p_.margin, lambda = p_.regularization_coefficient;
    const bool linear = p_.use_linear;
#pragma omp parallel for if (rows_ * k_ > loss::kParallelMin)
    for (int64_t row = 0; row < rows_; ++row) {
      const int64_t c = loss::class_of(l[row]);
      for (int64_t j = 0; j < k_; ++j) {
        loss::store(dx + row * k_ + j, r,
                    loss::svm_grad(y[row * k_ + j], j == c, margin, lambda, linear));
      }
    }
  }

 private:
  SVMOutputParam p_;
  int64_t rows_ = 0, k_ = 1;
};

LOOM_REGISTER_OP("SVMOutput")
    .describe(
        "Identity in forward; in backward the gradient of the one-vs-all hinge loss "
        "(squared by default, linear with use_linear), ignoring the head gradient.")
    .params(svm_output_schema())
    .inputs({"data", "label"})
    .outputs({"output"})
    .shape_fn(infer_svm_output_shape)
    .deps(GradDeps{false, true, true})
    .no_grad({1})
    .inplace_pairs({{0, 0}})
    .cpu<SVMOutputKernel>()
    .sample({.attrs = {},
             .in_shapes = {{4, 5}, {4}},
             .in_kinds = {"normal", "label:5"},
             .check_grad = false})
    .sample(
        {.attrs = {{"use_linear", "True"}, {"margin", "0.5"}, {"regularization_coefficient", "2"}},
         .in_shapes = {{2, 3, 4}, {2, 3}},
         .in_kinds = {"normal", "label:4"},
         .check_grad = false});

}  // namespace
}  // namespace loom
