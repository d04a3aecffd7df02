#include "runtime/cpu/dnnl_util.h"

#include <algorithm>
#include <mutex>

namespace loom::dnnl_util {

const dnnl::engine& engine() {
  static const dnnl::engine* eng = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *eng;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

memory::dims to_dims(const Shape& s) { return memory::dims(s.dims().begin(), s.dims().end()); }

memory::format_tag plain_tag(int ndim) {
  using T = memory::format_tag;
  switch (ndim) {
    case 1:
      return T::a;
    case 2:
      return T::ab;
    case 3:
      return T::abc;
    case 4:
      return T::abcd;
    case 5:
      return T::abcde;
    case 6:
      return T::abcdef;
    default:
      throw Error("oneDNN: unsupported rank " + std::to_string(ndim));
  }
}

memory::desc plain_md(const memory::dims& dims) {
  return memory::desc(dims, memory::data_type::f32, plain_tag(static_cast<int>(dims.size())));
}

memory::desc any_md(const memory::dims& dims) {
  return memory::desc(dims, memory::data_type::f32, memory::format_tag::any);
}

memory::desc layout_md(const memory::dims& dims, Layout layout) {
  switch (layout) {
    case Layout::kNChw16c:
      return memory::desc(dims, memory::data_type::f32, memory::format_tag::nChw16c);
    case Layout::kNChw8c:
      return memory::desc(dims, memory::data_type::f32, memory::format_tag::nChw8c);
    default:
      return plain_md(dims);
  }
}

int preferred_channel_block() {
  // Ask a typical 3x3 convolution (built as Convolution builds it) which source layout it wants.
  static const int block = [] {
    try {
      memory::dims src{1, 64, 14, 14}, w{64, 64, 3, 3}, dst{1, 64, 14, 14};
      dnnl::convolution_forward::primitive_desc pd({dnnl::prop_kind::forward_training,
                                                    dnnl::algorithm::convolution_direct,
                                                    any_md(src),
                                                    any_md(w),
                                                    any_md(dst),
                                                    {1, 1},
                                                    {1, 1},
                                                    {1, 1}},
                                                   engine());
      if (pd.src_desc() == layout_md(src, Layout::kNChw16c)) return 16;
      if (pd.src_desc() == layout_md(src, Layout::kNChw8c)) return 8;
    } catch (const dnnl::error&) {
    }
    return 1;
  }();
  return block;
}

dnnl::cpu_isa effective_isa() { return dnnl::get_effective_cpu_isa(); }

bool isa_has_avx512() {
  // The ISA values are nested bit sets: a later one contains every bit of those it extends.
  auto bits = static_cast<unsigned>(effective_isa());
  auto core = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (bits & core) == core;
}

std::string isa_name() {
  using I = dnnl::cpu_isa;
  switch (effective_isa()) {
    case I::sse41:
      return "sse41";
    case I::avx:
      return "avx";
    case I::avx2:
      return "avx2";
    case I::avx2_vnni:
      return "avx2_vnni";
    case I::avx512_mic:
      return "avx512_mic";
    case I::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case I::avx512_core:
      return "avx512_core";
    case I::avx512_core_vnni:
      return "avx512_core_vnni";
    case I::avx512_core_bf16:
      return "avx512_core_bf16";
    case I::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "isa#" + std::to_string(static_cast<int>(effective_isa()));
  }
}

bool has_winograd() {
  static const bool yes = [] {
    try {
      memory::dims src{1, 64, 28, 28}, w{64, 64, 3, 3}, dst{1, 64, 28, 28};
      dnnl::convolution_forward::primitive_desc pd({dnnl::prop_kind::forward_training,
                                                    dnnl::algorithm::convolution_winograd,
                                                    any_md(src),
                                                    any_md(w),
                                                    any_md(dst),
                                                    {1, 1},
                                                    {1, 1},
                                                    {1, 1}},
                                                   engine());
      return std::string(pd.impl_info_str()).find("ref") == std::string::npos;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return yes;
}

void execute(const dnnl::primitive& prim, const std::unordered_map<int, memory>& args) {
  auto& s = stream();
  prim.execute(s, args);
  s.wait();
}

void rethrow(const dnnl::error& e, const std::string& what) {
  throw Error(what + ": oneDNN error: " + e.what());
}

namespace {
std::mutex impl_mu;
uint64_t impl_count = 0;  // lines ever recorded, under impl_mu
std::vector<std::string>& impl_lines() {
  static auto* v = new std::vector<std::string>;
  return *v;
}
}  // namespace

void record_impl(const std::string& line) {
  std::lock_guard<std::mutex> lk(impl_mu);
  auto& v = impl_lines();
  if (v.size() >= 256) v.erase(v.begin());
  v.push_back(line);
  ++impl_count;
}

std::vector<std::string> recorded_impls() {
  std::lock_guard<std::mutex> lk(impl_mu);
  return impl_lines();
}

uint64_t recorded_impl_count() {
  std::lock_guard<std::mutex> lk(impl_mu);
  return impl_count;
}

std::vector<std::string> recorded_impls_since(uint64_t mark) {
  std::lock_guard<std::mutex> lk(impl_mu);
  const auto& v = impl_lines();
  const uint64_t newer = impl_count > mark ? impl_count - mark : 0;
  const size_t keep = static_cast<size_t>(std::min<uint64_t>(newer, v.size()));
  return std::vector<std::string>(v.end() - static_cast<long>(keep), v.end());
}

void add_to(float* dst, const float* src, int64_t n) {
#pragma omp parallel for simd if (parallel: n > 65536)
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

LayoutBridge::LayoutBridge(const memory::desc& plain, const memory::desc& chosen, bool to_only)
    : plain_(plain), chosen_(chosen), same_(plain == chosen) {
  if (same_) return;
  const auto& eng = engine();
  to_ = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plain_, eng, chosen_));
  if (to_only) return;
  from_write_ = dnnl::reorder(dnnl::reorder::primitive_desc(eng, chosen_, eng, plain_));
  dnnl::post_ops po;
  po.append_sum(1.f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  from_add_ = dnnl::reorder(dnnl::reorder::primitive_desc(eng, chosen_, eng, plain_, attr));
}

memory LayoutBridge::to_chosen(const float* plain, void* scratch) const {
  const auto& eng = engine();
  if (same_) return memory(chosen_, eng, const_cast<float*>(plain));
  memory src(plain_, eng, const_cast<float*>(plain));
  memory dst(chosen_, eng, scratch);
  execute(to_, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
  return dst;
}

void LayoutBridge::from_chosen(const void* src, float* plain, bool add) const {
  if (same_) {
    int64_t n = static_cast<int64_t>(plain_.get_size() / sizeof(float));
    const float* s = static_cast<const float*>(src);
    if (add)
      add_to(plain, s, n);
    else if (s != plain)
      std::copy(s, s + n, plain);
    return;
  }
  const auto& eng = engine();
  memory m_src(chosen_, eng, const_cast<void*>(src));
  memory m_dst(plain_, eng, plain);
  execute(add ? from_add_ : from_write_, {{DNNL_ARG_FROM, m_src}, {DNNL_ARG_TO, m_dst}});
}

}  // namespace loom::dnnl_util
