"""mx.nd.linalg / mx.sym.linalg (the _linalg_* operators): values from MXNet 1.9.1's own
tests, float32 and float64, batching, aliases, gradients by finite differences."""
import numpy as np
import pytest

import loom as mx
from loom.test_utils import (check_numeric_gradient, check_symbolic_backward,
                             check_symbolic_forward)

MATRIX = np.array([[9., 3., -6., 12.], [3., 26., -7., -11.], [-6., -7., 9., 7.],
                   [12., -11., 7., 65.]])
TRIAN = np.array([[3., 0., 0., 0.], [1., 5., 0., 0.], [-2., -1., 2., 0.], [4., -3., 6., 2.]])
INV = np.array([[8.95 / 3., 0.05 / 3., 2.65, -2.5 / 3.], [0.05 / 3., 0.05, 0.05, 0.],
                [2.65, 0.05, 2.5, -0.75], [-2.5 / 3., 0., -0.75, 0.25]])


def rep_3x(a, m, n):
    return np.reshape(np.tile(np.array(a).flatten(), 3), (3, 1, m, n))


def symm(a, ndims):
    axes = list(range(ndims))
    axes[-1], axes[-2] = ndims - 2, ndims - 1
    return 0.5 * (a + mx.sym.transpose(a, axes=tuple(axes)))


def fw_grad(sym, location, expected, dtype=np.float64, grad=True):
    check_symbolic_forward(sym, location, expected, rtol=1e-7, atol=1e-9, dtype=dtype)
    if grad:
        check_numeric_gradient(sym, location, numeric_eps=2e-6, rtol=1e-5, atol=1e-5,
                               dtype=dtype)


