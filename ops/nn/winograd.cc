#include "ops/nn/winograd.h"

#include <omp.h>

#include <algorithm>
#include <functional>

#include "ops/nn/block_vec.h"
#include "runtime/cpu/thread_cap.h"

namespace loom::nn {
namespace {

// F(4x4, 3x3) on the points 0, 1, -1, 2, -2 and infinity (Lavin & Gray, 2015):
// B^T (input, 6x6), G (weights, 6x3), A^T (output, 4x6), written out as sums.

using block_vec::load;
using block_vec::store;
using block_vec::Vec;

// r = B^T x for one column (or row) of six vectors.
template <typename T>
inline void input_1d(const T* x, T* r) {
  r[0] = 4.f * x[0] - 5.f * x[2] + x[4];
  r[1] = -4.f * (x[1] + x[2]) + x[3] + x[4];
  r[2] = 4.f * (x[1] - x[2]) - x[3] + x[4];
  r[3] = 2.f * (x[3] - x[1]) - x[2] + x[4];
  r[4] = 2.f * (x[1] - x[3]) - x[2] + x[4];
  r[5] = 4.f * x[1] - 5.f * x[3] + x[5];
}

// r = A^T m for six vectors, four results.
template <typename T>
inline void output_1d(const T* m, T* r) {
  const T a = m[1] + m[2], b = m[1] - m[2], c = m[3] + m[4], d = m[3] - m[4];
  r[0] = m[0] + a + c;
  r[1] = b + 2.f * d;
  r[2] = a + 4.f * c;
  r[3] = b + 8.f * d + m[5];
}

// r = G g for three weights, six results (computed in double, rounded once).
inline void weight_1d(const double* g, double* r) {
  r[0] = g[0] / 4;
  r[1] = -(g[0] + g[1] + g[2]) / 6;
  r[2] = -(g[0] - g[1] + g[2]) / 6;
  r[3] = g[0] / 24 + g[1] / 12 + g[2] / 6;
  r[4] = g[0] / 24 - g[1] / 12 + g[2] / 6;
  r[5] = g[2];
}

// r = A y for four values, six results: the forward's output transform, transposed.
template <typename T>
inline void expand_1d(const T* y, T* r) {
  const T a = y[0] + y[2], b = y[1] + y[3], c = y[0] + 4.f * y[2], d = 2.f * y[1] + 8.f * y[3];
  r[0] = y[0];
  r[1] = a + b;
  r[2] = a - b;
  r[3] = c + d;
  r[4] = c - d;
  r[5] = y[3];
}

// r = G^T m for six values, three results: the forward's weight transform, transposed.
inline void reduce_1d(const double* m, double* r) {
  r[0] = m[0] / 4 - (m[1] + m[2]) / 6 + (m[3] + m[4]) / 24;
  r[1] = (m[2] - m[1]) / 6 + (m[3] - m[4]) / 12;
  r[2] = (m[3] + m[4] - m[1] - m[2]) / 6 + m[5];
}

// One tile t's 4x4 output gradient (zero past the output's edge) for channel block kb
// through A . A^T, stored as Y[p][row][kb*B ..] at y + p * pos_stride + row * k.
template <int B>
inline void ygrad_tile(const WinogradShape& s, const float* dy, int64_t t, int64_t kb, float* y,
                       int64_t pos_stride, int64_t row) {
  const int64_t th = (s.oh + 3) / 4, tw = (s.ow + 3) / 4, kb_n = s.k / B;
  const int64_t n = t / (th * tw), ty = (t / tw) % th, tx = t % tw;
  const float* plane = dy + (n * kb_n + kb) * s.oh * s.ow * B;
  Vec<B> g[4][4], r[6][4], col[4], res[6];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t oy = ty * 4 + i, ox = tx * 4 + j;
      g[i][j] = oy < s.oh && ox < s.ow ? load<B>(plane + (oy * s.ow + ox) * B) : Vec<B>{};
    }
  for (int j = 0; j < 4; ++j) {  // columns: A g
    for (int i = 0; i < 4; ++i) col[i] = g[i][j];
    expand_1d(col, res);
    for (int i = 0; i < 6; ++i) r[i][j] = res[i];
  }
  float* out = y + row * s.k + kb * B;
  for (int i = 0; i < 6; ++i) {  // rows: (A g) A^T
    expand_1d(r[i], res);
    for (int j = 0; j < 6; ++j) store<B>(out + (i * 6 + j) * pos_stride, res[j]);
  }
}

// One tile t's 6x6 input patch (zero outside the image) for channel block cb through
// B^T . B, stored as V[p][row][cb*B ..] at v + p * pos_stride + row * c.
template <int B>
inline void input_tile(const WinogradShape& s, const float* src, int64_t t, int64_t cb, float* v,
                       int64_t pos_stride, int64_t row) {
  const int64_t th = (s.oh + 3) / 4, tw = (s.ow + 3) / 4, cb_n = s.c / B;
  const int64_t n = t / (th * tw), ty = (t / tw) % th, tx = t % tw;
  const float* plane = src + (n * cb_n + cb) * s.h * s.w * B;
  const int64_t y0 = ty * 4 - s.pad_h, x0 = tx * 4 - s.pad_w;
  Vec<B> d[6][6], r[6][6];
  const bool inside = y0 >= 0 && x0 >= 0 && y0 + 6 <= s.h && x0 + 6 <= s.w;
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      const int64_t y = y0 + i, x = x0 + j;
      if (inside || (y >= 0 && y < s.h && x >= 0 && x < s.w))
        d[i][j] = load<B>(plane + (y * s.w + x) * B);
      else
        d[i][j] = Vec<B>{};
    }
  Vec<B> col[6], res[6];
  for (int j = 0; j < 6; ++j) {  // columns: r = B^T d
    for (int i = 0; i < 6; ++i) col[i] = d[i][j];
    input_1d(col, res);
    for (int i = 0; i < 6; ++i) r[i][j] = res[i];
  }
  float* out = v + row * s.c + cb * B;
  for (int i = 0; i < 6; ++i) {  // rows: (B^T d) B
    input_1d(r[i], res);
    for (int j = 0; j < 6; ++j) store<B>(out + (i * 6 + j) * pos_stride, res[j]);
  }
}

