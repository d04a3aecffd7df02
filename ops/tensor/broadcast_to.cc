// broadcast_to(shape) / broadcast_like(lhs, rhs) / broadcast_axis(axis, size): copies the
// input along its size-1 axes (same rank, as MXNet requires). The gradient sums the output
// gradient back over those axes; broadcast_like's rhs only lends its shape (zero gradient).
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

// The output shape of `in` broadcast to `target`, where a 0 in target keeps in's dimension.
Shape broadcast_target(const OpAttrs& a, const Shape& in, const Shape& target) {
  // MXNet requires equal ranks here (unlike NumPy's left padding).
  if (target.ndim() != in.ndim())
    throw ShapeError("node '" + a.name + "' (op " + a.op->name + "): cannot broadcast input 0 " +
                     in.str() + " to " + target.str() + " (different number of dimensions)");
  Shape s = in, out = target;
  for (int d = 0; d < out.ndim(); ++d) {
    if (out[d] == 0) out[d] = s[d];
    if (s[d] != out[d] && s[d] != 1)
      throw ShapeError("node '" + a.name + "' (op " + a.op->name + "): cannot broadcast input 0 " +
                       in.str() + " to " + target.str() + " (dimension " + std::to_string(d) +
                       " is " + std::to_string(s[d]) + ", not 1)");
  }
  return out;
}

class BroadcastToKernel final : public Kernel {
 public:
  explicit BroadcastToKernel(const KernelArgs& a)
      : plan_(tensor::make_bcast_plan(a.in_shapes[0], a.in_shapes[0], a.out_shapes[0])),
        red_(tensor::make_reduce_plan(a.out_shapes[0],
                                      tensor::pad_shape(a.in_shapes[0], a.out_shapes[0].ndim()))),
        n_in_(a.in_shapes.size()),
        t_(a.in_types[0]),
        what_(tensor::node_label(a)) {
    // broadcast_like's rhs only lends its shape: its dtype may differ.
    if (a.out_types[0] != t_)
      throw Error(what_ + ": output dtype " + dtype_name(a.out_types[0]) +
                  " differs from input dtype " + dtype_name(t_));
    dispatch_dtype(t_, [](auto) {}, what_);
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    dispatch_dtype(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].cdata<T>();
      T* y = out[0].data<T>();
      if (req[0] == Req::kAdd)
        tensor::bcast_for(plan_, [=](int64_t o, int64_t i, int64_t) {
          y[o] = tensor::add_value<T>(y[o], x[i]);
        });
      else
        tensor::bcast_for(plan_, [=](int64_t o, int64_t i, int64_t) { y[o] = x[i]; });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] != Req::kNull)
      tensor::dispatch_float(t_, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, float>)
          tensor::reduce_sum(red_, og[0].cdata<float>(), ig[0].data<float>(), req[0]);
        else
          tensor::reduce_t(
              red_, og[0].cdata<T>(), ig[0].data<T>(), req[0], 0.0,
              [](double acc, T v) { return acc + static_cast<double>(v); },
              [](double acc) { return convert_value<T>(acc); });
      }, what_);
    if (n_in_ > 1 && req[1] != Req::kNull) tensor::fill_req(ig[1], req[1], 0.f);
  }

 private:
  tensor::BcastPlan plan_;
  tensor::ReducePlan red_;
  size_t n_in_;
  DType t_;
  std::string what_;
};

// ---- broadcast_to ----
struct BroadcastToParam {
  Shape shape;
};
const auto kBroadcastToSchema = ParamSchema<BroadcastToParam>().optional(
    "shape", &BroadcastToParam::shape, Shape(), "Target shape; 0 keeps the input's dimension.");

LOOM_REGISTER_OP("broadcast_to")
    .describe("Broadcasts the input's size-1 axes to a shape of the same rank (0 keeps a dimension).")
    .params(kBroadcastToSchema)
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      if (in[0].ndim() == 0) return;
      merge_shape(out[0], broadcast_target(a, in[0], a.param<BroadcastToParam>().shape), "output 0");
    })
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .cpu<BroadcastToKernel>()
    .sample({.attrs = {{"shape", "(2, 3, 4)"}}, .in_shapes = {{2, 1, 4}}})
    .sample({.attrs = {{"shape", "(0, 3, 5)"}}, .in_shapes = {{2, 1, 1}}})
    .sample({.attrs = {{"shape", "(2, 3)"}}, .in_shapes = {{2, 3}}});

