// Registry-driven checks every operator gets for free from its samples: shape inference
// against the reference's outputs, forward against a naive reference, a central-difference
// gradient check, and backward with req=add adding exactly the write-mode gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "ops/infer.h"
#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"
#include "tests/unit/sample_inputs.h"

namespace loom {
namespace {

// Ops that cannot be driven from static samples (they need a registered custom class).
// _loom_gradients is expanded by the graph pass and has no kernel (tested in test_executor).
// The overlapped allreduce's start and wait nodes need their plan node's live handle (they
// only run together in a data-parallel step graph: tests/dist/dist_overlap.py).
const std::set<std::string> kNoSampleOps = {"Custom", "_loom_gradients", "_loom_allreduce_plan",
                                            "_loom_allreduce_start", "_loom_allreduce_wait"};

using test::kind_of;
using test::make_input;

bool differentiable_input(const OpSample& s, size_t i, const std::set<int>& skip) {
  std::string k = kind_of(s, i);
  return !skip.count(static_cast<int>(i)) && k.rfind("label:", 0) != 0 &&
         k.rfind("index:", 0) != 0;
}

// sum_k <out_k, R_k> over visible outputs, in double.
double projected(const std::vector<NDArray>& outs, const std::vector<NDArray>& r) {
  double acc = 0;
  for (size_t k = 0; k < r.size(); ++k)
    for (int64_t i = 0; i < outs[k].size(); ++i)
      acc += static_cast<double>(outs[k].data<float>()[i]) * r[k].data<float>()[i];
  return acc;
}

std::string describe(const OpDef& op, const OpSample& s, size_t idx) {
  std::string d = op.name + " sample " + std::to_string(idx) + " {";
  for (const auto& [k, v] : s.attrs) d += k + "=" + v + " ";
  d += "} inputs";
  for (const auto& sh : s.in_shapes) d += " " + sh.str();
  return d;
}

void check_sample(const OpDef& op, const OpSample& s, size_t idx) {
  SCOPED_TRACE(describe(op, s, idx));
  std::mt19937 rng(1234 + static_cast<unsigned>(idx));
  ImperativeOp inst(op.name, s.attrs, s.in_shapes);
  const OpAttrs& attrs = inst.attrs();
  std::vector<NDArray> in;
  for (size_t i = 0; i < s.in_shapes.size(); ++i) in.push_back(make_input(inst.in_shapes()[i], kind_of(s, i), rng));
  std::vector<NDArray> ref_in;
  for (auto& a : in) ref_in.push_back(a.copy());

  // Forward vs reference.
  std::vector<NDArray> out = inst.forward(in, s.is_train);
  const test::RefFn* ref = test::find_reference(op.name);
  ASSERT_NE(ref, nullptr) << "op " << op.name << " has no naive reference registered";
  std::vector<NDArray> expect = (*ref)(test::RefCall{attrs, ref_in, inst.out_shapes(), s.is_train});
  ASSERT_LE(expect.size(), out.size());
  for (size_t k = 0; k < expect.size(); ++k) {
    ASSERT_EQ(expect[k].shape(), out[k].shape()) << "output " << k << ": inferred shape differs from reference";
    if (op.name == "Dropout" && s.is_train) continue;  // random; checked statistically elsewhere
    for (int64_t i = 0; i < out[k].size(); ++i) {
      double e = expect[k].at(i), g = out[k].at(i);
      ASSERT_NEAR(g, e, 1e-4 + 1e-4 * std::fabs(e)) << "output " << k << " element " << i;
    }
  }
  if (!s.check_grad || op.grad_mode != GradMode::kKernel) return;

  // Gradient by the kernel, req=write.
  int nvis = op_num_visible(attrs);
  std::vector<NDArray> r;
  for (int k = 0; k < nvis; ++k) r.push_back(make_input(out[static_cast<size_t>(k)].shape(), "normal", rng));
  std::vector<NDArray> og;
  for (size_t k = 0; k < out.size(); ++k)
    og.push_back(static_cast<int>(k) < nvis ? r[k].copy() : NDArray::zeros(out[k].shape()));
  std::set<int> skip;
  for (int a : op_aux(attrs)) skip.insert(a);
  if (op.nograd_inputs)
    for (int a : op.nograd_inputs(attrs)) skip.insert(a);
  std::vector<NDArray> grad;
  std::vector<Req> req;
  for (size_t i = 0; i < in.size(); ++i) {
    bool d = differentiable_input(s, i, skip);
    grad.push_back(d ? NDArray::full(in[i].shape(), 7.f) : NDArray());
    req.push_back(d ? Req::kWrite : Req::kNull);
  }
  // Forward again so any state the backward reads (BatchNorm batch stats) matches `in`.
  out = inst.forward(in, s.is_train);
  inst.backward(og, in, out, req, grad, s.is_train);

  // Central differences on a subset of elements, skipping kinks (where the one-sided
  // slopes disagree).
  const double h = 1e-3;
  for (size_t i = 0; i < in.size(); ++i) {
    if (req[i] == Req::kNull) continue;
    int64_t n = in[i].size();
    int64_t stride = std::max<int64_t>(1, n / 24);
    for (int64_t j = 0; j < n; j += stride) {
      float* p = in[i].data<float>();
      float x0 = p[j];
      p[j] = static_cast<float>(x0 + h);
      double fp = projected(inst.forward(in, s.is_train), r);
      p[j] = static_cast<float>(x0 - h);
      double fm = projected(inst.forward(in, s.is_train), r);
      p[j] = x0;
      double f0 = projected(inst.forward(in, s.is_train), r);
      double right = (fp - f0) / h, left = (f0 - fm) / h;
      if (std::fabs(right - left) > 0.05 * (1 + std::fabs(right))) continue;  // kink
      double num = (fp - fm) / (2 * h);
      double ana = grad[i].at(j);
      EXPECT_NEAR(ana, num, s.grad_atol * 10 + s.grad_rtol * std::fabs(num))
          << "gradient of " << input_label(attrs, i) << " element " << j;
    }
  }

  // req=add: starting from the write result, another backward must double it.
  out = inst.forward(in, s.is_train);
  std::vector<NDArray> acc;
  std::vector<Req> add_req;
  for (size_t i = 0; i < in.size(); ++i) {
    acc.push_back(req[i] == Req::kNull ? NDArray() : grad[i].copy());
    add_req.push_back(req[i] == Req::kNull ? Req::kNull : Req::kAdd);
  }
  inst.backward(og, in, out, add_req, acc, s.is_train);
  for (size_t i = 0; i < in.size(); ++i) {
    if (req[i] == Req::kNull) continue;
    for (int64_t j = 0; j < in[i].size(); ++j)
      ASSERT_NEAR(acc[i].at(j), 2 * grad[i].at(j), 1e-5 + 1e-5 * std::fabs(grad[i].at(j)))
          << "req=add on " << input_label(attrs, i) << " element " << j;
  }
}

TEST(OpSweep, EveryOpHasSamplesAndReferences) {
  std::string missing;
  for (const OpDef* op : all_ops()) {
    if (kNoSampleOps.count(op->name)) continue;
    if (op->name.rfind("_backward", 0) == 0) continue;
    if (op->samples.empty()) missing += " " + op->name + "(samples)";
    else if (!test::find_reference(op->name)) missing += " " + op->name + "(reference)";
  }
  EXPECT_EQ(missing, "") << "ops lacking sweep coverage:" << missing;
}

TEST(OpSweep, AllSamples) {
  size_t n = 0;
  for (const OpDef* op : all_ops()) {
    for (size_t i = 0; i < op->samples.size(); ++i) {
      if (!test::find_reference(op->name)) continue;
      check_sample(*op, op->samples[i], i);
      ++n;
    }
  }
  EXPECT_GT(n, 20u);
}

}  // namespace
}  // namespace loom
