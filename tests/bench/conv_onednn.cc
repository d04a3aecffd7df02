// ResNet-18's convolutions (forward inference, f32, direct algorithm, layouts left to
// oneDNN, weights pre-reordered) timed one layer at a time with whatever oneDNN this is
// linked against: builds against Debian's 2.6 and PyPI's onednn-devel-cpu-gomp 3.2 compare
// the libraries' kernels without touching Loom's build (issue 13, part 3). Not part of the
// build; compile by hand, e.g.
//   g++ -O2 -fopenmp conv_onednn.cc -ldnnl -o conv26
//   g++ -O2 -fopenmp -I$V/include conv_onednn.cc -L$V/lib -Wl,-rpath,$V/lib -ldnnl -o conv32
//
//   convNN BATCH [SECONDS_PER_LAYER [LAYOUT [ALGO]]]  ->  one line per layer (ms,
//   implementation), total. LAYOUT of the activations: any (oneDNN's choice, default),
//   blocked (nChw16c with AVX-512, nChw8c below: Loom's layout plan), nhwc; ALGO: direct
//   (default) or wino (Winograd where oneDNN has it, else direct). COLD=1 in the environment
//   rotates each layer through copies of its weights totalling >= 64 MB, so every call
//   reads them from memory as a network's batch-1 pass does (one layer's weights stay
//   in cache otherwise, and 7x7 layers then look 1.6x faster than they run in a network).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

namespace {

struct Layer {
  int c, hw, k, r, stride, pad, count;  // in channels, in size, out channels, kernel, times
};

// ResNet-18 v1 (224x224): the stem, then per stage the 3x3 convolutions and the 1x1
// projection shortcuts (count = how many such layers the network has).
const Layer kLayers[] = {
    {3, 224, 64, 7, 2, 3, 1},    {64, 56, 64, 3, 1, 1, 4},    {64, 56, 128, 3, 2, 1, 1},
    {128, 28, 128, 3, 1, 1, 3},  {64, 56, 128, 1, 2, 0, 1},   {128, 28, 256, 3, 2, 1, 1},
    {256, 14, 256, 3, 1, 1, 3},  {128, 28, 256, 1, 2, 0, 1},  {256, 14, 512, 3, 2, 1, 1},
    {512, 7, 512, 3, 1, 1, 3},   {256, 14, 512, 1, 2, 0, 1},
};

dnnl::memory filled(const dnnl::memory::desc& md, const dnnl::engine& eng) {
  dnnl::memory m(md, eng);
  float* p = static_cast<float*>(m.get_data_handle());
  size_t n = md.get_size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) p[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dnnl;
  if (argc < 2) {
    std::fprintf(stderr, "usage: conv_onednn BATCH [SECONDS_PER_LAYER]\n");
    return 2;
  }
  const int n = std::atoi(argv[1]);
  const double seconds = argc > 2 ? std::atof(argv[2]) : 0.3;
  const char* layout = argc > 3 ? argv[3] : "any";
  const bool wino = argc > 4 && std::strcmp(argv[4], "wino") == 0;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const auto* v = dnnl_version();
  std::printf("oneDNN %d.%d.%d, batch %d\n", v->major, v->minor, v->patch, n);
  double total = 0;
  for (const Layer& l : kLayers) {
    const int o = (l.hw + 2 * l.pad - l.r) / l.stride + 1;
    using tag = memory::format_tag;
    using dt = memory::data_type;
    tag act = tag::any;
    if (std::strcmp(layout, "nhwc") == 0) act = tag::nhwc;
    // The blocked layout needs whole blocks: the RGB stem stays oneDNN's choice.
    const bool avx512 = dnnl::get_effective_cpu_isa() >= cpu_isa::avx512_core;
    if (std::strcmp(layout, "blocked") == 0) act = avx512 ? tag::nChw16c : tag::nChw8c;
    memory::desc src({n, l.c, l.hw, l.hw}, dt::f32, l.c % 8 ? tag::any : act);
    memory::desc w({l.k, l.c, l.r, l.r}, dt::f32, tag::any);
    memory::desc b({l.k}, dt::f32, tag::x);
    memory::desc dst({n, l.k, o, o}, dt::f32, act);
    memory::dims strides{l.stride, l.stride}, pad{l.pad, l.pad};
    auto make = [&](algorithm algo) {
#if DNNL_VERSION_MAJOR >= 3
      return convolution_forward::primitive_desc(eng, prop_kind::forward_inference, algo, src, w,
                                                 b, dst, strides, pad, pad);
#else
      convolution_forward::desc d(prop_kind::forward_inference, algo, src, w, b, dst, strides, pad,
                                  pad);
      return convolution_forward::primitive_desc(d, eng);
#endif
    };
    convolution_forward::primitive_desc pd;
    try {
      pd = make(wino && l.r == 3 && l.stride == 1 ? algorithm::convolution_winograd
                                                  : algorithm::convolution_direct);
    } catch (const dnnl::error&) {
      pd = make(algorithm::convolution_direct);
    }
    convolution_forward conv(pd);
    auto ms = filled(pd.src_desc(), eng), mw = filled(pd.weights_desc(), eng),
         mb = filled(b, eng), md = filled(pd.dst_desc(), eng);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, md}};
    std::vector<memory> weights{mw};
    if (const char* cold = std::getenv("COLD"); cold && std::strcmp(cold, "1") == 0)
      while (weights.size() * pd.weights_desc().get_size() < (size_t{64} << 20))
        weights.push_back(filled(pd.weights_desc(), eng));
    size_t next = 0;
    for (int i = 0; i < 2; ++i) conv.execute(strm, args);
    strm.wait();
    std::vector<double> t;
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (t.size() < 5 || std::chrono::steady_clock::now() < end) {
      args[DNNL_ARG_WEIGHTS] = weights[next++ % weights.size()];
      auto t0 = std::chrono::steady_clock::now();
      conv.execute(strm, args);
      strm.wait();
      t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                      .count());
    }
    std::sort(t.begin(), t.end());
    double med = t[t.size() / 2];
    total += med * l.count;
    std::printf("  c%-3d %3dx%-3d k%-3d %dx%d s%d x%d  %8.3f ms  %s  scratch %.1f MB\n", l.c, l.hw,
                l.hw, l.k, l.r, l.r, l.stride, l.count, med, pd.impl_info_str(),
                static_cast<double>(pd.scratchpad_desc().get_size()) / (1 << 20));
  }
  std::printf("total %.3f ms\n", total);
  return 0;
}
