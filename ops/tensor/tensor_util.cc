#include "ops/tensor/tensor_util.h"

#include "ops/tensor/dtype_kernels.h"

#include <algorithm>

#include "ops/infer.h"

namespace loom::tensor {

void copy_req(const NDArray& dst, const NDArray& src, Req req) {
  if (req == Req::kNull) return;
  if (req == Req::kAdd && src.dtype() == DType::kFloat32) {
    const float* s = src.data<float>();
    write(dst.data<float>(), req, src.size(), [&](int64_t i) { return s[i]; });
    return;
  }
  copy_req_any(dst, src, req);  // other dtypes: integers wrap, float16 rounds
}

void fill_req(const NDArray& dst, Req req, float v) {
  if (dst.dtype() == DType::kFloat32) {
    write(dst.data<float>(), req, dst.size(), [&](int64_t) { return v; });
    return;
  }
  dispatch_dtype(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T x = convert_value<T>(v);
    write_t<T>(dst.data<T>(), req, dst.size(), [=](int64_t) { return x; });
  });
}

void check_f32(const KernelArgs& args) {
  auto bad = [&](const std::vector<DType>& ts, const char* what) {
    for (size_t i = 0; i < ts.size(); ++i)
      if (ts[i] != DType::kFloat32)
        throw Error("node '" + args.attrs.name + "' (op " + args.attrs.op->name + "): " + what +
                    " " + std::to_string(i) + " has dtype " + dtype_name(ts[i]) +
                    "; the CPU kernel supports float32 only");
  };
  bad(args.in_types, "input");
  bad(args.out_types, "output");
}

int norm_axis(int64_t axis, int ndim, const std::string& what) {
  int64_t a = axis < 0 ? axis + ndim : axis;
  if (a < 0 || a >= ndim)
    throw ShapeError(what + " " + std::to_string(axis) + " is out of range for " +
                     std::to_string(ndim) + " dims");
  return static_cast<int>(a);
}

Shape pad_shape(const Shape& s, int ndim) {
  std::vector<int64_t> d(static_cast<size_t>(ndim - s.ndim()), 1);
  d.insert(d.end(), s.begin(), s.end());
  return Shape(std::move(d));
}

Shape broadcast_shape(const OpAttrs& a, const Shape& lhs, const Shape& rhs) {
  int nd = std::max(lhs.ndim(), rhs.ndim());
  Shape l = pad_shape(lhs, nd), r = pad_shape(rhs, nd), out = l;
  for (int d = 0; d < nd; ++d) {
    if (l[d] == r[d] || r[d] == 1) continue;
    if (l[d] == 1) {
      out[d] = r[d];
      continue;
    }
    throw ShapeError(input_label(a, 0) + " shape " + lhs.str() + " and " + input_label(a, 1) +
                     " shape " + rhs.str() + " cannot be broadcast together");
  }
  return out;
}

BcastPlan make_bcast_plan(const Shape& a_in, const Shape& b_in, const Shape& out) {
  const int nd = out.ndim();
  Shape a = pad_shape(a_in, nd), b = pad_shape(b_in, nd);
  BcastPlan p;
  p.size = out.numel();
  // Merge runs of dims where each operand is uniformly broadcast or uniformly present.
  std::vector<int64_t> dims;
  std::vector<int> pa, pb;  // 1 = operand has this dim, 0 = broadcast
  for (int d = 0; d < nd; ++d) {
    if (out[d] == 1) continue;
    int ha = a[d] == out[d], hb = b[d] == out[d];
    if (!dims.empty() && pa.back() == ha && pb.back() == hb) {
      dims.back() *= out[d];
    } else {
      dims.push_back(out[d]);
      pa.push_back(ha);
      pb.push_back(hb);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    pa.push_back(1);
    pb.push_back(1);
  }
  const size_t n = dims.size();
  p.dims = dims;
  p.sa.assign(n, 0);
  p.sb.assign(n, 0);
  int64_t st_a = 1, st_b = 1;
  for (size_t k = n; k-- > 0;) {
    if (pa[k]) {
      p.sa[k] = st_a;
      st_a *= dims[k];
    }
    if (pb[k]) {
      p.sb[k] = st_b;
      st_b *= dims[k];
    }
  }
  return p;
}

ReducePlan make_reduce_plan(const Shape& big, const Shape& small) {
  const int nd = big.ndim();
  std::vector<int64_t> stride(static_cast<size_t>(nd), 1);
  for (int d = nd - 2; d >= 0; --d) stride[d] = stride[d + 1] * big[d + 1];
  std::vector<int64_t> kd, ks, rd, rs;  // kept / reduced dims and their strides in `big`
  int last = -1;                        // 1 kept, 0 reduced: adjacent dims of a kind merge
  for (int d = 0; d < nd; ++d) {
    if (big[d] == 1) continue;
    int kept = small[d] == big[d];
    auto& dims = kept ? kd : rd;
    auto& st = kept ? ks : rs;
    if (kept == last) {
      dims.back() *= big[d];
      st.back() = stride[d];
    } else {
      dims.push_back(big[d]);
      st.push_back(stride[d]);
    }
    last = kept;
  }
  ReducePlan p;
  if (!rd.empty()) {  // the innermost reduced run becomes the plan's inner loop
    p.inner_n = rd.back();
    p.inner_stride = rs.back();
    rd.pop_back();
    rs.pop_back();
  }
  // Enumerates offsets of all index combinations over (dims, strides), row-major.
  auto offsets = [](const std::vector<int64_t>& dims, const std::vector<int64_t>& st) {
    std::vector<int64_t> v{0};
    for (size_t k = 0; k < dims.size(); ++k) {
      std::vector<int64_t> next;
      next.reserve(v.size() * static_cast<size_t>(dims[k]));
      for (int64_t base : v)
        for (int64_t i = 0; i < dims[k]; ++i) next.push_back(base + i * st[k]);
      v.swap(next);
    }
    return v;
  };
  p.base = offsets(kd, ks);
  p.off = offsets(rd, rs);
  return p;
}

void reduce_sum(const ReducePlan& p, const float* in, float* out, Req req, double scale) {
  if (req == Req::kNull) return;
  if (p.base.size() == 1 && p.off.size() == 1 && p.inner_n >= kParallelMin) {
    double acc = 0;
    const float* src = in + p.base[0] + p.off[0];
    const int64_t n = p.inner_n, st = p.inner_stride;
#pragma omp parallel for reduction(+ : acc) schedule(static)
    for (int64_t j = 0; j < n; ++j) acc += src[j * st];
    store(out, req, static_cast<float>(acc * scale));
    return;
  }
  reduce(
      p, in, out, req, 0.0, [](double a, double x) { return a + x; },
      [scale](double a) { return a * scale; });
}

}  // namespace loom::tensor
