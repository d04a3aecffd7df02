// The machine's single-precision FMA peak, measured: independent chains of vector FMAs
// (enough to cover the FMA latency on two pipes) on every OpenMP thread for a fixed time.
// compare.py builds it with g++ and runs it in the same run as the engines, so achieved
// GFLOP/s are set against what this CPU does right now (clock, other load).
//
//   fma_peak {avx512|avx2} THREADS SECONDS   ->  prints GFLOP/s (all threads together)
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kChains = 12;
constexpr long kInner = 1 << 16;

__attribute__((target("avx512f"))) double run_avx512(long outer) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(0.001f * static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long o = 0; o < outer; ++o)
    for (long i = 0; i < kInner; ++i)
      for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  float sum = 0;
  for (int c = 0; c < kChains; ++c) sum += _mm512_reduce_add_ps(acc[c]);
  return sum;
}

__attribute__((target("avx2,fma"))) double run_avx2(long outer) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(0.001f * static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long o = 0; o < outer; ++o)
    for (long i = 0; i < kInner; ++i)
      for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  float lanes[8], sum = 0;
  for (int c = 0; c < kChains; ++c) {
    _mm256_storeu_ps(lanes, acc[c]);
    for (float l : lanes) sum += l;
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: fma_peak {avx512|avx2} THREADS SECONDS\n");
    return 2;
  }
  const bool wide = std::strcmp(argv[1], "avx512") == 0;
  const int threads = std::atoi(argv[2]);
  const double seconds = std::atof(argv[3]);
  if (wide && !__builtin_cpu_supports("avx512f")) {
    std::fprintf(stderr, "fma_peak: this CPU has no AVX-512\n");
    return 1;
  }
  auto run = [&](long outer) { return wide ? run_avx512(outer) : run_avx2(outer); };
  const double lanes = wide ? 16 : 8;
  // Calibrate the outer count on one thread, then time all threads together.
  long outer = 1;
  for (;;) {
    auto t0 = std::chrono::steady_clock::now();
    volatile double sink = run(outer);
    (void)sink;
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (dt > seconds / 4 || outer > (1L << 20)) {
      outer = static_cast<long>(static_cast<double>(outer) * seconds / dt) + 1;
      break;
    }
    outer *= 2;
  }
  double total = 0;
  auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
  total += run(outer);
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double flops =
      2.0 * lanes * kChains * static_cast<double>(kInner) * static_cast<double>(outer) * threads;
  std::printf("%.2f\n", flops / dt / 1e9);
  return total == 12345.678 ? 1 : 0;  // keeps the sums alive
}
