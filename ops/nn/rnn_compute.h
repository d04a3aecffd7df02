// The fused RNN's CPU computation (MXNet 1.9.1's RNN operator): stacked, optionally
// bidirectional vanilla (ReLU/tanh), LSTM and GRU layers over (T, N, C) data, with all
// weights in one flat vector laid out as cuDNN/MXNet do:
//   for each layer, for each direction: W_i2h (G*H, C_layer), W_h2h (G*H, H);
//   then for each layer, for each direction: b_i2h (G*H), b_h2h (G*H).
// Gates in MXNet's order: LSTM i, f, g, o; GRU r, z, n, where
//   n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),  h' = (1 - z) n + z h.
// The second direction runs from t = T-1 down to 0; a layer's output is (T, N, D*H) with
// direction d in columns [d*H, (d+1)*H); state index = layer * D + direction.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ops/nn/rnn_gemm.h"

namespace loom::rnn {

enum class Mode { kRelu, kTanh, kLstm, kGru };

/// Sizes of one RNN node and offsets into its flat parameter vector.
struct Geometry {
  Mode mode = Mode::kLstm;
  int L = 1, D = 1;                    ///< layers, directions
  int64_t T = 0, N = 0, I = 0, H = 0;  ///< steps, batch, input size, state size
  int G() const { return mode == Mode::kLstm ? 4 : mode == Mode::kGru ? 3 : 1; }
  int64_t in_size(int l) const { return l ? D * H : I; }
  /// Weights of one direction of layer l.
  int64_t w_size(int l) const { return G() * H * (in_size(l) + H); }
  int64_t w_offset(int l, int d) const {
    int64_t o = 0;
    for (int k = 0; k < l; ++k) o += D * w_size(k);
    return o + d * w_size(l);
  }
  int64_t total_w() const { return w_offset(L, 0); }
  int64_t b_offset(int l, int d) const { return total_w() + (l * D + d) * 2 * G() * H; }
  int64_t param_size() const { return total_w() + int64_t(L) * D * 2 * G() * H; }
};

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

/// Runs forward and backward for one node, keeping what backward needs from the last
/// training forward. Buffers are sized on first use: a training forward keeps every layer's
/// intermediates, an inference one only two layers' outputs and one layer's gates.
template <class T>
class Rnn {
 public:
  explicit Rnn(const Geometry& g) : g_(g) {
    const int64_t GH = int64_t(g.G()) * g.H, LD = int64_t(g.L) * g.D;
    ys_.resize(g.L);
    gates_.resize(LD);
    if (g.mode == Mode::kLstm || g.mode == Mode::kGru) extra_.resize(LD);
    hy_.resize(LD * g.N * g.H);
    cy_.resize(LD * g.N * g.H);
    int64_t max_in = std::max(g.I, int64_t(g.D) * g.H);
    wt_.resize(GH * max_in);
    ht_.resize(GH * g.H);
    gh_.resize(g.N * GH);
    h_.resize(g.N * g.H);
    c_.resize(g.N * g.H);
  }

  /// Outputs are left in y() (T, N, D*H), hy() and cy() (L*D, N, H). `p` > 0 with `train`
  /// drops layer outputs (but the last) with that rate, scaling kept ones by 1/(1-p).
  void forward(const T* x, const T* w, const T* hx, const T* cx, bool train, float p,
               std::mt19937_64* rng) {
    const bool drop = train && p > 0 && g_.L > 1;
    keep_ = train;
    if (drop) {
      masks_.resize(g_.L - 1);
      xs_.resize(g_.L);
    }
    for (int l = 0; l < g_.L; ++l) {
      const T* in = l == 0 ? x : drop ? xs_[l].data() : ybuf(l - 1).data();
      for (int d = 0; d < g_.D; ++d) {
        const int s = l * g_.D + d;
        layer_forward(l, d, in, w, hx + s * g_.N * g_.H, cx ? cx + s * g_.N * g_.H : nullptr,
                      &hy_[s * g_.N * g_.H], &cy_[s * g_.N * g_.H]);
      }
      if (drop && l + 1 < g_.L) dropout(l, p, rng);
    }
    saved_ = train;
    dropped_ = drop;
  }

  /// Whether the last forward was a training one (its intermediates are still here).
  bool saved() const { return saved_; }
  const std::vector<T>& y() const { return ys_[keep_ ? g_.L - 1 : (g_.L - 1) % 2]; }
  const std::vector<T>& hy() const { return hy_; }
  const std::vector<T>& cy() const { return cy_; }
  const std::vector<T>& dx() const { return dx_; }
  const std::vector<T>& dw() const { return dw_; }
  const std::vector<T>& dhx() const { return dhx_; }
  const std::vector<T>& dcx() const { return dcx_; }

