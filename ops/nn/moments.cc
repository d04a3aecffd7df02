// moments(axes, keepdims): the mean and the (population) variance over the given axes, as two
// outputs (MXNet 1.9.1, which refuses empty axes). Gradient:
//   dx = dmean / n + dvar * 2 (x - mean) / n,   n the number of reduced elements.
#include <optional>

#include "ops/infer.h"
#include "ops/nn/moments_math.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

struct MomentsParam {
  std::optional<Shape> axes;
  bool keepdims;
};
const auto kMomentsSchema =
    ParamSchema<MomentsParam>()
        .optional("axes", &MomentsParam::axes, std::optional<Shape>(),
                  "Axes along which to compute mean and variance (required, non-empty).")
        .optional("keepdims", &MomentsParam::keepdims, false, "Keep the reduced axes with size 1.");

// Which axes are reduced, and the output shape.
std::vector<bool> reduced_axes(const OpAttrs& a, const Shape& s, Shape* out) {
  const auto& p = a.param<MomentsParam>();
  const std::string what = "node '" + a.name + "' (op moments): axes";
  if (!p.axes || p.axes->ndim() == 0)
    throw ParamError(what + " must list at least one axis (pass every axis for global moments)");
  std::vector<bool> red(static_cast<size_t>(s.ndim()), false);
  for (int64_t ax : p.axes->dims()) {
    const int k = tensor::norm_axis(ax, s.ndim(), what);
    if (red[static_cast<size_t>(k)])
      throw ParamError(what + ": axis " + std::to_string(ax) + " is listed twice");
    red[static_cast<size_t>(k)] = true;
  }
  std::vector<int64_t> o;
  for (int d = 0; d < s.ndim(); ++d) {
    if (!red[static_cast<size_t>(d)])
      o.push_back(s[d]);
    else if (p.keepdims)
      o.push_back(1);
  }
  if (o.empty()) o.push_back(1);
  *out = Shape(std::move(o));
  return red;
}

class MomentsKernel final : public Kernel {
 public:
  explicit MomentsKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kFloatDTypes)), what_(tensor::node_label(a)) {
    view_ = nn::moments_view_of(a);
    n_out_ = view_.n_out;
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* x = in[0].cdata<T>();
          std::vector<double> mean, var;
          stats(x, mean, var);
          tensor::write_t<T>(out[0].data<T>(), req[0], n_out_, [&](int64_t o) {
            return tensor::from_c<T>(static_cast<compute_t<T>>(mean[static_cast<size_t>(o)]));
          });
          tensor::write_t<T>(out[1].data<T>(), req[1], n_out_, [&](int64_t o) {
            return tensor::from_c<T>(static_cast<compute_t<T>>(var[static_cast<size_t>(o)]));
          });
        },
        what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          const T* x = in[0].cdata<T>();
          const auto gm = tensor::reader<T>(og[0]);
          const auto gv = tensor::reader<T>(og[1]);
          std::vector<double> mean, var;
          stats(x, mean, var);
          tensor::write_t<T>(ig[0].data<T>(), req[0], ig[0].size(), [&](int64_t i) {
            const int64_t o = view_.slot(i);
            const double d =
                view_.grad(static_cast<double>(tensor::to_c(x[i])), mean[static_cast<size_t>(o)],
                           static_cast<double>(gm[o]), static_cast<double>(gv[o]));
            return tensor::from_c<T>(static_cast<compute_t<T>>(d));
          });
        },
        what_);
  }

 private:
  // Every output's mean and variance (moments_math.h, the GPU kernel's per-output code).
  template <class T>
  void stats(const T* x, std::vector<double>& mean, std::vector<double>& var) const {
    mean.assign(static_cast<size_t>(n_out_), 0.0);
    var.assign(static_cast<size_t>(n_out_), 0.0);
    for (int64_t o = 0; o < n_out_; ++o)
      view_.stats(x, o, mean[static_cast<size_t>(o)], var[static_cast<size_t>(o)]);
  }
  nn::MomentsView view_;
  int64_t n_out_ = 1;
  DType t_;
  std::string what_;
};

LOOM_REGISTER_OP("moments")
    .describe("Mean and variance of the input over the given axes.")
    .params(kMomentsSchema)
    .outputs({"output0", "output1"})
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      if (in[0].ndim() == 0) return;
      Shape o;
      reduced_axes(a, in[0], &o);
      merge_shape(out[0], o, "output 0");
      merge_shape(out[1], o, "output 1");
    })
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<MomentsKernel>()
    .sample({.attrs = {{"axes", "(1,)"}}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"axes", "(0, 2)"}, {"keepdims", "True"}}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"axes", "(0, 1)"}}, .in_shapes = {{3, 5}}});

}  // namespace

nn::MomentsView nn::moments_view_of(const KernelArgs& a) {
  Shape o;
  const auto red = reduced_axes(a.attrs, a.in_shapes[0], &o);
  return moments_view(a.in_shapes[0], red, tensor::node_label(a));
}

}  // namespace loom
