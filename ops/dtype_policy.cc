#include "ops/dtype_policy.h"

#include <map>
#include <mutex>

#include "ops/infer.h"

namespace loom {
namespace {

// Keyed by the name given at declaration; lookups also try the op's canonical name, so a
// declaration may run before or after the op registers (static-initialisation order).
std::map<std::string, DTypePolicy>& policies() {
  static std::map<std::string, DTypePolicy> m;
  return m;
}
std::mutex& policies_mu() {
  static std::mutex mu;
  return mu;
}

bool contains(const std::vector<int>& v, size_t i) {
  for (int x : v)
    if (x == static_cast<int>(i)) return true;
  return false;
}

}  // namespace

bool DTypePolicy::allows(DType t) const {
  for (DType d : dtypes)
    if (d == t) return true;
  return false;
}

std::string DTypePolicy::list() const {
  std::string s;
  for (DType d : dtypes) s += (s.empty() ? "" : ", ") + std::string(dtype_name(d));
  return s;
}

void declare_cpu_dtypes(const std::string& op, std::vector<DType> dtypes,
                        DTypePolicyOptions options) {
  std::lock_guard<std::mutex> lock(policies_mu());
  policies()[op] = DTypePolicy{std::move(dtypes), std::move(options)};
}

const DTypePolicy* find_cpu_dtype_policy(const std::string& op) {
  std::lock_guard<std::mutex> lock(policies_mu());
  auto& m = policies();
  auto it = m.find(op);
  if (it != m.end()) return &it->second;
  if (const OpDef* def = find_op(op)) {
    it = m.find(def->name);
    if (it != m.end()) return &it->second;
    for (const auto& al : def->aliases)
      if ((it = m.find(al)) != m.end()) return &it->second;
  }
  return nullptr;
}

void check_dtype_policy(const OpAttrs& a, Device dev, const std::vector<DType>& in,
                        const std::vector<DType>& out) {
  if (dev.type != DeviceType::kCPU || !a.op) return;
  const DTypePolicy* p = find_cpu_dtype_policy(a.op->name);
  if (!p) return;
  auto fail = [&](const std::string& slot, DType t) {
    throw DTypePolicyError("node '" + a.name + "' (op " + a.op->name + "): " + slot +
                           " has dtype " + dtype_name(t) + ", which the CPU kernel of " +
                           a.op->name + " does not support; it takes " + p->list());
  };
  const size_t nin = std::min(in.size(), op_kernel_inputs(a));
  for (size_t i = 0; i < nin; ++i)
    if (in[i] != DType::kUnknown && !contains(p->options.any_inputs, i) && !p->allows(in[i]))
      fail(input_label(a, i), in[i]);
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != DType::kUnknown && !contains(p->options.any_outputs, i) && !p->allows(out[i]))
      fail("output " + std::to_string(i), out[i]);
}

}  // namespace loom