// y = act(A^T M A + bias [+ y]) of tile t, output channel block kb (M[p][row][kb*B ..] at
// m + p * pos_stride + row * k), written where the tile lies inside the output.
template <int B>
inline void output_tile(const WinogradShape& s, const float* m, int64_t t, int64_t kb,
                        int64_t pos_stride, int64_t row, const float* bias, float* dst, bool sum,
                        bool relu, float alpha) {
  const int64_t th = (s.oh + 3) / 4, tw = (s.ow + 3) / 4, kb_n = s.k / B;
  const int64_t n = t / (th * tw), ty = (t / tw) % th, tx = t % tw;
  const float* in = m + row * s.k + kb * B;
  Vec<B> line[6], r[4][6], o[4][4], res[4];
  for (int i = 0; i < 6; ++i) {  // rows: A^T applied along each row of the 6x6 block
    for (int j = 0; j < 6; ++j) line[j] = load<B>(in + (i * 6 + j) * pos_stride);
    output_1d(line, res);
    for (int j = 0; j < 4; ++j) r[j][i] = res[j];
  }
  for (int j = 0; j < 4; ++j) {  // columns
    output_1d(r[j], res);
    for (int i = 0; i < 4; ++i) o[i][j] = res[i];
  }
  const Vec<B> b = bias ? load<B>(bias + kb * B) : Vec<B>{};
  float* plane = dst + (n * kb_n + kb) * s.oh * s.ow * B;
  const Vec<B> zero{};
  for (int i = 0; i < 4; ++i) {
    const int64_t y = ty * 4 + i;
    if (y >= s.oh) break;
    for (int j = 0; j < 4; ++j) {
      const int64_t x = tx * 4 + j;
      if (x >= s.ow) break;
      float* p = plane + (y * s.ow + x) * B;
      Vec<B> val = o[i][j] + b;
      if (sum) val += load<B>(p);
      if (relu) val = val > zero ? val : val * alpha;
      store<B>(p, val);
    }
  }
}

