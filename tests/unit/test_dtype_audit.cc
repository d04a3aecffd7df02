// Dtype audit: every registered op, on every sweep sample, run with its inputs in float64,
// float16 and (where integer results are well defined) int32. The op must either refuse at
// bind (the CPU dtype policy's error of ops/dtype_policy.h, a type-inference error, or a
// kernel's own bind-time error naming the refused dtype), or give the float32 result
// computed on the same (cast) values, within the dtype's tolerance.
// A kernel that reads float64/float16/int32 bytes as float32 fails here, by name.
//
// Input dtypes per variant:
//  - "float64" / "float16": every input is cast, label and index inputs included (MXNet's
//    loss heads require labels of the data's dtype; index inputs of take/Embedding/pick/...
//    accept any dtype, so casting them too is one of the legal combinations).
//  - "int32": every input is cast to int32 (values truncated toward zero, as MXNet casts).
//    Only samples whose inputs are all "normal"/"label"/"index"/"zeros"/"ones" kinds run it
//    (domain-restricted samples like log's "positive" inputs truncate to 0/1 and say
//    nothing), with the normal inputs scaled by 4 so they are not all 0 and +-1. The
//    expected result is the float32 result converted to the output's dtype (MXNet's integer
//    kernels of these ops compute through float or are exact), tolerance 1.
//  - "int32 labels": samples with label/index inputs also run with float32 data and int32
//    labels/indices (MXNet's usual mix for take, Embedding, pick, one_hot, SoftmaxOutput).
//
// Ops registered later are covered automatically: the audit walks all_ops().
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "ops/dtype_policy.h"
#include "ops/infer.h"
#include "runtime/dtype_traits.h"
#include "runtime/executor.h"
#include "runtime/imperative.h"
#include "tests/unit/sample_inputs.h"

