// CTCLoss (aliases ctc_loss, _contrib_CTCLoss, _contrib_ctc_loss), MXNet 1.9.1: the
// connectionist temporal classification loss of activations data (T, N, A) (softmax taken
// inside) against label (N, Lmax), one loss per sample. The blank is channel 0
// (blank_label='first', labels end at the first 0) or A-1 ('last', labels end at the first
// -1), unless label_lengths says where; data_lengths limits each sample's steps. As MXNet,
// forward also computes d loss / d data into a hidden second output that backward scales by
// the head gradient; a sample whose labels cannot fit its steps (L + repeats > T) has loss 0
// and gradient 0; steps beyond a sample's length get gradient 0.
#include <cmath>
#include <limits>

#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

struct CTCParam {
  bool use_data_lengths;
  bool use_label_lengths;
  std::string blank_label;
};
const auto kCTCSchema =
    ParamSchema<CTCParam>()
        .optional("use_data_lengths", &CTCParam::use_data_lengths, false,
                  "Take each sample's number of steps from the data_lengths input.")
        .optional("use_label_lengths", &CTCParam::use_label_lengths, false,
                  "Take each sample's number of labels from the label_lengths input (else "
                  "up to the first padding value: 0 with blank 'first', -1 with 'last').")
        .choice("blank_label", &CTCParam::blank_label, {"first", "last"}, "first",
                "Channel reserved for the blank: 0 ('first') or alphabet_size-1 ('last').");

std::vector<std::string> ctc_inputs(const OpAttrs& a) {
  const auto& p = a.param<CTCParam>();
  std::vector<std::string> v{"data", "label"};
  if (p.use_data_lengths) v.push_back("data_lengths");
  if (p.use_label_lengths) v.push_back("label_lengths");
  return v;
}

void infer_ctc(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const auto& p = a.param<CTCParam>();
  const Shape &d = in[0], &l = in[1];
  if (d.ndim() != 0 && d.ndim() != 3)
    throw ShapeError("input 0 (data) must be (sequence length, batch, alphabet size), got " +
                     d.str());
  if (l.ndim() != 0 && l.ndim() != 2)
    throw ShapeError("input 1 (label) must be (batch, label length), got " + l.str());
  if (d.ndim() == 0) return;
  if (l.ndim() == 2) {
    if (l[0] != d[1])
      throw ShapeError("label batch " + std::to_string(l[0]) + " differs from data batch " +
                       std::to_string(d[1]));
    if (l[1] > d[0])
      throw ShapeError("the label length " + std::to_string(l[1]) +
                       " exceeds the sequence length " + std::to_string(d[0]) + " of data");
  }
  size_t k = 2;
  if (p.use_data_lengths) merge_shape(in[k], Shape{d[1]}, input_label(a, k)), ++k;
  if (p.use_label_lengths) merge_shape(in[k], Shape{d[1]}, input_label(a, k));
  merge_shape(out[0], Shape{d[1]}, "output 0");
  merge_shape(out[1], d, "output 1");
}

void infer_ctc_type(const OpAttrs&, std::vector<DType>& in, std::vector<DType>& out) {
  // Labels and lengths keep their own dtype (integers allowed); the outputs follow data.
  for (size_t i = 1; i < in.size(); ++i)
    if (in[i] == DType::kUnknown) in[i] = DType::kFloat32;
  if (in[0] == DType::kUnknown) in[0] = out[0] != DType::kUnknown ? out[0] : DType::kFloat32;
  merge_type(out[0], in[0], "output 0");
  merge_type(out[1], in[0], "output 1");
}

double log_add(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  return std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b)));
}

