// FullyConnected: y = x·Wᵀ + b on oneDNN matmul (spec 6.1).
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "ops/infer.h"
#include "ops/nn/dnnl_args.h"
#include "ops/nn/fc_inference.h"
#include "ops/nn/nn_dtype.h"
#include "ops/nn/nn_util.h"
#include "runtime/cpu/dnnl_util.h"

namespace loom {
namespace {

struct FCParam {
  int num_hidden;
  bool no_bias;
  bool flatten;
};

const auto kFCSchema =
    ParamSchema<FCParam>()
        .required("num_hidden", &FCParam::num_hidden, "Number of hidden nodes of the output.")
        .optional("no_bias", &FCParam::no_bias, false, "Whether to disable bias parameter.")
        .optional("flatten", &FCParam::flatten, true,
                  "Whether to collapse all but the first axis of the input data tensor.")
        .check([](FCParam& p) {
          if (p.num_hidden < 1) throw ParamError("num_hidden must be >= 1");
        });

// Product of dims [b, e); 0 when any of them is unknown.
int64_t span_prod(const Shape& s, int b, int e) {
  int64_t n = 1;
  for (int i = b; i < e; ++i) n *= s[i];
  return n;
}

void fc_infer_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<FCParam>();
  Shape& data = in[0];
  // As MXNet, nothing is decided while data's rank is unknown (a partial inference reports
  // the weight as unknown, not as (num_hidden, 0)); Loom only goes back to a flattening
  // layer's data from a known output and a fully known weight.
  if (data.ndim() == 0) {
    if (p.flatten && out[0].ndim() > 0 && out[0][0] > 0 && in[1].ndim() == 2 && in[1].known())
      data = Shape{out[0][0], in[1][1]};
    else
      return;
  }
  merge_shape(in[1], Shape{p.num_hidden, 0}, input_label(a, 1));
  if (!p.no_bias) merge_shape(in[2], Shape{p.num_hidden}, input_label(a, 2));
  int64_t k = in[1][1];
  if (data.ndim() > 0) {
    if (p.flatten) {
      if (data.ndim() == 2 && data[1] == 0 && k > 0) data[1] = k;
      merge_shape(in[1], Shape{p.num_hidden, span_prod(data, 1, data.ndim())}, input_label(a, 1));
      merge_shape(out[0], Shape{data[0], p.num_hidden}, "output 0");
    } else {
      if (data[data.ndim() - 1] == 0 && k > 0) data[data.ndim() - 1] = k;
      merge_shape(in[1], Shape{p.num_hidden, data[data.ndim() - 1]}, input_label(a, 1));
      Shape o = data;
      o[o.ndim() - 1] = p.num_hidden;
      merge_shape(out[0], o, "output 0");
    }
  }
  // Back from the output: the batch dimension(s).
  if (out[0].ndim() > 0) {
    if (p.flatten && data.ndim() > 0 && data[0] == 0) data[0] = out[0][0];
    if (p.flatten && data.ndim() == 0 && in[1][1] > 0) data = Shape{out[0][0], in[1][1]};
    if (!p.flatten && data.ndim() == out[0].ndim())
      for (int i = 0; i + 1 < data.ndim(); ++i)
        if (data[i] == 0) data[i] = out[0][i];
  }
}

// One matmul primitive per product, built at bind on Loom's row-major arrays directly (a
// transposed operand is a strided descriptor), so no call reorders anything. Each product
// has a variant that overwrites and one that accumulates (post-op sum) for req=add.
class FCKernel final : public Kernel {
 public:
  explicit FCKernel(const KernelArgs& a) : p_(a.attrs.param<FCParam>()) {
    using dnnl::memory;
    const Shape& d = a.in_shapes[0];
    k_ = a.in_shapes[1][1];
    m_ = k_ ? d.numel() / k_ : 0;
    o_ = p_.num_hidden;
    auto md = [](int64_t r, int64_t c, bool transposed) {
      // (r, c) row-major, or the transpose of a row-major (c, r) array
      return transposed ? memory::desc({r, c}, memory::data_type::f32, memory::dims{1, r})
                        : memory::desc({r, c}, memory::data_type::f32, memory::dims{c, 1});
    };
    x_ = md(m_, k_, false);
    w_ = md(o_, k_, false);
    y_ = md(m_, o_, false);
    bias_ = memory::desc({1, o_}, memory::data_type::f32, memory::dims{o_, 1});
    try {
      // y = x · wᵀ + b;  dx = dy · w;  dw = dyᵀ · x
      make(fwd_, x_, md(k_, o_, true), y_, p_.no_bias ? nullptr : &bias_);
      make(bwd_data_, y_, w_, x_, nullptr);
      make(bwd_weights_, md(o_, m_, true), x_, w_, nullptr);
    } catch (const dnnl::error& e) {
      dnnl_util::rethrow(e, "FullyConnected node '" + a.attrs.name + "'");
    }
    a_fwd_.add(DNNL_ARG_SRC, x_);
    a_fwd_.add(DNNL_ARG_WEIGHTS, fwd_[0].pd.weights_desc());
    a_fwd_.add(DNNL_ARG_DST, y_);
    if (!p_.no_bias) a_fwd_.add(DNNL_ARG_BIAS, bias_);
    a_bd_.add(DNNL_ARG_SRC, y_);
    a_bd_.add(DNNL_ARG_WEIGHTS, w_);
    a_bd_.add(DNNL_ARG_DST, x_);
    a_bw_.add(DNNL_ARG_SRC, bwd_weights_[0].pd.src_desc());
    a_bw_.add(DNNL_ARG_WEIGHTS, x_);
    a_bw_.add(DNNL_ARG_DST, w_);
    infer_.emplace(m_, k_, o_, !p_.no_bias);  // inference: weights cached in oneDNN's layout
    dnnl_util::record_impl("FullyConnected " + d.str() + "->" + std::to_string(o_) +
                           " fwd=" + fwd_[0].impl + " bwd_data=" + bwd_data_[0].impl +
                           " bwd_weights=" + bwd_weights_[0].impl +
                           (infer_->ready() ? " | infer " + infer_->impl_info() : ""));
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull || m_ == 0) return;
    // (req=add only where the inference product accumulates the same values it writes)
    const bool add = nn::is_add(req[0]);
    if (!ctx.is_train && infer_ && (!add || infer_->accumulates()) &&
        infer_->forward(in[0].cdata<float>(), in[1],
                        p_.no_bias ? nullptr : in[2].cdata<float>(), out[0].data<float>(), add))
      return;
    a_fwd_.set(DNNL_ARG_SRC, in[0].raw());
    a_fwd_.set(DNNL_ARG_WEIGHTS, in[1].raw());
    a_fwd_.set(DNNL_ARG_DST, out[0].raw());
    if (!p_.no_bias) a_fwd_.set(DNNL_ARG_BIAS, in[2].raw());
    a_fwd_.execute(fwd_[nn::is_add(req[0])].prim);
  }

  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (m_ == 0) return;
    void* dy = og[0].raw();
    if (req[0] != Req::kNull) {
      a_bd_.set(DNNL_ARG_SRC, dy);
      a_bd_.set(DNNL_ARG_WEIGHTS, in[1].raw());
      a_bd_.set(DNNL_ARG_DST, ig[0].raw());
      a_bd_.execute(bwd_data_[nn::is_add(req[0])].prim);
    }
    if (req[1] != Req::kNull) {
      a_bw_.set(DNNL_ARG_SRC, dy);
      a_bw_.set(DNNL_ARG_WEIGHTS, in[0].raw());
      a_bw_.set(DNNL_ARG_DST, ig[1].raw());
      a_bw_.execute(bwd_weights_[nn::is_add(req[1])].prim);
    }
    if (!p_.no_bias && req[2] != Req::kNull)
      bias_grad(og[0].data<float>(), ig[2].data<float>(), req[2]);
  }

 private:
  struct Product {
    dnnl::matmul::primitive_desc pd;
    dnnl::matmul prim;
    std::string impl;
  };
  // [0] overwrites dst, [1] adds to it.
  static void make(Product (&p)[2], const dnnl::memory::desc& src, const dnnl::memory::desc& w,
                   const dnnl::memory::desc& dst, const dnnl::memory::desc* bias) {
    const auto& eng = dnnl_util::engine();
    for (int add = 0; add < 2; ++add) {
      dnnl::primitive_attr attr;
      if (add) {
        dnnl::post_ops po;
        po.append_sum(1.f);
        attr.set_post_ops(po);
      }
      auto desc = bias ? dnnl::matmul::desc(src, w, *bias, dst) : dnnl::matmul::desc(src, w, dst);
      p[add].pd = dnnl::matmul::primitive_desc(desc, attr, eng);
      p[add].prim = dnnl::matmul(p[add].pd);
      p[add].impl = p[add].pd.impl_info_str();
    }
  }

  // db[j] (+)= sum over rows of dy[:, j]
  void bias_grad(const float* dy, float* db, Req req) const {
    const int64_t m = m_, o = o_;
    bool add = nn::is_add(req);
#pragma omp parallel for if (m * o > 65536)
    for (int64_t j0 = 0; j0 < o; j0 += 64) {
      int64_t j1 = std::min(o, j0 + 64);
      float acc[64] = {};
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] += dy[r * o + j];
      for (int64_t j = j0; j < j1; ++j) nn::store(db, j, acc[j - j0], add);
    }
  }

  FCParam p_;
  int64_t m_ = 0, k_ = 0, o_ = 0;
  dnnl::memory::desc x_, w_, y_, bias_;
  Product fwd_[2], bwd_data_[2], bwd_weights_[2];
  nn::PrimitiveArgs a_fwd_, a_bd_, a_bw_;  // shared by each product's two variants
  std::optional<nn::FcInference> infer_;
};