// The whole batch at once: every tile's transform (threads over tiles x blocks), one batched
// matmul over all tiles (oneDNN's threads), every tile's output.
template <int B>
void run_whole(const WinogradShape& s, const float* src, float* v, float* m,
               const std::function<void()>& matmul, const float* bias, float* dst, bool sum,
               bool relu, float alpha) {
  const int64_t tiles = s.tiles(), cb_n = s.c / B, kb_n = s.k / B;
#pragma omp parallel for schedule(static)
  for (int64_t it = 0; it < tiles * cb_n; ++it)
    input_tile<B>(s, src, it / cb_n, it % cb_n, v, tiles * s.c, it / cb_n);
  matmul();
#pragma omp parallel for schedule(static)
  for (int64_t it = 0; it < tiles * kb_n; ++it)
    output_tile<B>(s, m, it / kb_n, it % kb_n, tiles * s.k, it / kb_n, bias, dst, sum, relu, alpha);
}

// Chunks of `chunk` tiles, each thread taking whole chunks: transform, a one-thread matmul
// and the output of one chunk stay in that core's cache, and no thread waits for another.
template <int B>
void run_chunked(const WinogradShape& s, int64_t chunk, const float* src, char* ws,
                 size_t per_thread, size_t m_offset,
                 const std::function<void(float*, float*, void*)>& matmul, size_t sp_offset,
                 const float* bias, float* dst, bool sum, bool relu, float alpha, int threads) {
  const int64_t tiles = s.tiles(), cb_n = s.c / B, kb_n = s.k / B;
  const int64_t chunks = (tiles + chunk - 1) / chunk;
#pragma omp parallel num_threads(threads)
  {
    char* mine = ws + per_thread * static_cast<size_t>(omp_get_thread_num());
    float* v = reinterpret_cast<float*>(mine);
    float* m = reinterpret_cast<float*>(mine + m_offset);
#pragma omp for schedule(dynamic, 1)
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t t0 = ch * chunk, nt = std::min(chunk, tiles - t0);
      // Rows past the last tile hold stale data; their products are never read.
      for (int64_t r = 0; r < nt; ++r)
        for (int64_t cb = 0; cb < cb_n; ++cb) input_tile<B>(s, src, t0 + r, cb, v, chunk * s.c, r);
      matmul(v, m, mine + sp_offset);
      for (int64_t r = 0; r < nt; ++r)
        for (int64_t kb = 0; kb < kb_n; ++kb)
          output_tile<B>(s, m, t0 + r, kb, chunk * s.k, r, bias, dst, sum, relu, alpha);
    }
  }
}

}  // namespace

WinogradConv::WinogradConv(const WinogradShape& s, int64_t chunk_tiles, bool cache_weights)
    : s_(s), tiles_(s.tiles()), cache_weights_(cache_weights) {
  using namespace dnnl;
  if (s.block != 8 && s.block != 16) throw Error("Winograd: channel block must be 8 or 16");
  if (s.c % s.block || s.k % s.block)
    throw Error("Winograd: channels must be multiples of the block");
  // Chunks of about 4 MB of transformed input and products (at least 16 tiles) once there
  // are four of them; LOOM_CONV_WINOGRAD_CHUNKS=0 runs the whole batch at once.
  threads_ = omp_get_max_threads();
  const int64_t chunk = std::clamp<int64_t>((int64_t{4} << 20) / (144 * (s.c + s.k)), 16, 1024);
  if (!env_off("LOOM_CONV_WINOGRAD_CHUNKS") && tiles_ >= 4 * chunk && threads_ > 1) chunk_ = chunk;
  if (chunk_tiles >= 0) chunk_ = std::min(chunk_tiles, tiles_);
  const int64_t rows = chunk_ ? chunk_ : tiles_;
  v_md_ = dnnl_util::plain_md({36, rows, s.c});
  u_plain_md_ = dnnl_util::plain_md({36, s.c, s.k});
  m_md_ = dnnl_util::plain_md({36, rows, s.k});
  primitive_attr attr;
  attr.set_scratchpad_mode(scratchpad_mode::user);
  // A chunk's matmul runs on the thread that owns the chunk.
  dnnl_util::ThreadCap cap(chunk_ ? 1 : 0);
  matmul::primitive_desc pd(matmul::desc(v_md_, dnnl_util::any_md({36, s.c, s.k}), m_md_), attr,
                            dnnl_util::engine());
  u_md_ = pd.weights_desc();
  sp_md_ = pd.scratchpad_desc();
  u_bridge_ = dnnl_util::LayoutBridge(u_plain_md_, u_md_, /*to_only=*/true);
  matmul_.emplace(pd);
  // Chunks run their matmuls on several threads at once: one set of arguments each.
  args_.resize(chunk_ ? static_cast<size_t>(threads_) : 1);
  for (auto& a : args_) {
    a.add(DNNL_ARG_SRC, v_md_);
    a.add(DNNL_ARG_WEIGHTS, u_md_);
    a.add(DNNL_ARG_DST, m_md_);
    a.add(DNNL_ARG_SCRATCHPAD, sp_md_);
  }
  impl_ = std::string("winograd_4x3") + (chunk_ ? "_chunked:" : ":") + pd.impl_info_str();
}

