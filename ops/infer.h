// Helpers for shape/type inference functions, and the entry points that apply an op's
// inference with Loom's defaults.
#pragma once

#include <string>
#include <vector>

#include "ops/op.h"

namespace loom {

/// Merges `src` into `dst`: unknown dst (ndim 0) takes src; unknown dims (0) are filled.
/// Throws ShapeError "<what>: expected X, got Y" when both are known and differ.
void merge_shape(Shape& dst, const Shape& src, const std::string& what);
/// Same for dtypes (kUnknown is unknown).
void merge_type(DType& dst, DType src, const std::string& what);

/// Applies the op's infer_shape (or the elementwise default). Errors are rethrown naming the
/// node and op. `in`/`out` must already have the op's input/output counts.
void run_infer_shape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out);
/// Applies the op's infer_type (or the all-equal default, float32 when nothing is known).
void run_infer_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out);

/// Default shape rule: every input and output has one shape.
void infer_shape_same(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out);

/// Throws ShapeError "<what>: shape X ..." when a dimension of `s` is negative or the product
/// of its dimensions (zeros counted as 1) overflows int64: no array of that shape can exist.
/// run_infer_shape applies it to every shape an op's inference returns.
void check_shape_fits(const Shape& s, const std::string& what);
/// a + b and a * b for dimension arithmetic in shape functions (sizes, pads, strides from
/// attributes); throw ShapeError naming `what` when the result overflows int64.
int64_t dim_add(int64_t a, int64_t b, const char* what);
int64_t dim_mul(int64_t a, int64_t b, const char* what);

/// Name of input i for messages: "input 1 (weight)".
std::string input_label(const OpAttrs& a, size_t i);

}  // namespace loom