namespace loom {
namespace {

// Same exclusions as the sweep (no static samples, or no kernel of their own).
const std::set<std::string> kNoSampleOps = {"Custom", "_loom_gradients"};
// Ops whose integer results differ from the float32 ones by MXNet's own design (checked
// against MXNet 1.9.1): the int32 variant is skipped for them.
//  - _histogram: bin positions are computed in the input dtype ([-4,-1,0,1,3,0,0] int32 in
//    4 bins over (-1.5, 1.5) gives [1 0 0 4] in MXNet, [1 0 3 1] for float32).
const std::set<std::string> kIntSemanticsOps = {"_histogram"};

using test::is_label_kind;
using test::kind_of;
using test::make_input;

// An array of shape s and dtype t with room for 8-byte elements behind it, so a kernel that
// reads or writes narrower data as float32/float64 corrupts nothing but the padding.
NDArray padded(const Shape& s, DType t) {
  NDArray big(Shape{s.numel() + 64}, DType::kFloat64);
  std::memset(big.raw(), 0, big.nbytes());
  return NDArray(big.storage(), big.offset(), s, t);
}

// `a` (any dtype) converted to dtype t with MXNet's value conversion.
NDArray cast_to(const NDArray& a, DType t) {
  NDArray out = padded(a.shape(), t);
  dispatch_dtype(a.dtype(), [&](auto st) {
    using S = typename decltype(st)::type;
    dispatch_dtype(t, [&](auto dt) {
      using D = typename decltype(dt)::type;
      const S* src = a.data<S>();
      D* dst = out.data<D>();
      for (int64_t i = 0; i < a.size(); ++i) dst[i] = convert_value<D>(src[i]);
    });
  });
  return out;
}

struct Variant {
  const char* name;
  DType data;    // dtype of data inputs
  DType labels;  // dtype of label/index inputs
  double rtol, atol;
};

std::string describe(const OpDef& op, const OpSample& s, size_t idx, const Variant& v) {
  std::string d = op.name + " sample " + std::to_string(idx) + " {";
  for (const auto& [k, val] : s.attrs) d += k + "=" + val + " ";
  d += "} inputs";
  for (const auto& sh : s.in_shapes) d += " " + sh.str();
  return d + " as " + v.name;
}

bool int_friendly(const OpSample& s) {
  for (size_t i = 0; i < s.in_shapes.size(); ++i) {
    std::string k = kind_of(s, i);
    if (!(k == "normal" || k == "zeros" || k == "ones" || is_label_kind(k))) return false;
  }
  return true;
}

size_t g_backward_runs = 0;  // backward comparisons made (printed with the summary)
// Ops refused by their kernel's own check rather than a declared policy (printed; each
// should eventually declare LOOM_CPU_DTYPES so its error lists what it takes).
std::set<std::string> g_kernel_refusals;

bool near(double g, double e, double rtol, double atol) {
  if (std::isnan(e) && std::isnan(g)) return true;
  if (std::isinf(e) && e == g) return true;
  return std::fabs(g - e) <= atol + rtol * std::fabs(e);
}

// Backward in the variant's dtype against float32's on the same values: the gradient of
// every differentiable input (not labels, indices, aux or no-grad inputs), req write.
std::string audit_backward(const OpDef& op, const OpSample& s, const Variant& v,
                           ImperativeOp& ref, ImperativeOp& inst, const std::vector<NDArray>& in32,
                           const std::vector<NDArray>& in_t, const std::vector<NDArray>& out32,
                           const std::vector<NDArray>& out_t) {
  const OpAttrs& attrs = ref.attrs();
  const int nvis = op_num_visible(attrs);
  std::mt19937 rng(4242);
  std::vector<NDArray> og32, og_t;
  for (size_t k = 0; k < out32.size(); ++k) {
    NDArray g = static_cast<int>(k) < nvis ? make_input(out32[k].shape(), "normal", rng, 1.f)
                                           : NDArray::zeros(out32[k].shape());
    og_t.push_back(cast_to(g, out_t[k].dtype()));
    og32.push_back(cast_to(og_t.back(), out32[k].dtype()));
  }
  std::set<int> skip;
  for (int a : op_aux(attrs)) skip.insert(a);
  if (op.nograd_inputs)
    for (int a : op.nograd_inputs(attrs)) skip.insert(a);
  std::vector<NDArray> g32, g_t;
  std::vector<Req> req;
  for (size_t i = 0; i < in32.size(); ++i) {
    const bool d = !skip.count(static_cast<int>(i)) && !is_label_kind(kind_of(s, i)) &&
                   dtype_is_float(in_t[i].dtype());
    g32.push_back(d ? NDArray::zeros(in32[i].shape()) : NDArray());
    g_t.push_back(d ? padded(in_t[i].shape(), in_t[i].dtype()) : NDArray());
    req.push_back(d ? Req::kWrite : Req::kNull);
  }
  ref.backward(og32, in32, out32, req, g32, s.is_train);
  try {
    inst.backward(og_t, in_t, out_t, req, g_t, s.is_train);
  } catch (const Error& e) {
    return std::string("forward works but backward fails (refuse at bind instead): ") + e.what();
  }
  ++g_backward_runs;
  const double rtol = v.data == DType::kFloat16 ? 3e-2 : v.rtol;
  const double atol = v.data == DType::kFloat16 ? 3e-2 : v.atol;
  for (size_t i = 0; i < in32.size(); ++i) {
    if (req[i] == Req::kNull) continue;
    for (int64_t j = 0; j < g32[i].size(); ++j)
      if (!near(g_t[i].at(j), g32[i].at(j), rtol, atol))
        return "wrong gradient: " + input_label(attrs, i) + " element " + std::to_string(j) +
               " is " + std::to_string(g_t[i].at(j)) + ", float32 gives " +
               std::to_string(g32[i].at(j));
  }
  return "";
}

// Outcome of one (op, sample, variant), "" when correct or properly refused.
std::string audit_one(const OpDef& op, const OpSample& s, size_t idx, const Variant& v,
                      int* refused) {
  const bool int_data = v.data == DType::kInt32;
  // Shapes as inference completes them (samples may leave parameter shapes unknown).
  ImperativeOp ref(op.name, s.attrs, s.in_shapes);
  const std::vector<Shape>& shapes = ref.in_shapes();
  std::mt19937 rng(777 + static_cast<unsigned>(idx));
  std::vector<NDArray> in32;    // the cast values, as float32 (input of the reference run)
  std::vector<NDArray> in_t;    // the same values in the variant's dtypes
  std::vector<DType> types;
  for (size_t i = 0; i < s.in_shapes.size(); ++i) {
    std::string k = kind_of(s, i);
    DType t = is_label_kind(k) ? v.labels : v.data;
    NDArray x = make_input(shapes[i], k, rng, int_data ? 4.f : 1.f);
    in_t.push_back(cast_to(x, t));
    in32.push_back(cast_to(in_t.back(), DType::kFloat32));
    types.push_back(t);
  }

  // The variant: refusal at bind is fine when it is the policy's (or type inference's).
  std::unique_ptr<ImperativeOp> inst;
  try {
    inst = std::make_unique<ImperativeOp>(op.name, s.attrs, shapes, types);
  } catch (const DTypePolicyError&) {
    ++*refused;
    return "";
  } catch (const Error& e) {
    // Did type inference itself reject these dtypes (MXNet's FInferType would too)?
    try {
      OpAttrs a = make_op_attrs(op, "audit", s.attrs);
      std::vector<DType> ti = types, to(op_outputs(a).size(), DType::kUnknown);
      run_infer_type(a, ti, to);
    } catch (const Error&) {
      ++*refused;
      return "";
    }
    // A kernel's own bind-time check that names the refused dtype is a clear refusal too
    // (the update kernels, ops of other families); anything else is a failure.
    std::string m = e.what();
    for (DType t : types)
      if (t != DType::kFloat32 && m.find(dtype_name(t)) != std::string::npos) {
        ++*refused;
        g_kernel_refusals.insert(op.name);
        return "";
      }
    return std::string("refuses at bind without naming the dtype (declare its dtypes with "
                       "LOOM_CPU_DTYPES): ") + m;
  }

  seed(99);
  std::vector<NDArray> expect = ref.forward(in32, s.is_train);
  std::vector<NDArray> got;
  try {
    seed(99);
    for (size_t k = 0; k < inst->out_shapes().size(); ++k)
      got.push_back(padded(inst->out_shapes()[k], inst->out_types()[k]));
    inst->forward(in_t, got, std::vector<Req>(got.size(), Req::kWrite), s.is_train);
  } catch (const Error& e) {
    return std::string("bound, then failed at run time (refuse at bind instead): ") + e.what();
  }
  const bool int_cmp = int_data;
  for (size_t k = 0; k < expect.size() && k < got.size(); ++k) {
    for (int64_t i = 0; i < got[k].size(); ++i) {
      double e = expect[k].at(i), g = got[k].at(i);
      if (got[k].dtype() != DType::kFloat32 && !dtype_is_float(got[k].dtype()))
        e = dispatch_dtype(got[k].dtype(), [&](auto tag) -> double {
          using T = typename decltype(tag)::type;
          return static_cast<double>(convert_value<T>(static_cast<float>(e)));
        });
      if (std::isnan(e) && std::isnan(g)) continue;
      if (std::isinf(e) && e == g) continue;
      // A float16 output (amp_cast, Cast) rounds even when its inputs were float64.
      const bool half_out = got[k].dtype() == DType::kFloat16 || expect[k].dtype() == DType::kFloat16;
      const double rtol = half_out ? std::max(v.rtol, 1e-2) : v.rtol;
      const double atol = half_out ? std::max(v.atol, 1e-2) : v.atol;
      double tol = int_cmp ? 1.0 + 1e-3 * std::fabs(e) : atol + rtol * std::fabs(e);
      if (!(std::fabs(g - e) <= tol))
        return "wrong numbers: output " + std::to_string(k) + " (" +
               dtype_name(got[k].dtype()) + ") element " + std::to_string(i) + " is " +
               std::to_string(g) + ", float32 gives " + std::to_string(e);
    }
  }
  if (dtype_is_float(v.data) && v.data != DType::kFloat32 && s.check_grad &&
      op.grad_mode == GradMode::kKernel)
    return audit_backward(op, s, v, ref, *inst, in32, in_t, expect, got);
  return "";
}

TEST(DTypeAudit, EveryOpRefusesOrComputesRight) {
  const Variant kVariants[] = {
      {"float64", DType::kFloat64, DType::kFloat64, 1e-4, 1e-4},
      {"float16", DType::kFloat16, DType::kFloat16, 1e-2, 1e-2},
      {"int32", DType::kInt32, DType::kInt32, 0, 1},
      {"float32 data, int32 labels", DType::kFloat32, DType::kInt32, 1e-5, 1e-5},
  };
  std::string filter;
  if (const char* f = std::getenv("LOOM_DTYPE_AUDIT_OP")) filter = f;
  std::map<std::string, std::string> failures;  // op -> first failure
  size_t runs = 0;
  int refused = 0;
  for (const OpDef* op : all_ops()) {
    if (kNoSampleOps.count(op->name) || op->name.rfind("_backward", 0) == 0) continue;
    if (!filter.empty() && op->name != filter) continue;
    for (size_t i = 0; i < op->samples.size(); ++i) {
      const OpSample& s = op->samples[i];
      if (s.in_shapes.empty()) continue;  // nothing to cast (dtype comes from attributes)
      bool has_labels = false;
      for (size_t j = 0; j < s.in_shapes.size(); ++j) has_labels |= is_label_kind(kind_of(s, j));
      for (const Variant& v : kVariants) {
        if (v.data == DType::kInt32 && (!int_friendly(s) || kIntSemanticsOps.count(op->name)))
          continue;
        if (v.data == DType::kFloat32 && !has_labels) continue;
        std::string r;
        if (std::getenv("LOOM_DTYPE_AUDIT_VERBOSE"))
          std::fprintf(stderr, "%s\n", describe(*op, s, i, v).c_str());
        try {
          r = audit_one(*op, s, i, v, &refused);
        } catch (const std::exception& e) {
          r = std::string("float32 reference run failed: ") + e.what();
        }
        ++runs;
        if (r.empty()) continue;
        if (!failures.count(op->name))
          failures[op->name] = describe(*op, s, i, v) + ": " + r;
        else if (failures[op->name].find(std::string("[") + v.name + "]") == std::string::npos)
          failures[op->name] += std::string(" [") + v.name + "]";
      }
    }
  }
  std::string names, details;
  for (const auto& [n, d] : failures) names += " " + n, details += "\n  " + d;
  EXPECT_TRUE(failures.empty()) << failures.size() << " ops compute wrong numbers or refuse "
                                << "without the policy:" << names << details;
  std::printf("[dtype audit] %zu runs, %d refused at bind, %zu backward comparisons\n", runs,
              refused, g_backward_runs);
  std::string own;
  for (const auto& n : g_kernel_refusals) own += " " + n;
  std::printf("[dtype audit] refused by the kernel's own check (no policy declared):%s\n",
              own.c_str());
  if (filter.empty()) {
    EXPECT_GT(runs, 100u);
  }
}

// The policy's error names node, op, input and dtype and lists what the op takes.
TEST(DTypeAudit, PolicyErrorIsSpecific) {
  declare_cpu_dtypes("_dtype_audit_probe", {DType::kFloat32});
  EXPECT_EQ(find_cpu_dtype_policy("_dtype_audit_probe")->list(), "float32");
  const OpDef* op = find_op("Pooling");
  ASSERT_NE(op, nullptr);
  const DTypePolicy* p = find_cpu_dtype_policy("Pooling");
  if (!p || p->allows(DType::kInt8)) GTEST_SKIP() << "Pooling takes int8";
  OpAttrs a = make_op_attrs(*op, "pool0", {{"kernel", "(2,2)"}});
  try {
    check_dtype_policy(a, Device::cpu(), {DType::kInt8}, {DType::kInt8});
    FAIL() << "no error";
  } catch (const DTypePolicyError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("pool0"), std::string::npos) << m;
    EXPECT_NE(m.find("Pooling"), std::string::npos) << m;
    EXPECT_NE(m.find("input 0 (data)"), std::string::npos) << m;
    EXPECT_NE(m.find("int8"), std::string::npos) << m;
    EXPECT_NE(m.find(p->list()), std::string::npos) << m;
  }
}

// The executor checks the policy at bind, before any kernel runs: a float64 Pooling input
// is refused naming the node, and the same graph in float32 binds.
TEST(DTypeAudit, ExecutorRefusesAtBind) {
  auto data = Symbol::Variable("data");
  auto pool = Symbol::Op("Pooling", {data}, {{"kernel", "(2, 2)"}}, "pool0");
  std::map<std::string, NDArray> args{{"data", NDArray::zeros(Shape{1, 1, 4, 4}, DType::kFloat64)}};
  try {
    Executor::bind(pool, args, {}, {});
    FAIL() << "float64 Pooling bound";
  } catch (const DTypePolicyError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'pool0'"), std::string::npos) << m;
    EXPECT_NE(m.find("float64"), std::string::npos) << m;
    EXPECT_NE(m.find("takes float32"), std::string::npos) << m;
  }
  args["data"] = NDArray::zeros(Shape{1, 1, 4, 4});
  EXPECT_NO_THROW(Executor::bind(pool, args, {}, {}));
}

}  // namespace
}  // namespace loom
