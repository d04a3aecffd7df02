// Helpers shared by the CPU tensor kernels: parallel loops, output requests, broadcast and
// reduction index plans. Internal to ops/tensor/.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "ops/op.h"

namespace loom::tensor {

/// Below this many elements loops run on the calling thread (no OpenMP region at all). A pass
/// over 128 K floats takes ~20-40 us on one core, about what waking a passively waiting
/// OpenMP thread costs (MobileFaceNet's 37 K-element input scaling took 110 us on 2 threads,
/// 1.3 us on one).
constexpr int64_t kParallelMin = 1 << 17;

/// Runs body(i) for i in [0, n), vectorised, threaded only for large n.
template <class Body>
inline void for_each(int64_t n, Body body) {
  if (n >= kParallelMin) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) body(i);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) body(i);
  }
}

/// dst[i] = v(i) (kWrite/kInplace), dst[i] += v(i) (kAdd), nothing (kNull).
template <class Fn>
inline void write(float* dst, Req req, int64_t n, Fn v) {
  if (req == Req::kNull) return;
  if (req == Req::kAdd)
    for_each(n, [&](int64_t i) { dst[i] += v(i); });
  else
    for_each(n, [&](int64_t i) { dst[i] = v(i); });
}

/// Stores one value honouring req (kNull must be filtered by the caller).
inline void store(float* dst, Req req, float v) {
  if (req == Req::kAdd)
    *dst += v;
  else
    *dst = v;
}

/// Copies src into dst honouring req; a no-op copy when dst aliases src.
void copy_req(const NDArray& dst, const NDArray& src, Req req);
/// Fills dst with v honouring req (kAdd adds v).
void fill_req(const NDArray& dst, Req req, float v);

/// Readers for optional inputs (GradDeps may leave arrays none): a pointer or a zero.
struct Ptr {
  const float* p;
  float operator[](int64_t i) const { return p[i]; }
};
struct Zero {
  float operator[](int64_t) const { return 0.f; }
};
inline const float* ptr_or_null(const NDArray& a) {
  return a.is_none() ? nullptr : a.data<float>();
}
/// Calls fn(A, B) with Ptr or Zero readers, so each combination is its own tight loop.
template <class Fn>
inline void with_readers(const float* a, const float* b, Fn fn) {
  if (a && b)
    fn(Ptr{a}, Ptr{b});
  else if (a)
    fn(Ptr{a}, Zero{});
  else if (b)
    fn(Zero{}, Ptr{b});
  else
    fn(Zero{}, Zero{});
}

/// Throws unless every input and output is float32 (the only dtype these kernels support).
void check_f32(const KernelArgs& args);

/// Normalises a possibly negative axis for `ndim` dims; throws ShapeError naming `what`.
int norm_axis(int64_t axis, int ndim, const std::string& what);

/// NumPy broadcast of a and b (right-aligned; equal or 1); throws ShapeError naming inputs.
Shape broadcast_shape(const OpAttrs& a, const Shape& lhs, const Shape& rhs);
/// `s` left-padded with 1s to ndim dims.
Shape pad_shape(const Shape& s, int ndim);

/// Index plan for an elementwise op over `out` reading two operands broadcast to it.
/// Adjacent dims with the same broadcast pattern are merged.
struct BcastPlan {
  std::vector<int64_t> dims, sa, sb;  ///< collapsed out dims, operand strides (0 = broadcast)
  int64_t size = 0;
};
BcastPlan make_bcast_plan(const Shape& a, const Shape& b, const Shape& out);

/// Calls fn(o, ia, ib) for every output element o with the operands' element indices.
template <class Fn>
void bcast_for(const BcastPlan& p, Fn fn) {
  const int nd = static_cast<int>(p.dims.size());
  const int64_t inner = p.dims[nd - 1], rows = p.size / inner;
  const int64_t sal = p.sa[nd - 1], sbl = p.sb[nd - 1];
  if (rows == 1) {
    for_each(inner, [&](int64_t j) { fn(j, j * sal, j * sbl); });
    return;
  }
  auto row = [&](int64_t r) {
    int64_t ia = 0, ib = 0, rem = r;
    for (int d = nd - 2; d >= 0; --d) {
      int64_t idx = rem % p.dims[d];
      rem /= p.dims[d];
      ia += idx * p.sa[d];
      ib += idx * p.sb[d];
    }
    const int64_t o = r * inner;
#pragma omp simd
    for (int64_t j = 0; j < inner; ++j) fn(o + j, ia + j * sal, ib + j * sbl);
  };
  if (p.size >= kParallelMin) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) row(r);
  } else {
    for (int64_t r = 0; r < rows; ++r) row(r);
  }
}

/// Reduction of a `big` array onto `small` (same ndim, each dim equal or 1): output element o
/// combines big[base[o] + off[r] + j * inner_stride] over r and j < inner_n.
struct ReducePlan {
  std::vector<int64_t> base, off;
  int64_t inner_n = 1, inner_stride = 0;
};
ReducePlan make_reduce_plan(const Shape& big, const Shape& small);

/// out[o] (with req) = fin(combine over the reduced elements), from init; double accumulator.
template <class Comb, class Fin>
void reduce(const ReducePlan& p, const float* in, float* out, Req req, double init, Comb comb,
            Fin fin) {
  if (req == Req::kNull) return;
  const int64_t n_out = static_cast<int64_t>(p.base.size());
  const int64_t n_off = static_cast<int64_t>(p.off.size());
  const int64_t* off = p.off.data();
  const int64_t n_in = p.inner_n, st = p.inner_stride;
  auto one = [&](int64_t o) {
    double acc = init;
    const float* src = in + p.base[o];
    for (int64_t r = 0; r < n_off; ++r) {
      const float* s = src + off[r];
      for (int64_t j = 0; j < n_in; ++j) acc = comb(acc, static_cast<double>(s[j * st]));
    }
    store(out + o, req, static_cast<float>(fin(acc)));
  };
  if (n_out * n_off * n_in >= kParallelMin && n_out > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < n_out; ++o) one(o);
  } else {
    for (int64_t o = 0; o < n_out; ++o) one(o);
  }
}

/// Sum of `in` (shape big) onto `out` (shape small) times scale, honouring req.
void reduce_sum(const ReducePlan& p, const float* in, float* out, Req req, double scale = 1.0);

}  // namespace loom::tensor
