#include "runtime/imperative.h"

#include "ops/dtype_policy.h"
#include "ops/infer.h"

namespace loom {

std::mt19937_64& global_rng() {
  static std::mt19937_64 rng(42);
  return rng;
}
void seed(uint64_t s) { global_rng().seed(s); }

ImperativeOp::ImperativeOp(const std::string& op, Attrs attrs, std::vector<Shape> in_shapes,
                           std::vector<DType> in_types, Device dev)
    : in_shapes_(std::move(in_shapes)), in_types_(std::move(in_types)), dev_(dev) {
  const OpDef& def = get_op(op);
  attrs_ = make_op_attrs(def, op, std::move(attrs));
  size_t nin = op_inputs(attrs_).size(), nout = op_outputs(attrs_).size();
  if (in_shapes_.size() != nin)
    throw ShapeError("op " + def.name + " takes " + std::to_string(nin) + " inputs, got " +
                     std::to_string(in_shapes_.size()));
  out_shapes_.assign(nout, Shape());
  run_infer_shape(attrs_, in_shapes_, out_shapes_);
  for (size_t i = 0; i < nin; ++i)
    if (!in_shapes_[i].known())
      throw ShapeError("op " + def.name + ": cannot infer shape of " + input_label(attrs_, i));
  for (size_t i = 0; i < nout; ++i)
    if (!out_shapes_[i].known())
      throw ShapeError("op " + def.name + ": cannot infer shape of output " + std::to_string(i));
  if (in_types_.empty()) in_types_.assign(nin, DType::kFloat32);
  out_types_.assign(nout, DType::kUnknown);
  run_infer_type(attrs_, in_types_, out_types_);
  for (auto& t : out_types_)
    if (t == DType::kUnknown) t = DType::kFloat32;
  auto it = def.kernels.find(dev.type);
  if (it == def.kernels.end())
    throw Error("op " + def.name + " has no kernel for " + dev.str());
  check_dtype_policy(attrs_, dev, in_types_, out_types_);
  KernelArgs args{attrs_, in_shapes_, out_shapes_, in_types_, out_types_, dev};
  kernel_ = it->second(args);
  if (size_t ws = kernel_->workspace_bytes())
    workspace_ = NDArray(Shape{static_cast<int64_t>(ws)}, DType::kUint8, dev);
}

ImperativeOp::~ImperativeOp() = default;

OpContext ImperativeOp::context(bool is_train) {
  OpContext ctx;
  ctx.is_train = is_train;
  ctx.device = dev_;
  ctx.stream = device_backend(dev_.type).stream(dev_.id);
  ctx.rng = &global_rng();
  ctx.workspace = workspace_.is_none() ? nullptr : workspace_.raw();
  return ctx;
}

std::vector<NDArray> ImperativeOp::forward(const std::vector<NDArray>& in, bool is_train) {
  std::vector<NDArray> out;
  for (size_t i = 0; i < out_shapes_.size(); ++i) out.emplace_back(out_shapes_[i], out_types_[i], dev_);
  forward(in, out, std::vector<Req>(out.size(), Req::kWrite), is_train);
  return out;
}

void ImperativeOp::forward(const std::vector<NDArray>& in, const std::vector<NDArray>& out,
                           const std::vector<Req>& req, bool is_train) {
  for (size_t i = 0; i < in.size() && i < in_shapes_.size(); ++i)
    if (in[i].shape() != in_shapes_[i])
      throw ShapeError("op " + attrs_.op->name + ": " + input_label(attrs_, i) + " expected " +
                       in_shapes_[i].str() + ", got " + in[i].shape().str());
  kernel_->forward(context(is_train), in, req, out);
}

void ImperativeOp::backward(const std::vector<NDArray>& out_grad,
                            const std::vector<NDArray>& in_data,
                            const std::vector<NDArray>& out_data, const std::vector<Req>& req,
                            const std::vector<NDArray>& in_grad, bool is_train) {
  kernel_->backward(context(is_train), out_grad, in_data, out_data, req, in_grad);
}

}  // namespace loom
