// The _linalg_* operators: naive references for the op sweep (written from MXNet 1.9.1's
// documented semantics, by explicit formulas rather than the kernels' factorizations where
// one exists), values MXNet gives on fixed inputs, float64 kernels, and finite-difference
// gradients of the factorizations on symmetric perturbations (which the sweep cannot do).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "runtime/imperative.h"
#include "tests/unit/op_reference.h"

namespace loom::test {
namespace {

using Mat = std::vector<std::vector<double>>;

std::string attr(const Attrs& d, const std::string& k, const std::string& def) {
  return d.count(k) ? d.at(k) : def;
}
bool battr(const Attrs& d, const std::string& k, bool def) {
  if (!d.count(k)) return def;
  const std::string v = d.at(k);
  return v == "True" || v == "true" || v == "1";
}
double dattr(const Attrs& d, const std::string& k, double def) {
  return d.count(k) ? std::stod(d.at(k)) : def;
}

Mat zeros(int64_t r, int64_t c) { return Mat(static_cast<size_t>(r), std::vector<double>(static_cast<size_t>(c), 0.0)); }
int64_t rows(const Mat& m) { return static_cast<int64_t>(m.size()); }
int64_t cols(const Mat& m) { return m.empty() ? 0 : static_cast<int64_t>(m[0].size()); }
double& at(Mat& m, int64_t i, int64_t j) { return m[static_cast<size_t>(i)][static_cast<size_t>(j)]; }
double at(const Mat& m, int64_t i, int64_t j) { return m[static_cast<size_t>(i)][static_cast<size_t>(j)]; }

Mat tr(const Mat& a) {
  Mat t = zeros(cols(a), rows(a));
  for (int64_t i = 0; i < rows(a); ++i)
    for (int64_t j = 0; j < cols(a); ++j) at(t, j, i) = at(a, i, j);
  return t;
}
Mat mul(const Mat& a, const Mat& b, double alpha = 1.0) {
  Mat c = zeros(rows(a), cols(b));
  for (int64_t i = 0; i < rows(a); ++i)
    for (int64_t j = 0; j < cols(b); ++j) {
      double s = 0;
      for (int64_t k = 0; k < cols(a); ++k) s += at(a, i, k) * at(b, k, j);
      at(c, i, j) = alpha * s;
    }
  return c;
}
Mat tri(const Mat& a, bool lower) {
  Mat t = zeros(rows(a), cols(a));
  for (int64_t i = 0; i < rows(a); ++i)
    for (int64_t j = 0; j < cols(a); ++j)
      if (lower ? j <= i : j >= i) at(t, i, j) = at(a, i, j);
  return t;
}
// Inverse by Gauss-Jordan elimination with partial pivoting.
Mat inv(Mat a) {
  const int64_t n = rows(a);
  Mat x = zeros(n, n);
  for (int64_t i = 0; i < n; ++i) at(x, i, i) = 1;
  for (int64_t k = 0; k < n; ++k) {
    int64_t p = k;
    for (int64_t i = k + 1; i < n; ++i)
      if (std::fabs(at(a, i, k)) > std::fabs(at(a, p, k))) p = i;
    std::swap(a[static_cast<size_t>(k)], a[static_cast<size_t>(p)]);
    std::swap(x[static_cast<size_t>(k)], x[static_cast<size_t>(p)]);
    const double d = at(a, k, k);
    for (int64_t j = 0; j < n; ++j) {
      at(a, k, j) /= d;
      at(x, k, j) /= d;
    }
    for (int64_t i = 0; i < n; ++i)
      if (i != k) {
        const double f = at(a, i, k);
        for (int64_t j = 0; j < n; ++j) {
          at(a, i, j) -= f * at(a, k, j);
          at(x, i, j) -= f * at(x, k, j);
        }
      }
  }
  return x;
}
// Determinant by Laplace expansion (matrices in samples are at most 3 x 3).
double det(const Mat& a) {
  const int64_t n = rows(a);
  if (n == 1) return at(a, 0, 0);
  double s = 0;
  for (int64_t j = 0; j < n; ++j) {
    Mat m = zeros(n - 1, n - 1);
    for (int64_t i = 1; i < n; ++i)
      for (int64_t c = 0, cc = 0; c < n; ++c)
        if (c != j) at(m, i - 1, cc++) = at(a, i, c);
    s += (j % 2 ? -1.0 : 1.0) * at(a, 0, j) * det(m);
  }
  return s;
}

// The last two axes of a float32 array as matrices (rank 2) or the last axis as rows (rank 1).
std::vector<Mat> split(const NDArray& a, int rank) {
  const Shape& s = a.shape();
  const int64_t c = s[s.ndim() - 1], r = rank == 2 ? s[s.ndim() - 2] : 1;
  std::vector<Mat> out;
  const float* p = a.data<float>();
  for (int64_t b = 0; b < a.size() / (r * c); ++b) {
    Mat m = zeros(r, c);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) at(m, i, j) = p[(b * r + i) * c + j];
    out.push_back(m);
  }
  return out;
}
NDArray join(const std::vector<Mat>& ms, const Shape& s) {
  NDArray y(s);
  float* p = y.data<float>();
  int64_t o = 0;
  for (const Mat& m : ms)
    for (const auto& row : m)
      for (double v : row) p[o++] = static_cast<float>(v);
  EXPECT_EQ(o, y.size());
  return y;
}
NDArray scalars(const std::vector<double>& v, const Shape& s) {
  NDArray y(s);
  for (size_t i = 0; i < v.size(); ++i) y.data<float>()[i] = static_cast<float>(v[i]);
  return y;
}

// ---- gemm / gemm2: by index arithmetic over the row axis and the last axis ----
std::vector<NDArray> ref_gemm(const RefCall& c, bool with_c) {
  const Attrs& d = c.attrs.dict;
  const bool ta = battr(d, "transpose_a", false), tb = battr(d, "transpose_b", false);
  const double alpha = dattr(d, "alpha", 1.0), beta = with_c ? dattr(d, "beta", 1.0) : 0.0;
  const Shape &sa = c.in[0].shape(), &sb = c.in[1].shape(), &so = c.out_shapes[0];
  const int nd = so.ndim();
  int64_t axis = std::stoll(attr(d, "axis", "-2"));
  if (axis < 0) axis += nd;
  const int ax = static_cast<int>(axis);
  const int64_t kdim = ta ? sa[ax] : sa[nd - 1];
  auto flat = [](const Shape& s, const std::vector<int64_t>& idx) {
    int64_t o = 0;
    for (int k = 0; k < s.ndim(); ++k) o = o * s[k] + idx[static_cast<size_t>(k)];
    return o;
  };
  NDArray y(so);
  for (int64_t o = 0; o < y.size(); ++o) {
    std::vector<int64_t> idx(static_cast<size_t>(nd));
    int64_t r = o;
    for (int k = nd - 1; k >= 0; --k) {
      idx[static_cast<size_t>(k)] = r % so[k];
      r /= so[k];
    }
    const int64_t i = idx[static_cast<size_t>(ax)], j = idx[static_cast<size_t>(nd - 1)];
    double s = 0;
    for (int64_t k = 0; k < kdim; ++k) {
      auto ia = idx, ib = idx;
      ia[static_cast<size_t>(ax)] = ta ? k : i;
      ia[static_cast<size_t>(nd - 1)] = ta ? i : k;
      ib[static_cast<size_t>(ax)] = tb ? j : k;
      ib[static_cast<size_t>(nd - 1)] = tb ? k : j;
      s += static_cast<double>(c.in[0].data<float>()[flat(sa, ia)]) * c.in[1].data<float>()[flat(sb, ib)];
    }
    y.data<float>()[o] = static_cast<float>(alpha * s + (with_c ? beta * c.in[2].data<float>()[o] : 0.0));
  }
  return {y};
}
LOOM_OP_REFERENCE("_linalg_gemm", [](const RefCall& c) { return ref_gemm(c, true); });
LOOM_OP_REFERENCE("_linalg_gemm2", [](const RefCall& c) { return ref_gemm(c, false); });

// ---- trmm / trsm ----
Mat op_tri(const Mat& a, const Attrs& d) {
  Mat t = tri(a, battr(d, "lower", true));
  return battr(d, "transpose", false) ? tr(t) : t;
}
LOOM_OP_REFERENCE("_linalg_trmm", [](const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  auto A = split(c.in[0], 2), B = split(c.in[1], 2);
  std::vector<Mat> out;
  for (size_t b = 0; b < A.size(); ++b) {
    const Mat t = op_tri(A[b], d);
    const double alpha = dattr(d, "alpha", 1.0);
    out.push_back(battr(d, "rightside", false) ? mul(B[b], t, alpha) : mul(t, B[b], alpha));
  }
  return std::vector<NDArray>{join(out, c.out_shapes[0])};
});
LOOM_OP_REFERENCE("_linalg_trsm", [](const RefCall& c) {
  const Attrs& d = c.attrs.dict;
  auto A = split(c.in[0], 2), B = split(c.in[1], 2);
  std::vector<Mat> out;
  for (size_t b = 0; b < A.size(); ++b) {
    const Mat ti = inv(op_tri(A[b], d));
    const double alpha = dattr(d, "alpha", 1.0);
    out.push_back(battr(d, "rightside", false) ? mul(B[b], ti, alpha) : mul(ti, B[b], alpha));
  }
  return std::vector<NDArray>{join(out, c.out_shapes[0])};
});

// ---- Cholesky family ----
LOOM_OP_REFERENCE("_linalg_potrf", [](const RefCall& c) {
  const bool lower = battr(c.attrs.dict, "lower", true);
  std::vector<Mat> out;
  for (Mat a : split(c.in[0], 2)) {
    // The symmetric matrix of the referenced triangle; Cholesky-Banachiewicz.
    const int64_t n = rows(a);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        if (lower ? j > i : j < i) at(a, i, j) = at(a, j, i);
    Mat l = zeros(n, n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        double s = at(a, i, j);
        for (int64_t k = 0; k < j; ++k) s -= at(l, i, k) * at(l, j, k);
        at(l, i, j) = i == j ? std::sqrt(s) : s / at(l, j, j);
      }
    out.push_back(lower ? l : tr(l));
  }
  return std::vector<NDArray>{join(out, c.out_shapes[0])};
});
LOOM_OP_REFERENCE("_linalg_potri", [](const RefCall& c) {
  const bool lower = battr(c.attrs.dict, "lower", true);
  std::vector<Mat> out;
  for (const Mat& a : split(c.in[0], 2)) {
    const Mat t = tri(a, lower);
    out.push_back(inv(lower ? mul(t, tr(t)) : mul(tr(t), t)));
  }
  return std::vector<NDArray>{join(out, c.out_shapes[0])};
});
LOOM_OP_REFERENCE("_linalg_sumlogdiag", [](const RefCall& c) {
  std::vector<double> v;
  for (const Mat& a : split(c.in[0], 2)) {
    double s = 0;
    for (int64_t i = 0; i < rows(a); ++i) s += std::log(at(a, i, i));
    v.push_back(s);
  }
  return std::vector<NDArray>{scalars(v, c.out_shapes[0])};
});
LOOM_OP_REFERENCE("_linalg_syrk", [](const RefCall& c) {
  const bool t = battr(c.attrs.dict, "transpose", false);
  const double alpha = dattr(c.attrs.dict, "alpha", 1.0);
  std::vector<Mat> out;
  for (const Mat& a : split(c.in[0], 2)) out.push_back(t ? mul(tr(a), a, alpha) : mul(a, tr(a), alpha));
  return std::vector<NDArray>{join(out, c.out_shapes[0])};
});

// ---- gelqf: explicit Householder matrices, LAPACK's sign rule (beta = -sign(alpha) |x|) ----
void ref_lq(const Mat& a, Mat* q, Mat* l) {
  const int64_t m = rows(a), n = cols(a);
  Mat r = a;
  Mat qt = zeros(n, n);  // accumulated H_0 H_1 ... (A H_0 H_1 ... = [L 0])
  for (int64_t i = 0; i < n; ++i) at(qt, i, i) = 1;
  for (int64_t i = 0; i < m; ++i) {
    double xn = 0;
    for (int64_t k = i + 1; k < n; ++k) xn += at(r, i, k) * at(r, i, k);
    if (xn == 0) continue;
    const double alpha = at(r, i, i), beta = -(alpha >= 0 ? 1 : -1) * std::sqrt(alpha * alpha + xn);
    std::vector<double> v(static_cast<size_t>(n), 0.0);
    v[static_cast<size_t>(i)] = 1;
    for (int64_t k = i + 1; k < n; ++k) v[static_cast<size_t>(k)] = at(r, i, k) / (alpha - beta);
    const double tau = (beta - alpha) / beta;
    Mat h = zeros(n, n);
    for (int64_t x = 0; x < n; ++x)
      for (int64_t y = 0; y < n; ++y)
        at(h, x, y) = (x == y) - tau * v[static_cast<size_t>(x)] * v[static_cast<size_t>(y)];
    r = mul(r, h);
    qt = mul(qt, h);
  }
  *l = zeros(m, m);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j <= i; ++j) at(*l, i, j) = at(r, i, j);
  const Mat qf = tr(qt);  // A = [L 0] qt^T: Q is the first m rows of qt^T
  *q = zeros(m, n);
  for (int64_t i = 0; i < m; ++i) (*q)[static_cast<size_t>(i)] = qf[static_cast<size_t>(i)];
}
LOOM_OP_REFERENCE("_linalg_gelqf", [](const RefCall& c) {
  std::vector<Mat> qs, ls;
  for (const Mat& a : split(c.in[0], 2)) {
    Mat q, l;
    ref_lq(a, &q, &l);
    qs.push_back(q);
    ls.push_back(l);
  }
  return std::vector<NDArray>{join(qs, c.out_shapes[0]), join(ls, c.out_shapes[1])};
});

