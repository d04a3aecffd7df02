#include "ops/nn/depthwise.h"

#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "ops/nn/block_vec.h"

namespace loom::nn {
namespace {

using block_vec::load;
using block_vec::store;
using block_vec::Vec;

// act(v) on one channel block: ReLU, or v < 0 scaled by `slope` (leaky's alpha in every lane
// or PReLU's per-channel slopes).
template <int B>
inline Vec<B> activate(Vec<B> v, DepthwiseAct::Kind kind, Vec<B> slope) {
  switch (kind) {
    case DepthwiseAct::kRelu:
      return v > 0 ? v : Vec<B>{};
    case DepthwiseAct::kLeaky:
    case DepthwiseAct::kPrelu:
      return v > 0 ? v : v * slope;
    case DepthwiseAct::kNone:
      break;
  }
  return v;
}

// The slopes of `act` for channel block cb (leaky: alpha in every lane).
template <int B>
inline Vec<B> slopes(const DepthwiseAct& act, int64_t cb) {
  if (act.kind == DepthwiseAct::kPrelu) return load<B>(act.slope.data() + cb * B);
  return Vec<B>{} + act.alpha;
}

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
    store<B>(out, activate<B>(v, kind, slope));
  }
};

// One output row of P channel blocks (1 or 2: two blocks give eight independent chains of
// FMAs, enough to hide their latency). `rp[i]`: the first block's input row (w x B) under
// kernel row i (set for the rows inside the input); `wp`, `out`: its packed weights
// (kh x kw x B) and output row (ow x B); the second block's are `is`, `ws`, `os` floats further.
// KW: the kernel width when known at compile time (0: s.kw). Columns [x0, x1) read no padding and
// go four at a time; the others one at a time over the kernel taps inside the input.
template <int B, int KW, int P>
void depthwise_row(const DepthwiseShape& s, const float* const* rp, const float* wp, float* out,
                   int64_t is, int64_t ws, int64_t os, int64_t y, int64_t x0, int64_t x1,
                   const Epilogue<B>* ep) {
  const int64_t kw = KW ? KW : s.kw;
  const int64_t iy0 = y * s.sh - s.ph;
  int64_t i0 = 0, i1 = s.kh;  // kernel rows inside the input
  while (i0 < s.kh && iy0 + i0 * s.dh < 0) ++i0;
  while (i1 > i0 && iy0 + (i1 - 1) * s.dh >= s.h) --i1;
  const int64_t step = s.sw * B, dstep = s.dw * B;
  auto one = [&](int64_t x) {
    Vec<B> a{}, b{};
    const int64_t ix0 = x * s.sw - s.pw;
    int64_t j0 = 0, j1 = kw;  // kernel columns inside the input
    while (j0 < kw && ix0 + j0 * s.dw < 0) ++j0;
    while (j1 > j0 && ix0 + (j1 - 1) * s.dw >= s.w) --j1;
    for (int64_t i = i0; i < i1; ++i) {
      const float* r = rp[i] + ix0 * B;
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
      const float* r = rp[i] + ix0 * B;
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
// the order (image, pair, row), spread over the threads in contiguous shares. With `pre`,
// each thread keeps the activated input rows of its current pair in a ring of `span` rows
// (row iy in slot iy % span: the rows one output row reads are `span` consecutive ones, so
// they never share a slot), each slot holding the pair's two blocks one after the other.
template <int B, int KW>
void depthwise_run(const DepthwiseShape& s, int threads, int64_t x0, int64_t x1, const float* src,
                   const float* wp, const float* bp, float* dst, bool sum, const DepthwiseAct& act,
                   const DepthwiseAct& pre, int64_t t0, int64_t t1) {
  const int64_t nb = s.c / B, pairs = (nb + 1) / 2, row = s.w * B;
  const int64_t is = s.h * row, ws = s.kh * s.kw * B, os = s.oh * s.ow * B;
  const int64_t span = (s.kh - 1) * s.dh + 1;
  const bool has_pre = pre.kind != DepthwiseAct::kNone;
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t ta = t0 + (t1 - t0) * id / nt, tb = t0 + (t1 - t0) * (id + 1) / nt;
    thread_local std::vector<const float*> rp;
    thread_local std::vector<float> ring;
    thread_local std::vector<int64_t> tag;  // per slot: pair * h + row held, -1: none
    rp.assign(static_cast<size_t>(s.kh), nullptr);
    if (has_pre) {
      if (ring.size() < static_cast<size_t>(span * 2 * row))
        ring.resize(static_cast<size_t>(span * 2 * row));
      tag.assign(static_cast<size_t>(span), -1);
    }
    for (int64_t t = ta; t < tb; ++t) {
      const int64_t y = t % s.oh, np = t / s.oh, n = np / pairs, cb = np % pairs * 2;
      const int parts = cb + 1 < nb ? 2 : 1;
      Epilogue<B> ep[2];
      for (int k = 0; k < parts; ++k)
        ep[k] = {load<B>(bp + (cb + k) * B), slopes<B>(act, cb + k), act.kind, sum};
      const int64_t nc = n * nb + cb;
      const float* in = src + nc * is;
      const int64_t iy0 = y * s.sh - s.ph;
      for (int64_t i = 0; i < s.kh; ++i) {
        const int64_t iy = iy0 + i * s.dh;
        if (iy < 0 || iy >= s.h) continue;  // depthwise_row skips these rows
        if (!has_pre) {
          rp[static_cast<size_t>(i)] = in + iy * row;
          continue;
        }
        const int64_t slot = iy % span, key = np * s.h + iy;
        float* r = ring.data() + slot * 2 * row;
        rp[static_cast<size_t>(i)] = r;
        if (tag[static_cast<size_t>(slot)] == key) continue;
        tag[static_cast<size_t>(slot)] = key;
        for (int k = 0; k < parts; ++k) {
          const Vec<B> sl = slopes<B>(pre, cb + k);
          const float* from = in + k * is + iy * row;
          float* to = r + k * row;
          for (int64_t x = 0; x < row; x += B)
            store<B>(to + x, activate<B>(load<B>(from + x), pre.kind, sl));
        }
      }
      const int64_t ris = has_pre ? row : is;
      float* out = dst + nc * os + y * s.ow * B;
      if (parts == 2)
        depthwise_row<B, KW, 2>(s, rp.data(), wp + cb * ws, out, ris, ws, os, y, x0, x1, ep);
      else
        depthwise_row<B, KW, 1>(s, rp.data(), wp + cb * ws, out, ris, ws, os, y, x0, x1, ep);
    }
  }
}

template <int B>
void depthwise_dispatch(const DepthwiseShape& s, int threads, int64_t x0, int64_t x1,
                        const float* src, const float* wp, const float* bp, float* dst, bool sum,
                        const DepthwiseAct& act, const DepthwiseAct& pre, int64_t t0, int64_t t1) {
  if (s.kw == 3)
    depthwise_run<B, 3>(s, threads, x0, x1, src, wp, bp, dst, sum, act, pre, t0, t1);
  else
    depthwise_run<B, 0>(s, threads, x0, x1, src, wp, bp, dst, sum, act, pre, t0, t1);
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
                            const DepthwiseAct& act, const DepthwiseAct& pre) {
  set_bias(bias);
  run_rows(src, dst, sum, act, pre, threads_, 0, rows());
}

int64_t DepthwiseConv::rows() const { return s_.n * ((s_.c / s_.block + 1) / 2) * s_.oh; }

void DepthwiseConv::set_bias(const float* bias) {
  for (int64_t c = 0; c < s_.c; ++c) bp_[static_cast<size_t>(c)] = bias ? bias[c] : 0.f;
}

void DepthwiseConv::forward_part(const float* src, float* dst, bool sum, const DepthwiseAct& act,
                                 int part, int parts, const DepthwiseAct& pre) const {
  const int64_t r = rows();
  run_rows(src, dst, sum, act, pre, 1, r * part / parts, r * (part + 1) / parts);
}

void DepthwiseConv::run_rows(const float* src, float* dst, bool sum, const DepthwiseAct& act,
                             const DepthwiseAct& pre, int threads, int64_t t0, int64_t t1) const {
  for (const DepthwiseAct* a : {&act, &pre})
    if (a->kind == DepthwiseAct::kPrelu && a->slope.size() < static_cast<size_t>(s_.c))
      throw std::invalid_argument("DepthwiseConv: PReLU needs one slope per channel");
  if (s_.block == 16)
    depthwise_dispatch<16>(s_, threads, x0_, x1_, src, wp_.data(), bp_.data(), dst, sum, act, pre,
                           t0, t1);
  else
    depthwise_dispatch<8>(s_, threads, x0_, x1_, src, wp_.data(), bp_.data(), dst, sum, act, pre,
                          t0, t1);
}

}  // namespace loom::nn
