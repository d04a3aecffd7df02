// where(condition, x, y): x where condition is non-zero, else y. condition has x's shape,
// or is 1-D with one entry per row (x.shape[0]).
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

void infer_where(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  // As MXNet: nothing is decided until the condition's shape is fully known (it selects
  // between the same-shape and the per-row form).
  if (!in[0].known()) return;
  Shape s;
  merge_shape(s, in[1], input_label(a, 1));
  merge_shape(s, in[2], input_label(a, 2));
  merge_shape(s, out[0], "output 0");
  in[1] = in[2] = out[0] = s;
  if (s.ndim() == 0 || in[0].ndim() == 0) {
    if (in[0].ndim() == 0) in[0] = s;  // assume the same-shape form
    return;
  }
  const Shape& c = in[0];
  bool rows = c.ndim() == 1 && s.ndim() > 1 && c[0] == s[0];
  if (!rows && c != s)
    throw ShapeError(input_label(a, 0) + " has shape " + c.str() + "; expected " + s.str() +
                     " (the shape of x) or (" + std::to_string(s[0]) + ",)");
}

/// x, y and the output share a dtype; the condition may have any dtype (as MXNet).
void infer_where_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  DType t = DType::kUnknown;
  merge_type(t, in[1], input_label(a, 1));
  merge_type(t, in[2], input_label(a, 2));
  merge_type(t, out[0], "output 0");
  if (t == DType::kUnknown) return;
  in[1] = in[2] = out[0] = t;
  if (in[0] == DType::kUnknown) in[0] = t;
}

/// Calls fn(cond_is_true) with a reader of the condition as bool (non-zero), for any dtype.
template <class Fn>
void with_condition(const NDArray& c, const std::string& what, Fn fn) {
  dispatch_dtype(c.dtype(), [&](auto tag) {
    using C = typename decltype(tag)::type;
    const C* p = c.data<C>();
    fn([p](int64_t i) { return tensor::to_c(p[i]) != compute_t<C>(0); });
  }, what);
}

class WhereKernel final : public Kernel {
 public:
  explicit WhereKernel(const KernelArgs& a) : what_(tensor::node_label(a)) {
    t_ = a.in_types[1];
    if (a.in_types[2] != t_ || a.out_types[0] != t_)
      throw Error(what_ + ": x, y and the output must share a dtype");
    dispatch_dtype(t_, [](auto) {}, what_);
    dispatch_dtype(a.in_types[0], [](auto) {}, what_);
    n_ = a.in_shapes[1].numel();
    // Row form: condition entry i / row_ selects for element i.
    row_ = a.in_shapes[0] == a.in_shapes[1] ? 1 : n_ / a.in_shapes[1][0];
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const int64_t row = row_;
    with_condition(in[0], what_, [&](auto cond) {
      dispatch_dtype(t_, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T *x = in[1].data<T>(), *y = in[2].data<T>();
        tensor::write_t<T>(out[0].data<T>(), req[0], n_,
                           [=](int64_t i) { return cond(i / row) ? x[i] : y[i]; });
      }, what_);
    });
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    const int64_t row = row_;
    // The condition is piecewise constant: its gradient is zero.
    if (req[0] != Req::kNull) tensor::fill_req(ig[0], req[0], 0.f);
    if (req[1] == Req::kNull && req[2] == Req::kNull) return;
    with_condition(in[0], what_, [&](auto cond) {
      tensor::dispatch_float(t_, [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* g = og[0].data<T>();
        const T zero = convert_value<T>(0);
        if (req[1] != Req::kNull)
          tensor::write_t<T>(ig[1].data<T>(), req[1], n_,
                             [=](int64_t i) { return cond(i / row) ? g[i] : zero; });
        if (req[2] != Req::kNull)
          tensor::write_t<T>(ig[2].data<T>(), req[2], n_,
                             [=](int64_t i) { return cond(i / row) ? zero : g[i]; });
      }, what_);
    });
  }

 private:
  std::string what_;
  DType t_ = DType::kFloat32;
  int64_t n_ = 0, row_ = 1;
};

LOOM_REGISTER_OP("where")
    .describe("Picks x where condition is non-zero and y elsewhere.")
    .inputs({"condition", "x", "y"})
    .shape_fn(infer_where)
    .type_fn(infer_where_type)
    .deps(GradDeps{true, true, false})
    .no_grad({0})
    .cpu<WhereKernel>()
    .sample({.attrs = {}, .in_shapes = {{2, 3}, {2, 3}, {2, 3}}, .in_kinds = {"label:2"}})
    .sample({.attrs = {}, .in_shapes = {{3}, {3, 2}, {3, 2}}, .in_kinds = {"label:2"}});

}  // namespace
}  // namespace loom