// ---- syevd: classical Jacobi (largest off-diagonal pivot first) ----
void ref_eig(Mat s, Mat* u, std::vector<double>* w) {
  const int64_t n = rows(s);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) at(s, i, j) = at(s, j, i);
  Mat v = zeros(n, n);
  for (int64_t i = 0; i < n; ++i) at(v, i, i) = 1;
  for (int it = 0; it < 1000; ++it) {
    int64_t p = 0, q = 1;
    double big = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j)
        if (std::fabs(at(s, i, j)) > big) big = std::fabs(at(s, i, j)), p = i, q = j;
    if (big < 1e-15) break;
    const double phi = 0.5 * std::atan2(2 * at(s, p, q), at(s, q, q) - at(s, p, p));
    Mat g = zeros(n, n);
    for (int64_t i = 0; i < n; ++i) at(g, i, i) = 1;
    at(g, p, p) = at(g, q, q) = std::cos(phi);
    at(g, p, q) = std::sin(phi);
    at(g, q, p) = -std::sin(phi);
    s = mul(tr(g), mul(s, g));
    v = mul(v, g);
  }
  std::vector<int64_t> ord(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ord[static_cast<size_t>(i)] = i;
  std::sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) { return at(s, a, a) < at(s, b, b); });
  *u = zeros(n, n);
  w->clear();
  for (int64_t r = 0; r < n; ++r) {
    const int64_t k = ord[static_cast<size_t>(r)];
    w->push_back(at(s, k, k));
    int64_t im = 0;
    for (int64_t i = 0; i < n; ++i)
      if (std::fabs(at(v, i, k)) > std::fabs(at(v, im, k))) im = i;
    for (int64_t i = 0; i < n; ++i) at(*u, r, i) = at(v, im, k) < 0 ? -at(v, i, k) : at(v, i, k);
  }
}
LOOM_OP_REFERENCE("_linalg_syevd", [](const RefCall& c) {
  std::vector<Mat> us, ls;
  for (const Mat& a : split(c.in[0], 2)) {
    Mat u;
    std::vector<double> w;
    ref_eig(a, &u, &w);
    us.push_back(u);
    ls.push_back(Mat{w});
  }
  return std::vector<NDArray>{join(us, c.out_shapes[0]), join(ls, c.out_shapes[1])};
});

