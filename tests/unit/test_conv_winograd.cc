// Convolution picks oneDNN's Winograd kernels for large 3x3 stride-1 convolutions where the
// CPU has them; its outputs and gradients must match direct convolution
// (LOOM_CONV_WINOGRAD=0) to float rounding, with layout propagation on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "runtime/cpu/dnnl_util.h"
#include "runtime/executor.h"

namespace loom {
namespace {

Symbol net() {
  auto data = Symbol::Variable("data");
  auto c1 = Symbol::Op("Convolution", {data},
                       {{"kernel", "(3,3)"},
                        {"pad", "(1,1)"},
                        {"num_filter", "32"},
                        {"no_bias", "True"}},  // BatchNorm makes a bias gradient exactly 0
                       "c1");
  auto bn = Symbol::Op("BatchNorm", {c1}, {{"fix_gamma", "False"}}, "bn");
  auto r = Symbol::Op("Activation", {bn}, {{"act_type", "relu"}}, "relu");
  auto c2 = Symbol::Op(
      "Convolution", {r},
      {{"kernel", "(3,3)"}, {"pad", "(1,1)"}, {"num_filter", "32"}, {"no_bias", "True"}}, "c2");
  return Symbol::Op("MakeLoss", {Symbol::Op("elemwise_add", {c2, r}, {}, "plus")}, {}, "loss");
}

struct Result {
  std::vector<std::vector<float>> arrays;
};

Result run(bool winograd) {
  if (!winograd) setenv("LOOM_CONV_WINOGRAD", "0", 1);
  auto ex = Executor::simple_bind(net(), {{"data", Shape{2, 16, 24, 24}}});
  unsetenv("LOOM_CONV_WINOGRAD");
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& [name, a] : ex->arg_dict()) {
    std::vector<float> v(static_cast<size_t>(a.size()));
    for (auto& x : v) x = name == "data" ? nd(rng) : 0.2f * nd(rng);
    if (name == "bn_gamma")
      for (auto& x : v) x = 1.f;
    a.copy_from_host(v.data(), a.nbytes());
  }
  ex->aux_dict().at("bn_moving_var").fill(1.0);
  ex->forward(true);
  ex->backward();
  Result r;
  auto add = [&](const NDArray& a) {
    std::vector<float> v(static_cast<size_t>(a.size()));
    a.copy_to_host(v.data(), a.nbytes());
    r.arrays.push_back(v);
  };
  for (const auto& o : ex->outputs()) add(o);
  for (const auto& g : ex->grad_arrays())
    if (!g.is_none()) add(g);
  ex->forward(false);
  add(ex->outputs()[0]);
  return r;
}

TEST(ConvWinograd, MatchesDirectConvolution) {
  Result direct = run(false), wino = run(true);
  bool used = false;
  for (const auto& line : dnnl_util::recorded_impls())
    used = used || (line.find("(2, 16, 24, 24)") != std::string::npos &&
                    line.find("wino") != std::string::npos);
  // Winograd runs exactly where oneDNN has it for this CPU (AVX-512 in oneDNN 2.x; with
  // ONEDNN_MAX_CPU_ISA=AVX2 or on an AVX2-only CPU it does not, and direct serves).
  EXPECT_EQ(used, dnnl_util::has_winograd())
      << "ISA " << dnnl_util::isa_name() << ": the 24x24 convolution "
      << (used ? "ran" : "did not run") << " Winograd kernels";
#if DNNL_VERSION_MAJOR == 2
  EXPECT_EQ(dnnl_util::has_winograd(), dnnl_util::isa_has_avx512()) << dnnl_util::isa_name();
#endif
  ASSERT_EQ(direct.arrays.size(), wino.arrays.size());
  for (size_t k = 0; k < direct.arrays.size(); ++k) {
    const auto &a = direct.arrays[k], &b = wino.arrays[k];
    ASSERT_EQ(a.size(), b.size());
    double scale = 0;
    for (float x : a) scale = std::max(scale, static_cast<double>(std::abs(x)));
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(b[i], a[i], 1e-4 * std::abs(a[i]) + 1e-5 * scale)
          << "array " << k << " element " << i;
  }
}

}  // namespace
}  // namespace loom
