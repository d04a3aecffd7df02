// Mixed-precision helpers (MXNet 1.9.1 tensor/amp_cast.cc, contrib/all_finite.cc):
//   amp_cast(data, dtype)            float32/float16 inputs are cast to dtype, other dtypes
//                                    pass through unchanged; gradient cast back.
//   amp_multicast(data_0.., num_outputs, cast_narrow)
//                                    float32/float16 inputs are cast to the widest (or with
//                                    cast_narrow the narrowest) of them; others pass through.
//   all_finite(data, init_output), multi_all_finite(array_0.., num_arrays, init_output)
//                                    a (1,) float32: 1 when every element is finite, else 0.
//                                    init_output=False leaves a 1 unset (only writes the 0).
#include <cmath>
#include <cstring>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"
#include "ops/tensor/reduce_extra_math.h"
#include "ops/tensor/reduce_extra_params.h"

namespace loom {
namespace {

bool amp_castable(DType t) { return t == DType::kFloat32 || t == DType::kFloat16; }

/// dst (with req) = src converted elementwise; a no-op when they alias and share a dtype.
void cast_req(const NDArray& dst, const NDArray& src, Req req) {
  if (req == Req::kNull) return;
  if (dst.dtype() == src.dtype() && req != Req::kAdd) {
    tensor::copy_req_any(dst, src, req);
    return;
  }
  dispatch_dtype(dst.dtype(), [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    D* d = dst.data<D>();
    dispatch_dtype(src.dtype(), [&](auto stag) {
      using S = typename decltype(stag)::type;
      const S* s = src.data<S>();
      tensor::write_t<D>(d, req, src.size(), [=](int64_t i) { return convert_value<D>(s[i]); });
    });
  });
}

/// Each output i is input i cast to its inferred dtype; the gradient casts back.
class AmpCastKernel final : public Kernel {
 public:
  explicit AmpCastKernel(const KernelArgs&) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    for (size_t i = 0; i < out.size(); ++i) cast_req(out[i], in[i], req[i]);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    for (size_t i = 0; i < ig.size(); ++i) {
      if (req[i] == Req::kNull) continue;
      if (og[i].is_none()) {  // an unused output contributes nothing
        if (req[i] != Req::kAdd) std::memset(ig[i].raw(), 0, static_cast<size_t>(ig[i].nbytes()));
        continue;
      }
      cast_req(ig[i], og[i], req[i]);
    }
  }
};

struct AmpCastParam {
  std::string dtype;
};
const auto kAmpCastSchema =
    ParamSchema<AmpCastParam>()
        .required("dtype", &AmpCastParam::dtype, "Output data type.")
        .check([](AmpCastParam& p) { dtype_from_string(p.dtype); });

struct AmpMultiCastParam {
  int num_outputs;
  bool cast_narrow;
};
const auto kAmpMultiCastSchema =
    ParamSchema<AmpMultiCastParam>()
        .required("num_outputs", &AmpMultiCastParam::num_outputs,
                  "Number of input/output pairs to be casted to the widest type.")
        .optional("cast_narrow", &AmpMultiCastParam::cast_narrow, false,
                  "Whether to cast to the narrowest type")
        .check([](AmpMultiCastParam& p) { check_input_count(p.num_outputs, "num_outputs"); });

std::vector<std::string> numbered(const char* stem, int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(stem + std::to_string(i));
  return v;
}

void infer_pairwise_shapes(const OpAttrs&, std::vector<Shape>& in, std::vector<Shape>& out) {
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].ndim()) merge_shape(out[i], in[i], "output " + std::to_string(i));
    if (out[i].ndim()) merge_shape(in[i], out[i], "input " + std::to_string(i));
  }
}

using tensor::AllFiniteParam;
const auto kAllFiniteSchema =
    ParamSchema<AllFiniteParam>().optional("init_output", &AllFiniteParam::init_output, true,
                                           "Initialize output to 1.");
const auto kMultiAllFiniteSchema =
    ParamSchema<AllFiniteParam>()
        .optional("num_arrays", &AllFiniteParam::num_arrays, 1, "Number of arrays.")
        .optional("init_output", &AllFiniteParam::init_output, true, "Initialize output to 1.")
        .check([](AllFiniteParam& p) { check_input_count(p.num_arrays, "num_arrays"); });