// ---- inverse / det / slogdet ----
LOOM_OP_REFERENCE("_linalg_inverse", [](const RefCall& c) {
  std::vector<Mat> out;
  for (const Mat& a : split(c.in[0], 2)) out.push_back(inv(a));
  return std::vector<NDArray>{join(out, c.out_shapes[0])};
});
LOOM_OP_REFERENCE("_linalg_det", [](const RefCall& c) {
  std::vector<double> v;
  for (const Mat& a : split(c.in[0], 2)) v.push_back(det(a));
  return std::vector<NDArray>{scalars(v, c.out_shapes[0])};
});
LOOM_OP_REFERENCE("_linalg_slogdet", [](const RefCall& c) {
  std::vector<double> s, l;
  for (const Mat& a : split(c.in[0], 2)) {
    const double d = det(a);
    s.push_back(d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0));
    l.push_back(std::log(std::fabs(d)));
  }
  return std::vector<NDArray>{scalars(s, c.out_shapes[0]), scalars(l, c.out_shapes[1])};
});

// ---- diagonals and triangles ----
int offset(const RefCall& c) { return std::stoi(attr(c.attrs.dict, "offset", "0")); }
LOOM_OP_REFERENCE("_linalg_extractdiag", [](const RefCall& c) {
  const int k = offset(c);
  std::vector<Mat> out;
  for (const Mat& a : split(c.in[0], 2)) {
    Mat d = zeros(1, rows(a) - std::abs(k));
    for (int64_t i = 0; i < rows(a); ++i)
      for (int64_t j = 0; j < rows(a); ++j)
        if (j - i == k) at(d, 0, std::min(i, j)) = at(a, i, j);
    out.push_back(d);
  }
  return std::vector<NDArray>{join(out, c.out_shapes[0])};
});
LOOM_OP_REFERENCE("_linalg_makediag", [](const RefCall& c) {
  const int k = offset(c);
  std::vector<Mat> out;
  for (const Mat& v : split(c.in[0], 1)) {
    const int64_t n = cols(v) + std::abs(k);
    Mat a = zeros(n, n);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        if (j - i == k) at(a, i, j) = at(v, 0, std::min(i, j));
    out.push_back(a);
  }
  return std::vector<NDArray>{join(out, c.out_shapes[0])};
});
// Packed order: the lower triangle (shifted down by |k|) row by row; the upper triangle is
// packed as the lower triangle of the transpose.
std::vector<std::pair<int64_t, int64_t>> packed_cells(int64_t n, int k, bool lower) {
  const bool up = k > 0 || (k == 0 && !lower);
  const int64_t s = std::abs(k);
  std::vector<std::pair<int64_t, int64_t>> cells;
  for (int64_t r = s; r < n; ++r)
    for (int64_t c = 0; c <= r - s; ++c) cells.push_back(up ? std::make_pair(c, r) : std::make_pair(r, c));
  return cells;
}
LOOM_OP_REFERENCE("_linalg_extracttrian", [](const RefCall& c) {
  const int k = offset(c);
  const bool lower = battr(c.attrs.dict, "lower", true);
  std::vector<Mat> out;
  for (const Mat& a : split(c.in[0], 2)) {
    const auto cells = packed_cells(rows(a), k, lower);
    Mat v = zeros(1, static_cast<int64_t>(cells.size()));
    for (size_t t = 0; t < cells.size(); ++t)
      at(v, 0, static_cast<int64_t>(t)) = at(a, cells[t].first, cells[t].second);
    out.push_back(v);
  }
  return std::vector<NDArray>{join(out, c.out_shapes[0])};
});
LOOM_OP_REFERENCE("_linalg_maketrian", [](const RefCall& c) {
  const int k = offset(c);
  const bool lower = battr(c.attrs.dict, "lower", true);
  const int64_t n = c.out_shapes[0][c.out_shapes[0].ndim() - 1];
  std::vector<Mat> out;
  for (const Mat& v : split(c.in[0], 1)) {
    const auto cells = packed_cells(n, k, lower);
    Mat a = zeros(n, n);
    for (size_t t = 0; t < cells.size(); ++t)
      at(a, cells[t].first, cells[t].second) = at(v, 0, static_cast<int64_t>(t));
    out.push_back(a);
  }
  return std::vector<NDArray>{join(out, c.out_shapes[0])};
});

