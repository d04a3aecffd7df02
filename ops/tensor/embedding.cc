// Embedding (spec 6.17): out[..., :] = weight[clip(int(data[...]), 0, input_dim - 1), :].
// The indices get no gradient; the weight gradient accumulates the rows of the output
// gradient at each looked-up index.
#include "ops/infer.h"
#include "ops/tensor/index_util.h"
#include "ops/tensor/tensor_util.h"

namespace loom {
namespace {

struct EmbeddingParam {
  int64_t input_dim, output_dim;
  std::string dtype;
  bool sparse_grad;
};
const auto kEmbeddingSchema =
    ParamSchema<EmbeddingParam>()
        .required("input_dim", &EmbeddingParam::input_dim, "Vocabulary size (rows of weight).")
        .required("output_dim", &EmbeddingParam::output_dim, "Embedding size (columns).")
        .choice("dtype", &EmbeddingParam::dtype,
                {"float32", "float64", "float16", "uint8", "int32", "int8", "int64"}, "float32",
                "Data type of weight and output.")
        .optional("sparse_grad", &EmbeddingParam::sparse_grad, false,
                  "Row-sparse weight gradient in MXNet; a dense gradient here.")
        .check([](EmbeddingParam& p) {
          if (p.input_dim < 1 || p.output_dim < 1)
            throw ParamError("input_dim and output_dim must be positive");
        });

void infer_embedding(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<EmbeddingParam>();
  merge_shape(in[1], Shape{p.input_dim, p.output_dim}, input_label(a, 1));
  if (in[0].ndim() == 0) return;
  auto d = in[0].dims();
  d.push_back(p.output_dim);
  merge_shape(out[0], Shape(std::move(d)), "output 0");
}

void infer_embedding_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  DType t = dtype_from_string(a.param<EmbeddingParam>().dtype);
  if (in[0] == DType::kUnknown) in[0] = t;  // indices: any dtype, float32 by default
  merge_type(in[1], t, input_label(a, 1));
  merge_type(out[0], t, "output 0");
}

class EmbeddingKernel final : public Kernel {
 public:
  explicit EmbeddingKernel(const KernelArgs& a)
      : rows_(a.attrs.param<EmbeddingParam>().input_dim),
        dim_(a.attrs.param<EmbeddingParam>().output_dim),
        n_(a.in_shapes[0].numel()) {
    tensor::check_f32(a);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const float* idx = in[0].data<float>();
    const float* w = in[1].data<float>();
    float* y = out[0].data<float>();
    const bool add = req[0] == Req::kAdd;
#pragma omp parallel for schedule(static) if (n_ * dim_ >= tensor::kParallelMin)
    for (int64_t i = 0; i < n_; ++i) {
      const float* row = w + row_of(idx[i]) * dim_;
      float* dst = y + i * dim_;
      for (int64_t j = 0; j < dim_; ++j) dst[j] = add ? dst[j] + row[j] : row[j];
    }
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[1] == Req::kNull) return;
    if (req[1] != Req::kAdd) tensor::fill_req(ig[1], req[1], 0.f);
    const float* idx = in[0].data<float>();
    const float* g = og[0].data<float>();
    float* dw = ig[1].data<float>();
    // Serial over indices: repeated indices add into the same row.
    for (int64_t i = 0; i < n_; ++i) {
      float* dst = dw + row_of(idx[i]) * dim_;
      const float* src = g + i * dim_;
#pragma omp simd
      for (int64_t j = 0; j < dim_; ++j) dst[j] += src[j];
    }
  }

 private:
  // MXNet truncates the float index toward zero and clips it into [0, input_dim).
  int64_t row_of(float v) const { return tensor::clip_index(v, rows_); }
  int64_t rows_, dim_, n_;
};

LOOM_REGISTER_OP("Embedding")
    .describe("Maps integer indices to rows of a (input_dim, output_dim) weight matrix.")
    .params(kEmbeddingSchema)
    .inputs({"data", "weight"})
    .shape_fn(infer_embedding)
    .type_fn(infer_embedding_type)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .no_grad({0})
    .cpu<EmbeddingKernel>()
    .sample({.attrs = {{"input_dim", "5"}, {"output_dim", "3"}},
             .in_shapes = {{2, 4}, {5, 3}},
             .in_kinds = {"index:5"}})
    // Indices up to 8 with only 4 rows: the clipped ones repeat the last row.
    .sample({.attrs = {{"input_dim", "4"}, {"output_dim", "2"}},
             .in_shapes = {{7}, {4, 2}},
             .in_kinds = {"index:9"}});

}  // namespace
}  // namespace loom
