// Broadcasting binary ops (broadcast_add, ...): NumPy rules; backward sums each operand's
// gradient over the axes it was broadcast along.
#include "ops/elemwise_math.h"
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

void infer_broadcast(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0 || in[1].ndim() == 0) return;
  merge_shape(out[0], tensor::broadcast_shape(a, in[0], in[1]), "output 0");
}

template <class F>
class BroadcastKernel final : public Kernel {
 public:
  explicit BroadcastKernel(const KernelArgs& a)
      : plan_(tensor::make_bcast_plan(a.in_shapes[0], a.in_shapes[1], a.out_shapes[0])),
        t_(tensor::check_dtypes(a, tensor::kNumericDTypes)),
        what_(tensor::node_label(a)) {
    const Shape& out = a.out_shapes[0];
    for (int k = 0; k < 2; ++k) {
      Shape s = tensor::pad_shape(a.in_shapes[k], out.ndim());
      reduce_[k] = s != out;
      if (reduce_[k]) red_[k] = tensor::make_reduce_plan(out, s);
    }
    // Gradient scratch in the compute type (double for float64, else float).
    if ((reduce_[0] || reduce_[1]) && dtype_is_float(t_))
      ws_ = static_cast<size_t>(out.numel()) * (t_ == DType::kFloat64 ? 8 : 4);
  }
  size_t workspace_bytes() const override { return ws_; }

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_numeric(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T *a = in[0].data<T>(), *b = in[1].data<T>();
      T* y = out[0].data<T>();
      if (req[0] == Req::kAdd)
        tensor::bcast_for(plan_, [=](int64_t o, int64_t ia, int64_t ib) {
          y[o] = tensor::add_value<T>(y[o], tensor::binary_value<F>(a[ia], b[ib]));
        });
      else
        tensor::bcast_for(plan_, [=](int64_t o, int64_t ia, int64_t ib) {
          y[o] = tensor::binary_value<F>(a[ia], b[ib]);
        });
    }, what_);
  }

  void backward(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    tensor::dispatch_float(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float>)
        backward_f32(ctx, og, in, req, ig);
      else
        backward_t<T>(ctx, og, in, req, ig);
    }, what_);
  }

 private:
  template <class T>
  void backward_t(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                  std::span<const Req> req, std::span<const NDArray> ig) {
    using C = compute_t<T>;
    const T* g = og[0].data<T>();
    C* tmp = static_cast<C*>(ctx.workspace);
    const auto a = tensor::reader<T>(in[0]);
    const auto b = tensor::reader<T>(in[1]);
    for (int k = 0; k < 2; ++k) {
      if (req[k] == Req::kNull) continue;
      T* dst = ig[k].data<T>();
      auto grad = [&](int64_t o, int64_t ia, int64_t ib) -> C {
        return tensor::to_c(g[o]) * (k == 0 ? F::da(a[ia], b[ib]) : F::db(a[ia], b[ib]));
      };
      if (!reduce_[k]) {
        if (req[k] == Req::kAdd)
          tensor::bcast_for(plan_, [&](int64_t o, int64_t ia, int64_t ib) {
            dst[o] = tensor::add_value<T>(dst[o], tensor::from_c<T>(grad(o, ia, ib)));
          });
        else
          tensor::bcast_for(plan_, [&](int64_t o, int64_t ia, int64_t ib) {
            dst[o] = tensor::from_c<T>(grad(o, ia, ib));
          });
      } else {
        tensor::bcast_for(plan_,
                          [&](int64_t o, int64_t ia, int64_t ib) { tmp[o] = grad(o, ia, ib); });
        tensor::reduce_t(
            red_[k], tmp, dst, req[k], 0.0, [](double acc, C v) { return acc + v; },
            [](double acc) { return convert_value<T>(acc); });
      }
    }
  }
  void backward_f32(const OpContext& ctx, std::span<const NDArray> og, std::span<const NDArray> in,
                    std::span<const Req> req, std::span<const NDArray> ig) {
    const float* g = og[0].data<float>();
    float* tmp = static_cast<float*>(ctx.workspace);
    tensor::with_readers(
        tensor::ptr_or_null(in[0]), tensor::ptr_or_null(in[1]), [&](auto a, auto b) {
          for (int k = 0; k < 2; ++k) {
            if (req[k] == Req::kNull) continue;
            float* dst = ig[k].data<float>();
            auto grad = [&](int64_t o, int64_t ia, int64_t ib) {
              return g[o] * (k == 0 ? F::da(a[ia], b[ib]) : F::db(a[ia], b[ib]));
            };
            // Indexed by the operand itself when it has the full shape, else via scratch.
            if (!reduce_[k]) {
              if (req[k] == Req::kAdd)
                tensor::bcast_for(
                    plan_, [&](int64_t o, int64_t ia, int64_t ib) { dst[o] += grad(o, ia, ib); });
              else
                tensor::bcast_for(
                    plan_, [&](int64_t o, int64_t ia, int64_t ib) { dst[o] = grad(o, ia, ib); });
            } else {
              tensor::bcast_for(
                  plan_, [&](int64_t o, int64_t ia, int64_t ib) { tmp[o] = grad(o, ia, ib); });
              tensor::reduce_sum(red_[k], tmp, dst, req[k]);
            }
          }
        });
  }

  tensor::BcastPlan plan_;
  DType t_;
  std::string what_;
  bool reduce_[2] = {false, false};
  tensor::ReducePlan red_[2];
  size_t ws_ = 0;
};