// ---------------------------------------------------------------- direct tests (float64)

NDArray f64(const Shape& s, const std::vector<double>& v) {
  NDArray a(s, DType::kFloat64);
  std::copy(v.begin(), v.end(), a.data<double>());
  return a;
}
void expect_near(const NDArray& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got.at(i), want[static_cast<size_t>(i)], tol) << "element " << i;
}

// MXNet's test_laop matrices.
const std::vector<double> kMatrix = {9, 3, -6, 12, 3, 26, -7, -11, -6, -7, 9, 7, 12, -11, 7, 65};
const std::vector<double> kTrian = {3, 0, 0, 0, 1, 5, 0, 0, -2, -1, 2, 0, 4, -3, 6, 2};
const std::vector<double> kInv = {8.95 / 3, 0.05 / 3, 2.65, -2.5 / 3, 0.05 / 3, 0.05, 0.05, 0,
                                  2.65, 0.05, 2.5, -0.75, -2.5 / 3, 0, -0.75, 0.25};

TEST(LinalgOps, PotrfPotriFloat64) {
  ImperativeOp potrf("_linalg_potrf", {}, {Shape{4, 4}}, {DType::kFloat64});
  expect_near(potrf.forward({f64(Shape{4, 4}, kMatrix)})[0], kTrian, 1e-12);
  ImperativeOp potrf_u("_linalg_potrf", {{"lower", "False"}}, {Shape{4, 4}}, {DType::kFloat64});
  std::vector<double> up(16);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) up[static_cast<size_t>(i * 4 + j)] = kTrian[static_cast<size_t>(j * 4 + i)];
  expect_near(potrf_u.forward({f64(Shape{4, 4}, kMatrix)})[0], up, 1e-12);
  ImperativeOp potri("_linalg_potri", {}, {Shape{4, 4}}, {DType::kFloat64});
  expect_near(potri.forward({f64(Shape{4, 4}, kTrian)})[0], kInv, 1e-12);
}

