// Stride-2 1x1 convolutions (ResNet-50 v1's downsampling 1x1 layers and projection shortcuts,
// ResNet-18's shortcuts) on oneDNN, forward inference, f32, channel-blocked activations
// (Loom's layout plan), ReLU post-op, weights pre-reordered: the strided primitive against a
// subsample copy (every s-th row and column into a buffer in the same layout) followed by
// the stride-1 primitive over the subsampled map, as ops/nn/convolution.cc runs it with
// LOOM_CONV_SUBSAMPLE_1X1 (issue 13). Alternating A/B rounds; prints the median times and
// their ratio. Not part of the build; compile by hand from the repository root:
//   g++ -O3 -march=native -fopenmp -std=gnu++20 -I. tests/bench/conv_subsample.cc -ldnnl
//       -o conv_subsample
//   conv_subsample BATCH [ROUNDS]
// Cap the ISA with ONEDNN_MAX_CPU_ISA=AVX2 (the block is then 8). Against oneDNN 2.6's
// strided jit_1x1 kernel (which subsamples internally) the two are equally fast; the path
// pays only against the strided brgemm 1x1 kernel (DESIGN.md).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

namespace {

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Layer {
  int c, hw, k;  // in channels, in size, out channels (stride 2)
};
const Layer kLayers[] = {
    {256, 56, 128},  {256, 56, 512},   {512, 28, 256}, {512, 28, 1024},  // ResNet-50
    {1024, 14, 512}, {1024, 14, 2048}, {64, 56, 128},  {128, 28, 256},   // ResNet-18
    {256, 14, 512},
};

engine eng(engine::kind::cpu, 0);
stream strm(eng);

struct Conv {
  primitive prim;
  std::unordered_map<int, memory> args;
};

Conv make(const memory::desc& src, const memory::desc& dst, int c, int k, int s, tag blk) {
  memory::desc w({k, c, 1, 1}, dt::f32, tag::any), b({k}, dt::f32, tag::x);
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src, w,
                              b, dst, {s, s}, {0, 0}, {0, 0});
  post_ops po;
  po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  primitive_attr attr;
  attr.set_post_ops(po);
  convolution_forward::primitive_desc pd(d, attr, eng);
  (void)blk;
  Conv cv{primitive(pd), {}};
  cv.args[DNNL_ARG_WEIGHTS] = memory(pd.weights_desc(), eng);
  cv.args[DNNL_ARG_BIAS] = memory(b, eng);
  std::fill_n(static_cast<float*>(cv.args[DNNL_ARG_WEIGHTS].get_data_handle()),
              pd.weights_desc().get_size() / 4, 0.01f);
  std::memset(cv.args[DNNL_ARG_BIAS].get_data_handle(), 0, b.get_size());
  std::printf("  %s", pd.impl_info_str());
  return cv;
}

// Every s-th row and column of a channel-blocked (n, cb, h, w, block) array.
void subsample(const float* x, float* y, int64_t nb, int64_t h, int64_t w, int64_t oh, int64_t ow,
               int s, int block) {
#pragma omp parallel for collapse(2)
  for (int64_t i = 0; i < nb; ++i)
    for (int64_t r = 0; r < oh; ++r) {
      const float* src = x + ((i * h + r * s) * w) * block;
      float* dst = y + ((i * oh + r) * ow) * block;
      for (int64_t q = 0; q < ow; ++q)
#pragma omp simd
        for (int j = 0; j < block; ++j) dst[q * block + j] = src[q * s * block + j];
    }
}

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  const bool avx512 = get_effective_cpu_isa() >= cpu_isa::avx512_core;
  const int block = avx512 ? 16 : 8;
  const tag blk = avx512 ? tag::nChw16c : tag::nChw8c;
  std::printf("batch %d, block %d, %d threads\n", n, block, omp_get_max_threads());
  for (const Layer& L : kLayers) {
    const int oh = (L.hw - 1) / 2 + 1;
    memory::desc src({n, L.c, L.hw, L.hw}, dt::f32, blk), sub({n, L.c, oh, oh}, dt::f32, blk);
    memory::desc dst({n, L.k, oh, oh}, dt::f32, blk);
    std::printf("%4d->%4d %dx%d:", L.c, L.k, L.hw, L.hw);
    Conv a = make(src, dst, L.c, L.k, 2, blk), b = make(sub, dst, L.c, L.k, 1, blk);
    memory xs(src, eng), xsub(sub, eng), y(dst, eng);
    std::fill_n(static_cast<float*>(xs.get_data_handle()), src.get_size() / 4, 0.5f);
    a.args[DNNL_ARG_SRC] = xs, a.args[DNNL_ARG_DST] = y;
    b.args[DNNL_ARG_SRC] = xsub, b.args[DNNL_ARG_DST] = y;
    const double flops = 2.0 * n * L.c * L.k * oh * oh;
    const int reps = std::max(3, static_cast<int>(2e9 / flops / 10));
    auto time = [&](bool sub_path) {
      const double t0 = now();
      for (int r = 0; r < reps; ++r) {
        if (sub_path) {
          subsample(static_cast<const float*>(xs.get_data_handle()),
                    static_cast<float*>(xsub.get_data_handle()), int64_t{n} * L.c / block, L.hw,
                    L.hw, oh, oh, 2, block);
          b.prim.execute(strm, b.args);
        } else {
          a.prim.execute(strm, a.args);
        }
        strm.wait();
      }
      return (now() - t0) / reps * 1e6;
    };
    time(false), time(true);
    std::vector<double> ta, tb;
    for (int r = 0; r < rounds; ++r) ta.push_back(time(false)), tb.push_back(time(true));
    std::sort(ta.begin(), ta.end()), std::sort(tb.begin(), tb.end());
    const double ma = ta[ta.size() / 2], mb = tb[tb.size() / 2];
    std::printf("\n    strided %8.1f us  subsample+1x1 %8.1f us  ratio %.2f\n", ma, mb, ma / mb);
  }
}