namespace {
size_t align64(size_t b) { return (b + 63) / 64 * 64; }
}  // namespace

size_t WinogradConv::per_thread_bytes() const {
  return align64(v_md_.get_size()) + align64(m_md_.get_size()) + align64(sp_md_.get_size());
}

size_t WinogradConv::workspace_bytes() const {
  const size_t threads = per_thread_bytes() * static_cast<size_t>(chunk_ ? threads_ : 1);
  return cache_weights_ ? threads : threads + align64(u_md_.get_size());
}

void WinogradConv::transform_weights(const float* w, std::span<const float> scale, float* u) const {
  // One input channel at a time over runs of up to kRun output channels, the output channel
  // innermost so that the double arithmetic vectorises (per (k, c) pair the same operations
  // in the same order as weight_1d: the result is identical).
  constexpr int64_t kRun = 64;
  const int64_t c_n = s_.c, k_n = s_.k;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < c_n; ++c) {
    double g[9][kRun], rows[6][3][kRun], res[6][6][kRun];
    for (int64_t k0 = 0; k0 < k_n; k0 += kRun) {
      const int64_t kn = std::min(kRun, k_n - k0);
      for (int64_t q = 0; q < kn; ++q) {
        const int64_t k = k0 + q;
        // A data gradient's kernel (k, c) is the forward layer's (c, k) rotated by 180
        // degrees.
        for (int e = 0; e < 9; ++e)
          g[e][q] = s_.data_grad ? w[(c * k_n + k) * 9 + 8 - e] : w[(k * c_n + c) * 9 + e];
      }
      for (int j = 0; j < 3; ++j)  // G g: along the kernel's rows
        for (int64_t q = 0; q < kn; ++q) {
          const double col[3] = {g[j][q], g[3 + j][q], g[6 + j][q]};
          double r[6];
          weight_1d(col, r);
          for (int i = 0; i < 6; ++i) rows[i][j][q] = r[i];
        }
      for (int i = 0; i < 6; ++i)  // (G g) G^T
        for (int64_t q = 0; q < kn; ++q) {
          const double row[3] = {rows[i][0][q], rows[i][1][q], rows[i][2][q]};
          double r[6];
          weight_1d(row, r);
          const double sc = scale.empty() ? 1.0 : scale[static_cast<size_t>(k0 + q)];
          for (int j = 0; j < 6; ++j) res[i][j][q] = r[j] * sc;
        }
      for (int p = 0; p < 36; ++p) {
        float* out = u + (p * c_n + c) * k_n + k0;
        for (int64_t q = 0; q < kn; ++q) out[q] = static_cast<float>(res[p / 6][p % 6][q]);
      }
    }
  }
}

void* WinogradConv::weights_for_call(const NDArray& weights, std::span<const float> scale,
                                     char* ws) {
  auto transform_into = [&](void* u) {
    if (u_bridge_.same()) {
      transform_weights(weights.cdata<float>(), scale, static_cast<float*>(u));
    } else {  // a temporary from the heap, not the kernel workspace (36 c k floats)
      std::vector<float> plain(static_cast<size_t>(u_plain_md_.get_size() / sizeof(float)));
      transform_weights(weights.cdata<float>(), scale, plain.data());
      u_bridge_.to_chosen(plain.data(), u);
    }
  };
  if (!cache_weights_) {
    void* u = ws + per_thread_bytes() * static_cast<size_t>(chunk_ ? threads_ : 1);
    transform_into(u);
    return u;
  }
  if (cache_.buffer.is_none() || !cache_.from.matches(weights, scale)) {
    if (cache_.buffer.is_none())
      cache_.buffer = NDArray(Shape{static_cast<int64_t>(u_md_.get_size())}, DType::kUint8);
    transform_into(cache_.buffer.raw());
    cache_.from.remember(weights, scale);
  }
  return cache_.buffer.raw();
}

