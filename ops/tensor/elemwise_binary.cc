// Same-shape element-wise binary ops (elemwise_add, _maximum, _power, ...) and add_n.
#include <cctype>
#include <type_traits>

#include "ops/elemwise_math.h"
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {
using tensor::write;

template <class F>
class BinaryKernel final : public Kernel {
 public:
  explicit BinaryKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kNumericDTypes)), what_(tensor::node_label(a)) {}
  // elemwise_add: a producer of one operand may accumulate into the other (Kernel::fuse_sum).
  bool is_binary_sum() const override {
    return std::is_same_v<F, math::Add> && t_ == DType::kFloat32;
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *a = in[0].data<T>(), *b = in[1].data<T>();
      tensor::write_t<T>(out[0].data<T>(), req[0], out[0].size(),
                         [=](int64_t i) { return tensor::binary_value<F>(a[i], b[i]); });
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull && req[1] == Req::kNull) return;
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float>) {
        backward_f32(og, in, req, ig);
      } else {
        const T* g = og[0].data<T>();
        const int64_t n = og[0].size();
        // Add/Sub declare no input dependency: their arrays are none and read as zero.
        const auto a = tensor::reader<T>(in[0]);
        const auto b = tensor::reader<T>(in[1]);
        if (req[0] != Req::kNull)
          tensor::write_t<T>(ig[0].data<T>(), req[0], n, [&](int64_t i) {
            return tensor::from_c<T>(tensor::to_c(g[i]) * F::da(a[i], b[i]));
          });
        if (req[1] != Req::kNull)
          tensor::write_t<T>(ig[1].data<T>(), req[1], n, [&](int64_t i) {
            return tensor::from_c<T>(tensor::to_c(g[i]) * F::db(a[i], b[i]));
          });
      }
    }, what_);
  }

 private:
  void backward_f32(std::span<const NDArray> og, std::span<const NDArray> in,
                    std::span<const Req> req, std::span<const NDArray> ig) {
    const float* g = og[0].data<float>();
    const int64_t n = og[0].size();
    tensor::with_readers(tensor::ptr_or_null(in[0]), tensor::ptr_or_null(in[1]),
                         [&](auto a, auto b) {
                           if (req[0] != Req::kNull)
                             write(ig[0].data<float>(), req[0], n,
                                   [&](int64_t i) { return g[i] * F::da(a[i], b[i]); });
                           if (req[1] != Req::kNull)
                             write(ig[1].data<float>(), req[1], n,
                                   [&](int64_t i) { return g[i] * F::db(a[i], b[i]); });
                         });
  }
  DType t_;
  std::string what_;
};

template <class F>
OpDef& binary(const char* name, bool needs_inputs, const char* doc,
              std::vector<const char*> aliases, const char* rhs_kind = "normal") {
  OpDef& op = register_op(name);
  op.describe(doc).inputs({"lhs", "rhs"}).cpu<BinaryKernel<F>>();
  // Both operands, the result and the gradients are indexed alike.
  op.layouts(
      [](const OpAttrs&, const std::vector<Shape>&) { return elementwise_layout_rule(2, 1); });
  for (const char* al : aliases) op.alias(al);
  op.deps(GradDeps{true, needs_inputs, false});
  // Writing over an input is safe only when the backward does not read the inputs.
  if (!needs_inputs) op.inplace_pairs({{0, 0}, {1, 0}});
  // lhs' gradient (g times a constant 1) may overwrite g: rhs' is computed from g after.
  if (!needs_inputs) op.backward_inplace_pairs({{0, 0}});
  op.sample({.attrs = {}, .in_shapes = {{2, 3}, {2, 3}}, .in_kinds = {"normal", rhs_kind}});
  op.sample({.attrs = {}, .in_shapes = {{3, 1, 4}, {3, 1, 4}}, .in_kinds = {"normal", rhs_kind}});
  return op;
}

