// Shape-only views: Reshape (MXNet's special codes), Flatten, expand_dims, squeeze,
// reshape_like. Forward and backward copy the data unchanged (a no-op when run in place).
#include "ops/infer.h"
#include "ops/tensor/dtype_kernels.h"

namespace loom {
namespace {

class ViewKernel final : public Kernel {
 public:
  // Any dtype: the data is copied unchanged (reshape_like's rhs may have another dtype).
  explicit ViewKernel(const KernelArgs& a) {
    if (a.in_types[0] != a.out_types[0])
      throw Error(tensor::node_label(a) + ": output dtype " + dtype_name(a.out_types[0]) +
                  " differs from input dtype " + dtype_name(a.in_types[0]));
    dispatch_dtype(a.in_types[0], [](auto) {}, tensor::node_label(a));
  }
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    tensor::copy_req(out[0], in[0], req[0]);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray>,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    tensor::copy_req(ig[0], og[0], req[0]);
    // reshape_like's rhs only lends its shape.
    if (ig.size() > 1 && req[1] != Req::kNull) tensor::fill_req(ig[1], req[1], 0.f);
  }
};

// ---- Reshape ----
struct ReshapeParam {
  Shape shape, target_shape;
  bool reverse, keep_highest;
};
const auto kReshapeSchema =
    ParamSchema<ReshapeParam>()
        .optional("shape", &ReshapeParam::shape, Shape(),
                  "Target shape; 0 copy, -1 infer, -2 rest, -3 merge two, -4 split one.")
        .optional("reverse", &ReshapeParam::reverse, false,
                  "Apply the special codes right to left.")
        .optional("target_shape", &ReshapeParam::target_shape, Shape(),
                  "(Deprecated) target shape; a single 0 is inferred.")
        .optional("keep_highest", &ReshapeParam::keep_highest, false,
                  "(Deprecated, with target_shape) keep the input's first dim.");

/// Applies the `shape` codes left to right to `in` (MXNet's rules, see spec 6.10).
Shape apply_codes(const std::vector<int64_t>& codes, const Shape& in, const std::string& text) {
  auto bad = [&](const std::string& why) {
    return ShapeError("cannot reshape " + in.str() + " with shape=" + text + ": " + why);
  };
  std::vector<int64_t> out;
  int src = 0, infer = -1;
  auto next_in = [&]() {
    if (src >= in.ndim()) throw bad("codes consume more input dims than there are");
    return in[src++];
  };
  for (size_t i = 0; i < codes.size(); ++i) {
    int64_t c = codes[i];
    if (c == 0) {
      out.push_back(next_in());
    } else if (c == -1) {
      if (infer >= 0) throw bad("more than one -1");
      infer = static_cast<int>(out.size());
      out.push_back(-1);
      ++src;
    } else if (c == -2) {
      while (src < in.ndim()) out.push_back(in[src++]);
    } else if (c == -3) {
      int64_t d1 = next_in(), d2 = next_in();
      out.push_back(d1 * d2);
    } else if (c == -4) {
      if (i + 2 >= codes.size()) throw bad("-4 needs two following values");
      int64_t d0 = next_in(), d1 = codes[i + 1], d2 = codes[i + 2];
      i += 2;
      if (d1 == -1 && d2 == -1) throw bad("-4 split with two -1");
      if (d1 == -1 && d2 > 0) d1 = d0 / d2;
      if (d2 == -1 && d1 > 0) d2 = d0 / d1;
      if (d1 <= 0 || d2 <= 0 || d1 * d2 != d0)
        throw bad("cannot split dim " + std::to_string(d0) + " into (" +
                  std::to_string(codes[i - 1]) + ", " + std::to_string(codes[i]) + ")");
      out.push_back(d1);
      out.push_back(d2);
    } else if (c > 0) {
      out.push_back(c);
      ++src;
    } else {
      throw bad("invalid code " + std::to_string(c));
    }
  }
  if (infer >= 0) {
    int64_t known = 1;
    for (size_t k = 0; k < out.size(); ++k)
      if (static_cast<int>(k) != infer) known *= out[k];
    if (known <= 0 || in.numel() % known != 0) throw bad("cannot infer the -1 dim");
    out[static_cast<size_t>(infer)] = in.numel() / known;
  }
  return Shape(std::move(out));
}

/// The output shape of Reshape for a known input shape.
Shape reshape_target(const ReshapeParam& p, const Shape& in) {
  Shape out;
  if (p.shape.ndim() > 0) {
    if (!p.reverse) {
      out = apply_codes(p.shape.dims(), in, p.shape.str());
    } else {
      // Right to left: reverse the dims and the codes, keeping each "-4, a, b" group intact
      // (as "-4, b, a") so it still splits one dim into (a, b) in the original order.
      const auto& c = p.shape.dims();
      std::vector<std::vector<int64_t>> groups;
      for (size_t i = 0; i < c.size(); ++i) {
        if (c[i] == -4 && i + 2 < c.size()) {
          groups.push_back({-4, c[i + 2], c[i + 1]});
          i += 2;
        } else {
          groups.push_back({c[i]});
        }
      }
      std::vector<int64_t> rc;
      for (size_t g = groups.size(); g-- > 0;)
        rc.insert(rc.end(), groups[g].begin(), groups[g].end());
      std::vector<int64_t> rin(in.dims().rbegin(), in.dims().rend());
      Shape r = apply_codes(rc, Shape(rin), p.shape.str());
      out = Shape(std::vector<int64_t>(r.dims().rbegin(), r.dims().rend()));
    }
  } else if (p.target_shape.ndim() > 0) {
    out = p.target_shape;
    if (p.keep_highest) out[0] = in[0];
    int zeros = 0, at = -1;
    for (int d = p.keep_highest ? 1 : 0; d < out.ndim(); ++d)
      if (out[d] == 0) ++zeros, at = d;
    if (zeros == 1) {
      out[at] = 1;
      out[at] = in.numel() / out.numel();
    }
  } else {
    throw ShapeError("Reshape needs a shape (or target_shape) parameter");
  }
  if (out.numel() != in.numel())
    throw ShapeError("cannot reshape input 0 (data) of shape " + in.str() + " (" +
                     std::to_string(in.numel()) + " elements) to " + out.str() + " (" +
                     std::to_string(out.numel()) + " elements)");
  return out;
}

void infer_reshape(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  // Backward: a known output and an input with one unknown (0) dim give that dim (the
  // element counts must agree), as MXNet's ReshapeShape does.
  if (!in[0].known() && in[0].ndim() > 0 && out[0].known()) {
    int unknown = -1, count = 0;
    int64_t rest = 1;
    for (int d = 0; d < in[0].ndim(); ++d) {
      if (in[0][d] == 0) unknown = d, ++count;
      else rest *= in[0][d];
    }
    if (count == 1 && out[0].numel() % rest == 0) {
      Shape s = in[0];
      s[unknown] = out[0].numel() / rest;
      merge_shape(in[0], s, "input 0 (data)");
    }
  }
  if (!in[0].known()) return;
  merge_shape(out[0], reshape_target(a.param<ReshapeParam>(), in[0]), "output 0");
}

LOOM_REGISTER_OP("Reshape")
    .describe("Reshapes the input; supports MXNet's codes 0, -1, -2, -3, -4 and reverse.")
    .alias("reshape")
    .params(kReshapeSchema)
    .shape_fn(infer_reshape)
    .deps(GradDeps{true, false, false})
    .inplace_pairs({{0, 0}})
    .cpu<ViewKernel>()
    .sample({.attrs = {{"shape", "(-1, 0)"}}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"shape", "(-4, 1, -1, -3)"}}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {{"target_shape", "(0, 4)"}}, .in_shapes = {{2, 3, 4}}});

