// The shared CPU kernel of the _linalg_* operators (see la_kernel.h).
#include "ops/linalg/la_kernel.h"

#include <algorithm>
#include <exception>
#include <mutex>

#include "ops/tensor/dtype_kernels.h"

namespace loom::linalg {

std::string la_label(const OpAttrs& a) {
  return "node '" + a.name + "' (op " + (a.op ? a.op->name : std::string("?")) + ")";
}

std::vector<int64_t> leading(const Shape& s, int rank) {
  std::vector<int64_t> d(s.dims().begin(), s.dims().end() - std::min(rank, s.ndim()));
  return d;
}

void for_batch(const Mats& like, const std::function<void(size_t)>& fn) {
  const int64_t n = static_cast<int64_t>(like.size());
  if (n == 0) return;
  const int64_t r = like[0].r, c = like[0].c;
  if (n < 2 || n * r * c * std::max(r, c) < (int64_t{1} << 16)) {
    for (int64_t b = 0; b < n; ++b) fn(static_cast<size_t>(b));
    return;
  }
  std::exception_ptr err;
  std::mutex mu;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t b = 0; b < n; ++b) {
    try {
      fn(static_cast<size_t>(b));
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!err) err = std::current_exception();
    }
  }
  if (err) std::rethrow_exception(err);
}

namespace {

// Where the matrices of a tensor live: matrix b's element (i, j) is at off[b] + i*rs + j*cs.
struct Geom {
  int64_t n = 0, r = 1, c = 1, rs = 0, cs = 0;
  std::vector<int64_t> off;
};

Geom geom(const Shape& s, int rank, int64_t row_axis) {
  Geom g;
  const int nd = s.ndim();
  const int64_t total = s.numel();
  if (rank == 0 || nd == 0) {
    g.n = total;
    for (int64_t b = 0; b < g.n; ++b) g.off.push_back(b);
    return g;
  }
  if (rank == 1) {
    g.c = s[nd - 1];
    g.cs = 1;
    g.n = g.c == 0 ? 0 : total / g.c;
    for (int64_t b = 0; b < g.n; ++b) g.off.push_back(b * g.c);
    return g;
  }
  const int row = row_axis < 0 ? nd - 2 : static_cast<int>(row_axis);
  std::vector<int64_t> stride(static_cast<size_t>(nd), 1);
  for (int d = nd - 2; d >= 0; --d)
    stride[static_cast<size_t>(d)] = stride[static_cast<size_t>(d) + 1] * s[d + 1];
  g.r = s[row];
  g.c = s[nd - 1];
  g.rs = stride[static_cast<size_t>(row)];
  g.cs = 1;
  std::vector<int> batch;
  for (int d = 0; d < nd - 1; ++d)
    if (d != row) batch.push_back(d);
  g.n = (g.r * g.c == 0) ? 0 : total / (g.r * g.c);
  std::vector<int64_t> idx(batch.size(), 0);
  for (int64_t b = 0; b < g.n; ++b) {
    int64_t o = 0;
    for (size_t k = 0; k < batch.size(); ++k) o += idx[k] * stride[static_cast<size_t>(batch[k])];
    g.off.push_back(o);
    for (int k = static_cast<int>(batch.size()) - 1; k >= 0; --k) {
      if (++idx[static_cast<size_t>(k)] < s[batch[static_cast<size_t>(k)]]) break;
      idx[static_cast<size_t>(k)] = 0;
    }
  }
  return g;
}

Mats zeros(const Geom& g) { return Mats(static_cast<size_t>(g.n), Dense(g.r, g.c)); }

template <class T>
Mats load(const NDArray& a, const Geom& g) {
  Mats m = zeros(g);
  if (a.is_none()) return m;
  const T* p = a.cdata<T>();
  for (int64_t b = 0; b < g.n; ++b) {
    Dense& d = m[static_cast<size_t>(b)];
    const int64_t o = g.off[static_cast<size_t>(b)];
    for (int64_t i = 0; i < g.r; ++i)
      for (int64_t j = 0; j < g.c; ++j) d(i, j) = static_cast<double>(p[o + i * g.rs + j * g.cs]);
  }
  return m;
}

template <class T>
void store(const NDArray& a, const Geom& g, const Mats& m, Req req, const std::string& what) {
  if (req == Req::kNull) return;
  if (static_cast<int64_t>(m.size()) != g.n)
    throw Error(what + ": internal error, " + std::to_string(m.size()) + " result matrices for " +
                std::to_string(g.n));
  T* p = a.data<T>();
  for (int64_t b = 0; b < g.n; ++b) {
    const Dense& d = m[static_cast<size_t>(b)];
    const int64_t o = g.off[static_cast<size_t>(b)];
    for (int64_t i = 0; i < g.r; ++i)
      for (int64_t j = 0; j < g.c; ++j) {
        T& dst = p[o + i * g.rs + j * g.cs];
        const T v = static_cast<T>(d(i, j));
        dst = req == Req::kAdd ? static_cast<T>(dst + v) : v;
      }
  }
}

class LaKernel final : public Kernel {
 public:
  LaKernel(const KernelArgs& a, const LaSpec* spec)
      : spec_(spec),
        attrs_(a.attrs),
        t_(tensor::check_dtypes(a, tensor::dtype_bit(DType::kFloat32) |
                                       tensor::dtype_bit(DType::kFloat64))),
        what_(tensor::node_label(a)),
        deps_(op_grad_deps(a.attrs)) {
    for (size_t i = 0; i < a.in_shapes.size(); ++i) in_.push_back(make_geom(a.in_shapes[i], spec->in_rank[i]));
    for (size_t i = 0; i < a.out_shapes.size(); ++i)
      out_.push_back(make_geom(a.out_shapes[i], spec->out_rank[i]));
  }