  /// Gradients of the last training forward (call forward first), left in dx() (when
  /// want_dx), dw() (param_size), dhx() and dcx() (LSTM). dhy/dcy may be null (zero).
  void backward(const T* x, const T* w, const T* hx, const T* cx, const T* dy, const T* dhy,
                const T* dcy, bool want_dx) {
    const int64_t TN = g_.T * g_.N, DH = int64_t(g_.D) * g_.H, GH = int64_t(g_.G()) * g_.H;
    const int64_t NH = g_.N * g_.H;
    // Backward-only buffers, sized on the first backward (inference binds never need them).
    dgx_.resize(TN * GH);
    dgh_.resize(TN * GH);
    dgt_.resize(TN * GH);
    hprev_.resize(TN * g_.H);
    dw_.resize(g_.param_size());
    dhx_.resize(int64_t(g_.L) * g_.D * NH);
    if (cx) dcx_.resize(dhx_.size());
    if (want_dx) dx_.resize(TN * g_.I);
    std::vector<T>& dcur = dcur_;
    std::vector<T>& dnext = dnext_;
    dcur.assign(dy, dy + TN * DH);
    T* dw = dw_.data();
    for (int l = g_.L - 1; l >= 0; --l) {
      const T* in = l == 0 ? x : dropped_ ? xs_[l].data() : ybuf(l - 1).data();
      T* din = nullptr;
      if (l > 0) {
        dnext.assign(TN * DH, T(0));
        din = dnext.data();
      } else {
        din = want_dx ? dx_.data() : nullptr;
      }
      for (int d = 0; d < g_.D; ++d) {
        const int s = l * g_.D + d;
        layer_backward(l, d, in, w, hx + s * NH, cx ? cx + s * NH : nullptr, dcur.data(),
                       dhy ? dhy + s * NH : nullptr, dcy ? dcy + s * NH : nullptr, din, d > 0, dw,
                       &dhx_[s * NH], cx ? &dcx_[s * NH] : nullptr);
      }
      if (l > 0) {
        if (dropped_) {
          const T* m = masks_[l - 1].data();
          for (int64_t i = 0; i < TN * DH; ++i) dnext[i] *= m[i];
        }
        dcur.swap(dnext);
      }
    }
  }

 private:
  static std::vector<T>& sized(std::vector<T>& v, int64_t n) {
    if (static_cast<int64_t>(v.size()) != n) v.resize(static_cast<size_t>(n));
    return v;
  }
  // Layer l's output, (T, N, D*H); without keep_ layers alternate between two buffers.
  std::vector<T>& ybuf(int l) { return sized(ys_[keep_ ? l : l % 2], g_.T * g_.N * g_.D * g_.H); }
  // Gates of (l, d), (T, N, G*H); without keep_ one set per direction.
  std::vector<T>& gbuf(int l, int d) {
    return sized(gates_[keep_ ? l * g_.D + d : d], g_.T * g_.N * g_.G() * g_.H);
  }
  T* ebuf(int l, int d) {
    if (extra_.empty()) return nullptr;
    return sized(extra_[keep_ ? l * g_.D + d : d], g_.T * g_.N * g_.H).data();
  }

  void dropout(int l, float p, std::mt19937_64* rng) {
    std::uniform_real_distribution<float> u(0.f, 1.f);
    std::mt19937_64 fallback(0);
    std::mt19937_64& r = rng ? *rng : fallback;
    const std::vector<T>& y = ybuf(l);
    std::vector<T>& m = masks_[l];
    std::vector<T>& out = xs_[l + 1];
    m.resize(y.size());
    out.resize(y.size());
    const T keep = p >= 1.f ? T(0) : T(1) / (T(1) - T(p));
    for (size_t i = 0; i < y.size(); ++i) {
      m[i] = u(r) < p ? T(0) : keep;
      out[i] = y[i] * m[i];
    }
  }

