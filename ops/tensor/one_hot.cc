// one_hot: out[..., j] = on_value where j == int(indices[...]), else off_value; indices
// outside [0, depth) give a row of off_value. Not differentiable (zero gradient).
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/gather_math.h"

namespace loom {
namespace {

using tensor::OneHotParam;  // gather_math.h (shared with gathers.cu)
const auto kOneHotSchema =
    ParamSchema<OneHotParam>()
        .required("depth", &OneHotParam::depth, "Length of the one-hot dimension.")
        .optional("on_value", &OneHotParam::on_value, 1.0, "Value at the index.")
        .optional("off_value", &OneHotParam::off_value, 0.0, "Value elsewhere.")
        .choice("dtype", &OneHotParam::dtype,
                {"float32", "float64", "float16", "uint8", "int32", "int8", "int64"}, "float32",
                "Data type of the output.")
        .check([](OneHotParam& p) {
          if (p.depth < 1) throw ParamError("depth must be positive");
        });

void infer_one_hot(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  auto d = in[0].dims();
  d.push_back(a.param<OneHotParam>().depth);
  merge_shape(out[0], Shape(std::move(d)), "output 0");
}

void infer_one_hot_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  if (in[0] == DType::kUnknown) in[0] = DType::kFloat32;  // indices: float32 by default
  merge_type(out[0], dtype_from_string(a.param<OneHotParam>().dtype), "output 0");
}

class OneHotKernel final : public Kernel {
 public:
  // Indices of any dtype (read as float), output in the dtype parameter.
  explicit OneHotKernel(const KernelArgs& a)
      : p_(a.attrs.param<OneHotParam>()), what_(tensor::node_label(a)) {
    tensor::dispatch_numeric(a.in_types[0], [](auto) {}, what_);
    tensor::dispatch_numeric(a.out_types[0], [](auto) {}, what_);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const int64_t n = in[0].size(), depth = p_.depth;
    std::vector<float> idx(static_cast<size_t>(n));
    tensor::dispatch_numeric(in[0].dtype(), [&](auto tag) {
      using I = typename decltype(tag)::type;
      const I* p = in[0].cdata<I>();
      for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = static_cast<float>(convert_value<double>(p[i]));
    }, what_);
    tensor::dispatch_numeric(out[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* y = out[0].data<T>();
      const T on = convert_value<T>(p_.on_value), off = convert_value<T>(p_.off_value);
      for (int64_t i = 0; i < n; ++i) {
        // MXNet truncates the index toward zero (gather_math.h).
        const int64_t hot = tensor::one_hot_position(idx[static_cast<size_t>(i)], depth);
        T* row = y + i * depth;
        for (int64_t j = 0; j < depth; ++j) tensor::store_t<T>(row + j, req[0], j == hot ? on : off);
      }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray>, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] != Req::kNull) tensor::fill_req(ig[0], req[0], 0.f);
  }

 private:
  OneHotParam p_;
  std::string what_;
};

LOOM_REGISTER_OP("one_hot")
    .describe("One-hot encodes integer indices along a new last axis of length depth.")
    .params(kOneHotSchema)
    .inputs({"indices"})
    .shape_fn(infer_one_hot)
    .type_fn(infer_one_hot_type)
    .deps(GradDeps{.out_grad = false, .in_data = false, .out_data = false})
    .zero_grad()
    .cpu<OneHotKernel>()
    .sample({.attrs = {{"depth", "4"}}, .in_shapes = {{5}}, .in_kinds = {"index:4"}, .check_grad = false})
    // Indices up to 6 with depth 3: out-of-range rows are all off_value.
    .sample({.attrs = {{"depth", "3"}, {"on_value", "2.5"}, {"off_value", "-1"}},
             .in_shapes = {{2, 3}},
             .in_kinds = {"index:6"},
             .check_grad = false});

}  // namespace
}  // namespace loom
