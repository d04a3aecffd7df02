// SoftmaxOutput (alias Softmax): softmax forward, cross-entropy gradient backward (spec 4.1).
// The head gradient is ignored unless `out_grad`; the label never receives a gradient.
#include <cstdio>
#include <mutex>

#include "ops/infer.h"
#include "ops/loss/softmax_output.h"

namespace loom {
namespace {

using loom::loss::SoftmaxOutputParam;

// True when `have` has `want`'s ndim and each of its known dimensions equals `want`'s.
bool compatible(const Shape& have, const Shape& want) {
  if (have.ndim() != want.ndim()) return false;
  for (int i = 0; i < have.ndim(); ++i)
    if (have[i] != 0 && have[i] != want[i]) return false;
  return true;
}

void infer_multi_output_label(const std::string& what, const Shape& d, Shape& l) {
  if (!d.known()) return;
  int64_t n = d[0], m = d.numel() / (d[0] * d[1]);
  Shape flat{n, m};  // (n, m)
  Shape spatial{n};  // (n, d2, d3, ...)
  for (int i = 2; i < d.ndim(); ++i) spatial.push_back(d[i]);
  Shape keepdim = d;  // (n, 1, d2, ...)
  keepdim[1] = 1;
  if (l.ndim() == 0) {
    l = flat;
    return;
  }
  for (const Shape* c : std::initializer_list<const Shape*>{&d, &flat, &spatial, &keepdim}) {
    if (compatible(l, *c)) {
      l = *c;
      return;
    }
  }
  throw ShapeError(what + ": multi_output expects " + flat.str() + ", " + spatial.str() + ", " +
                   keepdim.str() + " or the data shape " + d.str() + ", got " + l.str());
}

void infer_softmax_output_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<SoftmaxOutputParam>();
  Shape& d = in[0];
  Shape& l = in[1];
  merge_shape(d, out[0], "output 0 (output)");
  if (d.ndim() == 0) return;
  if (d.ndim() < 2)
    throw ShapeError(input_label(a, 0) +
                     ": SoftmaxOutput needs data of at least 2 "
                     "dimensions, got " +
                     d.str());
  const std::string what = input_label(a, 1);
  if (p.multi_output) {
    infer_multi_output_label(what, d, l);
  } else if (l.ndim() == d.ndim()) {
    merge_shape(l, d, what + " (soft labels must have the data's shape)");
  } else {
    Shape want(std::vector<int64_t>(d.begin(), d.end() - 1));
    merge_shape(l, want, what);
    // Without preserve_shape the data is viewed as (N, size/N): one class index per row.
    if (!p.preserve_shape && d.known() && l.known() && l.numel() != d[0])
      throw ShapeError(what + ": data " + d.str() + " is viewed as (" + std::to_string(d[0]) +
                       ", size/" + std::to_string(d[0]) + ") and needs " + std::to_string(d[0]) +
                       " labels, got " + l.str() +
                       "; use preserve_shape=True or multi_output=True");
  }
  out[0] = d;
}

void warn_out_grad_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "loom: SoftmaxOutput out_grad=True uses MXNet <= 1.4 semantics (gradient "
                 "times the head gradient); MXNet >= 1.5 multiplies by the output instead\n");
  });
}