template <class F>
OpDef& broadcast(const char* name, bool needs_inputs, const char* doc, const char* alias,
                 const char* rhs_kind = "normal", const char* lhs_kind = "normal") {
  OpDef& op = register_op(name);
  op.describe(doc).inputs({"lhs", "rhs"}).shape_fn(infer_broadcast).cpu<BroadcastKernel<F>>();
  if (alias) op.alias(alias);
  op.deps(GradDeps{true, needs_inputs, false});
  std::vector<std::string> kinds{lhs_kind, rhs_kind};
  op.sample({.attrs = {}, .in_shapes = {{2, 3}, {2, 3}}, .in_kinds = kinds});
  op.sample({.attrs = {}, .in_shapes = {{2, 1, 4}, {3, 1}}, .in_kinds = kinds});
  op.sample({.attrs = {}, .in_shapes = {{1, 3}, {4, 2, 3}}, .in_kinds = kinds});
  return op;
}

// Registered at static-initialisation time like LOOM_REGISTER_OP, through one helper.
[[maybe_unused]] const bool kBroadcastBinaryRegistered = [] {
  using namespace math;
  broadcast<Add>("broadcast_add", false, "lhs + rhs with broadcasting.", "broadcast_plus");
  broadcast<Sub>("broadcast_sub", false, "lhs - rhs with broadcasting.", "broadcast_minus");
  broadcast<Mul>("broadcast_mul", true, "lhs * rhs with broadcasting.", nullptr);
  broadcast<Div>("broadcast_div", true, "lhs / rhs with broadcasting.", nullptr, "positive");
  broadcast<Maximum>("broadcast_maximum", true, "Maximum with broadcasting.", nullptr);
  broadcast<Minimum>("broadcast_minimum", true, "Minimum with broadcasting.", nullptr);
  broadcast<Power>("broadcast_power", true, "lhs ^ rhs with broadcasting.", nullptr, "normal",
                   "positive");
  // Comparisons: 1 or 0 in the operands' dtype (MXNet's broadcast_equal, ...); zero gradient.
  tensor::for_each_comparison([](auto f, const char* name, const char*) {
    OpDef& op = broadcast<decltype(f)>((std::string("broadcast_") + name).c_str(), false,
                                       "1 where lhs compares true with rhs, else 0, broadcasting.",
                                       nullptr);
    op.deps(GradDeps{false, false, false}).zero_grad();
    for (auto& smp : op.samples) smp.check_grad = false;
  });
  return true;
}();

}  // namespace
}  // namespace loom
