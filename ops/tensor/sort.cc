// sort(axis, is_ascend) and argsort(axis, is_ascend, dtype): each lane along an axis (the
// flattened array with axis None) in order, stably, as values or as float32 positions.
// sort's gradient goes back to each value's original position; argsort has none.
#include "ops/infer.h"
#include "ops/tensor/sort_util.h"

namespace loom {
namespace {

struct SortParam {
  std::optional<int64_t> axis;
  bool is_ascend;
  std::string dtype;
};
const auto kSortSchema =
    ParamSchema<SortParam>()
        .optional("axis", &SortParam::axis, std::optional<int64_t>(-1), "Axis (None: the flattened array).")
        .optional("is_ascend", &SortParam::is_ascend, true, "Ascending (else descending) order.")
        .choice("dtype", &SortParam::dtype, {"float32", "float16", "float64", "int32", "int64", "uint8"},
                "float32", "Data type of argsort's indices (float32 here).");

void infer_sort(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].known()) return;
  for (size_t i = 0; i < out.size(); ++i)
    merge_shape(out[i], a.param<SortParam>().axis ? in[0] : Shape{in[0].numel()}, "output " + std::to_string(i));
}

template <bool kIndices>
class SortKernel final : public Kernel {
 public:
  explicit SortKernel(const KernelArgs& a)
      : p_(a.attrs.param<SortParam>()), l_(a.in_shapes[0], p_.axis, "axis") {
    tensor::check_f32(a);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const float* x = in[0].cdata<float>();
    float* y = out[0].data<float>();
    // sort's hidden second output: the positions (MXNet's sort is topk returning values).
    float* pos = out.size() > 1 && req[1] != Req::kNull ? out[1].data<float>() : nullptr;
    for (int64_t o = 0; o < l_.outer; ++o)
      for (int64_t i = 0; i < l_.inner; ++i) {
        auto order = l_.order(x, o, i, p_.is_ascend);
        for (int64_t j = 0; j < l_.n; ++j) {
          const int64_t src = order[static_cast<size_t>(j)];
          tensor::store(y + l_.at(o, i, j), req[0], kIndices ? static_cast<float>(src) : x[l_.at(o, i, src)]);
          if (pos) tensor::store(pos + l_.at(o, i, j), req[1], static_cast<float>(src));
        }
      }
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    if (req[0] != Req::kAdd) tensor::fill_req(ig[0], req[0], 0.f);
    if (kIndices) return;
    const float *x = in[0].cdata<float>(), *g = og[0].cdata<float>();
    float* dx = ig[0].data<float>();
    for (int64_t o = 0; o < l_.outer; ++o)
      for (int64_t i = 0; i < l_.inner; ++i) {
        auto order = l_.order(x, o, i, p_.is_ascend);
        for (int64_t j = 0; j < l_.n; ++j) dx[l_.at(o, i, order[static_cast<size_t>(j)])] += g[l_.at(o, i, j)];
      }
  }

 private:
  SortParam p_;
  tensor::Lanes l_;
};

LOOM_REGISTER_OP("sort")
    .describe("Sorts each lane along an axis (stable).")
    .params(kSortSchema)
    .outputs({"output0", "output1"})  // values, then the hidden positions (MXNet's names)
    .visible_outputs([](const OpAttrs&) { return 1; })
    .shape_fn(infer_sort)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<SortKernel<false>>()
    .sample({.attrs = {}, .in_shapes = {{2, 5}}})
    .sample({.attrs = {{"axis", "0"}, {"is_ascend", "False"}}, .in_shapes = {{4, 3}}})
    .sample({.attrs = {{"axis", "None"}}, .in_shapes = {{2, 3}}});

LOOM_REGISTER_OP("argsort")
    .describe("Positions that sort each lane along an axis (stable), as float32.")
    .params(kSortSchema)
    .shape_fn(infer_sort)
    .deps(GradDeps{.out_grad = false, .in_data = false, .out_data = false})
    .zero_grad()
    .cpu<SortKernel<true>>()
    .sample({.attrs = {}, .in_shapes = {{2, 5}}, .check_grad = false})
    .sample({.attrs = {{"axis", "0"}, {"is_ascend", "False"}}, .in_shapes = {{4, 3}}, .check_grad = false});

}  // namespace
}  // namespace loom
