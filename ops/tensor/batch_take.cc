// batch_take(a, indices): out[i] = a[i, indices[i]] for a 2-D a of shape (N, M); indices are
// truncated to integers, clipped to [0, M) and give the output's shape (MXNet 1.9.1). MXNet
// registers no gradient; Loom's scatters dy into the picked elements.
#include <algorithm>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/gather_math.h"

namespace loom {
namespace {

void infer_batch_take(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[1].ndim() != 0)
    merge_shape(out[0], in[1], "output 0");
  else if (out[0].ndim() != 0)
    merge_shape(in[1], out[0], input_label(a, 1));
  if (in[0].ndim() == 0 || out[0].ndim() == 0) return;
  // MXNet accepts more dimensions but then checks and indexes with different row sizes.
  if (in[0].ndim() != 2)
    throw ShapeError(input_label(a, 0) + ": batch_take needs a 2-D array, got " + in[0].str());
  if (in[0][0] != out[0].numel())
    throw ShapeError(input_label(a, 1) + ": expected " + std::to_string(in[0][0]) +
                     " indices (one per row of " + in[0].str() + "), got shape " + in[1].str());
}

void infer_batch_take_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  if (in[0] != DType::kUnknown) merge_type(out[0], in[0], "output 0");
  if (out[0] != DType::kUnknown) merge_type(in[0], out[0], input_label(a, 0));
  if (in[1] == DType::kUnknown) in[1] = DType::kFloat32;  // as take and pick; MXNet uses int32
}

class BatchTakeKernel final : public Kernel {
 public:
  explicit BatchTakeKernel(const KernelArgs& a)
      : n_(a.in_shapes[0][0]),
        m_(a.in_shapes[0].numel() / std::max<int64_t>(1, a.in_shapes[0][0])),
        t_(a.in_types[0]),
        it_(a.in_types[1]),
        what_(tensor::node_label(a)) {
    if (a.out_types[0] != t_)
      throw Error(what_ + ": output dtype " + dtype_name(a.out_types[0]) + " differs from a's " +
                  dtype_name(t_));
    tensor::dispatch_numeric(
        t_, [](auto) {}, what_);
    tensor::dispatch_numeric(
        it_, [](auto) {}, what_ + " (indices)");
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const auto col = columns(in[1]);
    tensor::dispatch_numeric(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* x = in[0].cdata<T>();
          tensor::write_t<T>(out[0].data<T>(), req[0], n_,
                             [&](int64_t i) { return x[i * m_ + col[static_cast<size_t>(i)]]; });
        },
        what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[1] != Req::kNull) tensor::fill_req(ig[1], req[1], 0.f);
    if (req[0] == Req::kNull) return;
    const auto col = columns(in[1]);
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          if (req[0] != Req::kAdd) tensor::fill_req(ig[0], req[0], 0.f);
          const T* g = og[0].cdata<T>();
          T* dx = ig[0].data<T>();
          for (int64_t i = 0; i < n_; ++i) {
            T* p = dx + i * m_ + col[static_cast<size_t>(i)];
            *p = tensor::add_value<T>(*p, g[i]);
          }
        },
        what_);
  }

 private:
  // The clipped column of each row.
  std::vector<int64_t> columns(const NDArray& idx) const {
    std::vector<int64_t> c(static_cast<size_t>(n_));
    tensor::dispatch_numeric(
        it_,
        [&](auto tag) {
          using I = typename decltype(tag)::type;
          const I* p = idx.cdata<I>();
          for (int64_t i = 0; i < n_; ++i) {
            const double v = static_cast<double>(tensor::to_c(p[i]));
            c[static_cast<size_t>(i)] = tensor::batch_take_column(v, m_);  // gather_math.h
          }
        },
        what_);
    return c;
  }
  int64_t n_, m_;
  DType t_, it_;
  std::string what_;
};

LOOM_REGISTER_OP("batch_take")
    .describe("Takes one element per row: out[i] = a[i, indices[i]] (indices clipped).")
    .inputs({"a", "indices"})
    .shape_fn(infer_batch_take)
    .type_fn(infer_batch_take_type)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .no_grad({1})
    .cpu<BatchTakeKernel>()
    .sample({.attrs = {}, .in_shapes = {{4, 3}, {4}}, .in_kinds = {"normal", "index:5"}})
    .sample({.attrs = {}, .in_shapes = {{3, 5}, {3}}, .in_kinds = {"normal", "index:7"}});

}  // namespace
}  // namespace loom