// One sample: loss and gradient rows grad[t * row_stride + k] for t < T (the caller zeroes
// the rest). lp holds log_softmax of the sample's steps, (T, A).
double ctc_sample(const std::vector<double>& lp, int64_t T, int64_t A, const std::vector<int>& lab,
                  int blank, std::vector<double>& grad) {
  const int64_t L = static_cast<int64_t>(lab.size()), S = 2 * L + 1;
  int64_t repeats = 0;
  for (int64_t i = 1; i < L; ++i) repeats += lab[i] == lab[i - 1];
  grad.assign(static_cast<size_t>(T * A), 0.0);
  if (L + repeats > T) return 0.0;  // no alignment fits: MXNet reports 0
  std::vector<int> ext(static_cast<size_t>(S), blank);
  for (int64_t i = 0; i < L; ++i) ext[2 * i + 1] = lab[i];
  auto skip_ok = [&](int64_t s) { return ext[s] != blank && s >= 2 && ext[s] != ext[s - 2]; };
  std::vector<double> alpha(static_cast<size_t>(T * S), -INFINITY), beta(alpha.size(), -INFINITY);
  alpha[0] = lp[blank];
  if (S > 1) alpha[1] = lp[ext[1]];
  for (int64_t t = 1; t < T; ++t)
    for (int64_t s = 0; s < S; ++s) {
      double v = alpha[(t - 1) * S + s];
      if (s >= 1) v = log_add(v, alpha[(t - 1) * S + s - 1]);
      if (skip_ok(s)) v = log_add(v, alpha[(t - 1) * S + s - 2]);
      alpha[t * S + s] = v == -INFINITY ? v : v + lp[t * A + ext[s]];
    }
  double loglike = alpha[(T - 1) * S + S - 1];
  if (S > 1) loglike = log_add(loglike, alpha[(T - 1) * S + S - 2]);
  beta[(T - 1) * S + S - 1] = lp[(T - 1) * A + blank];
  if (S > 1) beta[(T - 1) * S + S - 2] = lp[(T - 1) * A + ext[S - 2]];
  for (int64_t t = T - 2; t >= 0; --t)
    for (int64_t s = 0; s < S; ++s) {
      double v = beta[(t + 1) * S + s];
      if (s + 1 < S) v = log_add(v, beta[(t + 1) * S + s + 1]);
      if (s + 2 < S && skip_ok(s + 2)) v = log_add(v, beta[(t + 1) * S + s + 2]);
      beta[t * S + s] = v == -INFINITY ? v : v + lp[t * A + ext[s]];
    }
  // d(-log p)/d activation = softmax - occupancy, where occupancy(t, k) = sum over positions
  // s labelled k of alpha * beta / (p * y_tk) (both alpha and beta include y_tk).
  std::vector<double> occ(static_cast<size_t>(A));
  for (int64_t t = 0; t < T; ++t) {
    std::fill(occ.begin(), occ.end(), -INFINITY);
    for (int64_t s = 0; s < S; ++s)
      occ[ext[s]] = log_add(occ[ext[s]], alpha[t * S + s] + beta[t * S + s]);
    for (int64_t k = 0; k < A; ++k) {
      const double l = lp[t * A + k];
      double g = std::exp(l);
      // As warp-ctc: no occupancy term where it is -inf or exactly log 1.
      if (occ[k] != -INFINITY && occ[k] != 0.0 && l != -INFINITY)
        g -= std::exp(occ[k] - l - loglike);
      grad[t * A + k] = g;
    }
  }
  return -loglike;
}