// ---- Flatten ----
void infer_flatten(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].known()) return;
  int64_t rest = 1;
  for (int d = 1; d < in[0].ndim(); ++d) rest *= in[0][d];
  merge_shape(out[0], Shape{in[0][0], rest}, "output 0");
}

LOOM_REGISTER_OP("Flatten")
    .describe("Collapses (d0, d1, ...) into (d0, d1*d2*...).")
    .alias("flatten")
    .shape_fn(infer_flatten)
    .deps(GradDeps{true, false, false})
    .inplace_pairs({{0, 0}})
    .cpu<ViewKernel>()
    .sample({.attrs = {}, .in_shapes = {{2, 3, 4}}})
    .sample({.attrs = {}, .in_shapes = {{5}}});

// ---- expand_dims ----
struct ExpandDimsParam {
  int axis;
};
const auto kExpandDimsSchema = ParamSchema<ExpandDimsParam>().required(
    "axis", &ExpandDimsParam::axis, "Position of the new axis (negatives count from the end).");

void infer_expand_dims(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (in[0].ndim() == 0) return;
  int nd = in[0].ndim();
  int ax = tensor::norm_axis(a.param<ExpandDimsParam>().axis, nd + 1, "axis");
  auto d = in[0].dims();
  d.insert(d.begin() + ax, 1);
  merge_shape(out[0], Shape(std::move(d)), "output 0");
}

