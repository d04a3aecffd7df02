#include "frontends/cli/ops.h"

#include <iostream>

#include "frontends/cli/args.h"
#include "ops/dtype_policy.h"
#include "ops/op.h"

namespace loom::cli {

const char* kOpsUsage =
    "  loom ops\n"
    "      Lists every registered operator, one line each: NAME DEVICES DTYPES [ALIAS ...]\n"
    "      (DEVICES: cpu,gpu = devices with a kernel; DTYPES: the CPU kernel's declared\n"
    "      dtypes, - = checked by the kernel itself; GPU kernels take float32).\n";

namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s.empty() ? "-" : s;
}

}  // namespace

void write_ops(std::ostream& os) {
  for (const OpDef* op : all_ops()) {
    std::vector<std::string> devices;
    if (op->kernels.count(DeviceType::kCPU)) devices.push_back("cpu");
    if (op->kernels.count(DeviceType::kGPU)) devices.push_back("gpu");
    std::vector<std::string> dtypes;
    if (const DTypePolicy* p = find_cpu_dtype_policy(op->name))
      for (DType t : p->dtypes) dtypes.push_back(dtype_name(t));
    os << op->name << ' ' << join(devices, ",") << ' ' << join(dtypes, ",");
    for (const auto& a : op->aliases) os << ' ' << a;
    os << '\n';
  }
}

int cmd_ops(const std::vector<std::string>& args) {
  if (!args.empty()) throw UsageError("ops takes no arguments, got '" + args[0] + "'");
  write_ops(std::cout);
  return std::cout.good() ? 0 : 1;
}

}  // namespace loom::cli