class CTCKernel final : public Kernel {
 public:
  explicit CTCKernel(const KernelArgs& a)
      : p_(a.attrs.param<CTCParam>()), what_(tensor::node_label(a)) {
    t_ = a.in_types[0];
    if (t_ != DType::kFloat32 && t_ != DType::kFloat64)
      throw DTypePolicyError(what_ + ": data dtype " + std::string(dtype_name(t_)) +
                             " is not supported; it takes float32, float64");
    const Shape& d = a.in_shapes[0];
    T_ = d[0], N_ = d[1], A_ = d[2], Lmax_ = a.in_shapes[1][1];
  }

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) run<T>(in, req, out);
        },
        what_);
  }

  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    tensor::dispatch_float(
        t_,
        [&](auto tag) {
          using T = typename decltype(tag)::type;
          if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float>) {
            const T* g = og[0].cdata<T>();
            const T* saved = out[1].cdata<T>();
            T* dx = ig[0].data<T>();
            const bool add = req[0] == Req::kAdd;
            for (int64_t t = 0; t < T_; ++t)
              for (int64_t b = 0; b < N_; ++b)
                for (int64_t k = 0; k < A_; ++k) {
                  const int64_t i = (t * N_ + b) * A_ + k;
                  const T v = g[b] * saved[i];
                  dx[i] = add ? dx[i] + v : v;
                }
          }
        },
        what_);
  }

 private:
  template <class T>
  void run(std::span<const NDArray> in, std::span<const Req> req, std::span<const NDArray> out) {
    const T* x = in[0].cdata<T>();
    const NDArray& label = in[1];
    const NDArray* dlen = p_.use_data_lengths ? &in[2] : nullptr;
    const NDArray* llen = p_.use_label_lengths ? &in[p_.use_data_lengths ? 3 : 2] : nullptr;
    const int blank = p_.blank_label == "first" ? 0 : static_cast<int>(A_ - 1);
    const int pad = p_.blank_label == "first" ? 0 : -1;
    // Labels and lengths, checked before any output is touched.
    std::vector<std::vector<int>> labels(static_cast<size_t>(N_));
    std::vector<int64_t> steps(static_cast<size_t>(N_), T_);
    for (int64_t b = 0; b < N_; ++b) {
      if (dlen) {
        const double v = dlen->at(b);
        if (!(v >= 0 && v <= double(T_)))
          throw Error(what_ + ": data_lengths[" + std::to_string(b) + "] = " + std::to_string(v) +
                      " is outside [0, " + std::to_string(T_) + "]");
        steps[b] = static_cast<int64_t>(v);
      }
      int64_t n = Lmax_;
      if (llen) {
        const double v = llen->at(b);
        if (!(v >= 0 && v <= double(Lmax_)))
          throw Error(what_ + ": label_lengths[" + std::to_string(b) + "] = " + std::to_string(v) +
                      " is outside [0, " + std::to_string(Lmax_) + "]");
        n = static_cast<int64_t>(v);
      }
      for (int64_t j = 0; j < n; ++j) {
        const int c = static_cast<int>(label.at(b * Lmax_ + j));
        if (!llen && c == pad) break;
        if (c < 0 || c >= A_ || c == blank)
          throw Error(what_ + ": label[" + std::to_string(b) + ", " + std::to_string(j) +
                      "] = " + std::to_string(c) + " is not a label in [0, " + std::to_string(A_) +
                      ") other than the blank " + std::to_string(blank));
        labels[b].push_back(c);
      }
    }
    T* loss = out[0].data<T>();
    T* grad = req[1] != Req::kNull ? out[1].data<T>() : nullptr;
#pragma omp parallel for schedule(dynamic) if (N_ > 1 && T_ * A_ * N_ >= (1 << 14))
    for (int64_t b = 0; b < N_; ++b) {
      const int64_t Tb = steps[b];
      std::vector<double> lp(static_cast<size_t>(Tb * A_)), g;
      for (int64_t t = 0; t < Tb; ++t) {
        const T* row = x + (t * N_ + b) * A_;
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < A_; ++k) mx = std::max(mx, double(row[k]));
        for (int64_t k = 0; k < A_; ++k) sum += std::exp(double(row[k]) - mx);
        const double lse = mx + std::log(sum);
        for (int64_t k = 0; k < A_; ++k) lp[t * A_ + k] = double(row[k]) - lse;
      }
      const double cost = Tb > 0 ? ctc_sample(lp, Tb, A_, labels[b], blank, g) : 0.0;
      if (req[0] != Req::kNull) loss[b] = req[0] == Req::kAdd ? loss[b] + T(cost) : T(cost);
      if (!grad) continue;
      for (int64_t t = 0; t < T_; ++t)
        for (int64_t k = 0; k < A_; ++k)
          grad[(t * N_ + b) * A_ + k] = t < Tb ? T(g[t * A_ + k]) : T(0);
    }
  }

  CTCParam p_;
  std::string what_;
  DType t_;
  int64_t T_, N_, A_, Lmax_;
};

LOOM_REGISTER_OP("CTCLoss")
    .alias("ctc_loss")
    .alias("_contrib_CTCLoss")
    .alias("_contrib_ctc_loss")
    .describe("Connectionist temporal classification loss of activations against labels.")
    .params(kCTCSchema)
    .inputs(ctc_inputs)
    .outputs({"output0", "output1"})
    .visible_outputs([](const OpAttrs&) { return 1; })
    .shape_fn(infer_ctc)
    .type_fn(infer_ctc_type)
    .deps(GradDeps{.out_grad = true, .in_data = false, .out_data = true, .out_data_mask = 2u})
    .no_grad({1, 2, 3})
    .cpu<CTCKernel>()
    .sample({.attrs = {}, .in_shapes = {{4, 2, 5}, {2, 3}}, .in_kinds = {"normal", "label:5"}})
    .sample({.attrs = {{"blank_label", "last"}},
             .in_shapes = {{5, 3, 4}, {3, 2}},
             .in_kinds = {"normal", "label:3"}})
    .sample({.attrs = {{"use_data_lengths", "True"},
                       {"use_label_lengths", "True"},
                       {"blank_label", "last"}},
             .in_shapes = {{3, 3, 4}, {3, 2}, {3}, {3}},
             .in_kinds = {"normal", "label:3", "above1", "ones"}});

}  // namespace
}  // namespace loom
