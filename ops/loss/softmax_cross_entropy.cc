// softmax_cross_entropy(data (N, K), label (N,)): sum over the batch of -log softmax(data)
// at the label, as a (1,) array. d data = g * (softmax(data) - onehot(label)); the label gets
// no gradient. Labels are truncated and clipped into [0, K) as MXNet's pick does. The row
// arithmetic is in sce_svm_math.h (shared with the CUDA kernel, loss_heads.cu).
#include <cmath>

#include "ops/dtype_policy.h"
#include "ops/infer.h"
#include "ops/loss/sce_svm_math.h"
#include "ops/tensor/index_util.h"
#include "ops/tensor/tensor_util.h"

namespace loom {
namespace {

void infer_sce(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() != 0 && in[0].ndim() != 2)
    throw ShapeError("node '" + a.name + "' (op softmax_cross_entropy): data " + in[0].str() + " must be 2-D");
  if (in[0].ndim() == 2) merge_shape(in[1], Shape{in[0][0]}, input_label(a, 1));
  merge_shape(out[0], Shape{1}, "output 0");
}

class SoftmaxCrossEntropyKernel final : public Kernel {
 public:
  explicit SoftmaxCrossEntropyKernel(const KernelArgs& a)
      : n_(a.in_shapes[0][0]), k_(a.in_shapes[0][1]) {
    tensor::check_f32(a);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const float *x = in[0].cdata<float>(), *label = in[1].cdata<float>();
    double loss = 0;
    for (int64_t i = 0; i < n_; ++i) {
      const float* row = x + i * k_;
      loss += log_sum_exp(row) - row[cls(label[i])];
    }
    tensor::store(out[0].data<float>(), req[0], static_cast<float>(loss));
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[1] != Req::kNull) tensor::fill_req(ig[1], req[1], 0.f);
    if (req[0] == Req::kNull) return;
    const float g = og[0].cdata<float>()[0];
    const float *x = in[0].cdata<float>(), *label = in[1].cdata<float>();
    float* dx = ig[0].data<float>();
    for (int64_t i = 0; i < n_; ++i) {
      const float* row = x + i * k_;
      const double lse = log_sum_exp(row);
      const int64_t c = cls(label[i]);
      for (int64_t j = 0; j < k_; ++j)
        tensor::store(dx + i * k_ + j, req[0], loss::sce_grad(row[j], lse, j == c, g));
    }
  }

 private:
  double log_sum_exp(const float* row) const { return loss::sce_log_sum_exp(row, k_); }
  int64_t cls(float v) const { return tensor::clip_index(v, k_); }
  int64_t n_, k_;
};

LOOM_CPU_DTYPES("softmax_cross_entropy", kDTypePolicyF32);

LOOM_REGISTER_OP("softmax_cross_entropy")
    .describe("Sum over the batch of the cross-entropy of softmax(data) with integer labels.")
    .inputs({"data", "label"})
    .shape_fn(infer_sce)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .no_grad({1})
    .cpu<SoftmaxCrossEntropyKernel>()
    .sample({.attrs = {}, .in_shapes = {{3, 4}, {3}}, .in_kinds = {"normal", "label:4"}})
    .sample({.attrs = {}, .in_shapes = {{2, 5}, {2}}, .in_kinds = {"normal", "label:5"}});

}  // namespace
}  // namespace loom