class AllFiniteKernel final : public Kernel {
 public:
  explicit AllFiniteKernel(const KernelArgs& a)
      : init_(a.attrs.param<AllFiniteParam>().init_output), what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    bool finite = true;
    for (const NDArray& x : in) {
      dispatch_dtype(x.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* p = x.data<T>();
        const int64_t n = x.size();
        bool ok = true;
        // MXNet tests static_cast<float>(x): a float64 beyond float's range is not finite.
#pragma omp parallel for reduction(&& : ok) if (n >= tensor::kParallelMin)
        for (int64_t i = 0; i < n; ++i) ok = ok && math::finite_f32(convert_value<float>(p[i]));
        finite = finite && ok;
      }, what_);
    }
    float* y = out[0].data<float>();
    if (!finite) *y = 0.f;
    else if (init_) *y = 1.f;
  }

 private:
  bool init_;
  std::string what_;
};

void infer_flag(const OpAttrs&, std::vector<Shape>&, std::vector<Shape>& out) {
  merge_shape(out[0], Shape{1}, "output 0");
}
void infer_flag_type(const OpAttrs&, std::vector<DType>&, std::vector<DType>& out) {
  merge_type(out[0], DType::kFloat32, "output 0");
}

[[maybe_unused]] const bool kAmpRegistered = [] {
  register_op("amp_cast")
      .describe("Cast function between low precision float/FP32 used by AMP: float32 and "
                "float16 inputs become dtype, other dtypes pass through unchanged.")
      .params(kAmpCastSchema)
      .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
        if (in[0] == DType::kUnknown) return;
        merge_type(out[0],
                   amp_castable(in[0]) ? dtype_from_string(a.param<AmpCastParam>().dtype) : in[0],
                   "output 0");
      })
      .deps(GradDeps{true, false, false})
      .inplace_pairs({{0, 0}})
      .cpu<AmpCastKernel>()
      .sample({.attrs = {{"dtype", "float32"}}, .in_shapes = {{2, 3}}})
      .sample({.attrs = {{"dtype", "float16"}}, .in_shapes = {{5}}, .check_grad = false});
  register_op("amp_multicast")
      .describe("Cast function used by AMP, that casts its inputs to the common widest type "
                "(or the narrowest with cast_narrow).")
      .params(kAmpMultiCastSchema)
      .inputs([](const OpAttrs& a) {
        return numbered("data_", a.param<AmpMultiCastParam>().num_outputs);
      })
      .outputs([](const OpAttrs& a) {
        return numbered("output", a.param<AmpMultiCastParam>().num_outputs);
      })
      .shape_fn(infer_pairwise_shapes)
      .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
        const auto& p = a.param<AmpMultiCastParam>();
        DType target = p.cast_narrow ? DType::kFloat32 : in[0];
        for (size_t i = 0; i < in.size(); ++i) {
          if (!p.cast_narrow && (in[i] == DType::kFloat32 || out[i] == DType::kFloat32))
            target = DType::kFloat32;
          else if (p.cast_narrow && (in[i] == DType::kFloat16 || out[i] == DType::kFloat16))
            target = DType::kFloat16;
        }
        for (size_t i = 0; i < in.size(); ++i) {
          if (in[i] == DType::kUnknown) continue;
          merge_type(out[i], amp_castable(in[i]) ? target : in[i], "output " + std::to_string(i));
        }
      })
      .deps(GradDeps{true, false, false})
      .inplace_fn([](const OpAttrs& a) {
        std::vector<std::pair<int, int>> v;
        for (int i = 0; i < a.param<AmpMultiCastParam>().num_outputs; ++i) v.emplace_back(i, i);
        return v;
      })
      .cpu<AmpCastKernel>()
      .sample({.attrs = {{"num_outputs", "2"}}, .in_shapes = {{2, 3}, {4}}})
      .sample({.attrs = {{"num_outputs", "3"}, {"cast_narrow", "True"}},
               .in_shapes = {{2}, {3}, {1, 2}}});
  register_op("all_finite")
      .describe("Check if all the float numbers in the array are finite (used for AMP).")
      .params(kAllFiniteSchema)
      .shape_fn(infer_flag)
      .type_fn(infer_flag_type)
      .zero_grad()
      .deps(GradDeps{false, false, false})
      .cpu<AllFiniteKernel>()
      .sample({.attrs = {}, .in_shapes = {{2, 3}}});
  register_op("multi_all_finite")
      .describe("Check if all the float numbers in all the arrays are finite (used for AMP).")
      .params(kMultiAllFiniteSchema)
      .inputs([](const OpAttrs& a) {
        return numbered("array_", a.param<AllFiniteParam>().num_arrays);
      })
      .shape_fn(infer_flag)
      .type_fn(infer_flag_type)
      .zero_grad()
      .deps(GradDeps{false, false, false})
      .cpu<AllFiniteKernel>()
      .sample({.attrs = {{"num_arrays", "2"}}, .in_shapes = {{2, 3}, {4}}})
      .sample({.attrs = {}, .in_shapes = {{3}}});
  return true;
}();

}  // namespace
}  // namespace loom
