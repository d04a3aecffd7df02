// _loom_bucket: one node that runs an element-wise update op (sgd_mom_update, adam_update,
// _loom_accumulate, _loom_ema_update, ...) over many parameters in one parallel pass. It is
// what training-step graphs use for their buckets (graph/step_builder.h): the inputs are the
// inner op's inputs, tensor after tensor (weight0, grad0, mom0, lr0, weight1, ...), the
// outputs likewise; every other attribute is the inner op's, and `wds` gives each tensor its
// own weight decay. The element ranges of all tensors are split evenly among the OpenMP
// threads, each running the inner kernels' RangeKernel::run over its share, so a bucket of
// many small parameters costs one pass, not one parallel region per parameter.
//
// The inner op's full-size inputs (weights, states) are declared contiguous
// (OpDef::contiguous_inputs): simple_bind lays out the variables feeding them back to back
// in one buffer per input position, so a bucket's weights, momenta, shadows... are each one
// flat array with per-parameter views.
#include <omp.h>

#include <algorithm>

#include "ops/float_tuple.h"
#include "ops/infer.h"
#include "ops/update/bucket.h"
#include "ops/update/update_util.h"

namespace loom {
namespace {

using update::BucketParam;  // bucket.h (shared with bucket.cu)

std::shared_ptr<const void> parse_bucket(const Attrs& dict) {
  auto p = std::make_shared<BucketParam>();
  auto get = [&](const char* k) -> const std::string& {
    auto it = dict.find(k);
    if (it == dict.end()) throw ParamError(std::string("required parameter '") + k + "' is missing");
    return it->second;
  };
  const std::string& op = get("op");
  p->inner = find_op(op);
  if (!p->inner) throw ParamError("op '" + op + "' is not a registered operator");
  if (p->inner->name == "_loom_bucket") throw ParamError("a bucket cannot hold buckets");
  if (p->inner->grad_mode != GradMode::kZero)
    throw ParamError("op '" + op + "' is differentiable; a bucket holds update ops only");
  const int64_t n = parse_int(get("num_tensors"));
  check_input_count(n, "num_tensors");
  p->n = static_cast<size_t>(n);
  std::vector<double> wds;
  if (auto it = dict.find("wds"); it != dict.end()) {
    wds = parse_double_tuple(it->second, "wds");
    if (wds.size() != p->n)
      throw ParamError("wds has " + std::to_string(wds.size()) + " values for " +
                       std::to_string(p->n) + " tensors");
  }
  Attrs base;
  for (const auto& [k, v] : dict)
    if (k != "op" && k != "num_tensors" && k != "wds" && k.rfind("__", 0) != 0) base[k] = v;
  for (size_t i = 0; i < p->n; ++i) {
    Attrs d = base;
    if (!wds.empty()) d["wd"] = format_float(wds[i]);
    p->attrs.push_back(make_op_attrs(*p->inner, "tensor " + std::to_string(i), std::move(d)));
  }
  const OpAttrs& a0 = p->attrs[0];
  p->m = op_inputs(a0).size();
  p->o = op_outputs(a0).size();
  if (op_num_visible(a0) != static_cast<int>(p->o))
    throw ParamError("op '" + op + "' has hidden outputs; a bucket cannot interleave them");
  return p;
}

const BucketParam& bp(const OpAttrs& a) { return a.param<BucketParam>(); }

/// Applies f(i, attrs_i, first input index, first output index) per tensor.
template <class F>
void per_tensor(const OpAttrs& a, F f) {
  const BucketParam& p = bp(a);
  for (size_t i = 0; i < p.n; ++i) f(i, p.attrs[i], i * p.m, i * p.o);
}

template <class T, class Run>
void infer_per_tensor(const OpAttrs& a, std::vector<T>& in, std::vector<T>& out, Run run) {
  const BucketParam& p = bp(a);
  per_tensor(a, [&](size_t, const OpAttrs& ai, size_t bi, size_t bo) {
    std::vector<T> si(in.begin() + bi, in.begin() + bi + p.m);
    std::vector<T> so(out.begin() + bo, out.begin() + bo + p.o);
    run(ai, si, so);
    std::copy(si.begin(), si.end(), in.begin() + bi);
    std::copy(so.begin(), so.end(), out.begin() + bo);
  });
}

class BucketKernel final : public Kernel {
 public:
  explicit BucketKernel(const KernelArgs& a) : p_(bp(a.attrs)) {
    auto f = p_.inner->kernels.find(DeviceType::kCPU);
    if (f == p_.inner->kernels.end())
      throw Error("node '" + a.attrs.name + "' (op _loom_bucket): op '" + p_.inner->name +
                  "' has no CPU kernel");
    int64_t off = 0;
    for (size_t i = 0; i < p_.n; ++i) {
      auto sub = [&](const auto& v, size_t b, size_t k) {
        return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin() + b,
                                                                           v.begin() + b + k);
      };
      std::vector<Shape> is = sub(a.in_shapes, i * p_.m, p_.m), os = sub(a.out_shapes, i * p_.o, p_.o);
      std::vector<DType> it = sub(a.in_types, i * p_.m, p_.m), ot = sub(a.out_types, i * p_.o, p_.o);
      auto k = f->second(KernelArgs{p_.attrs[i], is, os, it, ot, a.device});
      auto part = k->range_partition();
      if (part.size() != 1 || k->workspace_bytes() != 0)
        throw Error("node '" + a.attrs.name + "' (op _loom_bucket): op '" + p_.inner->name +
                    "' is not an element-wise update and cannot run in a bucket");
      kernels_.push_back(std::move(k));
      begin_.push_back(off);
      sizes_.push_back(part[0]);
      off += part[0];
    }
    begin_.push_back(off);
  }