@pytest.mark.parametrize("lower", [True, False])
def test_laop_cholesky_family(lower):
    """MXNet's test_laop, with the triangle masks dropped: the ops read only the referenced
    triangle and give the other one a zero gradient, so the mask changes nothing."""
    d1, d2 = mx.sym.var("data1"), mx.sym.var("data2")
    upper = not lower
    trian = TRIAN if lower else TRIAN.T
    fw_grad(mx.sym.linalg.potrf(symm(d1, 4), lower=lower), [rep_3x(MATRIX, 4, 4)],
            [rep_3x(trian, 4, 4)])
    a = rep_3x(trian, 4, 4)
    fw_grad(mx.sym.linalg.potri(d1, lower=lower), [a], [rep_3x(INV, 4, 4)])
    b = rep_3x(MATRIX, 4, 4)
    fw_grad(mx.sym.linalg.trsm(d1, d2, alpha=7., transpose=upper, lower=lower), [a, b],
            [rep_3x(7. * TRIAN.T, 4, 4)])
    fw_grad(mx.sym.linalg.trsm(d1, d2, alpha=-2., rightside=True, transpose=lower, lower=lower),
            [a, b], [rep_3x(-2. * TRIAN, 4, 4)])
    fw_grad(mx.sym.linalg.trmm(d1, d2, alpha=7., transpose=True, rightside=True, lower=lower),
            [a, b], [rep_3x(7. * np.dot(MATRIX, trian.T), 4, 4)])
    fw_grad(mx.sym.linalg.trmm(d1, d2, alpha=-2., lower=lower), [a, b],
            [rep_3x(-2. * np.dot(trian, MATRIX), 4, 4)])
    fw_grad(mx.sym.linalg.trmm(d1, d2, rightside=True, lower=lower), [a, b],
            [rep_3x(np.dot(MATRIX, trian), 4, 4)])
    pw = np.diag([2., 4., 8., 16.]) + (1 - np.eye(4))
    fw_grad(mx.sym.linalg.sumlogdiag(d1), [rep_3x(pw, 4, 4)],
            [np.tile(10. * np.log(2.), 3).reshape(3, 1)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nd_linalg_values(dtype):
    nd = mx.nd
    a = nd.array(MATRIX, dtype=dtype)
    l = nd.linalg.potrf(a)
    assert l.dtype == dtype
    np.testing.assert_allclose(l.asnumpy(), TRIAN, rtol=1e-5)
    np.testing.assert_allclose(nd.linalg.potri(l).asnumpy(), INV, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(nd.linalg.inverse(a).asnumpy(), np.linalg.inv(MATRIX),
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(nd.linalg.det(a).asnumpy(), [np.linalg.det(MATRIX)], rtol=1e-5)
    sign, logabs = nd.linalg.slogdet(a)
    assert sign.asnumpy()[0] == 1
    np.testing.assert_allclose(logabs.asnumpy(), [np.log(np.linalg.det(MATRIX))], rtol=1e-5)
    np.testing.assert_allclose(nd.linalg.syrk(nd.array(TRIAN, dtype=dtype)).asnumpy(), MATRIX,
                               rtol=1e-6)
    u, lam = nd.linalg.syevd(nd.array([[1., 2.], [2., 4.]], dtype=dtype))
    np.testing.assert_allclose(u.asnumpy(), [[0.89442718, -0.44721359],
                                             [0.44721359, 0.89442718]], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lam.asnumpy(), [0., 5.], atol=1e-5)
    x = np.random.RandomState(0).randn(2, 3, 5)
    q, lq = nd.linalg.gelqf(nd.array(x, dtype=dtype))
    np.testing.assert_allclose(np.matmul(lq.asnumpy(), q.asnumpy()), x, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.matmul(q.asnumpy(), q.asnumpy().transpose(0, 2, 1)),
                               np.tile(np.eye(3), (2, 1, 1)), atol=1e-5)


def test_aliases_and_gemm_axis():
    x = np.random.RandomState(1).randn(3, 2, 4)
    y = np.random.RandomState(2).randn(4, 2, 5)
    c = np.random.RandomState(3).randn(3, 2, 5)
    out = mx.nd.linalg_gemm(mx.nd.array(x), mx.nd.array(y), mx.nd.array(c), alpha=2., beta=0.5,
                            axis=0)
    want = 2. * np.einsum("ibk,kbj->ibj", x, y) + 0.5 * c
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-5, atol=1e-5)
    out2 = mx.nd.linalg.gemm2(mx.nd.array(x.transpose(1, 0, 2)), mx.nd.array(y.transpose(1, 0, 2)),
                              transpose_a=False)
    np.testing.assert_allclose(out2.asnumpy(), np.matmul(x.transpose(1, 0, 2), y.transpose(1, 0, 2)),
                               rtol=1e-5, atol=1e-5)


def test_det_inverse_gradients():
    """MXNet's test_laop_6 (skipped there for a crash) on Loom."""
    v = np.random.RandomState(4).random_sample(4)
    a = np.tile(np.eye(4) + np.outer(v, v), (3, 1, 1))
    data = mx.sym.var("data")
    check_symbolic_forward(mx.sym.linalg.gemm2(data, mx.sym.linalg.inverse(data)), [a],
                           [np.tile(np.eye(4), (3, 1, 1))], rtol=1e-7, atol=1e-9, dtype=np.float64)
    check_numeric_gradient(mx.sym.linalg.inverse(data), [a], numeric_eps=1e-6, rtol=1e-4,
                           atol=1e-6, dtype=np.float64)
    check_symbolic_forward(mx.sym.linalg.det(data), [a], [np.linalg.det(a)], rtol=1e-7,
                           atol=1e-9, dtype=np.float64)
    check_numeric_gradient(mx.sym.linalg.det(data), [a], numeric_eps=1e-6, rtol=1e-4, atol=1e-6,
                           dtype=np.float64)
    sign, logabs = mx.sym.linalg.slogdet(data)
    perm = np.eye(4)[[1, 0, 2, 3]]
    check_symbolic_forward(sign, [np.matmul(a, perm)], [-np.ones(3)], dtype=np.float64)
    check_symbolic_forward(logabs, [a], [np.log(np.abs(np.linalg.det(a)))], rtol=1e-7, atol=1e-9,
                           dtype=np.float64)
    check_numeric_gradient(logabs, [a], numeric_eps=1e-6, rtol=1e-4, atol=1e-6, dtype=np.float64)


def test_grad_req_add_doubles():
    x = np.random.RandomState(5).randn(2, 3, 4)
    data = mx.sym.var("data")
    sym = mx.sym.linalg.syrk(data, alpha=0.5)
    g = np.random.RandomState(6).randn(2, 3, 3)
    want = 0.5 * (np.matmul(g, x) + np.matmul(g.transpose(0, 2, 1), x))
    check_symbolic_backward(sym, [x], [g], [want], rtol=1e-5, atol=1e-6)
    exe = sym.simple_bind(mx.cpu(), data=x.shape, grad_req="add")
    exe.arg_dict["data"][:] = x
    exe.grad_dict["data"][:] = 1.0
    exe.forward(is_train=True)
    exe.backward([mx.nd.array(g)])
    exe.forward(is_train=True)
    exe.backward([mx.nd.array(g)])
    np.testing.assert_allclose(exe.grad_dict["data"].asnumpy(), 1 + 2 * want, rtol=1e-5, atol=1e-5)


def test_errors_name_the_op():
    with pytest.raises(mx.base.MXNetError, match="positive definite"):
        mx.nd.linalg.potrf(mx.nd.array([[1., 2.], [2., 1.]])).asnumpy()
    with pytest.raises(mx.base.MXNetError, match="square"):
        mx.nd.linalg.inverse(mx.nd.ones((2, 3))).asnumpy()
    with pytest.raises(mx.base.MXNetError, match="triangular number"):
        mx.nd.linalg.maketrian(mx.nd.ones((2, 4))).asnumpy()