// float64 and float16 (oneDNN's matmul has no f64, and MXNet's CPU float16 FC computes in
// float): plain loops over (rows, hidden), accumulating in compute_t<T>.
class FCLoopKernel final : public Kernel {
 public:
  explicit FCLoopKernel(const KernelArgs& a)
      : p_(a.attrs.param<FCParam>()), dtype_(a.in_types[0]),
        what_("node '" + a.attrs.name + "' (op FullyConnected)") {
    k_ = a.in_shapes[1][1];
    m_ = k_ ? a.in_shapes[0].numel() / k_ : 0;
    o_ = p_.num_hidden;
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    nn::dispatch_floats(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T *x = in[0].cdata<T>(), *w = in[1].cdata<T>();
      const T* b = p_.no_bias ? nullptr : in[2].cdata<T>();
      T* y = out[0].data<T>();
      const bool add = nn::is_add(req[0]);
#pragma omp parallel for if (m_ * o_ * k_ > 65536)
      for (int64_t r = 0; r < m_; ++r)
        for (int64_t j = 0; j < o_; ++j) {
          C acc = b ? nn::ld(b, j) : C(0);
          for (int64_t q = 0; q < k_; ++q) acc += nn::ld(x, r * k_ + q) * nn::ld(w, j * k_ + q);
          nn::st(y, r * o_ + j, acc, add);
        }
    }, what_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    nn::dispatch_floats(dtype_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      using C = compute_t<T>;
      const T *dy = og[0].cdata<T>(), *x = in[0].cdata<T>(), *w = in[1].cdata<T>();
      if (req[0] != Req::kNull) {  // dx = dy · w
        T* dx = ig[0].data<T>();
        const bool add = nn::is_add(req[0]);
#pragma omp parallel for if (m_ * o_ * k_ > 65536)
        for (int64_t r = 0; r < m_; ++r)
          for (int64_t q = 0; q < k_; ++q) {
            C acc = 0;
            for (int64_t j = 0; j < o_; ++j) acc += nn::ld(dy, r * o_ + j) * nn::ld(w, j * k_ + q);
            nn::st(dx, r * k_ + q, acc, add);
          }
      }
      if (req[1] != Req::kNull) {  // dw = dyᵀ · x
        T* dw = ig[1].data<T>();
        const bool add = nn::is_add(req[1]);
#pragma omp parallel for if (m_ * o_ * k_ > 65536)
        for (int64_t j = 0; j < o_; ++j)
          for (int64_t q = 0; q < k_; ++q) {
            C acc = 0;
            for (int64_t r = 0; r < m_; ++r) acc += nn::ld(dy, r * o_ + j) * nn::ld(x, r * k_ + q);
            nn::st(dw, j * k_ + q, acc, add);
          }
      }
      if (!p_.no_bias && req[2] != Req::kNull) {
        T* db = ig[2].data<T>();
        const bool add = nn::is_add(req[2]);
        for (int64_t j = 0; j < o_; ++j) {
          C acc = 0;
          for (int64_t r = 0; r < m_; ++r) acc += nn::ld(dy, r * o_ + j);
          nn::st(db, j, acc, add);
        }
      }
    }, what_);
  }

 private:
  FCParam p_;
  DType dtype_;
  std::string what_;
  int64_t m_ = 0, k_ = 0, o_ = 0;
};

std::unique_ptr<Kernel> make_fc(const KernelArgs& a) {
  if (a.in_types[0] == DType::kFloat32) return std::make_unique<FCKernel>(a);
  return std::make_unique<FCLoopKernel>(a);
}

LOOM_CPU_DTYPES("FullyConnected", kDTypePolicyFloats);

LOOM_REGISTER_OP("FullyConnected")
    .describe("Applies a linear transformation: y = x·Wᵀ + b.")
    .params(kFCSchema)
    .inputs([](const OpAttrs& a) {
      return a.param<FCParam>().no_bias ? std::vector<std::string>{"data", "weight"}
                                        : std::vector<std::string>{"data", "weight", "bias"};
    })
    .shape_fn(fc_infer_shape)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .kernel(DeviceType::kCPU, make_fc)
    .sample({.attrs = {{"num_hidden", "4"}}, .in_shapes = {{2, 3, 5}, {4, 15}, {4}}})
    .sample({.attrs = {{"num_hidden", "3"}, {"no_bias", "True"}, {"flatten", "False"}},
             .in_shapes = {{2, 3, 4}, {3, 4}}});

}  // namespace
}  // namespace loom