  std::vector<int64_t> range_partition() const override { return sizes_; }

  void forward_range(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
                     std::span<const NDArray> out, int64_t lo, int64_t hi) override {
    // The first tensor that ends after lo, then on while tensors start before hi.
    size_t i = static_cast<size_t>(std::upper_bound(begin_.begin(), begin_.end() - 1, lo) - begin_.begin()) - 1;
    for (; i < p_.n && begin_[i] < hi; ++i) {
      const int64_t b = std::max(lo, begin_[i]), e = std::min(hi, begin_[i + 1]);
      if (b < e)
        kernels_[i]->forward_range(ctx, in.subspan(i * p_.m, p_.m), req.subspan(i * p_.o, p_.o),
                                   out.subspan(i * p_.o, p_.o), b - begin_[i], e - begin_[i]);
    }
  }

  void forward_once(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
                    std::span<const NDArray> out) override {
    for (size_t i = 0; i < p_.n; ++i)
      kernels_[i]->forward_once(ctx, in.subspan(i * p_.m, p_.m), req.subspan(i * p_.o, p_.o),
                                out.subspan(i * p_.o, p_.o));
  }

  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    const int64_t total = begin_.back();
    if (total < update::kParallelMin || omp_get_max_threads() == 1) {
      forward_range(ctx, in, req, out, 0, total);
    } else {
#pragma omp parallel
      {
        auto [lo, hi] = thread_share(0, total, omp_get_num_threads(), omp_get_thread_num());
        forward_range(ctx, in, req, out, lo, hi);
      }
    }
    forward_once(ctx, in, req, out);
  }

 private:
  const BucketParam& p_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<int64_t> begin_;  ///< element offset of each tensor, then the total
  std::vector<int64_t> sizes_;
};

LOOM_REGISTER_OP("_loom_bucket")
    .describe(
        "Runs the element-wise update op `op` over `num_tensors` tensors in one parallel pass. "
        "Inputs and outputs are the op's, tensor after tensor; other attributes are the op's; "
        "`wds` (optional) gives each tensor its own wd.")
    .params_custom(parse_bucket,
                   {{.name = "op", .type = "string", .required = true,
                     .doc = "The element-wise update op to run."},
                    {.name = "num_tensors", .type = "int", .required = true, .doc = "Number of tensors."},
                    {.name = "wds", .type = "tuple of float", .default_str = "None",
                     .doc = "Per-tensor weight decay (replaces wd)."}})
    .inputs([](const OpAttrs& a) {
      std::vector<std::string> v;
      per_tensor(a, [&](size_t i, const OpAttrs& ai, size_t, size_t) {
        for (const auto& s : op_inputs(ai)) v.push_back(s + std::to_string(i));
      });
      return v;
    })
    .outputs([](const OpAttrs& a) {
      std::vector<std::string> v;
      per_tensor(a, [&](size_t i, const OpAttrs& ai, size_t, size_t) {
        for (const auto& s : op_outputs(ai)) v.push_back(s + std::to_string(i));
      });
      return v;
    })
    .aux([](const OpAttrs& a) {
      std::vector<int> v;
      per_tensor(a, [&](size_t, const OpAttrs& ai, size_t bi, size_t) {
        for (int x : op_aux(ai)) v.push_back(static_cast<int>(bi) + x);
      });
      return v;
    })
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      infer_per_tensor(a, in, out, run_infer_shape);
    })
    .type_fn([](const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
      infer_per_tensor(a, in, out, run_infer_type);
    })
    .inplace_fn([](const OpAttrs& a) {
      std::vector<std::pair<int, int>> v;
      per_tensor(a, [&](size_t, const OpAttrs& ai, size_t bi, size_t bo) {
        if (!ai.op->inplace) return;
        for (auto [i, o] : ai.op->inplace(ai))
          v.emplace_back(static_cast<int>(bi) + i, static_cast<int>(bo) + o);
      });
      return v;
    })
    .contiguous([](const OpAttrs& a) {
      // One group per input position of the inner op: that input of every tensor.
      const BucketParam& p = bp(a);
      std::vector<std::vector<int>> groups(p.m);
      for (size_t j = 0; j < p.m; ++j)
        for (size_t i = 0; i < p.n; ++i) groups[j].push_back(static_cast<int>(i * p.m + j));
      return groups;
    })
    .zero_grad()
    .cpu<BucketKernel>()
    .sample({.attrs = {{"op", "sgd_mom_update"}, {"num_tensors", "3"}, {"lr", "0.1"},
                       {"momentum", "0.9"}, {"wds", "(0.1, 0, 0.01)"}},
             .in_shapes = {{3, 4}, {3, 4}, {3, 4}, {5}, {5}, {5}, {40000}, {40000}, {40000}},
             .check_grad = false})
    .sample({.attrs = {{"op", "_loom_accumulate"}, {"num_tensors", "2"}, {"scale", "0.5"}},
             .in_shapes = {{7}, {7}, {1}, {70000}, {70000}, {1}},
             .in_kinds = {"normal", "normal", "zeros", "normal", "normal", "zeros"},
             .check_grad = false})
    .sample({.attrs = {{"op", "_loom_ema_update"}, {"num_tensors", "2"}, {"decay", "0.9"},
                       {"init", "zero_debias"}},
             .in_shapes = {{6}, {6}, {1}, {1}, {50000}, {50000}, {1}, {1}},
             .in_kinds = {"normal", "normal", "label:9", "unit", "normal", "normal", "label:9",
                          "unit"},
             .check_grad = false});

}  // namespace
}  // namespace loom
