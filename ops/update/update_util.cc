#include "ops/update/update_util.h"

#include <cstring>

namespace loom::update {

void keep_weight(const NDArray& weight, const NDArray& out, Req req, Range r) {
  const float* w = weight.data<float>();
  float* o = out.data<float>();
  if (req == Req::kNull || (req != Req::kAdd && o == w)) return;
  apply(o, req, r, [=](int64_t i) { return w[i]; });
}

void check_f32(const KernelArgs& args) {
  auto bad = [&](const std::vector<DType>& ts, const char* what) {
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i] != DType::kFloat32)
        throw Error("node '" + args.attrs.name + "' (op " + args.attrs.op->name + "): " + what +
                    " " + std::to_string(i) + " has dtype " + dtype_name(ts[i]) +
                    "; the CPU update kernels support float32 only");
  };
  bad(args.in_types, "input");
  bad(args.out_types, "output");
}

void infer_shape_with_scalars(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out,
                              size_t n_full) {
  Shape s;
  for (size_t i = 0; i < n_full; ++i) merge_shape(s, in[i], input_label(a, i));
  merge_shape(s, out[0], "output 0");
  for (size_t i = 0; i < n_full; ++i) in[i] = s;
  out[0] = s;
  for (size_t i = n_full; i < in.size(); ++i) {
    Shape& r = in[i];
    if (r.ndim() == 0) r = Shape{1};
    for (auto& d : r.dims())
      if (d == 0) d = 1;
    if (r.numel() != 1)
      throw ShapeError(input_label(a, i) + ": expected one element, shape (1,), got " + r.str());
  }
}

}  // namespace loom::update
