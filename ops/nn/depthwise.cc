#include "ops/nn/depthwise.h"

#include <algorithm>
#include <stdexcept>

#include "ops/nn/block_vec.h"

namespace loom::nn {
namespace {

using block_vec::load;
using block_vec::store;
using block_vec::Vec;

// What one channel block of one output row needs besides the arrays.
template <int B>
struct Epilogue {
  Vec<B> bias, slope;  // slope: kLeaky's alpha or kPrelu's per-channel slopes
  DepthwiseAct::Kind kind;
  bool sum;
  // Writes act(acc + bias [+ *out]) to out.
  inline void operator()(float* out, Vec<B> acc) const {
    Vec<B> v = acc + bias;
    if (sum) v += load<B>(out);
    switch (kind) {
      case DepthwiseAct::kRelu:
        v = v > 0 ? v : Vec<B>{};
        break;
      case DepthwiseAct::kLeaky:
      case DepthwiseAct::kPrelu:
        v = v > 0 ? v : v * slope;
        break;
      case DepthwiseAct::kNone:
        break;
    }
    store<B>(out, v);
  }
};

// One output row of P channel blocks (1 or 2: two blocks give eight independent chains of
// FMAs, enough to hide their latency). `in`, `wp`, `out`: the first block's input plane
// (h x w x B), packed weights (kh x kw x B) and output row (ow x B); the second block's are
// `is`, `ws`, `os` floats further. KW: the kernel width when known at compile time (0: s.kw).
// Columns [x0, x1) read no padding and go four at a time; the others one at a time over the
// kernel taps inside the input.
template <int B, int KW, int P>
void depthwise_row(const DepthwiseShape& s, const float* in, const float* wp, float* out,
                   int64_t is, int64_t ws, int64_t os, int64_t y, int64_t x0, int64_t x1,
                   const Epilogue<B>* ep) {
  const int64_t kw = KW ? KW : s.kw;
  const int64_t iy0 = y * s.sh - s.ph;
  int64_t i0 = 0, i1 = s.kh;  // kernel rows inside the input
  while (i0 < s.kh && iy0 + i0 * s.dh < 0) ++i0;
  while (i1 > i0 && iy0 + (i1 - 1) * s.dh >= s.h) --i1;
  const int64_t row = s.w * B, step = s.sw * B, dstep = s.dw * B;
  auto one = [&](int64_t x) {
    Vec<B> a{}, b{};
    const int64_t ix0 = x * s.sw - s.pw;
    int64_t j0 = 0, j1 = kw;  // kernel columns inside the input
    while (j0 < kw && ix0 + j0 * s.dw < 0) ++j0;
    while (j1 > j0 && ix0 + (j1 - 1) * s.dw >= s.w) --j1;
    for (int64_t i = i0; i < i1; ++i) {
      const float* r = in + (iy0 + i * s.dh) * row + ix0 * B;
      const float* wr = wp + i * kw * B;
      for (int64_t j = j0; j < j1; ++j) {
        a += load<B>(r + j * dstep) * load<B>(wr + j * B);
        if constexpr (P == 2) b += load<B>(r + is + j * dstep) * load<B>(wr + ws + j * B);
      }
    }
    ep[0](out + x * B, a);
    if constexpr (P == 2) ep[1](out + os + x * B, b);
  };
  for (int64_t x = 0; x < x0; ++x) one(x);
  int64_t x = x0;
  for (; x + 4 <= x1; x += 4) {
    Vec<B> a0{}, a1{}, a2{}, a3{}, b0{}, b1{}, b2{}, b3{};
    const int64_t ix0 = x * s.sw - s.pw;
    for (int64_t i = i0; i < i1; ++i) {
      const float* r = in + (iy0 + i * s.dh) * row + ix0 * B;
      const float* wr = wp + i * kw * B;
      for (int64_t j = 0; j < kw; ++j) {
        const float* p = r + j * dstep;
        const Vec<B> wa = load<B>(wr + j * B);
        a0 += load<B>(p) * wa;
        a1 += load<B>(p + step) * wa;
        a2 += load<B>(p + 2 * step) * wa;
        a3 += load<B>(p + 3 * step) * wa;
        if constexpr (P == 2) {
          const Vec<B> wb = load<B>(wr + ws + j * B);
          b0 += load<B>(p + is) * wb;
          b1 += load<B>(p + is + step) * wb;
          b2 += load<B>(p + is + 2 * step) * wb;
          b3 += load<B>(p + is + 3 * step) * wb;
        }
      }
    }
    float* o = out + x * B;
    ep[0](o, a0), ep[0](o + B, a1), ep[0](o + 2 * B, a2), ep[0](o + 3 * B, a3);
    if constexpr (P == 2) {
      o += os;
      ep[1](o, b0), ep[1](o + B, b1), ep[1](o + 2 * B, b2), ep[1](o + 3 * B, b3);
    }
  }
  for (; x < s.ow; ++x) one(x);
}

// Output rows [t0, t1) of every block pair (a lone last block when the count is odd), in
// the order (image, pair, row), spread over the threads.
template <int B, int KW>
void depthwise_run(const DepthwiseShape& s, int threads, int64_t x0, int64_t x1, const float* src,
                   const float* wp, const float* bp, float* dst, bool sum, const DepthwiseAct& act,
                   int64_t t0, int64_t t1) {
  const int64_t nb = s.c / B, pairs = (nb + 1) / 2;
  const int64_t is = s.h * s.w * B, ws = s.kh * s.kw * B, os = s.oh * s.ow * B;
#pragma omp parallel for num_threads(threads) if (threads > 1) schedule(static)
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t y = t % s.oh, np = t / s.oh, n = np / pairs, cb = np % pairs * 2;
    Epilogue<B> ep[2];
    for (int k = 0; k < 2 && cb + k < nb; ++k) {
      ep[k] = {load<B>(bp + (cb + k) * B), Vec<B>{} + act.alpha, act.kind, sum};
      if (act.kind == DepthwiseAct::kPrelu) ep[k].slope = load<B>(act.slope.data() + (cb + k) * B);
    }
    const int64_t nc = n * nb + cb;
    const float* in = src + nc * is;
    float* out = dst + nc * os + y * s.ow * B;
    if (cb + 1 < nb)
      depthwise_row<B, KW, 2>(s, in, wp + cb * ws, out, is, ws, os, y, x0, x1, ep);
    else
      depthwise_row<B, KW, 1>(s, in, wp + cb * ws, out, is, ws, os, y, x0, x1, ep);
  }
}

template <int B>
void depthwise_dispatch(const DepthwiseShape& s, int threads, int64_t x0, int64_t x1,
                        const float* src, const float* wp, const float* bp, float* dst, bool sum,
                        const DepthwiseAct& act, int64_t t0, int64_t t1) {
  if (s.kw == 3)
    depthwise_run<B, 3>(s, threads, x0, x1, src, wp, bp, dst, sum, act, t0, t1);
  else
    depthwise_run<B, 0>(s, threads, x0, x1, src, wp, bp, dst, sum, act, t0, t1);
}

}  // namespace