TEST(LinalgOps, PotrfRejectsIndefinite) {
  ImperativeOp potrf("_linalg_potrf", {}, {Shape{2, 2}});
  NDArray a(Shape{2, 2});
  const float v[] = {1, 2, 2, 1};
  std::copy(v, v + 4, a.data<float>());
  try {
    potrf.forward({a});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("positive definite"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("_linalg_potrf"), std::string::npos) << e.what();
  }
}

TEST(LinalgOps, SyevdMatchesMXNet) {
  // MXNet's test_laop_4.
  ImperativeOp op("_linalg_syevd", {}, {Shape{2, 2}}, {DType::kFloat64});
  auto out = op.forward({f64(Shape{2, 2}, {1, 2, 2, 4})});
  expect_near(out[0], {0.89442718, -0.44721359, 0.44721359, 0.89442718}, 1e-7);
  expect_near(out[1], {0, 5}, 1e-12);
}

TEST(LinalgOps, GelqfReconstructs) {
  const std::vector<double> a = {1, -2, 3, 0.5, 4, -1, 2, 2};
  ImperativeOp op("_linalg_gelqf", {}, {Shape{2, 4}}, {DType::kFloat64});
  auto out = op.forward({f64(Shape{2, 4}, a)});
  const NDArray &q = out[0], &l = out[1];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int k = 0; k < 2; ++k) s += l.at(i * 2 + k) * q.at(k * 4 + j);
      EXPECT_NEAR(s, a[static_cast<size_t>(i * 4 + j)], 1e-12);
    }
  EXPECT_EQ(l.at(1), 0.0);
  // LAPACK's sign: L_00 = -sign(a_00) * |row 0|.
  EXPECT_NEAR(l.at(0), -std::sqrt(1 + 4 + 9 + 0.25), 1e-12);
}

