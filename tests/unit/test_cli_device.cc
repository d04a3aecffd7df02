// `loom run --device`: the CPU device gives what the default gives, a bad value is a usage
// error (exit 2), and a GPU without a CUDA device is one clear error (exit 1) before any
// file is read.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "runtime/device.h"
#include "runtime/npy.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out;
};
Result loom_cli(const std::string& args) {
  std::string cmd = std::string(LOOM_CLI) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

class CliDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("loom_cli_device_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    // y = relu(x): the expected output is known without running anything.
    FILE* f = std::fopen(p("net.json").c_str(), "w");
    std::fputs(R"({"nodes": [{"op": "null", "name": "data", "inputs": []},
      {"op": "Activation", "name": "act", "attrs": {"act_type": "relu"}, "inputs": [[0, 0, 0]]}],
      "arg_nodes": [0], "heads": [[1, 0, 0]]})", f);
    std::fclose(f);
    NDArray x(Shape{2, 3});
    const float v[] = {-1.f, 2.f, -3.f, 4.f, 0.5f, -0.5f};
    std::copy(v, v + 6, x.data<float>());
    save_npy(p("x.npy"), x);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string p(const std::string& f) const { return (dir_ / f).string(); }
  fs::path dir_;
};

TEST_F(CliDevice, CpuDeviceRunsAsTheDefault) {
  for (const char* dev : {"cpu", "cpu:0"}) {
    Result r = loom_cli("run " + p("net.json") + " --input data=" + p("x.npy") + " --device " +
                        dev + " --output-dir " + p(dev));
    ASSERT_EQ(r.code, 0) << r.out;
    NDArray y = load_npy(p(std::string(dev) + "/act_output.npy"));
    const float want[] = {0.f, 2.f, 0.f, 4.f, 0.5f, 0.f};
    ASSERT_EQ(y.shape(), (Shape{2, 3}));
    for (int i = 0; i < 6; ++i) EXPECT_EQ(y.data<float>()[i], want[i]) << dev << " " << i;
  }
}

TEST_F(CliDevice, BadValueIsAUsageError) {
  for (const char* dev : {"tpu", "gpu:x", "gpu:-1", "gpu:"}) {
    Result r = loom_cli("run " + p("net.json") + " --device " + dev);
    EXPECT_EQ(r.code, 2) << dev << ": " << r.out;
    EXPECT_NE(r.out.find(std::string("--device ") + dev + ": expected cpu, gpu"),
              std::string::npos)
        << r.out;
  }
}

TEST_F(CliDevice, GpuWithoutDeviceIsOneClearError) {
  if (device_available(DeviceType::kGPU)) GTEST_SKIP() << "a CUDA device is present";
  for (const char* dev : {"gpu", "gpu:1"}) {
    // The graph file does not exist: the device is checked first.
    Result r = loom_cli("run " + p("missing.json") + " --input data=" + p("x.npy") +
                        " --device " + dev);
    EXPECT_EQ(r.code, 1) << r.out;
    const std::string want = std::string("loom: error: no CUDA device: gpu(") +
                             (dev[3] == ':' ? "1" : "0") + ") is not available (";
    EXPECT_EQ(r.out.find(want), 0u) << r.out;
    EXPECT_EQ(r.out.find("missing.json"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace loom
