// The `Custom` graph op: dispatches to registered CustomOpProp classes by op_type.
#include <dlfcn.h>

#include <algorithm>
#include <mutex>

#include "ops/custom/custom_op.h"
#include "ops/infer.h"
#include "ops/op.h"

namespace loom {
namespace {

std::mutex registry_mu;
std::map<std::string, CustomPropFactory>& registry() {
  static auto* m = new std::map<std::string, CustomPropFactory>;
  return *m;
}

struct CustomParam {
  std::string op_type;
  std::shared_ptr<CustomOpProp> prop;
  size_t n_args = 0, n_outs = 0, n_aux = 0;
  std::vector<std::string> inputs, outputs;
  GradDeps deps;
};

std::shared_ptr<const void> parse_custom(const Attrs& attrs) {
  auto it = attrs.find("op_type");
  if (it == attrs.end()) throw ParamError("required parameter 'op_type' is missing");
  CustomPropFactory factory;
  {
    std::lock_guard<std::mutex> lk(registry_mu);
    auto f = registry().find(it->second);
    if (f == registry().end())
      throw ParamError("custom operator type '" + it->second +
                       "' is not registered (register it with mx.operator.register or "
                       "LOOM_REGISTER_CUSTOM_OP, or load its plugin)");
    factory = f->second;
  }
  std::map<std::string, std::string> kwargs(attrs.begin(), attrs.end());
  kwargs.erase("op_type");
  auto p = std::make_shared<CustomParam>();
  p->op_type = it->second;
  p->prop = factory(kwargs);
  auto args = p->prop->list_arguments();
  auto aux = p->prop->list_auxiliary_states();
  p->outputs = p->prop->list_outputs();
  p->n_args = args.size();
  p->n_aux = aux.size();
  p->n_outs = p->outputs.size();
  p->inputs = args;
  p->inputs.insert(p->inputs.end(), aux.begin(), aux.end());
  std::vector<int> og, id, od;
  for (size_t i = 0; i < p->n_outs; ++i) og.push_back(static_cast<int>(i));
  for (size_t i = 0; i < p->n_args; ++i) id.push_back(static_cast<int>(p->n_outs + i));
  for (size_t i = 0; i < p->n_outs; ++i) od.push_back(static_cast<int>(p->n_outs + p->n_args + i));
  auto deps = p->prop->declare_backward_dependency(og, id, od);
  auto has_any = [&](const std::vector<int>& ids) {
    return std::any_of(ids.begin(), ids.end(), [&](int x) {
      return std::find(deps.begin(), deps.end(), x) != deps.end();
    });
  };
  p->deps = GradDeps{has_any(og), has_any(id), has_any(od)};
  return p;
}

const CustomParam& cp(const OpAttrs& a) { return a.param<CustomParam>(); }

std::string where(const OpAttrs& a) {
  return "custom op '" + cp(a).op_type + "'";
}

void check_count(const OpAttrs& a, const char* fn, const char* what, size_t got, size_t want) {
  if (got != want)
    throw ShapeError(where(a) + ": " + fn + " returned " + std::to_string(got) + " " + what +
                     ", expected " + std::to_string(want));
}

void infer_custom_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  const CustomParam& p = cp(a);
  if (in.empty() || in[0].ndim() == 0) return;  // nothing to go on yet
  std::vector<Shape> args(in.begin(), in.begin() + static_cast<long>(p.n_args));
  CustomShapes s = p.prop->infer_shape(args);
  check_count(a, "infer_shape", "argument shapes", s.args.size(), p.n_args);
  check_count(a, "infer_shape", "output shapes", s.outs.size(), p.n_outs);
  if (!s.aux.empty() || p.n_aux) check_count(a, "infer_shape", "aux shapes", s.aux.size(), p.n_aux);
  for (size_t i = 0; i < p.n_args; ++i) merge_shape(in[i], s.args[i], input_label(a, i));
  for (size_t i = 0; i < p.n_aux; ++i) merge_shape(in[p.n_args + i], s.aux[i], input_label(a, p.n_args + i));
  for (size_t i = 0; i < p.n_outs; ++i) merge_shape(out[i], s.outs[i], "output " + std::to_string(i));
}

void infer_custom_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  const CustomParam& p = cp(a);
  if (in.empty() || in[0] == DType::kUnknown) return;
  std::vector<DType> args(in.begin(), in.begin() + static_cast<long>(p.n_args));
  CustomTypes t = p.prop->infer_type(args);
  check_count(a, "infer_type", "argument types", t.args.size(), p.n_args);
  check_count(a, "infer_type", "output types", t.outs.size(), p.n_outs);
  if (!t.aux.empty() || p.n_aux) check_count(a, "infer_type", "aux types", t.aux.size(), p.n_aux);
  for (size_t i = 0; i < p.n_args; ++i) merge_type(in[i], t.args[i], input_label(a, i));
  for (size_t i = 0; i < p.n_aux; ++i) merge_type(in[p.n_args + i], t.aux[i], input_label(a, p.n_args + i));
  for (size_t i = 0; i < p.n_outs; ++i) merge_type(out[i], t.outs[i], "output " + std::to_string(i));
}

