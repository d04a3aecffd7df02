// The interleaved multi-head attention matmuls of MXNet 1.9.1 (src/operator/contrib/
// transformer.cc), float32 only as MXNet's CPU kernels. With H heads of size D, sequences
// laid out (length, batch, ...) and attention batches n = b·H + h:
//   _contrib_interleaved_matmul_selfatt_qk(qkv (L,B,H·3·D))
//       out (B·H, L, L)[n,i,j] = Σ_d q(i,b,h,d)·k(j,b,h,d) / √D, with q, k, v the slots 0, 1, 2
//       of qkv viewed as (L, B, H, 3, D).
//   _contrib_interleaved_matmul_selfatt_valatt(qkv, attention (B·H, L, L))
//       out (L, B, H·D)[i,b,h·D+d] = Σ_j attention[n,i,j]·v(j,b,h,d).
//   _contrib_interleaved_matmul_encdec_qk(queries (Lq,B,H·D), keys_values (Lk,B,H·2·D))
//       out (B·H, Lq, Lk) as selfatt_qk, with q from queries and k slot 0 of keys_values.
//   _contrib_interleaved_matmul_encdec_valatt(keys_values, attention (B·H, Lq, Lk))
//       out (Lq, B, H·D) as selfatt_valatt with v slot 1 of keys_values.
// Gradients are the matching products; slots an op does not read get zero gradient.
#include <cmath>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

struct HeadsParam {
  int64_t heads;
};
const auto kHeadsSchema =
    ParamSchema<HeadsParam>().required("heads", &HeadsParam::heads, "Set number of heads");

enum class Mode { kSelfQK, kSelfValAtt, kEncDecQK, kEncDecValAtt };

std::string op_label(const OpAttrs& a) { return "node '" + a.name + "' (op " + a.op->name + ")"; }

int64_t heads_of(const OpAttrs& a) {
  const int64_t h = a.param<HeadsParam>().heads;
  if (h <= 0) throw ParamError(op_label(a) + ": heads must be positive, got " + std::to_string(h));
  return h;
}

void need3(const OpAttrs& a, const Shape& s, const char* name) {
  if (s.ndim() != 3)
    throw ShapeError(op_label(a) + ": " + name + " must be 3-D, got shape " + s.str());
}
void need_div(const OpAttrs& a, int64_t v, int64_t by, const std::string& what) {
  if (v % by != 0)
    throw ShapeError(op_label(a) + ": " + what + " (" + std::to_string(v) +
                     ") must be divisible by " + std::to_string(by));
}

template <Mode M>
void infer(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const int64_t H = heads_of(a);
  for (const auto& s : in)
    if (s.ndim() == 0) return;
  if constexpr (M == Mode::kSelfQK) {
    need3(a, in[0], "queries_keys_values");
    need_div(a, in[0][2], 3 * H, "queries_keys_values.shape[2]");
    merge_shape(out[0], Shape{in[0][1] * H, in[0][0], in[0][0]}, "output 0");
  } else if constexpr (M == Mode::kSelfValAtt) {
    need3(a, in[0], "queries_keys_values");
    need3(a, in[1], "attention");
    need_div(a, in[0][2], 3 * H, "queries_keys_values.shape[2]");
    if (in[1][0] != in[0][1] * H || in[1][1] != in[0][0] || in[1][2] != in[0][0])
      throw ShapeError(op_label(a) + ": attention " + in[1].str() + " must be (batch*heads, " +
                       "seq_length, seq_length) for queries_keys_values " + in[0].str());
    merge_shape(out[0], Shape{in[0][0], in[0][1], in[0][2] / 3}, "output 0");
  } else if constexpr (M == Mode::kEncDecQK) {
    need3(a, in[0], "queries");
    need3(a, in[1], "keys_values");
    need_div(a, in[0][2], H, "queries.shape[2]");
    if (in[0][2] * 2 != in[1][2] || in[0][1] != in[1][1])
      throw ShapeError(op_label(a) + ": keys_values " + in[1].str() + " must be (seq_length, " +
                       "batch, 2*proj_dim) for queries " + in[0].str());
    merge_shape(out[0], Shape{in[0][1] * H, in[0][0], in[1][0]}, "output 0");
  } else {
    need3(a, in[0], "keys_values");
    need3(a, in[1], "attention");
    need_div(a, in[0][2], 2 * H, "keys_values.shape[2]");
    if (in[1][0] != in[0][1] * H || in[1][2] != in[0][0])
      throw ShapeError(op_label(a) + ": attention " + in[1].str() + " must be (batch*heads, " +
                       "q_length, kv_length) for keys_values " + in[0].str());
    merge_shape(out[0], Shape{in[1][1], in[0][1], in[0][2] / 2}, "output 0");
  }
}