TEST(LinalgOps, DetSlogdetFloat64) {
  ImperativeOp d("_linalg_det", {}, {Shape{2, 2, 2}}, {DType::kFloat64});
  const auto in = f64(Shape{2, 2, 2}, {1, 2, 3, 4, 0, 1, 1, 0});
  expect_near(d.forward({in})[0], {-2, -1}, 1e-12);
  ImperativeOp s("_linalg_slogdet", {}, {Shape{2, 2, 2}}, {DType::kFloat64});
  auto out = s.forward({in});
  expect_near(out[0], {-1, -1}, 0);
  expect_near(out[1], {std::log(2.0), 0}, 1e-12);
  EXPECT_EQ(d.out_shapes()[0], (Shape{2}));
  ImperativeOp d2("_linalg_det", {}, {Shape{3, 3}});
  EXPECT_EQ(d2.out_shapes()[0], (Shape{1}));
}

// Gradient of sum(R * f(A)) along a symmetric perturbation E (E_ij = E_ji = 1), against the
// kernel's gradient G: d/dt = sum(G * E) = G_ij + G_ji (i != j).
void check_symmetric_grad(const std::string& op, const Attrs& attrs, const std::vector<double>& a,
                          int64_t n) {
  const Shape s{n, n};
  ImperativeOp inst(op, attrs, {s}, {DType::kFloat64});
  std::vector<NDArray> heads;
  uint32_t seed = 7;
  auto rnd = [&]() { seed = seed * 1103515245u + 12345u; return ((seed >> 8) % 2000) / 1000.0 - 1.0; };
  auto out = inst.forward({f64(s, a)});
  for (auto& o : out) {
    NDArray h(o.shape(), DType::kFloat64);
    for (int64_t i = 0; i < h.size(); ++i) h.data<double>()[i] = rnd();
    heads.push_back(h);
  }
  auto proj = [&](const std::vector<double>& x) {
    auto y = inst.forward({f64(s, x)});
    double acc = 0;
    for (size_t k = 0; k < y.size(); ++k)
      for (int64_t i = 0; i < y[k].size(); ++i) acc += y[k].at(i) * heads[k].at(i);
    return acc;
  };
  NDArray g(s, DType::kFloat64);
  inst.backward(heads, {f64(s, a)}, out, {Req::kWrite}, {g});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      const double h = 1e-6;
      auto xp = a, xm = a;
      for (auto* x : {&xp, &xm}) {
        const double d = x == &xp ? h : -h;
        (*x)[static_cast<size_t>(i * n + j)] += d;
        if (i != j) (*x)[static_cast<size_t>(j * n + i)] += d;
      }
      const double num = (proj(xp) - proj(xm)) / (2 * h);
      const double ana = g.at(i * n + j) + (i != j ? g.at(j * n + i) : 0.0);
      EXPECT_NEAR(ana, num, 1e-6 + 1e-5 * std::fabs(num)) << op << " entry " << i << "," << j;
    }
}

