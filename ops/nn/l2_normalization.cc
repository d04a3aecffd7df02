// L2Normalization: y = x / sqrt(sum(x^2) + eps), the sum taken per sample (instance: over
// every axis but 0), per sample and position (channel: over axis 1) or per sample and
// channel (spatial: over axes 2...). dx = (g - y * sum(g * y)) / norm over the same groups.
#include <cmath>

#include "ops/infer.h"
#include "ops/nn/l2_normalization_math.h"
#include "ops/nn/nn_dtype.h"
#include "ops/tensor/tensor_util.h"

namespace loom {
namespace {

using nn::L2NormParam;  // l2_normalization_math.h (shared with norms.cu)
const auto kL2NormSchema =
    ParamSchema<L2NormParam>()
        .optional("eps", &L2NormParam::eps, 1e-10f, "Added to the sum of squares.")
        .choice("mode", &L2NormParam::mode, {"instance", "channel", "spatial"}, "instance",
                "instance: per sample; channel: across channels per position; spatial: "
                "across positions per channel.");

using Groups = nn::L2Groups;
inline Groups groups_of(const std::string& mode, const Shape& s) {
  return nn::l2_groups(mode, s);
}

void infer_l2norm(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  infer_shape_same(a, in, out);
  const Shape& s = in[0].ndim() ? in[0] : out[0];
  if (s.ndim() == 0) return;
  const std::string& mode = a.param<L2NormParam>().mode;
  if (s.ndim() < (mode == "instance" ? 2 : 3))
    throw ShapeError("node '" + a.name + "' (op L2Normalization): mode " + mode + " needs " +
                     (mode == "instance" ? "2" : "3") + " or more dimensions, got " + s.str());
}

// float32, float64 and float16, sums in double, values in compute_t<T>.
class L2NormKernel final : public Kernel {
 public:
  explicit L2NormKernel(const KernelArgs& a)
      : eps_(a.attrs.param<L2NormParam>().eps),
        g_(groups_of(a.attrs.param<L2NormParam>().mode, a.in_shapes[0])),
        t_(a.in_types[0]),
        what_("node '" + a.attrs.name + "' (op L2Normalization)") {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    nn::dispatch_floats(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* x = in[0].cdata<T>();
      T* y = out[0].data<T>();
      const bool add = req[0] == Req::kAdd;
      each_group([&](int64_t base, int64_t stride) {
        nn::l2norm_group_forward(x, y, base, stride, g_.reduced, eps_, add);
      });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    nn::dispatch_floats(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *x = in[0].cdata<T>(), *g = og[0].cdata<T>();
      T* dx = ig[0].data<T>();
      const bool add = req[0] == Req::kAdd;
      each_group([&](int64_t base, int64_t stride) {
        nn::l2norm_group_backward(x, g, dx, base, stride, g_.reduced, eps_, add);
      });
    }, what_);
  }

 private:
  // fn(first element, stride between the group's elements) for every group, in parallel.
  template <class Fn>
  void each_group(Fn fn) const {
    const int64_t n = g_.outer * g_.inner;
#pragma omp parallel for schedule(static) if (n * g_.reduced >= tensor::kParallelMin && n > 1)
    for (int64_t k = 0; k < n; ++k) {
      const int64_t o = k / g_.inner, i = k % g_.inner;
      fn(o * g_.reduced * g_.inner + i, g_.inner);
    }
  }
  double eps_;
  Groups g_;
  DType t_;
  std::string what_;
};

LOOM_CPU_DTYPES("L2Normalization", kDTypePolicyFloats);

LOOM_REGISTER_OP("L2Normalization")
    .describe("Divides the input by its L2 norm per sample, channel or spatial group.")
    .params(kL2NormSchema)
    .inputs({"data"})
    .shape_fn(infer_l2norm)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<L2NormKernel>()
    .sample({.attrs = {}, .in_shapes = {{3, 5}}})
    .sample({.attrs = {{"mode", "instance"}, {"eps", "0.5"}}, .in_shapes = {{2, 3, 2, 2}}})
    .sample({.attrs = {{"mode", "channel"}}, .in_shapes = {{2, 3, 2, 2}}})
    .sample({.attrs = {{"mode", "channel"}}, .in_shapes = {{2, 4, 3}}})
    .sample({.attrs = {{"mode", "spatial"}}, .in_shapes = {{2, 3, 2, 3}}});

}  // namespace
}  // namespace loom