class CustomKernel final : public Kernel {
 public:
  explicit CustomKernel(const KernelArgs& k) : p_(cp(k.attrs)), name_(k.attrs.name) {
    op_ = p_.prop->create_operator(k.device, k.in_shapes, k.in_types);
    if (!op_) throw Error(where(k.attrs) + " (node '" + name_ + "'): create_operator returned nothing");
  }
  // User code runs on the host (Python: through staging copies of device arrays).
  bool capturable() const override { return false; }
  void forward(const OpContext& ctx, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    args_.assign(in.begin(), in.begin() + static_cast<long>(p_.n_args));
    aux_.assign(in.begin() + static_cast<long>(p_.n_args), in.end());
    outs_.assign(out.begin(), out.end());
    reqs_.assign(req.begin(), req.end());
    op_->forward(ctx.is_train, reqs_, args_, outs_, aux_);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> id,
                std::span<const NDArray> od, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    std::vector<NDArray> out_grad(og.begin(), og.end()), out_data(od.begin(), od.end());
    std::vector<NDArray> in_data(id.begin(), id.begin() + static_cast<long>(p_.n_args));
    std::vector<NDArray> aux(id.begin() + static_cast<long>(p_.n_args), id.end());
    std::vector<NDArray> in_grad(ig.begin(), ig.begin() + static_cast<long>(p_.n_args));
    std::vector<Req> reqs(req.begin(), req.begin() + static_cast<long>(p_.n_args));
    // Aux states are passed even when in_data is not a declared dependency.
    if (aux.empty() || aux[0].is_none()) aux = aux_;
    op_->backward(reqs, out_grad, in_data, out_data, in_grad, aux);
  }

 private:
  const CustomParam& p_;
  std::string name_;
  std::unique_ptr<CustomOp> op_;
  std::vector<NDArray> args_, aux_, outs_;
  std::vector<Req> reqs_;
};

LOOM_REGISTER_OP("Custom")
    .describe("Applies a custom operator registered by name (op_type), with MXNet's "
              "CustomOpProp protocol.")
    .inputs([](const OpAttrs& a) { return cp(a).inputs; })
    .outputs([](const OpAttrs& a) { return cp(a).outputs; })
    .aux([](const OpAttrs& a) {
      std::vector<int> v;
      for (size_t i = 0; i < cp(a).n_aux; ++i) v.push_back(static_cast<int>(cp(a).n_args + i));
      return v;
    })
    .shape_fn(infer_custom_shape)
    .type_fn(infer_custom_type)
    .deps([](const OpAttrs& a) {
      GradDeps d = cp(a).deps;
      d.in_data = true;  // aux states travel with in_data
      return d;
    })
    .kernel(DeviceType::kCPU, [](const KernelArgs& k) { return std::make_unique<CustomKernel>(k); })
    .kernel(DeviceType::kGPU, [](const KernelArgs& k) { return std::make_unique<CustomKernel>(k); });

// The parse function is set here rather than with ParamSchema: a custom op's parameters
// are whatever its Prop accepts.
[[maybe_unused]] const bool custom_parse_set = [] {
  OpDef& d = register_op("Custom");
  d.parse = parse_custom;
  d.param_info = {ParamInfo{"op_type", "string", "", true, {}, "Registered custom op name."}};
  return true;
}();

}  // namespace

void CustomOp::assign(const NDArray& dst, Req req, const NDArray& src) {
  if (req == Req::kNull) return;
  if (dst.shape().numel() != src.shape().numel())
    throw ShapeError("assign: destination " + dst.shape().str() + " vs source " + src.shape().str());
  if (req == Req::kAdd) {
    if (dst.device().type != DeviceType::kCPU) throw Error("assign add: CPU arrays only");
    float* d = dst.data<float>();
    const float* s = src.data<float>();
    for (int64_t i = 0; i < dst.size(); ++i) d[i] += s[i];
  } else {
    dst.copy_from(src.reshape(dst.shape()));
  }
}

CustomShapes CustomOpProp::infer_shape(const std::vector<Shape>& in) {
  CustomShapes s;
  s.args = in;
  s.outs.assign(list_outputs().size(), in.empty() ? Shape() : in[0]);
  s.aux.assign(list_auxiliary_states().size(), Shape());
  return s;
}

CustomTypes CustomOpProp::infer_type(const std::vector<DType>& in) {
  DType t = in.empty() ? DType::kFloat32 : in[0];
  CustomTypes r;
  r.args.assign(in.size(), t);
  r.outs.assign(list_outputs().size(), t);
  r.aux.assign(list_auxiliary_states().size(), t);
  return r;
}

std::vector<int> CustomOpProp::declare_backward_dependency(const std::vector<int>& out_grad,
                                                           const std::vector<int>& in_data,
                                                           const std::vector<int>& out_data) {
  std::vector<int> d;
  if (need_top_grad_) d = out_grad;
  d.insert(d.end(), in_data.begin(), in_data.end());
  d.insert(d.end(), out_data.begin(), out_data.end());
  return d;
}

void register_custom_op(const std::string& op_type, CustomPropFactory factory) {
  std::lock_guard<std::mutex> lk(registry_mu);
  registry()[op_type] = std::move(factory);
}

bool custom_op_registered(const std::string& op_type) {
  std::lock_guard<std::mutex> lk(registry_mu);
  return registry().count(op_type) > 0;
}

std::vector<std::string> custom_op_types() {
  std::lock_guard<std::mutex> lk(registry_mu);
  std::vector<std::string> v;
  for (const auto& [k, f] : registry()) v.push_back(k);
  return v;
}

void load_plugin(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) throw Error("cannot load plugin '" + path + "': " + dlerror());
}

}  // namespace loom