// ---- broadcast_axis ----
struct BroadcastAxisParam {
  Shape axis, size;
};
const auto kBroadcastAxisSchema =
    ParamSchema<BroadcastAxisParam>()
        .optional("axis", &BroadcastAxisParam::axis, Shape(), "Axes to broadcast (size 1 each).")
        .optional("size", &BroadcastAxisParam::size, Shape(), "Target size of each axis.");

LOOM_REGISTER_OP("broadcast_axis")
    .describe("Broadcasts size-1 axes of the input to the given sizes.")
    .alias("broadcast_axes")
    .params(kBroadcastAxisSchema)
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      if (in[0].ndim() == 0) return;
      const auto& p = a.param<BroadcastAxisParam>();
      if (p.axis.ndim() != p.size.ndim())
        throw ShapeError("node '" + a.name + "' (op broadcast_axis): axis " + p.axis.str() +
                         " and size " + p.size.str() + " differ in length");
      Shape o = in[0];
      for (int k = 0; k < p.axis.ndim(); ++k) {
        int ax = tensor::norm_axis(p.axis[k], o.ndim(), "node '" + a.name + "' (op broadcast_axis): axis");
        if (o[ax] != 1)
          throw ShapeError("node '" + a.name + "' (op broadcast_axis): axis " +
                           std::to_string(p.axis[k]) + " of input 0 " + in[0].str() + " is not 1");
        o[ax] = p.size[k];
      }
      merge_shape(out[0], o, "output 0");
    })
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .cpu<BroadcastToKernel>()
    .sample({.attrs = {{"axis", "(0, 2)"}, {"size", "(3, 4)"}}, .in_shapes = {{1, 2, 1}}})
    .sample({.attrs = {{"axis", "-1"}, {"size", "5"}}, .in_shapes = {{3, 1}}});

// ---- broadcast_like ----
// The second input only lends its shape: any dtype (MXNet's *_like ops take an int32 rhs
// with a float lhs); the output has the first input's dtype.
void infer_type_like(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  merge_type(out[0], in[0], "output 0");
  merge_type(in[0], out[0], input_label(a, 0));
}

struct BroadcastLikeParam {
  std::optional<Shape> lhs_axes, rhs_axes;
};
const auto kBroadcastLikeSchema =
    ParamSchema<BroadcastLikeParam>()
        .optional("lhs_axes", &BroadcastLikeParam::lhs_axes, std::optional<Shape>(),
                  "Axes of lhs to broadcast (None: all).")
        .optional("rhs_axes", &BroadcastLikeParam::rhs_axes, std::optional<Shape>(),
                  "The rhs axes giving their sizes (None: all).");

void infer_broadcast_like(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0 || in[1].ndim() == 0) return;
  const auto& p = a.param<BroadcastLikeParam>();
  if (!p.lhs_axes && !p.rhs_axes) {
    merge_shape(out[0], broadcast_target(a, in[0], in[1]), "output 0");
    return;
  }
  if (!p.lhs_axes || !p.rhs_axes || p.lhs_axes->ndim() != p.rhs_axes->ndim() ||
      p.lhs_axes->ndim() == 0)
    throw ShapeError("lhs_axes and rhs_axes must both be given, with the same length, and "
                     "not be empty");
  Shape o = in[0];
  for (int k = 0; k < p.lhs_axes->ndim(); ++k) {
    int l = tensor::norm_axis((*p.lhs_axes)[k], in[0].ndim(), "lhs_axes: axis");
    int r = tensor::norm_axis((*p.rhs_axes)[k], in[1].ndim(), "rhs_axes: axis");
    if (o[l] != 1 && o[l] != in[1][r])
      throw ShapeError("axis " + std::to_string(l) + " of lhs " + in[0].str() + " is not 1");
    o[l] = in[1][r];
  }
  merge_shape(out[0], o, "output 0");
}

LOOM_REGISTER_OP("broadcast_like")
    .describe("Broadcasts lhs to the shape of rhs (or of the given rhs axes).")
    .params(kBroadcastLikeSchema)
    .inputs({"lhs", "rhs"})
    .shape_fn(infer_broadcast_like)
    .type_fn(infer_type_like)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = false})
    .cpu<BroadcastToKernel>()
    .sample({.attrs = {}, .in_shapes = {{1, 3}, {4, 3}}})
    .sample({.attrs = {{"lhs_axes", "(0, 2)"}, {"rhs_axes", "(1, 0)"}}, .in_shapes = {{1, 2, 1}, {5, 3}}});

}  // namespace
}  // namespace loom
