// MobileNet v1 1.0's convolutions at 224x224 (forward inference, f32, ReLU post-op, weights
// pre-reordered), one layer at a time, and each 1x1 layer fused with the depthwise 3x3 after
// it (oneDNN's depthwise post-op) against the two run apart; `dw`: the depthwise layers of
// MobileNet v1 and MobileFaceNet (112x112) on oneDNN (ReLU post-op; PReLU as a second pass
// as Loom ran it) against Loom's own kernel (ops/nn/depthwise.h) with the activation fused,
// alternating, blocked layout only. Not part of the build (like conv_onednn.cc); compile by
// hand from the repository root:
//   g++ -O3 -march=native -fopenmp -std=gnu++20 -I. tests/bench/mobile_layers.cc
//       ops/nn/depthwise.cc -ldnnl -o mobile_layers
//   mobile_layers BATCH [layers|dwfuse|dw] [LAYOUT] [SECONDS]
// LAYOUT of the activations: blocked (nChw16c / nChw8c, Loom's layout plan; default), nhwc,
// any. Run it under the OpenMP settings to compare, e.g. OMP_NUM_THREADS=1, or 2 with
// OMP_WAIT_POLICY=PASSIVE (Loom's default), ACTIVE, or OMP_PROC_BIND=spread OMP_PLACES=cores.
// Measured on the 2-vCPU Zen 5 machine at load average 8 (issue 13): the 1x1 layers ran at
// 250-262 GFLOP/s on one thread, at the same speed on 2 passive unbound threads, 1.4-1.7x
// faster on 2 passive threads bound to separate CPUs, and 2x faster (94% of the FMA peak) on 2
// spinning threads; at load average 13 the bound threads were 2-20x slower than unbound ones.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "ops/nn/depthwise.h"