void WinogradConv::forward(const float* src, const NDArray& weights, std::span<const float> scale,
                           const float* bias, float* dst, bool sum, const FusedActivation& act,
                           void* workspace) {
  char* ws = static_cast<char*>(workspace);
  float* v = reinterpret_cast<float*>(ws);
  float* m = reinterpret_cast<float*>(ws + align64(v_md_.get_size()));

  void* u = weights_for_call(weights, scale, ws);

  const bool relu = act.kind == FusedActivation::kRelu || act.kind == FusedActivation::kLeaky;
  const float alpha = act.kind == FusedActivation::kLeaky ? act.alpha : 0.f;
  auto matmul = [&](float* v, float* m, void* sp) {
    auto& a = args_[chunk_ ? static_cast<size_t>(omp_get_thread_num()) : 0];
    a.set(DNNL_ARG_SRC, v);
    a.set(DNNL_ARG_WEIGHTS, u);
    a.set(DNNL_ARG_DST, m);
    if (sp_md_.get_size()) a.set(DNNL_ARG_SCRATCHPAD, sp);
    a.execute(*matmul_);
  };
  const size_t m_off = align64(v_md_.get_size()), sp_off = m_off + align64(m_md_.get_size());
  if (chunk_) {
    const int threads = std::min(threads_, omp_get_max_threads());
    if (s_.block == 16)
      run_chunked<16>(s_, chunk_, src, ws, per_thread_bytes(), m_off, matmul, sp_off, bias, dst,
                      sum, relu, alpha, threads);
    else
      run_chunked<8>(s_, chunk_, src, ws, per_thread_bytes(), m_off, matmul, sp_off, bias, dst, sum,
                     relu, alpha, threads);
    return;
  }
  auto whole = [&] { matmul(v, m, ws + sp_off); };
  if (s_.block == 16)
    run_whole<16>(s_, src, v, m, whole, bias, dst, sum, relu, alpha);
  else
    run_whole<8>(s_, src, v, m, whole, bias, dst, sum, relu, alpha);
}

}  // namespace loom::nn