  // One direction of one layer: fills gates_/extra_ for (l, d) and its half of ys_[l].
  void layer_forward(int l, int d, const T* x, const T* w, const T* h0, const T* c0, T* hy, T* cy) {
    const int64_t N = g_.N, H = g_.H, In = g_.in_size(l), GH = int64_t(g_.G()) * H;
    const int64_t TN = g_.T * N, DH = int64_t(g_.D) * H;
    const T* wx = w + g_.w_offset(l, d);
    const T* wh = wx + GH * In;
    const T* bx = w + g_.b_offset(l, d);
    const T* bh = bx + GH;
    T* gates = gbuf(l, d).data();
    T* ext = ebuf(l, d);
    T* y = ybuf(l).data();
    transpose(GH, In, wx, wt_.data());
    matmul(TN, GH, In, x, wt_.data(), gates, false);
    transpose(GH, H, wh, ht_.data());
    std::copy(h0, h0 + N * H, h_.begin());
    if (c0) std::copy(c0, c0 + N * H, c_.begin());
    const Mode mode = g_.mode;
    for (int64_t step = 0; step < g_.T; ++step) {
      const int64_t t = d ? g_.T - 1 - step : step;
      matmul(N, GH, H, h_.data(), ht_.data(), gh_.data(), false);
      T* gt = gates + t * N * GH;
#pragma omp parallel for schedule(static) if (N * GH >= (1 << 14) && N > 1)
      for (int64_t n = 0; n < N; ++n) {
        T* gx = gt + n * GH;
        const T* gh = gh_.data() + n * GH;
        T* hn = h_.data() + n * H;
        T* yo = y + (t * N + n) * DH + d * H;
        if (mode == Mode::kLstm) {
          T* cn = c_.data() + n * H;
          for (int64_t j = 0; j < H; ++j) {
            const T i = sigmoid(gx[j] + gh[j] + bx[j] + bh[j]);
            const T f = sigmoid(gx[H + j] + gh[H + j] + bx[H + j] + bh[H + j]);
            const T g = std::tanh(gx[2 * H + j] + gh[2 * H + j] + bx[2 * H + j] + bh[2 * H + j]);
            const T o = sigmoid(gx[3 * H + j] + gh[3 * H + j] + bx[3 * H + j] + bh[3 * H + j]);
            const T c = f * cn[j] + i * g;
            gx[j] = i, gx[H + j] = f, gx[2 * H + j] = g, gx[3 * H + j] = o;
            ext[(t * N + n) * H + j] = c;
            cn[j] = c;
            hn[j] = yo[j] = o * std::tanh(c);
          }
        } else if (mode == Mode::kGru) {
          for (int64_t j = 0; j < H; ++j) {
            const T r = sigmoid(gx[j] + gh[j] + bx[j] + bh[j]);
            const T z = sigmoid(gx[H + j] + gh[H + j] + bx[H + j] + bh[H + j]);
            const T hh = gh[2 * H + j] + bh[2 * H + j];
            const T nn = std::tanh(gx[2 * H + j] + bx[2 * H + j] + r * hh);
            gx[j] = r, gx[H + j] = z, gx[2 * H + j] = nn;
            ext[(t * N + n) * H + j] = hh;
            hn[j] = yo[j] = (T(1) - z) * nn + z * hn[j];
          }
        } else {
          const bool relu = mode == Mode::kRelu;
          for (int64_t j = 0; j < H; ++j) {
            const T a = gx[j] + gh[j] + bx[j] + bh[j];
            hn[j] = yo[j] = relu ? (a > T(0) ? a : T(0)) : std::tanh(a);
          }
        }
      }
    }
    std::copy(h_.begin(), h_.end(), hy);
    if (mode == Mode::kLstm) std::copy(c_.begin(), c_.end(), cy);
  }

