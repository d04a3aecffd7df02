// SequenceMask, SequenceLast and SequenceReverse (MXNet 1.9.1): operations on a batch of
// variable-length sequences laid out along `axis` (0: (time, batch, ...), 1: (batch, time,
// ...)), with one length per batch entry taken from the optional `sequence_length` input
// (any numeric dtype, truncated toward zero) when use_sequence_length is set; otherwise every
// sequence has the full length.
//   SequenceMask:    positions at or after a sequence's length are set to `value`.
//   SequenceLast:    the element at position length - 1 of each sequence (the axis removed).
//   SequenceReverse: the first `length` positions of each sequence in reverse order, the
//                    rest kept in place (axis 0 only, as in MXNet).
// The data gradient routes the head gradient back through the same selection; the lengths
// get none. Lengths outside [1, T] are clamped (MXNet reads out of bounds there).
#include <algorithm>
#include <cmath>

#include "ops/dtype_policy.h"
#include "ops/vision/vision_util.h"

namespace loom {
namespace {

struct SeqParam {
  bool use_sequence_length;
  float value;
  int64_t axis;
};
const auto kSeqMaskSchema =
    ParamSchema<SeqParam>()
        .optional("use_sequence_length", &SeqParam::use_sequence_length, false,
                  "Take the lengths from the sequence_length input (else all full length).")
        .optional("value", &SeqParam::value, 0.f, "The value masked positions are set to.")
        .optional("axis", &SeqParam::axis, int64_t{0}, "The sequence axis: 0 or 1.");
const auto kSeqSchema =
    ParamSchema<SeqParam>()
        .optional("use_sequence_length", &SeqParam::use_sequence_length, false,
                  "Take the lengths from the sequence_length input (else all full length).")
        .optional("axis", &SeqParam::axis, int64_t{0}, "The sequence axis.");

std::vector<std::string> seq_inputs(const OpAttrs& a) {
  if (a.param<SeqParam>().use_sequence_length) return {"data", "sequence_length"};
  return {"data"};
}

// (T, B, R) view of the data: element (t, b, r) is at t * st + b * sb + r.
struct SeqGeom {
  int64_t T = 0, B = 0, R = 1, st = 0, sb = 0;
  int64_t at(int64_t t, int64_t b) const { return t * st + b * sb; }
};
SeqGeom seq_geom(const Shape& s, int64_t axis) {
  SeqGeom g;
  for (int d = 2; d < s.ndim(); ++d) g.R *= s[d];
  if (axis == 0) {
    g.T = s[0], g.B = s[1], g.st = g.B * g.R, g.sb = g.R;
  } else {
    g.B = s[0], g.T = s[1], g.st = g.R, g.sb = g.T * g.R;
  }
  return g;
}

void infer_seq(const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out, bool last,
               bool axis0_only) {
  const auto& p = a.param<SeqParam>();
  if (axis0_only ? p.axis != 0 : (p.axis != 0 && p.axis != 1))
    throw ParamError(vision::label(a) + ": axis " + std::to_string(p.axis) +
                     (axis0_only ? " is not supported (only 0)" : " is not supported (0 or 1)"));
  if (in[0].ndim() == 0) return;
  const Shape& s = in[0];
  if (s.ndim() < 2)
    throw ShapeError(vision::label(a) + ": data must have rank 2 or more, got " + s.str());
  const int64_t batch = p.axis == 0 ? s[1] : s[0];
  if (p.use_sequence_length) merge_shape(in[1], Shape{batch}, "input 1 (sequence_length)");
  if (!last) {
    merge_shape(out[0], s, "output 0");
    return;
  }
  std::vector<int64_t> o;
  for (int d = 0; d < s.ndim(); ++d)
    if (d != p.axis) o.push_back(s[d]);
  merge_shape(out[0], Shape(std::move(o)), "output 0");
}

void infer_seq_type(const OpAttrs& a, std::vector<DType>& in, std::vector<DType>& out) {
  vision::infer_type_shared(in, out, 1);
  // The lengths keep their own dtype; unknown ones default to the data's.
  if (in.size() > 1 && in[1] == DType::kUnknown) in[1] = in[0];
}

class SeqKernel : public Kernel {
 public:
  explicit SeqKernel(const KernelArgs& a)
      : p_(a.attrs.param<SeqParam>()), g_(seq_geom(a.in_shapes[0], p_.axis)) {
    vision::check_float(a, 1);
  }

 protected:
  // Length of sequence b, clamped to [lo, T].
  std::vector<int64_t> lengths(std::span<const NDArray> in, int64_t lo) const {
    std::vector<int64_t> len(static_cast<size_t>(g_.B), g_.T);
    if (!p_.use_sequence_length) return len;
    std::vector<float> l = vision::load(in[1]);
    for (int64_t b = 0; b < g_.B; ++b) {
      const float v = l[static_cast<size_t>(b)];
      int64_t n = std::isfinite(v) ? static_cast<int64_t>(std::trunc(v)) : g_.T;
      len[static_cast<size_t>(b)] = std::clamp<int64_t>(n, lo, g_.T);
    }
    return len;
  }
  SeqParam p_;
  SeqGeom g_;
};

class SeqMaskKernel final : public SeqKernel {
 public:
  using SeqKernel::SeqKernel;
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    std::vector<float> y = vision::load(in[0]);
    apply(lengths(in, 0), y, p_.value);
    vision::store(out[0], req[0], y);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (req[0] == Req::kNull) return;
    std::vector<float> g = vision::load(og[0]);
    apply(lengths(in, 0), g, 0.f);
    vision::store(ig[0], req[0], g);
    if (ig.size() > 1) vision::store_zero(ig[1], req[1]);
  }