class SoftmaxOutputKernel final : public Kernel {
 public:
  explicit SoftmaxOutputKernel(const KernelArgs& a)
      : p_(a.attrs.param<SoftmaxOutputParam>()), v_(loss::softmax_output_view(a)) {
    loss::require_float32(a);
    if (p_.out_grad) warn_out_grad_once();
  }

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const float* x = in[0].data<float>();
    float* y = out[0].data<float>();
    const bool add = req[0] == Req::kAdd;
    const loss::SoftmaxOutputView v = v_;
#pragma omp parallel for if (v.size > loss::kParallelMin)
    for (int64_t g = 0; g < v.groups(); ++g) {
      const int64_t base = v.base(g);
      loss::softmax_strided(x + base, y + base, v.k, v.m, add);
    }
  }

  void backward(const OpContext&, std::span<const NDArray> out_grad,
                std::span<const NDArray> in_data, std::span<const NDArray> out_data,
                std::span<const Req> req, std::span<const NDArray> in_grad) override {
    if (req[0] == Req::kNull) return;
    const bool add = req[0] == Req::kAdd;
    const float* y = out_data[0].data<float>();
    const float* l = in_data[1].data<float>();
    const float* hg = p_.out_grad ? out_grad[0].data<float>() : nullptr;
    float* dx = in_grad[0].data<float>();
    const loss::SoftmaxOutputView v = v_;
    if (v.soft) {  // probability labels: no ignore, normalisation or smoothing
      const float s = p_.grad_scale;
#pragma omp parallel for if (v.size > loss::kParallelMin)
      for (int64_t i = 0; i < v.size; ++i)
        math::assign_req(dx + i, add, loss::soft_label_grad(y[i], l[i], hg ? hg[i] : 1.f, s));
      return;
    }
    const loss::SoftmaxOutputGrad gr(p_, v);
    float scale = gr.scale;
    if (p_.normalization == "valid") {
      int64_t valid = 0;  // counted even when use_ignore is false, as MXNet does
      for (int64_t g = 0; g < v.groups(); ++g) valid += gr.counts(l[g]);
      scale = gr.valid_scale(valid);
    }
#pragma omp parallel for if (v.size > loss::kParallelMin)
    for (int64_t g = 0; g < v.groups(); ++g) gr.group(v, g, y, l[g], hg, dx, scale, add);
  }

 private:
  SoftmaxOutputParam p_;
  loss::SoftmaxOutputView v_;
};

LOOM_REGISTER_OP("SoftmaxOutput")
    .describe(
        "Softmax in forward; in backward the gradient of the cross-entropy loss "
        "(probabilities minus the one-hot label), ignoring the head gradient.")
    .alias("Softmax")
    .params(loss::softmax_output_schema())
    .inputs({"data", "label"})
    .outputs({"output"})
    .shape_fn(infer_softmax_output_shape)
    .deps([](const OpAttrs& a) {
      return GradDeps{a.param<SoftmaxOutputParam>().out_grad, true, true};
    })
    .no_grad({1})
    .inplace_pairs({{0, 0}})
    .cpu<SoftmaxOutputKernel>()
    .sample({.attrs = {},
             .in_shapes = {{4, 5}, {4}},
             .in_kinds = {"normal", "label:5"},
             .check_grad = false})
    .sample({.attrs = {{"normalization", "batch"}, {"grad_scale", "2"}},
             .in_shapes = {{3, 4}, {3}},
             .in_kinds = {"normal", "label:4"},
             .check_grad = false})
    .sample({.attrs = {{"normalization", "valid"}, {"use_ignore", "1"}, {"ignore_label", "0"}},
             .in_shapes = {{6, 3}, {6}},
             .in_kinds = {"normal", "label:3"},
             .check_grad = false})
    .sample({.attrs = {{"multi_output", "true"}},
             .in_shapes = {{2, 3, 2, 2}, {2, 4}},
             .in_kinds = {"normal", "label:3"},
             .check_grad = false})
    .sample({.attrs = {{"preserve_shape", "True"}, {"smooth_alpha", "0.1"}},
             .in_shapes = {{2, 3, 4}, {2, 3}},
             .in_kinds = {"normal", "label:4"},
             .check_grad = false})
    .sample({.attrs = {},
             .in_shapes = {{3, 4}, {3, 4}},
             .in_kinds = {"normal", "unit"},
             .check_grad = false})
    .sample({.attrs = {{"out_grad", "True"}},
             .in_shapes = {{3, 4}, {3}},
             .in_kinds = {"normal", "label:4"},
             .check_grad = false});

}  // namespace
}  // namespace loom
