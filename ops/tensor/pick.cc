// pick: out[a..., b...] = data[a..., k, b...] with k = int(index[a..., b...]) along `axis`,
// clipped into [0, n) (mode clip) or taken modulo n (wrap). The gradient scatters the output
// gradient back to the picked elements; the index gets none.
#include "ops/infer.h"
#include "ops/tensor/gather_math.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

using tensor::PickParam;  // gather_math.h (shared with gathers.cu)
const auto kPickSchema =
    ParamSchema<PickParam>()
        .optional("axis", &PickParam::axis, std::optional<int64_t>(-1),
                  "The axis to pick along (None: the flattened array).")
        .optional("keepdims", &PickParam::keepdims, false, "Keep the picked axis with size 1.")
        .choice("mode", &PickParam::mode, {"clip", "wrap"}, "clip",
                "Out-of-range indices: clip to the ends, or wrap around.");

using tensor::Layout3;
Layout3 layout_of(const PickParam& p, const Shape& s, const std::string& what) {
  return tensor::pick_layout(p, s, what);
}

void infer_pick(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  const auto& p = a.param<PickParam>();
  Shape idx;
  if (!p.axis) {
    idx = p.keepdims ? Shape(std::vector<int64_t>(static_cast<size_t>(in[0].ndim()), 1)) : Shape{1};
  } else {
    int ax = tensor::norm_axis(*p.axis, in[0].ndim(), "node '" + a.name + "' (op pick): axis");
    auto d = in[0].dims();
    if (p.keepdims)
      d[static_cast<size_t>(ax)] = 1;
    else
      d.erase(d.begin() + ax);
    if (d.empty()) d.push_back(1);
    idx = Shape(std::move(d));
  }
  merge_shape(in[1], idx, input_label(a, 1));
  merge_shape(out[0], idx, "output 0");
}

void infer_pick_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  if (in[0] != DType::kUnknown) merge_type(out[0], in[0], "output 0");
  if (out[0] != DType::kUnknown) merge_type(in[0], out[0], input_label(a, 0));
  if (in[1] == DType::kUnknown) in[1] = DType::kFloat32;  // indices: float32 by default
}

class PickKernel final : public Kernel {
 public:
  explicit PickKernel(const KernelArgs& a)
      : wrap_(a.attrs.param<PickParam>().mode == "wrap"),
        l_(layout_of(a.attrs.param<PickParam>(), a.in_shapes[0],
                     "node '" + a.attrs.name + "' (op pick): axis")),
        t_(a.in_types[0]),
        what_(tensor::node_label(a)) {
    if (a.out_types[0] != t_)
      throw Error(what_ + ": output dtype " + dtype_name(a.out_types[0]) +
                  " differs from input dtype " + dtype_name(t_));
    tensor::dispatch_numeric(t_, [](auto) {}, what_);
    tensor::dispatch_numeric(a.in_types[1], [](auto) {}, what_);
  }
  // Data of any numeric dtype; indices of any dtype, read as float (MXNet).
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const std::vector<int64_t> rows = read_rows(in[1]);
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].cdata<T>();
      T* y = out[0].data<T>();
      for (int64_t o = 0; o < l_.outer; ++o)
        for (int64_t i = 0; i < l_.inner; ++i) {
          const int64_t k = o * l_.inner + i;
          tensor::store_t<T>(y + k, req[0], x[(o * l_.n + rows[static_cast<size_t>(k)]) * l_.inner + i]);
        }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    const std::vector<int64_t> rows = read_rows(in[1]);
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (req[0] != Req::kAdd) tensor::fill_req(ig[0], req[0], 0.f);
      const T* g = og[0].cdata<T>();
      T* dx = ig[0].data<T>();
      for (int64_t o = 0; o < l_.outer; ++o)
        for (int64_t i = 0; i < l_.inner; ++i) {
          const int64_t k = o * l_.inner + i;
          T* d = dx + (o * l_.n + rows[static_cast<size_t>(k)]) * l_.inner + i;
          *d = tensor::add_value<T>(*d, g[k]);
        }
    }, what_);
  }

 private:
  std::vector<int64_t> read_rows(const NDArray& idx) const {
    std::vector<int64_t> rows(static_cast<size_t>(idx.size()));
    tensor::dispatch_numeric(idx.dtype(), [&](auto tag) {
      using I = typename decltype(tag)::type;
      const I* p = idx.cdata<I>();
      for (size_t j = 0; j < rows.size(); ++j)
        rows[j] = which(static_cast<float>(convert_value<double>(p[j])));
    }, what_);
    return rows;
  }
  int64_t which(float v) const { return tensor::index_row(v, l_.n, wrap_); }
  bool wrap_;
  Layout3 l_;
  DType t_;
  std::string what_;
};

LOOM_REGISTER_OP("pick")
    .describe("Picks one element per position along an axis, at the given indices.")
    .params(kPickSchema)
    .inputs({"data", "index"})
    .shape_fn(infer_pick)
    .type_fn(infer_pick_type)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .no_grad({1})
    .cpu<PickKernel>()
    .sample({.attrs = {}, .in_shapes = {{3, 4}, {3}}, .in_kinds = {"normal", "index:4"}})
    .sample({.attrs = {{"axis", "1"}, {"keepdims", "True"}},
             .in_shapes = {{2, 3, 2}, {2, 1, 2}},
             .in_kinds = {"normal", "index:3"}})
    .sample({.attrs = {{"axis", "0"}, {"mode", "wrap"}},
             .in_shapes = {{3, 4}, {4}},
             .in_kinds = {"normal", "index:8"}})
    // Clipped indices past the end pick the last element.
    .sample({.attrs = {{"axis", "-1"}}, .in_shapes = {{2, 3}, {2}}, .in_kinds = {"normal", "index:6"}});

}  // namespace
}  // namespace loom
