"""Arithmetic, casts, creation and reductions on every MXNet dtype, against NumPy references
that follow MXNet 1.9.1's semantics (output dtype = input dtype; integer division truncates;
a scalar converts to the array's dtype first; float16 computes in float32 and rounds)."""
import numpy as np
import pytest

FLOATS = ["float32", "float64", "float16"]
INTS = ["uint8", "int8", "int32", "int64"]
ALL = FLOATS + INTS


def _data(dtype, positive=False, n=12, seed=0):
    rng = np.random.RandomState(seed)
    if dtype in INTS:
        lo = 1 if positive or dtype == "uint8" else -9
        return rng.randint(lo, 10, size=n).astype(dtype).reshape(3, 4)
    lo = 0.5 if positive else -2.0
    return rng.uniform(lo, 2.0, size=n).astype(dtype).reshape(3, 4)


def _close(got, want, dtype):
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    if dtype in INTS:
        np.testing.assert_array_equal(got, want.astype(dtype))
    else:
        rtol = {"float64": 1e-12, "float32": 2e-6, "float16": 2e-3}[dtype]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                                   atol=rtol)


def _tdiv(a, b):
    # MXNet's integer division: truncation toward zero
    return np.trunc(a.astype(np.float64) / b.astype(np.float64))


@pytest.mark.parametrize("dtype", ALL)
def test_creation_and_fill(mx, dtype):
    for fn, v in ((mx.nd.zeros, 0), (mx.nd.ones, 1)):
        a = fn((2, 3), dtype=dtype)
        assert a.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(a.asnumpy(), np.full((2, 3), v, dtype))
    a = mx.nd.full((2,), 7, dtype=dtype)
    assert a.dtype == np.dtype(dtype) and a.asnumpy().tolist() == [7, 7]
    a[:] = 5
    np.testing.assert_array_equal(a.asnumpy(), np.full((2,), 5, dtype))


def test_fill_converts_as_mxnet(mx):
    assert mx.nd.full((2,), -1, dtype="uint8").asnumpy().tolist() == [255, 255]
    assert mx.nd.full((2,), 300, dtype="int8").asnumpy().tolist() == [44, 44]
    assert mx.nd.full((2,), 7.9, dtype="int32").asnumpy().tolist() == [7, 7]
    assert mx.nd.full((1,), 2049, dtype="float16").asnumpy().tolist() == [2048.0]


@pytest.mark.parametrize("src", ALL)
@pytest.mark.parametrize("dst", ALL)
def test_astype_every_pair(mx, src, dst):
    x = _data(src)
    got = mx.nd.array(x, dtype=src).astype(dst).asnumpy()
    assert got.dtype == np.dtype(dst)
    np.testing.assert_array_equal(got, x.astype(dst))


def test_cast_float_to_narrow_ints_wraps_as_mxnet(mx):
    x = mx.nd.array([1.7, -1.7, 300, -300], dtype="float32")
    assert x.astype("uint8").asnumpy().tolist() == [1, 255, 44, 212]
    assert x.astype("int8").asnumpy().tolist() == [1, -1, 44, -44]
    assert x.astype("int32").asnumpy().tolist() == [1, -1, 300, -300]
    h = mx.nd.array([2049, 2051, 65519, 65520], dtype="float32").astype("float16").asnumpy()
    assert h.tolist() == [2048.0, 2052.0, 65504.0, float("inf")]