// A per-head projection inside an interleaved tensor: element (l, b, h, d) is at
// ((l·B + b)·H + h)·stride + off + d.
struct Proj {
  int64_t B, H, stride, off;
  int64_t at(int64_t l, int64_t b, int64_t h) const { return ((l * B + b) * H + h) * stride + off; }
};

template <Mode M>
class InterleavedKernel final : public Kernel {
 public:
  explicit InterleavedKernel(const KernelArgs& a) : what_(tensor::node_label(a)) {
    tensor::check_dtypes(a, tensor::dtype_bit(DType::kFloat32));
    H_ = heads_of(a.attrs);
    const Shape& s0 = a.in_shapes[0];
    B_ = s0[1];
    if constexpr (M == Mode::kSelfQK || M == Mode::kSelfValAtt) {
      D_ = s0[2] / 3 / H_;
      Lq_ = Lk_ = s0[0];
      const int64_t st = 3 * D_;
      qa_ = Proj{B_, H_, st, 0};
      kb_ = Proj{B_, H_, st, M == Mode::kSelfQK ? D_ : 2 * D_};
    } else if constexpr (M == Mode::kEncDecQK) {
      D_ = s0[2] / H_;
      Lq_ = s0[0];
      Lk_ = a.in_shapes[1][0];
      qa_ = Proj{B_, H_, D_, 0};
      kb_ = Proj{B_, H_, 2 * D_, 0};
    } else {
      D_ = s0[2] / 2 / H_;
      Lk_ = s0[0];
      Lq_ = a.in_shapes[1][1];
      kb_ = Proj{B_, H_, 2 * D_, D_};
    }
    out_proj_ = Proj{B_, H_, D_, 0};
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const bool add = req[0] == Req::kAdd;
    float* y = out[0].data<float>();
    if constexpr (M == Mode::kSelfQK || M == Mode::kEncDecQK) {
      const float* Q = in[0].data<float>();
      const float* K = M == Mode::kSelfQK ? Q : in[1].data<float>();
      const double scale = 1.0 / std::sqrt(static_cast<double>(D_));
#pragma omp parallel for if (B_ * H_ > 1)
      for (int64_t n = 0; n < B_ * H_; ++n) {
        const int64_t b = n / H_, h = n % H_;
        for (int64_t i = 0; i < Lq_; ++i)
          for (int64_t j = 0; j < Lk_; ++j) {
            const float* q = Q + qa_.at(i, b, h);
            const float* k = K + kb_.at(j, b, h);
            double s = 0;
            for (int64_t d = 0; d < D_; ++d) s += static_cast<double>(q[d]) * k[d];
            float& o = y[(n * Lq_ + i) * Lk_ + j];
            const auto v = static_cast<float>(s * scale);
            o = add ? o + v : v;
          }
      }
    } else {
      const float* V = in[0].data<float>();
      const float* A = in[1].data<float>();
#pragma omp parallel for if (B_ * H_ > 1)
      for (int64_t n = 0; n < B_ * H_; ++n) {
        const int64_t b = n / H_, h = n % H_;
        for (int64_t i = 0; i < Lq_; ++i)
          for (int64_t d = 0; d < D_; ++d) {
            double s = 0;
            for (int64_t j = 0; j < Lk_; ++j)
              s += static_cast<double>(A[(n * Lq_ + i) * Lk_ + j]) * V[kb_.at(j, b, h) + d];
            float& o = y[out_proj_.at(i, b, h) + d];
            o = add ? o + static_cast<float>(s) : static_cast<float>(s);
          }
      }
    }
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    const float* g = og[0].data<float>();
    // Full gradients into scratch, then written with req.
    std::vector<float> g0(static_cast<size_t>(in[0].size()), 0.f), g1;
    if (in.size() > 1) g1.assign(static_cast<size_t>(in[1].size()), 0.f);
    if constexpr (M == Mode::kSelfQK || M == Mode::kEncDecQK) {
      const float* Q = in[0].data<float>();
      const float* K = M == Mode::kSelfQK ? Q : in[1].data<float>();
      float* dQ = g0.data();
      float* dK = M == Mode::kSelfQK ? g0.data() : g1.data();
      const double scale = 1.0 / std::sqrt(static_cast<double>(D_));
#pragma omp parallel for if (B_ * H_ > 1)
      for (int64_t n = 0; n < B_ * H_; ++n) {
        const int64_t b = n / H_, h = n % H_;
        for (int64_t i = 0; i < Lq_; ++i)
          for (int64_t j = 0; j < Lk_; ++j) {
            const auto gv = static_cast<float>(g[(n * Lq_ + i) * Lk_ + j] * scale);
            const int64_t qo = qa_.at(i, b, h), ko = kb_.at(j, b, h);
            for (int64_t d = 0; d < D_; ++d) {
              dQ[qo + d] += gv * K[ko + d];
              dK[ko + d] += gv * Q[qo + d];
            }
          }
      }
    } else {
      const float* V = in[0].data<float>();
      const float* A = in[1].data<float>();
      float* dV = g0.data();
      float* dA = g1.data();
#pragma omp parallel for if (B_ * H_ > 1)
      for (int64_t n = 0; n < B_ * H_; ++n) {
        const int64_t b = n / H_, h = n % H_;
        for (int64_t i = 0; i < Lq_; ++i)
          for (int64_t j = 0; j < Lk_; ++j) {
            const int64_t vo = kb_.at(j, b, h), go = out_proj_.at(i, b, h);
            const float a = A[(n * Lq_ + i) * Lk_ + j];
            double s = 0;
            for (int64_t d = 0; d < D_; ++d) {
              s += static_cast<double>(g[go + d]) * V[vo + d];
              dV[vo + d] += a * g[go + d];
            }
            dA[(n * Lq_ + i) * Lk_ + j] = static_cast<float>(s);
          }
      }
    }
    put(ig[0], req[0], g0);
    if (ig.size() > 1) put(ig[1], req[1], g1);
  }

