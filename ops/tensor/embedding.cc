// Embedding (spec 6.17): out[..., :] = weight[clip(int(data[...]), 0, input_dim - 1), :]
// (the index rule is embedding_math.h's, which the CUDA kernel of embedding.cu uses too).
// The indices get no gradient; the weight gradient accumulates the rows of the output
// gradient at each looked-up index.
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/embedding_math.h"
#include "ops/tensor/index_util.h"

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

// Indices of any numeric dtype; weight and output of the `dtype` parameter's (the forward is
// a row copy, exact in every dtype; the weight gradient needs a float dtype).
class EmbeddingKernel final : public Kernel {
 public:
  explicit EmbeddingKernel(const KernelArgs& a)
      : rows_(a.attrs.param<EmbeddingParam>().input_dim),
        dim_(a.attrs.param<EmbeddingParam>().output_dim),
        n_(a.in_shapes[0].numel()),
        it_(a.in_types[0]),
        wt_(a.in_types[1]),
        what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const std::vector<int64_t> rows = row_indices(in[0]);
    tensor::dispatch_numeric(wt_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* w = in[1].cdata<T>();
      T* y = out[0].data<T>();
      const bool add = req[0] == Req::kAdd;
#pragma omp parallel for schedule(static) if (n_ * dim_ >= tensor::kParallelMin)
      for (int64_t i = 0; i < n_; ++i) {
        const T* row = w + rows[static_cast<size_t>(i)] * dim_;
        T* dst = y + i * dim_;
        for (int64_t j = 0; j < dim_; ++j) dst[j] = add ? tensor::add_value<T>(dst[j], row[j]) : row[j];
      }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[1] == Req::kNull) return;
    const std::vector<int64_t> rows = row_indices(in[0]);
    tensor::dispatch_float(wt_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      // Summed in the compute type, stored once (float16 rounds once per element).
      std::vector<C> acc(static_cast<size_t>(rows_ * dim_), C(0));
      const T* g = og[0].cdata<T>();
      for (int64_t i = 0; i < n_; ++i) {  // serial: repeated indices add into one row
        C* dst = acc.data() + rows[static_cast<size_t>(i)] * dim_;
        for (int64_t j = 0; j < dim_; ++j) dst[j] += static_cast<C>(g[i * dim_ + j]);
      }
      T* dw = ig[1].data<T>();
      const bool add = req[1] == Req::kAdd;
      for (size_t k = 0; k < acc.size(); ++k)
        dw[k] = T(add ? static_cast<C>(dw[k]) + acc[k] : acc[k]);
    }, what_);
  }

 private:
  // MXNet truncates the index toward zero and clips it into [0, input_dim).
  std::vector<int64_t> row_indices(const NDArray& idx) const {
    std::vector<int64_t> r(static_cast<size_t>(n_));
    tensor::dispatch_numeric(it_, [&](auto tag) {
      using I = typename decltype(tag)::type;
      const I* p = idx.cdata<I>();
      for (int64_t i = 0; i < n_; ++i) {
        r[static_cast<size_t>(i)] = tensor::embedding_row(static_cast<double>(p[i]), rows_);
      }
    }, what_);
    return r;
  }
  int64_t rows_, dim_, n_;
  DType it_, wt_;
  std::string what_;
};

LOOM_CPU_DTYPES("Embedding",
                {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kUint8, DType::kInt8,
                 DType::kInt32, DType::kInt64},
                {.any_inputs = {0}});

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