  void forward(const OpContext&, std::span<const NDArray> in, std::span<const Req> req,
               std::span<const NDArray> out) override {
    dispatch(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::vector<Mats> x, y;
      for (size_t i = 0; i < in_.size(); ++i) x.push_back(load<T>(in[i], in_[i]));
      for (size_t i = 0; i < out_.size(); ++i) y.push_back(zeros(out_[i]));
      spec_->forward(attrs_, x, y);
      for (size_t i = 0; i < out_.size(); ++i) store<T>(out[i], out_[i], y[i], req[i], what_);
    });
  }

  void backward(const OpContext&, std::span<const NDArray> og, std::span<const NDArray> in,
                std::span<const NDArray> out, std::span<const Req> req,
                std::span<const NDArray> ig) override {
    bool any = false;
    for (size_t i = 0; i < in_.size(); ++i) any = any || req[i] != Req::kNull;
    if (!any) return;
    dispatch(t_, [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::vector<Mats> g, x, y, dx;
      for (size_t i = 0; i < out_.size(); ++i)
        g.push_back(i < og.size() ? load<T>(og[i], out_[i]) : zeros(out_[i]));
      if (deps_.in_data)
        for (size_t i = 0; i < in_.size(); ++i) x.push_back(load<T>(in[i], in_[i]));
      if (deps_.out_data)
        for (size_t i = 0; i < out_.size(); ++i) y.push_back(load<T>(out[i], out_[i]));
      for (size_t i = 0; i < in_.size(); ++i) dx.push_back(zeros(in_[i]));
      spec_->backward(attrs_, g, x, y, dx);
      for (size_t i = 0; i < in_.size(); ++i) store<T>(ig[i], in_[i], dx[i], req[i], what_);
    });
  }

 private:
  Geom make_geom(const Shape& s, int rank) const {
    int64_t row = -1;
    if (rank == 2 && spec_->row_axis) {
      const int64_t ax = spec_->row_axis(attrs_);
      row = ax < 0 ? ax + s.ndim() : ax;
      if (row == s.ndim() - 2) row = -1;
    }
    return geom(s, rank, row);
  }
  template <class Fn>
  void dispatch(DType t, Fn&& fn) {
    if (t == DType::kFloat64)
      fn(type_tag<double>{});
    else
      fn(type_tag<float>{});
  }

  const LaSpec* spec_;
  OpAttrs attrs_;
  DType t_;
  std::string what_;
  GradDeps deps_;
  std::vector<Geom> in_, out_;
};

}  // namespace

KernelFactory la_kernel(const LaSpec* spec) {
  return [spec](const KernelArgs& a) -> std::unique_ptr<Kernel> {
    return std::make_unique<LaKernel>(a, spec);
  };
}

}  // namespace loom::linalg