 private:
  static void put(const NDArray& dst, Req req, const std::vector<float>& v) {
    if (req == Req::kNull) return;
    tensor::write_t<float>(dst.data<float>(), req, dst.size(),
                           [&](int64_t i) { return v[static_cast<size_t>(i)]; });
  }
  std::string what_;
  int64_t H_ = 1, B_ = 1, D_ = 1, Lq_ = 1, Lk_ = 1;
  Proj qa_{}, kb_{}, out_proj_{};
};

LOOM_REGISTER_OP("_contrib_interleaved_matmul_selfatt_qk")
    .describe("Query-key products of self attention from interleaved projections.")
    .params(kHeadsSchema)
    .inputs({"queries_keys_values"})
    .shape_fn(infer<Mode::kSelfQK>)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<InterleavedKernel<Mode::kSelfQK>>()
    .sample({.attrs = {{"heads", "2"}}, .in_shapes = {{3, 2, 12}}})
    .sample({.attrs = {{"heads", "1"}}, .in_shapes = {{4, 1, 9}}});
LOOM_REGISTER_OP("_contrib_interleaved_matmul_selfatt_valatt")
    .describe("Attention-weighted values of self attention from interleaved projections.")
    .params(kHeadsSchema)
    .inputs({"queries_keys_values", "attention"})
    .shape_fn(infer<Mode::kSelfValAtt>)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<InterleavedKernel<Mode::kSelfValAtt>>()
    .sample({.attrs = {{"heads", "2"}}, .in_shapes = {{3, 2, 12}, {4, 3, 3}}});
LOOM_REGISTER_OP("_contrib_interleaved_matmul_encdec_qk")
    .describe("Query-key products of encoder-decoder attention (keys and values interleaved).")
    .params(kHeadsSchema)
    .inputs({"queries", "keys_values"})
    .shape_fn(infer<Mode::kEncDecQK>)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<InterleavedKernel<Mode::kEncDecQK>>()
    .sample({.attrs = {{"heads", "2"}}, .in_shapes = {{3, 2, 4}, {5, 2, 8}}});
LOOM_REGISTER_OP("_contrib_interleaved_matmul_encdec_valatt")
    .describe("Attention-weighted values of encoder-decoder attention (keys and values "
              "interleaved).")
    .params(kHeadsSchema)
    .inputs({"keys_values", "attention"})
    .shape_fn(infer<Mode::kEncDecValAtt>)
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<InterleavedKernel<Mode::kEncDecValAtt>>()
    .sample({.attrs = {{"heads", "2"}}, .in_shapes = {{5, 2, 8}, {4, 3, 5}}});

LOOM_CPU_DTYPES("_contrib_interleaved_matmul_selfatt_qk", kDTypePolicyF32);
LOOM_CPU_DTYPES("_contrib_interleaved_matmul_selfatt_valatt", kDTypePolicyF32);
LOOM_CPU_DTYPES("_contrib_interleaved_matmul_encdec_qk", kDTypePolicyF32);
LOOM_CPU_DTYPES("_contrib_interleaved_matmul_encdec_valatt", kDTypePolicyF32);

}  // namespace
}  // namespace loom