 private:
  void apply(const std::vector<int64_t>& len, std::vector<float>& v, float fill) const {
    for (int64_t b = 0; b < g_.B; ++b)
      for (int64_t t = len[static_cast<size_t>(b)]; t < g_.T; ++t)
        std::fill_n(v.begin() + g_.at(t, b), g_.R, fill);
  }
};

class SeqLastKernel final : public SeqKernel {
 public:
  using SeqKernel::SeqKernel;
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    const std::vector<float> x = vision::load(in[0]);
    const std::vector<int64_t> len = lengths(in, 1);
    std::vector<float> y(static_cast<size_t>(g_.B * g_.R));
    for (int64_t b = 0; b < g_.B; ++b)
      std::copy_n(x.begin() + g_.at(len[static_cast<size_t>(b)] - 1, b), g_.R,
                  y.begin() + b * g_.R);
    vision::store(out[0], req[0], y);
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (ig.size() > 1) vision::store_zero(ig[1], req[1]);
    if (req[0] == Req::kNull) return;
    const std::vector<float> g = vision::load(og[0]);
    const std::vector<int64_t> len = lengths(in, 1);
    std::vector<float> dx(static_cast<size_t>(g_.T * g_.B * g_.R), 0.f);
    for (int64_t b = 0; b < g_.B; ++b)
      std::copy_n(g.begin() + b * g_.R, g_.R,
                  dx.begin() + g_.at(len[static_cast<size_t>(b)] - 1, b));
    vision::store(ig[0], req[0], dx);
  }
};

class SeqReverseKernel final : public SeqKernel {
 public:
  using SeqKernel::SeqKernel;
  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    if (req[0] == Req::kNull) return;
    vision::store(out[0], req[0], permute(lengths(in, 0), vision::load(in[0])));
  }
  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray>, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    if (ig.size() > 1) vision::store_zero(ig[1], req[1]);
    if (req[0] == Req::kNull) return;
    // The permutation is its own inverse.
    vision::store(ig[0], req[0], permute(lengths(in, 0), vision::load(og[0])));
  }

 private:
  std::vector<float> permute(const std::vector<int64_t>& len, const std::vector<float>& x) const {
    std::vector<float> y(x.size());
    for (int64_t b = 0; b < g_.B; ++b) {
      const int64_t n = len[static_cast<size_t>(b)];
      for (int64_t t = 0; t < g_.T; ++t) {
        const int64_t src = t < n ? n - 1 - t : t;
        std::copy_n(x.begin() + g_.at(src, b), g_.R, y.begin() + g_.at(t, b));
      }
    }
    return y;
  }
};

LOOM_REGISTER_OP("SequenceMask")
    .describe("Sets positions at or after each sequence's length to a constant value.")
    .params(kSeqMaskSchema)
    .inputs(seq_inputs)
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      infer_seq(a, in, out, false, false);
    })
    .type_fn(infer_seq_type)
    .no_grad({1})
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<SeqMaskKernel>()
    .sample({.attrs = {}, .in_shapes = {{3, 4}}})
    .sample({.attrs = {{"use_sequence_length", "True"}, {"value", "-2.5"}},
             .in_shapes = {{4, 3, 2}, {3}},
             .in_kinds = {"normal", "label:5"}})
    .sample({.attrs = {{"use_sequence_length", "True"}, {"axis", "1"}, {"value", "0.3"}},
             .in_shapes = {{3, 5, 2, 2}, {3}},
             .in_kinds = {"normal", "label:6"}});

LOOM_REGISTER_OP("SequenceLast")
    .describe("Takes the last element of each sequence (at position length - 1).")
    .params(kSeqSchema)
    .inputs(seq_inputs)
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      infer_seq(a, in, out, true, false);
    })
    .type_fn(infer_seq_type)
    .no_grad({1})
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<SeqLastKernel>()
    .sample({.attrs = {}, .in_shapes = {{3, 4}}})
    .sample({.attrs = {{"use_sequence_length", "True"}},
             .in_shapes = {{4, 3, 2}, {3}},
             .in_kinds = {"normal", "label:5"}})
    .sample({.attrs = {{"use_sequence_length", "True"}, {"axis", "1"}},
             .in_shapes = {{3, 5, 2, 2}, {3}},
             .in_kinds = {"normal", "label:6"}});

LOOM_REGISTER_OP("SequenceReverse")
    .describe("Reverses the first `length` positions of each sequence along axis 0.")
    .params(kSeqSchema)
    .inputs(seq_inputs)
    .shape_fn([](const OpAttrs& a, std::vector<Shape>& in, std::vector<Shape>& out) {
      infer_seq(a, in, out, false, true);
    })
    .type_fn(infer_seq_type)
    .no_grad({1})
    .deps(GradDeps{.out_grad = true, .in_data = true, .out_data = false})
    .cpu<SeqReverseKernel>()
    .sample({.attrs = {}, .in_shapes = {{3, 4}}})
    .sample({.attrs = {{"use_sequence_length", "True"}},
             .in_shapes = {{5, 3, 2}, {3}},
             .in_kinds = {"normal", "label:6"}});

// The kernels compute float16/32/64 data through float32 buffers.
LOOM_CPU_DTYPES("SequenceMask", kDTypePolicyFloats, {.any_inputs = {1}});
LOOM_CPU_DTYPES("SequenceLast", kDTypePolicyFloats, {.any_inputs = {1}});
LOOM_CPU_DTYPES("SequenceReverse", kDTypePolicyFloats, {.any_inputs = {1}});

}  // namespace
}  // namespace loom