LOOM_REGISTER_OP("expand_dims")
    .describe("Inserts a new axis of size 1 at `axis`.")
    .params(kExpandDimsSchema)
    .shape_fn(infer_expand_dims)
    .deps(GradDeps{true, false, false})
    .inplace_pairs({{0, 0}})
    .cpu<ViewKernel>()
    .sample({.attrs = {{"axis", "1"}}, .in_shapes = {{2, 3}}})
    .sample({.attrs = {{"axis", "-1"}}, .in_shapes = {{2, 3}}});

// ---- squeeze ----
struct SqueezeParam {
  std::optional<Shape> axis;
};
const auto kSqueezeSchema = ParamSchema<SqueezeParam>().optional(
    "axis", &SqueezeParam::axis, std::optional<Shape>(),
    "Axes of size 1 to remove (None: every axis of size 1).");

void infer_squeeze(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].known()) return;
  const auto& p = a.param<SqueezeParam>();
  const Shape& s = in[0];
  std::vector<bool> drop(static_cast<size_t>(s.ndim()), false);
  if (!p.axis) {
    for (int d = 0; d < s.ndim(); ++d) drop[d] = s[d] == 1;
  } else {
    const std::string what = "node '" + a.name + "' (op squeeze): axis";
    for (auto ax : *p.axis) {
      int d = tensor::norm_axis(ax, s.ndim(), what);
      if (s[d] != 1)
        throw ShapeError(what + " " + std::to_string(ax) + " of input 0 " + s.str() +
                         " has size " + std::to_string(s[d]) + ", not 1");
      drop[d] = true;
    }
  }
  std::vector<int64_t> o;
  for (int d = 0; d < s.ndim(); ++d)
    if (!drop[d]) o.push_back(s[d]);
  if (o.empty()) o.push_back(1);  // MXNet keeps one dimension
  merge_shape(out[0], Shape(std::move(o)), "output 0");
}

LOOM_REGISTER_OP("squeeze")
    .describe("Removes axes of size 1.")
    .params(kSqueezeSchema)
    .shape_fn(infer_squeeze)
    .deps(GradDeps{true, false, false})
    .inplace_pairs({{0, 0}})
    .cpu<ViewKernel>()
    .sample({.attrs = {}, .in_shapes = {{2, 1, 3, 1}}})
    .sample({.attrs = {{"axis", "(1,)"}}, .in_shapes = {{2, 1, 3, 1}}})
    .sample({.attrs = {{"axis", "(0, -1)"}}, .in_shapes = {{1, 4, 1}}});

// ---- reshape_like ----
// The second input only lends its shape: any dtype (MXNet's *_like ops take an int32 rhs
// with a float lhs); the output has the first input's dtype.
void infer_reshape_like_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  merge_type(out[0], in[0], "output 0");
  merge_type(in[0], out[0], input_label(a, 0));
}

