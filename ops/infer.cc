#include "ops/infer.h"

#include <algorithm>

namespace loom {

void merge_shape(Shape& dst, const Shape& src, const std::string& what) {
  if (src.ndim() == 0) return;
  if (dst.ndim() == 0) {
    dst = src;
    return;
  }
  if (dst.ndim() != src.ndim())
    throw ShapeError(what + ": expected " + dst.str() + ", got " + src.str());
  for (int i = 0; i < dst.ndim(); ++i) {
    if (src[i] == 0) continue;
    if (dst[i] == 0) dst[i] = src[i];
    else if (dst[i] != src[i])
      throw ShapeError(what + ": expected " + dst.str() + ", got " + src.str());
  }
}

void merge_type(DType& dst, DType src, const std::string& what) {
  if (src == DType::kUnknown) return;
  if (dst == DType::kUnknown) dst = src;
  else if (dst != src)
    throw ShapeError(what + ": expected dtype " + dtype_name(dst) + ", got " + dtype_name(src));
}

void check_shape_fits(const Shape& s, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : s)
    if (d < 0 || __builtin_mul_overflow(n, std::max<int64_t>(d, 1), &n))
      throw ShapeError(what + ": shape " + s.str() +
                       (d < 0 ? " has a negative dimension" : " has more than 2^63 elements"));
}

int64_t dim_add(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw ShapeError(std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) +
                     " overflows int64");
  return r;
}

int64_t dim_mul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw ShapeError(std::string(what) + ": " + std::to_string(a) + " * " + std::to_string(b) +
                     " overflows int64");
  return r;
}

std::string input_label(const OpAttrs& a, size_t i) {
  auto names = op_inputs(a);
  std::string s = "input " + std::to_string(i);
  if (i < names.size()) s += " (" + names[i] + ")";
  return s;
}

void infer_shape_same(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  Shape s;
  for (size_t i = 0; i < in.size(); ++i) merge_shape(s, in[i], input_label(a, i));
  for (size_t i = 0; i < out.size(); ++i) merge_shape(s, out[i], "output " + std::to_string(i));
  for (auto& x : in) x = s;
  for (auto& x : out) x = s;
}

namespace {
void run_infer_shape_unpredicated(const OpAttrs& a, std::vector<Shape>& in,
                                  std::vector<Shape>& out) {
  if (a.op->infer_shape) a.op->infer_shape(a, in, out);
  else infer_shape_same(a, in, out);
}
}  // namespace

void run_infer_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  try {
    if (op_is_predicated(a) && !in.empty()) {
      merge_shape(in.back(), Shape{1}, "the predicate input");
      std::vector<Shape> args(in.begin(), in.end() - 1);
      run_infer_shape_unpredicated(a, args, out);
      std::copy(args.begin(), args.end(), in.begin());
    } else {
      run_infer_shape_unpredicated(a, in, out);
    }
    // What an op derives from hostile attributes must still be a shape an array can have.
    for (size_t i = 0; i < in.size(); ++i) check_shape_fits(in[i], input_label(a, i));
    for (size_t i = 0; i < out.size(); ++i) check_shape_fits(out[i], "output " + std::to_string(i));
  } catch (const ShapeError& e) {
    throw ShapeError("node '" + a.name + "' (op " + a.op->name + "): " + e.what());
  }
}

namespace {
void run_infer_type_unpredicated(const OpAttrs& a, std::vector<DType>& in,
                                 std::vector<DType>& out) {
  if (a.op->infer_type) {
    a.op->infer_type(a, in, out);
    return;
  }
  DType t = DType::kUnknown;
  for (size_t i = 0; i < in.size(); ++i) merge_type(t, in[i], input_label(a, i));
  for (size_t i = 0; i < out.size(); ++i) merge_type(t, out[i], "output " + std::to_string(i));
  if (t == DType::kUnknown) return;
  for (auto& x : in) x = t;
  for (auto& x : out) x = t;
}
}  // namespace

void run_infer_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  try {
    if (op_is_predicated(a) && !in.empty()) {
      merge_type(in.back(), DType::kFloat32, "the predicate input");
      std::vector<DType> args(in.begin(), in.end() - 1);
      run_infer_type_unpredicated(a, args, out);
      std::copy(args.begin(), args.end(), in.begin());
      return;
    }
    run_infer_type_unpredicated(a, in, out);
  } catch (const ShapeError& e) {
    throw ShapeError("node '" + a.name + "' (op " + a.op->name + "): " + e.what());
  }
}

}  // namespace loom