bool depthwise_supported(const DepthwiseShape& s) {
  return (s.block == 8 || s.block == 16) && s.c > 0 && s.c % s.block == 0 && s.n > 0 && s.h > 0 &&
         s.w > 0 && s.oh > 0 && s.ow > 0 && s.kh > 0 && s.kw > 0 && s.sh > 0 && s.sw > 0 &&
         s.dh > 0 && s.dw > 0 && s.ph >= 0 && s.pw >= 0;
}

DepthwiseConv::DepthwiseConv(const DepthwiseShape& s, int threads)
    : s_(s), threads_(std::max(threads, 1)) {
  if (!depthwise_supported(s)) throw std::invalid_argument("DepthwiseConv: unsupported shape");
  // Interior columns: x * sw - pw >= 0 and x * sw - pw + (kw - 1) * dw <= w - 1.
  x0_ = std::min<int64_t>((s.pw + s.sw - 1) / s.sw, s.ow);
  const int64_t last = s.w - 1 - (s.kw - 1) * s.dw + s.pw;
  x1_ = last < 0 ? x0_ : std::clamp<int64_t>(last / s.sw + 1, x0_, s.ow);
  wp_.resize(static_cast<size_t>(s.c * s.kh * s.kw));
  bp_.resize(static_cast<size_t>(s.c));
}

void DepthwiseConv::pack_weights(const float* w, std::span<const float> scale) {
  const int64_t B = s_.block, k = s_.kh * s_.kw;
  for (int64_t c = 0; c < s_.c; ++c) {
    const float sc = scale.empty() ? 1.f : scale[static_cast<size_t>(c)];
    float* wb = wp_.data() + (c / B) * k * B + c % B;
    for (int64_t e = 0; e < k; ++e) wb[e * B] = w[c * k + e] * sc;
  }
}

void DepthwiseConv::forward(const float* src, const float* bias, float* dst, bool sum,
                            const DepthwiseAct& act) {
  set_bias(bias);
  run_rows(src, dst, sum, act, threads_, 0, rows());
}

int64_t DepthwiseConv::rows() const { return s_.n * ((s_.c / s_.block + 1) / 2) * s_.oh; }

void DepthwiseConv::set_bias(const float* bias) {
  for (int64_t c = 0; c < s_.c; ++c) bp_[static_cast<size_t>(c)] = bias ? bias[c] : 0.f;
}

void DepthwiseConv::forward_part(const float* src, float* dst, bool sum, const DepthwiseAct& act,
                                 int part, int parts) const {
  const int64_t r = rows();
  run_rows(src, dst, sum, act, 1, r * part / parts, r * (part + 1) / parts);
}

void DepthwiseConv::run_rows(const float* src, float* dst, bool sum, const DepthwiseAct& act,
                             int threads, int64_t t0, int64_t t1) const {
  if (act.kind == DepthwiseAct::kPrelu && act.slope.size() < static_cast<size_t>(s_.c))
    throw std::invalid_argument("DepthwiseConv: PReLU needs one slope per channel");
  if (s_.block == 16)
    depthwise_dispatch<16>(s_, threads, x0_, x1_, src, wp_.data(), bp_.data(), dst, sum, act, t0,
                           t1);
  else
    depthwise_dispatch<8>(s_, threads, x0_, x1_, src, wp_.data(), bp_.data(), dst, sum, act, t0,
                          t1);
}

}  // namespace loom::nn