struct ReshapeLikeParam {
  std::optional<int64_t> lhs_begin, lhs_end, rhs_begin, rhs_end;
};
const auto kReshapeLikeSchema =
    ParamSchema<ReshapeLikeParam>()
        .optional("lhs_begin", &ReshapeLikeParam::lhs_begin, std::optional<int64_t>(),
                  "First lhs axis replaced (None: 0).")
        .optional("lhs_end", &ReshapeLikeParam::lhs_end, std::optional<int64_t>(),
                  "End of the lhs axes replaced (None: all).")
        .optional("rhs_begin", &ReshapeLikeParam::rhs_begin, std::optional<int64_t>(),
                  "First rhs axis used (None: 0).")
        .optional("rhs_end", &ReshapeLikeParam::rhs_end, std::optional<int64_t>(),
                  "End of the rhs axes used (None: all).");

void infer_reshape_like(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
  if (!in[0].known() || !in[1].known()) return;
  const auto& p = a.param<ReshapeLikeParam>();
  // [begin, end) of `s` with None defaults and negative positions counted from the end.
  auto range = [&](const Shape& s, std::optional<int64_t> b, std::optional<int64_t> e) {
    int64_t n = s.ndim(), lo = b.value_or(0), hi = e.value_or(n);
    if (lo < 0) lo += n;
    if (hi < 0) hi += n;
    if (lo < 0 || hi > n || lo > hi)
      throw ShapeError("node '" + a.name + "' (op reshape_like): axis range [" + std::to_string(lo) +
                       ", " + std::to_string(hi) + ") is out of range for " + s.str());
    return std::pair<int, int>(static_cast<int>(lo), static_cast<int>(hi));
  };
  auto [lb, le] = range(in[0], p.lhs_begin, p.lhs_end);
  auto [rb, re] = range(in[1], p.rhs_begin, p.rhs_end);
  std::vector<int64_t> o(in[0].begin(), in[0].begin() + lb);
  o.insert(o.end(), in[1].begin() + rb, in[1].begin() + re);
  o.insert(o.end(), in[0].begin() + le, in[0].end());
  Shape os(std::move(o));
  if (os.numel() != in[0].numel())
    throw ShapeError("node '" + a.name + "' (op reshape_like): cannot reshape lhs " + in[0].str() +
                     " to " + os.str());
  merge_shape(out[0], os, "output 0");
}

LOOM_REGISTER_OP("reshape_like")
    .describe("Reshapes lhs to the shape of rhs (or of a range of its axes).")
    .params(kReshapeLikeSchema)
    .inputs({"lhs", "rhs"})
    .shape_fn(infer_reshape_like)
    .type_fn(infer_reshape_like_type)
    .deps(GradDeps{true, false, false})
    .inplace_pairs({{0, 0}})
    .cpu<ViewKernel>()
    .sample({.attrs = {}, .in_shapes = {{2, 6}, {3, 4}}})
    .sample({.attrs = {{"lhs_begin", "1"}, {"lhs_end", "None"}, {"rhs_begin", "0"}, {"rhs_end", "2"}},
             .in_shapes = {{5, 6}, {2, 3, 7}}});

// ---- _identity_with_attr_like_rhs ----
// lhs passed through, constrained to rhs's shape: a graph states "this has the shape of
// that" so inference can run backwards (MXNet's shape-constraint op; rhs gets no gradient).
LOOM_REGISTER_OP("_identity_with_attr_like_rhs")
    .describe("Returns lhs; lhs, rhs and the output share one shape (rhs only lends it).")
    .inputs({"lhs", "rhs"})
    .shape_fn(infer_shape_same)
    .type_fn(infer_reshape_like_type)
    .deps(GradDeps{true, false, false})
    .no_grad({1})
    .inplace_pairs({{0, 0}})
    .cpu<ViewKernel>()
    .sample({.attrs = {}, .in_shapes = {{2, 3}, {2, 3}}});

}  // namespace
}  // namespace loom