TEST(LinalgOps, PotrfGradientSymmetric) {
  check_symmetric_grad("_linalg_potrf", {}, kMatrix, 4);
  check_symmetric_grad("_linalg_potrf", {{"lower", "False"}}, kMatrix, 4);
}

TEST(LinalgOps, SyevdGradientSymmetric) {
  check_symmetric_grad("_linalg_syevd", {}, {2, 1, 0.5, 1, -3, 0.2, 0.5, 0.2, 5}, 3);
}

// A batch large enough for the parallel loop: every matrix equals its own single-matrix run,
// and a failing matrix inside the parallel region still raises the op's error.
TEST(LinalgOps, ParallelBatchMatchesSingleAndRethrows) {
  const int64_t nb = 64, n = 16;
  std::vector<double> all;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        all.push_back(i == j ? n + 1.0 + b : 1.0 / (1.0 + static_cast<double>(i + j + b)));
  ImperativeOp batch("_linalg_potrf", {}, {Shape{nb, n, n}}, {DType::kFloat64});
  const NDArray out = batch.forward({f64(Shape{nb, n, n}, all)})[0];
  ImperativeOp one("_linalg_potrf", {}, {Shape{n, n}}, {DType::kFloat64});
  for (int64_t b : {int64_t{0}, int64_t{37}, nb - 1}) {
    const std::vector<double> m(all.begin() + b * n * n, all.begin() + (b + 1) * n * n);
    const NDArray r = one.forward({f64(Shape{n, n}, m)})[0];
    for (int64_t k = 0; k < n * n; ++k) ASSERT_EQ(out.at(b * n * n + k), r.at(k)) << b << " " << k;
  }
  all[static_cast<size_t>(40 * n * n)] = -1.0;  // matrix 40 is no longer positive definite
  EXPECT_THROW(batch.forward({f64(Shape{nb, n, n}, all)}), Error);
}

}  // namespace
}  // namespace loom::test