// Registered at static-initialisation time like LOOM_REGISTER_OP, through one helper.
[[maybe_unused]] const bool kElemwiseBinaryRegistered = [] {
  using namespace math;
  binary<Add>("elemwise_add", false, "lhs + rhs (same shapes).", {"_plus", "_Plus", "_add"});
  binary<Sub>("elemwise_sub", false, "lhs - rhs (same shapes).", {"_minus", "_Minus", "_sub"});
  binary<Mul>("elemwise_mul", true, "lhs * rhs (same shapes).", {"_mul", "_Mul"});
  binary<Div>("elemwise_div", true, "lhs / rhs (same shapes).", {"_div", "_Div"}, "positive");
  binary<Maximum>("_maximum", true, "Element-wise maximum (same shapes).", {"_Maximum"});
  binary<Minimum>("_minimum", true, "Element-wise minimum (same shapes).", {"_Minimum"});
  OpDef& pw = binary<Power>("_power", true, "lhs ^ rhs (same shapes).", {"_Power"});
  // The rhs gradient uses log(lhs): sample positive bases.
  pw.samples.clear();
  pw.sample({.attrs = {}, .in_shapes = {{2, 3}, {2, 3}}, .in_kinds = {"positive", "normal"}});
  // Comparisons: 1 or 0 in the operands' dtype (MXNet's legacy _equal, ...); zero gradient.
  tensor::for_each_comparison([](auto f, const char* name, const char* camel) {
    OpDef& op = binary<decltype(f)>((std::string("_") + name).c_str(), false,
                                    "1 where lhs compares true with rhs, else 0 (same shapes).",
                                    {(std::string("_") + camel).c_str()});
    op.deps(GradDeps{false, false, false}).zero_grad();
    op.inplace_pairs({{0, 0}, {1, 0}});
    op.backward_inplace_pairs({});
    for (auto& smp : op.samples) smp.check_grad = false;
    // MXNet also registers the two-word ones as _Greater_Equal, _Not_Equal, _Logical_And...
    std::string spaced = "_";
    bool upper = true, two_words = false;
    for (const char* c = name; *c; ++c) {
      if (*c == '_') two_words = true;
      spaced += upper ? static_cast<char>(std::toupper(*c)) : *c;
      upper = *c == '_';
    }
    if (two_words) op.alias(spaced);
  });
  register_op("_hypot").alias("_Hypot");
  register_op("_hypot_scalar").alias("_HypotScalar");
  return true;
}();

// ---- add_n ----
struct AddNParam {
  int num_args;
};
const auto kAddNSchema = ParamSchema<AddNParam>()
                             .required("num_args", &AddNParam::num_args, "Number of inputs to add.")
                             .check([](AddNParam& p) {
                               check_input_count(p.num_args, "num_args");
                             });

std::vector<std::string> arg_names(int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back("arg" + std::to_string(i));
  return v;
}

class AddNKernel final : public Kernel {
 public:
  explicit AddNKernel(const KernelArgs& a)
      : t_(tensor::check_dtypes(a, tensor::kNumericDTypes)), what_(tensor::node_label(a)) {}
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    if (in.size() == 1) {
      tensor::copy_req_any(out[0], in[0], req[0]);
      return;
    }
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* y = out[0].data<T>();
      const int64_t n = out[0].size();
      // Pairwise passes keep each loop simple; the first pass honours req (and in-place).
      const T *a = in[0].data<T>(), *b = in[1].data<T>();
      tensor::write_t<T>(y, req[0], n, [=](int64_t i) { return tensor::add_value<T>(a[i], b[i]); });
      for (size_t k = 2; k < in.size(); ++k) {
        const T* c = in[k].data<T>();
        tensor::write_t<T>(y, Req::kAdd, n, [=](int64_t i) { return c[i]; });
      }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    for (size_t k = 0; k < ig.size(); ++k) tensor::copy_req_any(ig[k], og[0], req[k]);
  }

 private:
  DType t_;
  std::string what_;
};

LOOM_REGISTER_OP("add_n")
    .describe("Sums num_args arrays of one shape.")
    .alias("ElementWiseSum")
    .params(kAddNSchema)
    .inputs([](const OpAttrs& a) { return arg_names(a.param<AddNParam>().num_args); })
    .deps(GradDeps{true, false, false})
    .inplace_pairs({{0, 0}})
    .backward_inplace_pairs({{0, 0}})
    .cpu<AddNKernel>()
    .layouts([](const OpAttrs&, const std::vector<Shape>& in) {
      return elementwise_layout_rule(static_cast<int>(in.size()), 1);
    })
    .sample({.attrs = {{"num_args", "3"}}, .in_shapes = {{2, 3}, {2, 3}, {2, 3}}})
    .sample({.attrs = {{"num_args", "1"}}, .in_shapes = {{4}}});

}  // namespace
}  // namespace loom