@pytest.mark.parametrize("dtype", ALL)
def test_binary_same_shape_and_broadcast(mx, dtype):
    a = _data(dtype, seed=1)
    b = _data(dtype, positive=True, seed=2)
    A, B = mx.nd.array(a, dtype=dtype), mx.nd.array(b, dtype=dtype)
    f64 = lambda x: x.astype(np.float64)
    is_int = dtype in INTS
    cases = [
        (A + B, f64(a) + f64(b)),
        (A - B, f64(a) - f64(b)),
        (A * B, f64(a) * f64(b)),
        (A / B, _tdiv(a, b) if is_int else f64(a) / f64(b)),
        (mx.nd.maximum(A, B), np.maximum(f64(a), f64(b))),
        (mx.nd.minimum(A, B), np.minimum(f64(a), f64(b))),
    ]
    for got, want in cases:
        _close(got.asnumpy(), want.astype(dtype), dtype)
    row = mx.nd.array(b[:1], dtype=dtype)  # (1, 4) broadcast
    _close(mx.nd.broadcast_add(A, row).asnumpy(), (f64(a) + f64(b[:1])).astype(dtype), dtype)
    _close(mx.nd.broadcast_mul(A, row).asnumpy(), (f64(a) * f64(b[:1])).astype(dtype), dtype)
    want = _tdiv(a, b[:1]) if is_int else f64(a) / f64(b[:1])
    _close(mx.nd.broadcast_div(A, row).asnumpy(), want.astype(dtype), dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_scalar_ops(mx, dtype):
    a = _data(dtype, positive=True, seed=3)
    A = mx.nd.array(a, dtype=dtype)
    f64 = a.astype(np.float64)
    # MXNet converts the scalar to the array's dtype first: int32 * 2.5 multiplies by 2
    s = float(np.array(2.5).astype(dtype))
    is_int = dtype in INTS
    cases = [
        (A + 2.5, f64 + s),
        (A - 2.5, f64 - s),
        (2.5 - A, s - f64),
        (A * 2.5, f64 * s),
        (A / 2.5, np.trunc(f64 / s) if is_int else f64 / s),
        (2.5 / A, np.trunc(s / f64) if is_int else s / f64),
    ]
    for got, want in cases:
        _close(got.asnumpy(), want.astype(dtype), dtype)
    if is_int:
        assert (A ** 2).asnumpy().tolist() == (a.astype(np.int64) ** 2).astype(dtype).tolist()


def test_int_scalar_examples_match_mxnet(mx):
    a = mx.nd.ones((2, 3), dtype="int32") * 3
    assert a.dtype == np.int32 and a.asnumpy().tolist() == [[3, 3, 3], [3, 3, 3]]
    b = mx.nd.array([7, -7, 3, 0], dtype="int32")
    assert (b / 2).asnumpy().tolist() == [3, -3, 1, 0]
    assert (b * 2.5).asnumpy().tolist() == [14, -14, 6, 0]
    u = mx.nd.array([3, 250], dtype="uint8")
    assert (-u).asnumpy().tolist() == [253, 6]
    assert (u + 10).asnumpy().tolist() == [13, 4]


def test_mixed_dtypes_rejected(mx):
    with pytest.raises(mx.base.MXNetError if hasattr(mx, "base") else Exception) as e:
        mx.nd.elemwise_add(mx.nd.ones(2, dtype="int32"), mx.nd.ones(2))
    msg = str(e.value)
    assert "elemwise_add" in msg and "int32" in msg and "float32" in msg


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_float(mx, dtype):
    a = _data(dtype, positive=True, seed=4)
    A = mx.nd.array(a, dtype=dtype)
    f64 = a.astype(np.float64)
    for name, ref in (("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("square", np.square),
                      ("abs", np.abs), ("negative", np.negative), ("sign", np.sign),
                      ("tanh", np.tanh), ("sin", np.sin)):
        got = getattr(mx.nd, name)(A).asnumpy()
        _close(got, ref(f64).astype(dtype), dtype)


@pytest.mark.parametrize("dtype", INTS)
def test_unary_int(mx, dtype):
    a = _data(dtype, seed=5)
    A = mx.nd.array(a, dtype=dtype)
    i64 = a.astype(np.int64)
    for name, ref in (("abs", np.abs), ("negative", np.negative), ("sign", np.sign),
                      ("square", np.square)):
        got = getattr(mx.nd, name)(A).asnumpy()
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, ref(i64).astype(dtype))


@pytest.mark.parametrize("dtype", ALL)
def test_reductions(mx, dtype):
    a = _data(dtype, positive=True, seed=6)
    if dtype in INTS:
        a = (a % 3 + 1).astype(dtype)  # small values: prod does not wrap
    A = mx.nd.array(a, dtype=dtype)
    f64 = a.astype(np.float64)
    for name, ref in (("sum", np.sum), ("max", np.max), ("min", np.min), ("prod", np.prod)):
        for axis in (None, 1):
            kw = {} if axis is None else {"axis": axis}
            got = getattr(mx.nd, name)(A, **kw).asnumpy()
            want = np.atleast_1d(ref(f64, axis=axis))
            _close(got, want.astype(dtype), dtype)
    mean = mx.nd.mean(A, axis=1).asnumpy()
    want = np.trunc(f64.sum(1) / 4) if dtype in INTS else f64.mean(1)
    _close(mean, want.astype(dtype), dtype)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_executor_gradient_float(mx, dtype):
    a = _data(dtype, positive=True, seed=7)
    x = mx.sym.var("x")
    y = mx.sym.sum(x * x + 2 * x - mx.sym.broadcast_mul(x, mx.sym.var("w")))
    w = _data(dtype, positive=True, seed=8)[:1]
    ex = y.simple_bind(mx.cpu(), x=(3, 4), w=(1, 4), type_dict={"x": dtype, "w": dtype})
    ex.arg_dict["x"][:] = a
    ex.arg_dict["w"][:] = w
    for _ in range(2):  # twice: gradients are overwritten (grad_req write)
        ex.forward(is_train=True)
        ex.backward(mx.nd.ones((1,), dtype=dtype))
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    assert ex.outputs[0].dtype == np.dtype(dtype)
    _close(ex.outputs[0].asnumpy(), np.atleast_1d((a64 * a64 + 2 * a64 - a64 * w64).sum()).astype(dtype),
           dtype) if dtype == "float64" else None
    assert ex.grad_dict["x"].dtype == np.dtype(dtype)
    _close(ex.grad_dict["x"].asnumpy(), (2 * a64 + 2 - w64).astype(dtype), dtype)
    _close(ex.grad_dict["w"].asnumpy(), (-a64.sum(0, keepdims=True)).astype(dtype), dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_comparisons_return_input_dtype(mx, dtype):
    a = _data(dtype, seed=9)
    b = a.copy()
    b[:, 1] = _data(dtype, seed=10)[:, 1]
    A, B = mx.nd.array(a, dtype=dtype), mx.nd.array(b, dtype=dtype)
    for name, ref in (("equal", np.equal), ("not_equal", np.not_equal), ("greater", np.greater),
                      ("greater_equal", np.greater_equal), ("lesser", np.less),
                      ("lesser_equal", np.less_equal), ("logical_and", np.logical_and),
                      ("logical_or", np.logical_or), ("logical_xor", np.logical_xor)):
        fn = getattr(mx.nd, name)
        got = fn(A, B).asnumpy()
        assert got.dtype == np.dtype(dtype), name
        np.testing.assert_array_equal(got, ref(a, b).astype(dtype))
        got = fn(A, mx.nd.array(b[:1], dtype=dtype)).asnumpy()  # broadcast
        np.testing.assert_array_equal(got, ref(a, b[:1]).astype(dtype))
        got = fn(A, 1).asnumpy()  # scalar
        np.testing.assert_array_equal(got, ref(a, np.array(1, dtype)).astype(dtype))


def test_comparison_scalar_converts_to_dtype_as_mxnet(mx):
    a = mx.nd.array([2, 3], dtype="int32")
    # MXNet 1.9.1: the scalar becomes int32 first, so 2.5 compares as 2
    assert mx.nd.equal(a, 2.5).asnumpy().tolist() == [1, 0]
    assert mx.nd.greater(a, 2.5).asnumpy().tolist() == [0, 1]


def test_clip_int_as_mxnet(mx):
    a = mx.nd.array([7, -3, 0], dtype="int32")
    got = mx.nd.clip(a, -1.5, 4.5)
    assert got.dtype == np.int32 and got.asnumpy().tolist() == [4, -1, 0]