namespace loom::nn {

WinogradWeightGrad::WinogradWeightGrad(const WinogradShape& s) : s_(s), tiles_(s.tiles()) {
  using namespace dnnl;
  if (s.block != 8 && s.block != 16) throw Error("Winograd: channel block must be 8 or 16");
  if (s.c % s.block || s.k % s.block)
    throw Error("Winograd: channels must be multiples of the block");
  // Chunks of about 8 MB of transformed input and output gradient, one after the other; the
  // transforms run on every thread, the matmul on oneDNN's.
  chunk_ = std::min(tiles_, std::max<int64_t>((int64_t{8} << 20) / (144 * (s.c + s.k)), 256));
  const int64_t t = chunk_;
  // V stored [p][tile][c], read as (C x T) per p; Y [p][tile][k] as (T x K).
  v_md_ = memory::desc({36, s.c, t}, memory::data_type::f32, memory::dims{t * s.c, 1, s.c});
  y_md_ = dnnl_util::plain_md({36, t, s.k});
  m_md_ = dnnl_util::plain_md({36, s.c, s.k});
  primitive_attr attr;
  attr.set_scratchpad_mode(scratchpad_mode::user);
  post_ops po;
  po.append_sum(1.f);  // M accumulates over the chunks (zeroed first)
  attr.set_post_ops(po);
  matmul::primitive_desc pd(matmul::desc(v_md_, y_md_, m_md_), attr, dnnl_util::engine());
  sp_md_ = pd.scratchpad_desc();
  matmul_.emplace(pd);
  args_.add(DNNL_ARG_SRC, v_md_);
  args_.add(DNNL_ARG_WEIGHTS, y_md_);
  args_.add(DNNL_ARG_DST, m_md_);
  args_.add(DNNL_ARG_SCRATCHPAD, sp_md_);
  impl_ = std::string("winograd_wgrad_4x3:") + pd.impl_info_str();
}

size_t WinogradWeightGrad::workspace_bytes() const {
  return align64(v_md_.get_size()) + align64(y_md_.get_size()) + align64(m_md_.get_size()) +
         align64(sp_md_.get_size());
}

void WinogradWeightGrad::compute(const float* src, const float* diff_dst, float* dw, bool add,
                                 void* workspace) {
  char* ws = static_cast<char*>(workspace);
  float* v = reinterpret_cast<float*>(ws);
  float* y = reinterpret_cast<float*>(ws + align64(v_md_.get_size()));
  float* m = reinterpret_cast<float*>(ws + align64(v_md_.get_size()) + align64(y_md_.get_size()));
  void* sp = ws + align64(v_md_.get_size()) + align64(y_md_.get_size()) + align64(m_md_.get_size());
  const int64_t c_n = s_.c, k_n = s_.k, B = s_.block, cb_n = c_n / B, kb_n = k_n / B;
  std::fill(m, m + 36 * c_n * k_n, 0.f);
  for (int64_t t0 = 0; t0 < tiles_; t0 += chunk_) {
    const int64_t nt = std::min(chunk_, tiles_ - t0);
    // Rows past the last tile are zero, so they add nothing to M.
    if (nt < chunk_) {
#pragma omp parallel for schedule(static)
      for (int64_t p = 0; p < 36; ++p) {
        std::fill(v + (p * chunk_ + nt) * c_n, v + (p + 1) * chunk_ * c_n, 0.f);
        std::fill(y + (p * chunk_ + nt) * k_n, y + (p + 1) * chunk_ * k_n, 0.f);
      }
    }
#pragma omp parallel for schedule(static)
    for (int64_t it = 0; it < nt * (cb_n + kb_n); ++it) {
      const int64_t r = it / (cb_n + kb_n), b = it % (cb_n + kb_n);
      if (B == 16) {
        if (b < cb_n) input_tile<16>(s_, src, t0 + r, b, v, chunk_ * c_n, r);
        else ygrad_tile<16>(s_, diff_dst, t0 + r, b - cb_n, y, chunk_ * k_n, r);
      } else {
        if (b < cb_n) input_tile<8>(s_, src, t0 + r, b, v, chunk_ * c_n, r);
        else ygrad_tile<8>(s_, diff_dst, t0 + r, b - cb_n, y, chunk_ * k_n, r);
      }
    }
    args_.set(DNNL_ARG_SRC, v);
    args_.set(DNNL_ARG_WEIGHTS, y);
    args_.set(DNNL_ARG_DST, m);
    if (sp_md_.get_size()) args_.set(DNNL_ARG_SCRATCHPAD, sp);
    args_.execute(*matmul_);
  }
  // dw[k][c] = G^T M[.][c][k] G, in double over runs of output channels (contiguous in M).
  constexpr int64_t kRun = 64;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < c_n; ++c) {
    for (int64_t k0 = 0; k0 < k_n; k0 += kRun) {
      const int64_t kn = std::min(kRun, k_n - k0);
      double rows[6][3][kRun];
      for (int i = 0; i < 6; ++i)
        for (int64_t q = 0; q < kn; ++q) {
          double mm[6], r[3];
          for (int j = 0; j < 6; ++j) mm[j] = m[((i * 6 + j) * c_n + c) * k_n + k0 + q];
          reduce_1d(mm, r);  // along each row: M G
          for (int j = 0; j < 3; ++j) rows[i][j][q] = r[j];
        }
      for (int j = 0; j < 3; ++j)
        for (int64_t q = 0; q < kn; ++q) {
          double col[6], r[3];
          for (int i = 0; i < 6; ++i) col[i] = rows[i][j][q];
          reduce_1d(col, r);  // down each column: G^T (M G)
          float* out = dw + ((k0 + q) * c_n + c) * 9;
          for (int i = 0; i < 3; ++i) {
            const float val = static_cast<float>(r[i]);
            out[i * 3 + j] = add ? out[i * 3 + j] + val : val;
          }
        }
    }
  }
}

}  // namespace loom::nn
