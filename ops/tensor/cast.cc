// Cast (alias cast): converts element types; the gradient is cast back to the input type.
#include <limits>
#include <type_traits>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

struct CastParam {
  std::string dtype;
};
const auto kCastSchema =
    ParamSchema<CastParam>()
        .required("dtype", &CastParam::dtype, "Output type (float32, float64, int32, ...).")
        .check([](CastParam& p) { dtype_from_string(p.dtype); });

/// dst = convert_value(src) with req (kAdd accumulates in the destination type).
void convert(const NDArray& src, const NDArray& dst, Req req) {
  if (req == Req::kNull) return;
  const int64_t n = src.size();
  dispatch_dtype(src.dtype(), [&](auto st) {
    dispatch_dtype(dst.dtype(), [&](auto dt) {
      using S = typename decltype(st)::type;
      using D = typename decltype(dt)::type;
      const S* s = src.data<S>();
      D* d = dst.data<D>();
      if (req == Req::kAdd)
        tensor::for_each(n, [=](int64_t i) {
          d[i] = tensor::add_value<D>(d[i], convert_value<D>(s[i]));
        });
      else if (static_cast<const void*>(s) != static_cast<void*>(d))
        tensor::for_each(n, [=](int64_t i) { d[i] = convert_value<D>(s[i]); });
    }, "Cast");
  }, "Cast");
}

class CastKernel final : public Kernel {
 public:
  explicit CastKernel(const KernelArgs& a) {
    // Fail at bind time for unsupported types.
    dispatch_dtype(a.in_types[0], [](auto) {}, tensor::node_label(a));
    dispatch_dtype(a.out_types[0], [](auto) {}, tensor::node_label(a));
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    convert(in[0], out[0], req[0]);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    convert(og[0], ig[0], req[0]);
  }
};

LOOM_REGISTER_OP("Cast")
    .describe(
        "Casts the input to dtype as MXNet: floats truncate toward zero; out of int32/int64 "
        "range they saturate (NaN becomes 0), into int8/uint8 they wrap through int32; "
        "float16 rounds to nearest even.")
    .alias("cast")
    .params(kCastSchema)
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      merge_type(out[0], dtype_from_string(a.param<CastParam>().dtype), "output 0");
    })
    .deps(GradDeps{true, false, false})
    .cpu<CastKernel>()
    .sample({.attrs = {{"dtype", "float32"}}, .in_shapes = {{2, 3}}})
    .sample({.attrs = {{"dtype", "float64"}}, .in_shapes = {{3, 2}}, .check_grad = false});

}  // namespace
}  // namespace loom
