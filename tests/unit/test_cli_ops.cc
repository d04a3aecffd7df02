// `loom ops`: the CLI's operator list, checked line by line against the registry's own API
// (OpDef::kernels, find_cpu_dtype_policy, aliases) and against a few facts known from the
// ops' sources.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ops/dtype_policy.h"
#include "ops/op.h"

namespace loom {
namespace {

struct CmdResult {
  int code;
  std::string out;
};
CmdResult run(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

struct OpLine {
  std::string devices, dtypes;
  std::vector<std::string> aliases;
};

// name -> fields of `loom ops`' stdout; fails the test on a malformed or repeated line.
std::map<std::string, OpLine> parse_ops(const std::string& text) {
  std::map<std::string, OpLine> m;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string name;
    OpLine l;
    ls >> name >> l.devices >> l.dtypes;
    EXPECT_FALSE(l.dtypes.empty()) << "line with fewer than 3 fields: '" << line << "'";
    for (std::string a; ls >> a;) l.aliases.push_back(a);
    EXPECT_TRUE(m.emplace(name, l).second) << "op listed twice: " << name;
  }
  return m;
}

std::string expected_devices(const OpDef& op) {
  bool cpu = op.kernels.count(DeviceType::kCPU), gpu = op.kernels.count(DeviceType::kGPU);
  return cpu && gpu ? "cpu,gpu" : cpu ? "cpu" : gpu ? "gpu" : "-";
}

std::string expected_dtypes(const OpDef& op) {
  const DTypePolicy* p = find_cpu_dtype_policy(op.name);
  if (!p) return "-";
  std::string s;
  for (DType t : p->dtypes) s += (s.empty() ? "" : ",") + std::string(dtype_name(t));
  return s;
}

TEST(CliOps, OneLinePerRegisteredOp) {
  CmdResult r = run(std::string(LOOM_CLI) + " ops");
  ASSERT_EQ(r.code, 0) << r.out;
  std::map<std::string, OpLine> listed = parse_ops(r.out);
  std::vector<const OpDef*> ops = all_ops();
  EXPECT_EQ(listed.size(), ops.size());
  for (const OpDef* op : ops) {
    auto it = listed.find(op->name);
    if (it == listed.end()) {
      ADD_FAILURE() << "op " << op->name << " is not listed";
      continue;
    }
    EXPECT_EQ(it->second.devices, expected_devices(*op)) << op->name;
    EXPECT_EQ(it->second.dtypes, expected_dtypes(*op)) << op->name;
    EXPECT_EQ(it->second.aliases, op->aliases) << op->name;
  }
  // Facts from the ops' sources, independent of how the registry is read above.
  ASSERT_TRUE(listed.count("elemwise_add") && listed.count("LayerNorm") &&
              listed.count("_loom_gradients") && listed.count("Convolution"));
  const std::vector<std::string>& add_aliases = listed["elemwise_add"].aliases;
  EXPECT_EQ(std::set<std::string>(add_aliases.begin(), add_aliases.end()),
            (std::set<std::string>{"_plus", "_Plus", "_add"}));
  EXPECT_EQ(listed["LayerNorm"].dtypes, "float32,float64,float16");
  EXPECT_EQ(listed["Convolution"].dtypes, "float32");
  EXPECT_EQ(listed["_loom_gradients"].devices, "-");  // expanded by the gradient pass
#ifdef LOOM_HAVE_CUDA
  EXPECT_EQ(listed["elemwise_add"].devices, "cpu,gpu");
#else
  EXPECT_EQ(listed["elemwise_add"].devices, "cpu");
#endif
  // Sorted by name, as all_ops() promises.
  std::istringstream in(r.out);
  std::string line, prev;
  while (std::getline(in, line)) {
    std::string name = line.substr(0, line.find(' '));
    EXPECT_LT(prev, name);
    prev = name;
  }
}

TEST(CliOps, ArgumentsAreAUsageError) {
  CmdResult r = run(std::string(LOOM_CLI) + " ops extra 2>&1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("ops takes no arguments"), std::string::npos) << r.out;
  CmdResult help = run(std::string(LOOM_CLI) + " --help");
  EXPECT_NE(help.out.find("loom ops"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace loom
