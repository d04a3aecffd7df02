// Multi-precision SGD (MXNet 1.9.1 optimizer_op-inl.h MP_SGDKernel / MP_SGDMomKernel): the
// weight and gradient have a low-precision dtype (float16, or float32/float64), a float32
// master copy weight32 (and mom) is updated in place, and the output is weight32 rounded to
// the weight's dtype. With g = clip(rescale_grad·grad, clip_gradient), in float:
//   mp_sgd_update:     w32 ← (1 − lr·wd)·w32 − lr·g
//   mp_sgd_mom_update: mom ← momentum·mom − lr·wd·w32 − lr·g;  w32 ← w32 + mom
#include "ops/tensor/dtype_kernels.h"
#include "ops/update/sgd.h"
#include "ops/update/update_util.h"

namespace loom {
namespace {

using update::f32;

using update::MPSGDParam;
ParamSchema<MPSGDParam> mp_schema(bool momentum) {
  ParamSchema<MPSGDParam> s;
  s.required("lr", &MPSGDParam::lr, update::kDocLr);
  if (momentum) s.optional("momentum", &MPSGDParam::momentum, 0.0, update::kDocMomentum);
  s.optional("wd", &MPSGDParam::wd, 0.0, update::kDocWd)
      .optional("rescale_grad", &MPSGDParam::rescale_grad, 1.0, update::kDocRescale)
      .optional("clip_gradient", &MPSGDParam::clip_gradient, -1.0, update::kDocClip)
      .optional("lazy_update", &MPSGDParam::lazy_update, true, update::kDocLazy);
  return s;
}
const auto kMPSGDSchema = mp_schema(false);
const auto kMPSGDMomSchema = mp_schema(true);

/// weight, grad and the output share the weight's dtype; the float32 states follow.
void infer_mp_type(const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
  DType t = in[0] != DType::kUnknown ? in[0] : out[0];
  if (t == DType::kUnknown) t = in[1];
  if (t != DType::kUnknown) {
    merge_type(in[0], t, "input 0 (weight)");
    merge_type(in[1], t, "input 1 (grad)");
    merge_type(out[0], t, "output 0");
  }
  for (size_t i = 2; i < in.size(); ++i)
    merge_type(in[i], DType::kFloat32, "input " + std::to_string(i));
}

template <bool kMom>
class MPSGDKernel final : public Kernel {
 public:
  explicit MPSGDKernel(const KernelArgs& a)
      : p_(a.attrs.param<MPSGDParam>()), t_(a.in_types[0]), what_(tensor::node_label(a)) {
    for (size_t i = 2; i < a.in_types.size(); ++i)
      if (a.in_types[i] != DType::kFloat32)
        throw Error(what_ + ": " + input_label(a.attrs, i) + " must be float32, got " +
                    dtype_name(a.in_types[i]));
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* g = in[1].data<T>();
      float* mom = kMom ? in[2].data<float>() : nullptr;
      float* w32 = in[kMom ? 3 : 2].data<float>();
      T* y = out[0].data<T>();
      // The steps of sgd.h on the master weight (the GPU kernel's, mp_sgd.cu).
      const auto step = update::mp_sgd_step<kMom>(p_);
      const float lr = f32(p_.lr);
      const Req r = req[0];
      const int64_t n = in[0].size();
      for (int64_t i = 0; i < n; ++i) {
        float m = kMom ? mom[i] : 0.f;
        const float w = step(lr, w32[i], convert_value<float>(g[i]), m);
        if constexpr (kMom) mom[i] = m;
        w32[i] = w;
        if (r != Req::kNull) tensor::store_t<T>(y + i, r, convert_value<T>(w));
      }
    }, what_);
  }

 private:
  MPSGDParam p_;
  DType t_;
  std::string what_;
};

[[maybe_unused]] const bool kMpSgdRegistered = [] {
  register_op("mp_sgd_update")
      .describe("Multi-precision SGD: the float32 weight32 is updated in place and returned in "
                "the weight's dtype.")
      .params(kMPSGDSchema)
      .inputs({"weight", "grad", "weight32"})
      .type_fn(infer_mp_type)
      .aux({2})
      .inplace_pairs({{0, 0}})
      .zero_grad()
      .cpu<MPSGDKernel<false>>()
      .sample({.attrs = {{"lr", "0.1"}, {"wd", "0.01"}, {"clip_gradient", "0.5"}},
               .in_shapes = {{3, 4}, {3, 4}, {3, 4}},
               .check_grad = false});
  register_op("mp_sgd_mom_update")
      .describe("Multi-precision SGD with momentum: mom and the float32 weight32 are updated in "
                "place; the output is weight32 in the weight's dtype.")
      .params(kMPSGDMomSchema)
      .inputs({"weight", "grad", "mom", "weight32"})
      .type_fn(infer_mp_type)
      .aux({2, 3})
      .inplace_pairs({{0, 0}})
      .zero_grad()
      .cpu<MPSGDKernel<true>>()
      .sample({.attrs = {{"lr", "0.1"}, {"momentum", "0.9"}, {"wd", "0.01"}},
               .in_shapes = {{3, 4}, {3, 4}, {3, 4}, {3, 4}},
               .check_grad = false});
  return true;
}();

}  // namespace
}  // namespace loom
