// The CPU-dependent choices follow what this CPU has, capped by ONEDNN_MAX_CPU_ISA /
// DNNL_MAX_CPU_ISA: the ISA oneDNN reports, the activation layout the executor picks and
// the kernels that run. The test command runs these (and every other oneDNN test) once as
// the machine is and once more with ONEDNN_MAX_CPU_ISA=AVX2, so an AVX-512 machine checks
// both paths; on an AVX2-only CPU both runs take the AVX2 path.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/cpu/dnnl_util.h"
#include "runtime/executor.h"

namespace loom {
namespace {

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The cap the environment asks for ("" when none): oneDNN 2.6 reads ONEDNN_MAX_CPU_ISA first.
std::string isa_cap() {
  for (const char* v : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* s = std::getenv(v); s && *s) return upper(s);
  return "";
}

// What the CPU itself offers, from cpuid: oneDNN's avx512_core needs F, BW, VL and DQ.
bool cpu_has_avx512_core() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

bool expect_avx512() {
  std::string cap = isa_cap();
  bool capped_below = cap == "SSE41" || cap == "AVX" || cap == "AVX2" || cap == "AVX2_VNNI";
  return cpu_has_avx512_core() && !capped_below;
}

TEST(CpuIsa, EffectiveIsaIsTheCpusCappedByTheEnvironment) {
  ASSERT_TRUE(__builtin_cpu_supports("avx2")) << "Loom's machines all have AVX2";
  EXPECT_EQ(dnnl_util::isa_has_avx512(), expect_avx512())
      << "oneDNN uses " << dnnl_util::isa_name() << ", cap '" << isa_cap() << "'";
  auto bits = static_cast<unsigned>(dnnl_util::effective_isa());
  auto avx2 = static_cast<unsigned>(dnnl::cpu_isa::avx2);
  EXPECT_EQ(bits & avx2, avx2) << dnnl_util::isa_name();
}

Symbol conv_net() {
  auto data = Symbol::Variable("data");
  auto c = Symbol::Op("Convolution", {data}, {{"kernel", "(3,3)"}, {"pad", "(1,1)"}, {"num_filter", "32"}},
                      "isa_conv");
  auto r = Symbol::Op("Activation", {c}, {{"act_type", "relu"}}, "isa_relu");
  return Symbol::Op("Pooling", {r}, {{"kernel", "(2,2)"}, {"stride", "(2,2)"}, {"pool_type", "max"}},
                    "isa_pool");
}

// The executor blocks activations by the ISA's vector width and the convolution runs the
// JIT kernel of that ISA.
TEST(CpuIsa, LayoutAndKernelsFollowTheIsa) {
  const bool avx512 = expect_avx512();
  EXPECT_EQ(dnnl_util::preferred_channel_block(), avx512 ? 16 : 8);
  auto ex = Executor::simple_bind(conv_net(), {{"data", Shape{2, 16, 12, 12}}});
  for (auto& [name, a] : ex->arg_dict()) a.fill(name == "data" ? 1.0 : 0.01);
  ex->forward(false);
  // All ones through a 3x3 convolution of 16 channels with weights and bias 0.01: interior
  // pixels are 16*9*0.01 + 0.01, and every 2x2 pooling window holds an interior pixel.
  std::vector<float> out(static_cast<size_t>(ex->outputs()[0].size()));
  ASSERT_EQ(out.size(), 2u * 32 * 6 * 6);
  ex->outputs()[0].copy_to_host(out.data(), out.size() * sizeof(float));
  for (float v : out) ASSERT_NEAR(v, 16 * 9 * 0.01f + 0.01f, 1e-5);
  bool found = false;
  for (const auto& line : dnnl_util::recorded_impls()) {
    if (line.find("Convolution (2, 16, 12, 12)") == std::string::npos) continue;
    found = true;
    // The forward's line ("fwd=jit:...") and the post-op primitive's ("+relu jit:..." or, in
    // inference where oneDNN has Winograd, "+relu jit_fp32_wino_2x3:..."): JIT kernels of the
    // ISA.
    const std::string want = avx512 ? ":avx512_core" : ":avx2";
    EXPECT_NE(line.find(want), std::string::npos) << line;
    EXPECT_NE(line.find("jit"), std::string::npos) << line;
  }
  EXPECT_TRUE(found) << "the convolution recorded no implementation";
}

// oneDNN's own verbose log names the ISA it dispatches to; this confirms the cap took effect
// in a fresh process (the cap is read once, before the first primitive).
TEST(CpuIsa, VerboseLogNamesTheIsa) {
  std::string cmd = "DNNL_VERBOSE=1 ONEDNN_VERBOSE=1 /proc/" + std::to_string(::getpid()) +
                    "/exe --gtest_filter=CpuIsa.LayoutAndKernelsFollowTheIsa 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int st = pclose(p);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  auto at = out.find(",isa:");
  ASSERT_NE(at, std::string::npos) << "no ISA line in oneDNN's verbose log:\n" << out;
  std::string line = out.substr(at + 5, out.find('\n', at) - at - 5);
  if (expect_avx512()) {
    EXPECT_NE(line.find("AVX-512"), std::string::npos) << line;
  } else {
    EXPECT_EQ(line.find("AVX-512"), std::string::npos) << line;
    EXPECT_NE(line.find("AVX2"), std::string::npos) << line;
  }
  // The cap names an ISA oneDNN reports by its marketing name: AVX2 -> "Intel AVX2".
  if (isa_cap() == "AVX2") {
    EXPECT_EQ(line, "Intel AVX2");
  }
}

}  // namespace
}  // namespace loom
