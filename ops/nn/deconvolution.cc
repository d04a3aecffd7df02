// Deconvolution (transposed convolution, 1-D to 3-D, grouped) on oneDNN deconvolution
// primitives (spec 6.3). Weights are MXNet's (C, F/G, k...); no_bias defaults to True.
#include <optional>

#include "ops/dtype_policy.h"
#include "ops/infer.h"
#include "ops/nn/conv_params.h"
#include "ops/nn/deconv_layer.h"

namespace loom {
namespace {

using nn::DeconvParam;  // ops/nn/conv_params.h, shared with the cuDNN kernel

const auto kDeconvSchema =
    ParamSchema<DeconvParam>()
        .required("kernel", &DeconvParam::kernel,
                  "Kernel size of the corresponding convolution: (w,), (h, w) or (d, h, w).")
        .optional("stride", &DeconvParam::stride, Shape(), "Stride; default 1 per dimension.")
        .optional("dilate", &DeconvParam::dilate, Shape(), "Dilation; default 1 per dimension.")
        .optional("pad", &DeconvParam::pad, Shape(),
                  "Padding of the corresponding convolution; ignored with target_shape.")
        .optional("adj", &DeconvParam::adj, Shape(),
                  "Cells added at the end of each output dim; ignored with target_shape.")
        .optional("target_shape", &DeconvParam::target_shape, Shape(),
                  "Output spatial shape; pad and adj are derived from it.")
        .required("num_filter", &DeconvParam::num_filter, "Number of output channels.")
        .optional("num_group", &DeconvParam::num_group, 1, "Number of channel groups.")
        .optional("workspace", &DeconvParam::workspace, 512, "Workspace limit in MB (ignored).")
        .optional("no_bias", &DeconvParam::no_bias, true, "Whether to disable bias parameter.")
        .optional("cudnn_tune", &DeconvParam::cudnn_tune, std::optional<std::string>(),
                  "cuDNN algorithm choice (ignored on CPU).")
        .optional("cudnn_off", &DeconvParam::cudnn_off, false, "Turn off cuDNN (ignored).")
        .optional("layout", &DeconvParam::layout, std::optional<std::string>(),
                  "Data layout; only NCW, NCHW and NCDHW are supported.")
        .check([](DeconvParam& p) {
          int nd = p.kernel.ndim();
          if (nd < 1 || nd > 3) throw ParamError("kernel must have 1 to 3 dimensions");
          p.stride = nn::expand_tuple(p.stride, nd, 1, "stride");
          p.dilate = nn::expand_tuple(p.dilate, nd, 1, "dilate");
          p.pad = nn::expand_tuple(p.pad, nd, 0, "pad");
          p.adj = nn::expand_tuple(p.adj, nd, 0, "adj");
          p.target_shape = nn::expand_tuple(p.target_shape, nd, 0, "target_shape");
          for (int i = 0; i < nd; ++i) {
            if (p.kernel[i] < 1 || p.stride[i] < 1 || p.dilate[i] < 1 || p.pad[i] < 0 ||
                p.adj[i] < 0 || p.target_shape[i] < 0)
              throw ParamError("kernel, stride and dilate must be >= 1; pad, adj >= 0");
            // With a target_shape, pad and adj are derived from it and the given ones
            // ignored (as MXNet), so only a used adj must be smaller than the stride.
            if (p.target_shape[i] == 0 && p.adj[i] >= p.stride[i])
              throw ParamError("adj " + p.adj.str() + " must be smaller than stride " +
                               p.stride.str());
          }
          if (p.num_filter < 1 || p.num_group < 1 || p.num_filter % p.num_group != 0)
            throw ParamError("num_filter must be a positive multiple of num_group");
          static const char* kLayouts[] = {"NCW", "NCHW", "NCDHW"};
          if (p.layout && *p.layout != kLayouts[nd - 1])
            throw ParamError("layout " + *p.layout + " is not supported on CPU (use " +
                             kLayouts[nd - 1] + ")");
        });

// Padding on each side for known spatial input sizes (nn::deconv_pads: MXNet's InferPad).
nn::DeconvGeometry geometry(const DeconvParam& p, const Shape& data) {
  nn::DeconvGeometry g{p.kernel, p.stride, p.dilate, {}, {}, p.num_filter, p.num_group, p.no_bias};
  nn::deconv_pads(p, data, g.pad_l, g.pad_r);
  return g;
}

void deconv_infer_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<DeconvParam>();
  const int nd = p.kernel.ndim();
  Shape& data = in[0];
  if (data.ndim() != 0 && data.ndim() != nd + 2)
    throw ShapeError(input_label(a, 0) + ": expected " + std::to_string(nd + 2) +
                     "-d input for a " + std::to_string(nd) + "-d kernel, got " + data.str());
  Shape w{0, p.num_filter / p.num_group};
  for (int i = 0; i < nd; ++i) w.push_back(p.kernel[i]);
  merge_shape(in[1], w, input_label(a, 1));
  if (!p.no_bias) merge_shape(in[2], Shape{p.num_filter}, input_label(a, 2));
  if (data.ndim() == 0 && in[1][0] > 0) data = Shape(std::vector<int64_t>(nd + 2, 0));
  if (data.ndim() == 0) return;
  if (data[1] == 0) data[1] = in[1][0];
  if (data[1] > 0) {
    if (data[1] % p.num_group != 0)
      throw ShapeError(input_label(a, 0) + ": " + std::to_string(data[1]) +
                       " channels are not divisible by num_group " + std::to_string(p.num_group));
    w[0] = data[1];
    merge_shape(in[1], w, input_label(a, 1));
  }
  if (data[0] == 0 && out[0].ndim() == nd + 2) data[0] = out[0][0];
  Shape o{data[0], p.num_filter};
  for (int i = 0; i < nd; ++i) o.push_back(0);
  bool spatial_known = true;
  for (int i = 0; i < nd; ++i) spatial_known = spatial_known && data[i + 2] > 0;
  if (spatial_known) {
    nn::DeconvGeometry g = geometry(p, data);
    for (int i = 0; i < nd; ++i) {
      // pad_l >= 0; pad_r = pad - adj may be negative (adj widens the output).
      const char* what = "Deconvolution output size";
      const int64_t full = nn::deconv_full_length(p, i, data[i + 2]);
      const int64_t len = dim_add(dim_add(full, -g.pad_l[i], what), -g.pad_r[i], what);
      if (len < 1)
        throw ShapeError("Deconvolution output would be empty along spatial dim " +
                         std::to_string(i) + " for input " + data.str());
      o[i + 2] = len;
    }
  }
  merge_shape(out[0], o, "output 0");
}

class DeconvKernel final : public nn::WeightedLayerKernel {
 public:
  explicit DeconvKernel(const KernelArgs& a)
      : WeightedLayerKernel(a.attrs.param<DeconvParam>().no_bias) {
    const auto& p = a.attrs.param<DeconvParam>();
    layer_.emplace(nn::make_deconv_layer(geometry(p, a.in_shapes[0]), a.in_shapes[0],
                                         a.out_shapes[0],
                                         "Deconvolution node '" + a.attrs.name + "'"));
  }

};

// float32 only: oneDNN/naive float kernels; MXNet's CPU tests of Deconvolution use float32.
LOOM_CPU_DTYPES("Deconvolution", kDTypePolicyF32);

LOOM_REGISTER_OP("Deconvolution")
    .describe("Transposed convolution of (N, C, ...) input with (C, F/G, k...) weights.")
    .params(kDeconvSchema)
    .inputs([](const OpAttrs& a) {
      return a.param<DeconvParam>().no_bias ? std::vector<std::string>{"data", "weight"}
                                            : std::vector<std::string>{"data", "weight", "bias"};
    })
    .shape_fn(deconv_infer_shape)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<DeconvKernel>()
    .sample({.attrs = {{"kernel", "(3, 3)"},
                       {"num_filter", "4"},
                       {"pad", "(1, 1)"},
                       {"no_bias", "False"}},
             .in_shapes = {{2, 3, 4, 5}, {3, 4, 3, 3}, {4}}})
    .sample({.attrs = {{"kernel", "(3, 2)"},
                       {"num_filter", "4"},
                       {"stride", "(2, 3)"},
                       {"dilate", "(1, 2)"},
                       {"pad", "(1, 0)"},
                       {"adj", "(1, 2)"},
                       {"num_group", "2"}},
             .in_shapes = {{2, 4, 3, 3}, {4, 2, 3, 2}}})
    .sample({.attrs = {{"kernel", "(4, 4)"},
                       {"num_filter", "2"},
                       {"stride", "(2, 2)"},
                       {"target_shape", "(7, 8)"},
                       {"no_bias", "False"}},
             .in_shapes = {{1, 3, 4, 4}, {3, 2, 4, 4}, {2}}})
    .sample({.attrs = {{"kernel", "(3,)"}, {"num_filter", "2"}, {"stride", "(2,)"}},
             .in_shapes = {{2, 3, 5}, {3, 2, 3}}});

}  // namespace
}  // namespace loom