  // Backward of one direction of one layer. dy: (T, N, D*H) gradient of the layer's output;
  // dx (T, N, In) receives (add_dx: adds) the input gradient; dw the weight/bias gradients.
  void layer_backward(int l, int d, const T* x, const T* w, const T* h0, const T* c0, const T* dy,
                      const T* dhy, const T* dcy, T* dx, bool add_dx, T* dw, T* dh0, T* dc0) {
    const int64_t N = g_.N, H = g_.H, In = g_.in_size(l), GH = int64_t(g_.G()) * H;
    const int64_t TN = g_.T * N, DH = int64_t(g_.D) * H, NH = N * H;
    const T* wx = w + g_.w_offset(l, d);
    const T* wh = wx + GH * In;
    const T* gates = gbuf(l, d).data();
    const T* ext = ebuf(l, d);
    const T* y = ybuf(l).data();
    T* dh = h_.data();  // gradient flowing into the state of the step being processed
    T* dc = c_.data();
    if (dhy)
      std::copy(dhy, dhy + NH, dh);
    else
      std::fill(dh, dh + NH, T(0));
    if (dcy && c0)
      std::copy(dcy, dcy + NH, dc);
    else
      std::fill(dc, dc + NH, T(0));
    const Mode mode = g_.mode;
    for (int64_t step = g_.T - 1; step >= 0; --step) {
      const int64_t t = d ? g_.T - 1 - step : step;
      const int64_t tp = d ? t + 1 : t - 1;  // the step whose state this one started from
#pragma omp parallel for schedule(static) if (N * GH >= (1 << 14) && N > 1)
      for (int64_t n = 0; n < N; ++n) {
        const T* hp = step ? y + (tp * N + n) * DH + d * H : h0 + n * H;
        std::copy(hp, hp + H, &hprev_[(t * N + n) * H]);
        const T* g = gates + (t * N + n) * GH;
        const T* dyo = dy + (t * N + n) * DH + d * H;
        T* dgx = &dgx_[(t * N + n) * GH];
        T* dgh = &dgh_[(t * N + n) * GH];
        T* dhn = dh + n * H;
        if (mode == Mode::kLstm) {
          const T* cp = step ? ext + (tp * N + n) * H : c0 + n * H;
          const T* cc = ext + (t * N + n) * H;
          T* dcn = dc + n * H;
          for (int64_t j = 0; j < H; ++j) {
            const T i = g[j], f = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
            const T tc = std::tanh(cc[j]);
            const T dht = dyo[j] + dhn[j];
            const T dct = dcn[j] + dht * o * (T(1) - tc * tc);
            dgx[j] = dct * gg * i * (T(1) - i);
            dgx[H + j] = dct * cp[j] * f * (T(1) - f);
            dgx[2 * H + j] = dct * i * (T(1) - gg * gg);
            dgx[3 * H + j] = dht * tc * o * (T(1) - o);
            dcn[j] = dct * f;
          }
          std::copy(dgx, dgx + GH, dgh);
        } else if (mode == Mode::kGru) {
          const T* hh = ext + (t * N + n) * H;
          for (int64_t j = 0; j < H; ++j) {
            const T r = g[j], z = g[H + j], nn = g[2 * H + j];
            const T dht = dyo[j] + dhn[j];
            const T dan = dht * (T(1) - z) * (T(1) - nn * nn);
            const T dr = dan * hh[j];
            dgx[j] = dgh[j] = dr * r * (T(1) - r);
            dgx[H + j] = dgh[H + j] = dht * (hp[j] - nn) * z * (T(1) - z);
            dgx[2 * H + j] = dan;
            dgh[2 * H + j] = dan * r;
            dhn[j] = dht * z;  // the direct path; the gate paths are added below
          }
        } else {
          const T* ho = y + (t * N + n) * DH + d * H;
          const bool relu = mode == Mode::kRelu;
          for (int64_t j = 0; j < H; ++j) {
            const T dht = dyo[j] + dhn[j];
            dgx[j] = dgh[j] = relu ? (ho[j] > T(0) ? dht : T(0)) : dht * (T(1) - ho[j] * ho[j]);
          }
        }
      }
      matmul(N, H, GH, &dgh_[t * N * GH], wh, dh, mode == Mode::kGru);
    }
    std::copy(dh, dh + NH, dh0);
    if (dc0) std::copy(dc, dc + NH, dc0);
    // Weight and bias gradients over all steps at once.
    T* dwx = dw + g_.w_offset(l, d);
    T* dwh = dwx + GH * In;
    T* dbx = dw + g_.b_offset(l, d);
    T* dbh = dbx + GH;
    transpose(TN, GH, dgx_.data(), dgt_.data());
    matmul(GH, In, TN, dgt_.data(), x, dwx, false);
    for (int64_t k = 0; k < GH; ++k) {
      T acc = 0;
      for (int64_t i = 0; i < TN; ++i) acc += dgt_[k * TN + i];
      dbx[k] = acc;
    }
    transpose(TN, GH, dgh_.data(), dgt_.data());
    matmul(GH, H, TN, dgt_.data(), hprev_.data(), dwh, false);
    for (int64_t k = 0; k < GH; ++k) {
      T acc = 0;
      for (int64_t i = 0; i < TN; ++i) acc += dgt_[k * TN + i];
      dbh[k] = acc;
    }
    if (dx) matmul(TN, In, GH, dgx_.data(), wx, dx, add_dx);
  }

  Geometry g_;
  std::vector<std::vector<T>> ys_;     // per layer: outputs (T, N, D*H), before dropout
  std::vector<std::vector<T>> xs_;     // per layer > 0, with dropout: its input after dropout
  std::vector<std::vector<T>> masks_;  // per layer < L-1, with dropout: 0 or 1/(1-p)
  std::vector<std::vector<T>> gates_;  // per (layer, dir): gate activations (T, N, G*H)
  std::vector<std::vector<T>> extra_;  // per (layer, dir): LSTM cells / GRU W_hn h + b_hn
  std::vector<T> hy_, cy_;
  std::vector<T> wt_, ht_, gh_, h_, c_;                    // transposed weights and step scratch
  std::vector<T> dgx_, dgh_, dgt_, hprev_, dcur_, dnext_;  // backward scratch
  std::vector<T> dx_, dw_, dhx_, dcx_;                     // backward results
  bool saved_ = false, dropped_ = false, keep_ = false;
};

}  // namespace loom::rnn