namespace {

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Layer {
  int c, hw, k, r, stride, group;  // in channels, in size, out channels, kernel, groups
};

// MobileNet v1 1.0: the stem, then depthwise 3x3 / pointwise 1x1 pairs.
const Layer kLayers[] = {
    {3, 224, 32, 3, 2, 1},        {32, 112, 32, 3, 1, 32},      {32, 112, 64, 1, 1, 1},
    {64, 112, 64, 3, 2, 64},      {64, 56, 128, 1, 1, 1},       {128, 56, 128, 3, 1, 128},
    {128, 56, 128, 1, 1, 1},      {128, 56, 128, 3, 2, 128},    {128, 28, 256, 1, 1, 1},
    {256, 28, 256, 3, 1, 256},    {256, 28, 256, 1, 1, 1},      {256, 28, 256, 3, 2, 256},
    {256, 14, 512, 1, 1, 1},      {512, 14, 512, 3, 1, 512},    {512, 14, 512, 1, 1, 1},
    {512, 14, 512, 3, 2, 512},    {512, 7, 1024, 1, 1, 1},      {1024, 7, 1024, 3, 1, 1024},
    {1024, 7, 1024, 1, 1, 1},
};

// MobileFaceNet's depthwise layers at 112x112 (the last one a 7x7 over the whole 7x7 map).
const Layer kFaceDw[] = {
    {64, 56, 64, 3, 1, 64},    {128, 56, 128, 3, 2, 128}, {128, 28, 128, 3, 1, 128},
    {256, 28, 256, 3, 2, 256}, {256, 14, 256, 3, 1, 256}, {512, 14, 512, 3, 2, 512},
    {256, 7, 256, 3, 1, 256},  {512, 7, 512, 7, 1, 512},
};

memory filled(const memory::desc& md, const engine& eng) {
  memory m(md, eng);
  auto* p = static_cast<float*>(m.get_data_handle());
  const size_t n = md.get_size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) p[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
  return m;
}

// Median milliseconds of `prim` over about `seconds` (at least 5 calls).
double median_ms(const primitive& prim, std::unordered_map<int, memory>& args, stream& s,
                 double seconds) {
  for (int i = 0; i < 3; ++i) prim.execute(s, args);
  s.wait();
  std::vector<double> t;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (t.size() < 5 || std::chrono::steady_clock::now() < end) {
    const auto t0 = std::chrono::steady_clock::now();
    prim.execute(s, args);
    s.wait();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

post_ops relu() {
  post_ops po;
  po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
  return po;
}

convolution_forward::primitive_desc conv_pd(const engine& eng, int n, const Layer& l, tag act,
                                            const post_ops& po) {
  const int pad = l.r == 7 ? 0 : l.r / 2, o = (l.hw + 2 * pad - l.r) / l.stride + 1;
  memory::desc src({n, l.c, l.hw, l.hw}, dt::f32, l.c % 8 ? tag::any : act);
  memory::dims wd = l.group > 1 ? memory::dims{l.group, l.k / l.group, l.c / l.group, l.r, l.r}
                                : memory::dims{l.k, l.c, l.r, l.r};
  memory::desc w(wd, dt::f32, tag::any), b({l.k}, dt::f32, tag::x);
  memory::desc dst({n, l.k, o, o}, dt::f32, act);
  primitive_attr attr;
  attr.set_post_ops(po);
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src, w,
                              b, dst, {l.stride, l.stride}, {pad, pad}, {pad, pad});
  return convolution_forward::primitive_desc(d, attr, eng);
}

std::unordered_map<int, memory> args_for(const convolution_forward::primitive_desc& pd,
                                         const engine& eng) {
  std::unordered_map<int, memory> a{{DNNL_ARG_SRC, filled(pd.src_desc(), eng)},
                                    {DNNL_ARG_WEIGHTS, filled(pd.weights_desc(), eng)},
                                    {DNNL_ARG_BIAS, filled(pd.bias_desc(), eng)},
                                    {DNNL_ARG_DST, filled(pd.dst_desc(), eng)}};
  if (pd.scratchpad_desc().get_size())
    a[DNNL_ARG_SCRATCHPAD] = memory(pd.scratchpad_desc(), eng);
  return a;
}

// Loom's PReLU pass over a channel-blocked array, in place (ops/nn/leaky_relu.cc's loop).
template <int B>
void prelu_blocked(float* y, const float* slope, int64_t outer, int64_t nb, int64_t run) {
  for (int64_t n = 0; n < outer; ++n)
    for (int64_t cb = 0; cb < nb; ++cb) {
      float* ys = y + (n * nb + cb) * run;
      for (int64_t i = 0; i < run; i += B)
#pragma omp simd
        for (int j = 0; j < B; ++j)
          ys[i + j] = ys[i + j] > 0 ? ys[i + j] : slope[cb * B + j] * ys[i + j];
    }
}

// Median ms of f() over about `seconds`.
template <class F>
double median_of(F&& f, double seconds) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> t;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (t.size() < 5 || std::chrono::steady_clock::now() < end) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// dw mode: per depthwise layer, oneDNN + ReLU, oneDNN + a PReLU pass, own + ReLU, own + PReLU
// (one thread per call unless OMP_NUM_THREADS says otherwise), and whether both agree.
void run_dw(const engine& eng, stream& s, int n, tag act, int block, double seconds) {
  const int threads = omp_get_max_threads();
  double tot[4] = {0, 0, 0, 0};
  auto one_set = [&](const char* net, const Layer* layers, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      const Layer& l = layers[i];
      if (l.group == 1) continue;
      const int pad = l.r == 7 ? 0 : l.r / 2, o = (l.hw + 2 * pad - l.r) / l.stride + 1;
      auto pd = conv_pd(eng, n, l, act, relu());
      auto args = args_for(pd, eng);
      convolution_forward prim(pd);
      std::vector<float> w(static_cast<size_t>(l.c * l.r * l.r)), bias(l.c), slope(l.c);
      for (size_t j = 0; j < w.size(); ++j) w[j] = 0.01f * static_cast<float>(j % 89) - 0.4f;
      for (int c = 0; c < l.c; ++c) bias[c] = 0.01f * c - 1, slope[c] = 0.001f * c;
      auto wmem = memory({{l.c, 1, 1, l.r, l.r}, dt::f32, tag::goihw}, eng, w.data());
      reorder(wmem, args[DNNL_ARG_WEIGHTS]).execute(s, wmem, args[DNNL_ARG_WEIGHTS]);
      std::memcpy(args[DNNL_ARG_BIAS].get_data_handle(), bias.data(), bias.size() * 4);
      s.wait();
      loom::nn::DepthwiseConv own({n, l.c, l.hw, l.hw, o, o, l.r, l.r, l.stride, l.stride, pad,
                                   pad, 1, 1, block},
                                  threads);
      const float* src = static_cast<const float*>(args[DNNL_ARG_SRC].get_data_handle());
      float* ref = static_cast<float*>(args[DNNL_ARG_DST].get_data_handle());
      const size_t out_n = static_cast<size_t>(n) * l.c * o * o;
      std::vector<float> mine(out_n);
      loom::nn::DepthwiseAct relu_act{loom::nn::DepthwiseAct::kRelu, 0.f, {}};
      loom::nn::DepthwiseAct prelu_act{loom::nn::DepthwiseAct::kPrelu, 0.f, slope};
      auto dnnl_relu = [&] { prim.execute(s, args), s.wait(); };
      auto dnnl_prelu = [&] {
        prim.execute(s, args), s.wait();
        if (block == 16)
          prelu_blocked<16>(ref, slope.data(), n, l.c / 16, int64_t{o} * o * 16);
        else
          prelu_blocked<8>(ref, slope.data(), n, l.c / 8, int64_t{o} * o * 8);
      };
      own.pack_weights(w.data(), {});  // once, as oneDNN's weights are reordered once
      auto own_relu = [&] { own.forward(src, bias.data(), mine.data(), false, relu_act); };
      auto own_prelu = [&] { own.forward(src, bias.data(), mine.data(), false, prelu_act); };
      dnnl_relu(), own_relu();
      double diff = 0;
      for (size_t j = 0; j < out_n; ++j) diff = std::max(diff, double(std::fabs(ref[j] - mine[j])));
      double ms[4] = {1e9, 1e9, 1e9, 1e9};
      for (int round = 0; round < 3; ++round) {  // alternating, best of the rounds' medians
        ms[0] = std::min(ms[0], median_of(dnnl_relu, seconds));
        ms[2] = std::min(ms[2], median_of(own_relu, seconds));
        ms[1] = std::min(ms[1], median_of(dnnl_prelu, seconds));
        ms[3] = std::min(ms[3], median_of(own_prelu, seconds));
      }
      for (int k = 0; k < 4; ++k) tot[k] += ms[k];
      std::printf("%-4s c%-4d %3d %dx%d s%d: oneDNN %7.4f / +prelu %7.4f  own %7.4f / %7.4f ms"
                  "  (%.2fx, %.2fx) diff %.1e  %s\n",
                  net, l.c, l.hw, l.r, l.r, l.stride, ms[0], ms[1], ms[2], ms[3], ms[0] / ms[2],
                  ms[1] / ms[3], diff, pd.impl_info_str());
    }
  };
  one_set("mb1", kLayers, std::size(kLayers));
  one_set("mfn", kFaceDw, std::size(kFaceDw));
  std::printf("total: oneDNN %.3f / +prelu %.3f  own %.3f / %.3f ms (%d threads)\n", tot[0],
              tot[1], tot[2], tot[3], threads);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: mobile_layers BATCH [layers|dwfuse|dw] [LAYOUT] [SECONDS]\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const std::string mode = argc > 2 ? argv[2] : "layers";
  const std::string layout = argc > 3 ? argv[3] : "blocked";
  const double seconds = argc > 4 ? std::atof(argv[4]) : 0.2;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  const bool avx512 = get_effective_cpu_isa() >= cpu_isa::avx512_core;
  tag act = layout == "nhwc" ? tag::nhwc : layout == "any" ? tag::any
                                         : avx512          ? tag::nChw16c
                                                           : tag::nChw8c;
  if (mode == "dw") {
    run_dw(eng, s, n, act, avx512 ? 16 : 8, seconds);
    return 0;
  }
  double total = 0, apart_total = 0, fused_total = 0;
  for (size_t i = 0; i < std::size(kLayers); ++i) {
    const Layer& l = kLayers[i];
    const int o = (l.hw + 2 * (l.r / 2) - l.r) / l.stride + 1;
    auto pd = conv_pd(eng, n, l, act, relu());
    auto args = args_for(pd, eng);
    const double ms = median_ms(convolution_forward(pd), args, s, seconds);
    total += ms;
    if (mode == "layers") {
      const double gflop = 2.0 * n * l.k * o * o * (l.c / l.group) * l.r * l.r / 1e9;
      std::printf("c%-5d %3d k%-5d %dx%d s%d g%-5d %8.3f ms %7.1f GFLOP/s  %s\n", l.c, l.hw, l.k,
                  l.r, l.r, l.stride, l.group, ms, gflop / ms * 1e3, pd.impl_info_str());
      continue;
    }
    // dwfuse: a 1x1 layer followed by a depthwise 3x3, apart and as one primitive.
    if (l.r != 1 || i + 1 >= std::size(kLayers)) continue;
    const Layer& dw = kLayers[i + 1];
    auto dpd = conv_pd(eng, n, dw, act, relu());
    auto dargs = args_for(dpd, eng);
    dargs[DNNL_ARG_SRC] = args[DNNL_ARG_DST];
    const double dms = median_ms(convolution_forward(dpd), dargs, s, seconds);
    post_ops po = relu();
    po.append_dw(dt::f32, dt::f32, dt::f32, 3, dw.stride, 1, 0, {});
    po.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f);
    double fms = -1;
    std::string impl;
    try {
      auto fpd = conv_pd(eng, n, l, act, po);
      auto fargs = args_for(fpd, eng);
      fargs[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS] = dargs[DNNL_ARG_WEIGHTS];
      fargs[DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS] = dargs[DNNL_ARG_BIAS];
      fms = median_ms(convolution_forward(fpd), fargs, s, seconds);
      impl = fpd.impl_info_str();
    } catch (const dnnl::error& e) {
      impl = e.what();
    }
    apart_total += ms + dms;
    fused_total += fms;
    std::printf("1x1 c%-4d %3d k%-4d + dw s%d: %8.3f + %8.3f = %8.3f ms, fused %8.3f ms  %s\n",
                l.c, l.hw, l.k, dw.stride, ms, dms, ms + dms, fms, impl.c_str());
  }
  if (mode == "layers") std::printf("total %.3f ms\n", total);
  else std::printf("apart %.3f ms, fused %.3f ms\n", apart_total, fused_total);
  return 0;
}
