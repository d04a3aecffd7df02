"""MXNet 1.x mx.nd / mx.sym Python-level functions found missing by running MXNet's own unit
tests against Loom (tests/mxnet_suite): elementwise functions over numbers and arrays,
moveaxis, onehot_encode, linspace, eye, from_numpy, %, fluent methods, _internal."""
import numpy as np
import pytest


@pytest.mark.parametrize("name,ref", [
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
    ("divide", np.true_divide), ("power", np.power), ("maximum", np.maximum),
    ("minimum", np.minimum), ("hypot", np.hypot), ("equal", np.equal),
    ("not_equal", np.not_equal), ("greater", np.greater), ("greater_equal", np.greater_equal),
    ("lesser", np.less), ("lesser_equal", np.less_equal), ("logical_and", np.logical_and),
    ("logical_or", np.logical_or), ("logical_xor", np.logical_xor),
])
def test_elementwise_functions(mx, name, ref):
    rng = np.random.RandomState(1)
    a = np.round(rng.uniform(0.5, 3, (2, 3)), 1).astype(np.float32)
    b = np.round(rng.uniform(0.5, 3, (2, 1)), 1).astype(np.float32)
    a[0, 0] = b[0, 0]
    f = getattr(mx.nd, name)
    want = ref(a, b).astype(np.float32)
    got = f(mx.nd.array(a), mx.nd.array(b))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5)
    np.testing.assert_allclose(f(mx.nd.array(a), 2.0).asnumpy(),
                               ref(a, np.float32(2.0)).astype(np.float32), rtol=1e-5)
    np.testing.assert_allclose(f(2.0, mx.nd.array(a)).asnumpy(),
                               ref(np.float32(2.0), a).astype(np.float32), rtol=1e-5)
    assert f(2.0, 3.0) == ref(2.0, 3.0)


def test_modulo_follows_the_divisor_sign_and_zero(mx):
    a = np.array([7, -7, 7, -7, 5], dtype=np.float32)
    b = np.array([3, 3, -3, -3, 0], dtype=np.float32)
    got = mx.nd.modulo(mx.nd.array(a), mx.nd.array(b)).asnumpy()
    np.testing.assert_array_equal(got, [1, 2, -2, -1, 0])
    np.testing.assert_array_equal((mx.nd.array(a) % 3).asnumpy(), [1, 2, 1, 2, 2])
    np.testing.assert_array_equal((10 % mx.nd.array([3, 4])).asnumpy(), [1, 2])
    x = mx.nd.array([5, 6])
    x %= 4
    np.testing.assert_array_equal(x.asnumpy(), [1, 2])


def test_moveaxis_matches_numpy(mx):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for src, dst in [(0, 2), (2, 0), (-1, 0), ([0, 1], [-1, -2]), ([0, 2], [1, 0])]:
        got = mx.nd.moveaxis(mx.nd.array(x), src, dst).asnumpy()
        np.testing.assert_array_equal(got, np.moveaxis(x, src, dst))
    for src, dst in [(3, 0), (-4, 0), (0, 5), ([0, 0], [0, 1]), ([0, 1], [1, 1]),
                     (0, [0, 1]), ([0, 1], [0])]:
        with pytest.raises(ValueError):
            mx.nd.moveaxis(mx.nd.array(x), src, dst)


def test_onehot_encode_linspace_eye_from_numpy(mx):
    out = mx.nd.zeros((3, 4))
    res = mx.nd.onehot_encode(mx.nd.array([0, 3, 1]), out=out)
    assert res is out
    np.testing.assert_array_equal(out.asnumpy(), np.eye(4)[[0, 3, 1]])
    np.testing.assert_allclose(mx.nd.linspace(0, 1, 5).asnumpy(), np.linspace(0, 1, 5))
    np.testing.assert_allclose(mx.nd.linspace(0, 1, 4, endpoint=False).asnumpy(),
                               np.linspace(0, 1, 4, endpoint=False))
    li = mx.nd.linspace(0, 10, 4, dtype="int32")
    assert li.dtype == np.int32
    np.testing.assert_array_equal(li.asnumpy(), np.linspace(0, 10, 4, dtype="int32"))
    np.testing.assert_array_equal(mx.nd.eye(3, 4, 1).asnumpy(), np.eye(3, 4, 1))
    np.testing.assert_array_equal(mx.nd.eye(3, k=-1).asnumpy(), np.eye(3, k=-1))
    src = np.arange(6, dtype=np.int32).reshape(2, 3)
    a = mx.nd.from_numpy(src)
    assert a.dtype == np.int32 and a.shape == (2, 3)
    np.testing.assert_array_equal(a.asnumpy(), src)


def test_fluent_methods_and_internal(mx):
    x = np.array([[1.0, -4.0, 2.0], [0.5, 3.0, -1.0]], dtype=np.float32)
    a = mx.nd.array(x)
    np.testing.assert_array_equal(a.argmax(axis=1).asnumpy(), x.argmax(axis=1))
    np.testing.assert_allclose(a.norm().asnumpy(), [np.linalg.norm(x)], rtol=1e-6)
    np.testing.assert_allclose(a.sin().asnumpy(), np.sin(x), rtol=1e-6)
    np.testing.assert_array_equal(a.tile(reps=(1, 2)).asnumpy(), np.tile(x, (1, 2)))
    np.testing.assert_array_equal(mx.nd._internal._plus_scalar(a, scalar=1).asnumpy(), x + 1)
    s = mx.sym.Variable("s")
    assert s.argmax(axis=1).eval(s=a)[0].asnumpy().tolist() == x.argmax(axis=1).tolist()


def test_symbol_binary_functions(mx):
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    xa = np.array([1.0, 5.0, -2.0], dtype=np.float32)
    xb = np.array([3.0, 2.0, -1.0], dtype=np.float32)
    feed = {"a": mx.nd.array(xa), "b": mx.nd.array(xb)}
    np.testing.assert_array_equal(mx.sym.maximum(a, b).eval(**feed)[0].asnumpy(),
                                  np.maximum(xa, xb))
    np.testing.assert_array_equal(mx.sym.minimum(a, 0).eval(**feed)[0].asnumpy(),
                                  np.minimum(xa, 0))
    np.testing.assert_allclose(mx.sym.pow(2, a).eval(**feed)[0].asnumpy(), 2.0 ** xa)
    np.testing.assert_allclose(mx.sym.power(b, 2).eval(**feed)[0].asnumpy(), xb ** 2)
    assert mx.sym.maximum(2, 3) == 3 and mx.sym.pow(2, 3) == 8


@pytest.mark.parametrize("src,code,want", [
    ((2, 3, 5), (-2,), (2, 3, 5)),
    ((2, 3, 5), (0, -3), (2, 15)),
    ((2, 3, 5), (-3, -2), (6, 5)),
    ((2, 3, 5), (-4, 1, 2, 0, 0), (1, 2, 3, 5)),
    ((2, 3, 5), (-4, -1, 1, -2), (2, 1, 3, 5)),
    ((2, 3, 5), (0, -1), (2, 15)),
    ((2, 3, 4), (-1, 0), (8, 3)),
])
def test_reshape_special_values(mx, src, code, want):
    n = int(np.prod(src))
    x = mx.nd.array(np.arange(n).reshape(src))
    y = x.reshape(code)
    assert y.shape == want
    np.testing.assert_array_equal(y.asnumpy().ravel(), np.arange(n))


def test_reshape_reverse(mx):
    # reverse=True matches special values from the right: (10, 5, 4) with (-1, 0) -> (50, 4)
    x = mx.nd.zeros((10, 5, 4))
    assert x.reshape((-1, 0), reverse=True).shape == (50, 4)
    assert x.reshape((-1, 0)).shape == (40, 5)
    with pytest.raises(mx.base.MXNetError):
        x.reshape((3, -1, 7))


def test_positional_parameters_follow_the_inputs(mx):
    x = mx.nd.array([1.0, 5.0, -3.0])
    np.testing.assert_array_equal(mx.nd.clip(x, 0, 2).asnumpy(), [1, 2, 0])
    s = mx.sym.clip(mx.sym.Variable("x"), 0, 2)
    np.testing.assert_array_equal(s.eval(x=x)[0].asnumpy(), [1, 2, 0])
    with pytest.raises(TypeError):
        mx.nd.clip(x, 0, 2, a_min=1)


def test_scalars_bool_abs_pickle_indexing(mx):
    import pickle
    assert mx.nd.array(5).shape == () and mx.nd.array(5).asscalar() == 5
    assert mx.nd.array(np.ones([])).shape == ()
    assert not bool(mx.nd.array([]))
    assert not bool(mx.nd.zeros((1,))) and bool(mx.nd.ones((1,)))
    with pytest.raises(ValueError):
        bool(mx.nd.ones((2,)))
    np.testing.assert_array_equal(abs(mx.nd.array([-1.5, 2])).asnumpy(), [1.5, 2])
    a = mx.nd.array([[1, 2], [3, 4]], dtype="int32")
    b = pickle.loads(pickle.dumps(a))
    assert b.dtype == np.int32
    np.testing.assert_array_equal(b.asnumpy(), [[1, 2], [3, 4]])
    m = mx.nd.array([[0, 1], [2, 3]])
    np.testing.assert_array_equal(m[[1, 1, 0], [0, 1, 0]].asnumpy(), [2, 3, 0])
    np.testing.assert_array_equal(m[mx.nd.array([1, 1, 0]), mx.nd.array([0, 1, 0])].asnumpy(),
                                  [2, 3, 0])


def test_inplace_expand_dims_flatten_squeeze_share_memory(mx):
    t = mx.nd.array(np.arange(6).reshape(2, 3))
    copy, view = t.expand_dims(axis=1), t.expand_dims(axis=1, inplace=True)
    fcopy, fview = t.flatten(), t.flatten(inplace=True)
    assert copy.shape == view.shape == (2, 1, 3)
    t[0] = -1
    np.testing.assert_array_equal(copy.asnumpy()[0, 0], [0, 1, 2])
    np.testing.assert_array_equal(view.asnumpy()[0, 0], [-1, -1, -1])
    np.testing.assert_array_equal(fcopy.asnumpy()[0], [0, 1, 2])
    np.testing.assert_array_equal(fview.asnumpy()[0], [-1, -1, -1])
    z = mx.nd.zeros((2, 1, 3, 1))
    assert z.squeeze().shape == (2, 3) and z.squeeze(axis=(1, 3)).shape == (2, 3)
    assert z.squeeze(axis=1).shape == (2, 3, 1)
    assert mx.nd.zeros((1, 1)).squeeze().shape == (1,)
    sq = z.squeeze(inplace=True)
    z[:] = 7
    assert sq.asnumpy().min() == 7
    with pytest.raises(ValueError):
        z.squeeze(axis=0)


def test_getstate_setstate_mxnet_single_array_bytes(mx):
    import struct
    # MXNet's single-array form: magic, storage type, ndim, dims (int64), device type and
    # id, dtype flag, data. This one is a float32 [7.5] saved on gpu(0).
    raw = (struct.pack("<IiI", 0xF993FAC9, 0, 1) + struct.pack("<q", 1) +
           struct.pack("<iii", 2, 0, 0) + struct.pack("<f", 7.5))
    a = mx.nd.zeros((1,))
    a.__setstate__({"handle": bytearray(raw)})
    assert a.asnumpy().tolist() == [7.5]
    b = mx.nd.array([[1, 2], [3, 4]])
    c = mx.nd.zeros((2, 2))
    c.__setstate__(b.__getstate__())
    np.testing.assert_array_equal(c.asnumpy(), [[1, 2], [3, 4]])


def test_comparison_operators_follow_mxnet_dtype_rules(mx):
    # MXNet converts the scalar to the array's dtype first: int32 [2, 3] == 2.5 is [1, 0]
    a = mx.nd.array([2, 3], dtype="int32")
    eq = a == 2.5
    assert eq.dtype == np.int32 and eq.asnumpy().tolist() == [1, 0]
    x = np.array([[1, 2], [3, 4]], np.float32)
    y = np.array([[2, 2]], np.float32)
    got = (mx.nd.array(x) >= mx.nd.array(y)).asnumpy()       # broadcast
    np.testing.assert_array_equal(got, (x >= y).astype(np.float32))
    got = (2 < mx.nd.array(x)).asnumpy()                      # reflected scalar
    np.testing.assert_array_equal(got, (2 < x).astype(np.float32))


def test_contiguous_tuple_indexing_is_a_view(mx):
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    is_contig = mx.nd.NDArray._basic_indexing_slice_is_contiguous
    keys = [(1, slice(None)), (slice(0, 1), slice(1, 3)), (1, 2, slice(1, 3)),
            (slice(None), slice(1, 2)), (1, slice(None, None, 2)), (0, slice(None, None, -1))]
    for key in keys:
        full = key + (slice(None),) * (4 - len(key))
        slcs = tuple(k if isinstance(k, slice) else slice(k, k + 1) for k in full)
        assert is_contig(slcs, x.shape) == x[slcs].flags.c_contiguous, key
        a = mx.nd.array(x)
        v = a[key]
        np.testing.assert_array_equal(v.asnumpy(), x[key])
        v[:] = -1
        expect = x.copy()
        if is_contig(slcs, x.shape):
            expect[key] = -1  # a view: the write reaches the array
        np.testing.assert_array_equal(a.asnumpy(), expect)


def test_split_v2_and_histogram_front_ends(mx):
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    parts = mx.nd.split_v2(mx.nd.array(x), (1, 4))
    for got, expect in zip(parts, np.split(x, (1, 4))):
        np.testing.assert_array_equal(got.asnumpy(), expect)
    assert [p.shape for p in mx.nd.array(x).split_v2(3)] == [(2, 2)] * 3
    outs = mx.sym.split_v2(mx.sym.var("x"), 2, axis=1)
    assert len(outs.list_outputs()) == 2
    data = np.array([0.5, 1.5, 1.7, 2.9, 3.0], np.float32)
    counts, edges = mx.nd.histogram(mx.nd.array(data), bins=3, range=(0, 3))
    ref_counts, ref_edges = np.histogram(data, bins=3, range=(0, 3))
    np.testing.assert_array_equal(counts.asnumpy(), ref_counts)
    np.testing.assert_allclose(edges.asnumpy(), ref_edges, rtol=1e-6)


def test_nd_arange_matches_mxnet_rules(mx):
    np.testing.assert_array_equal(mx.nd.arange(5).asnumpy(), np.arange(5, dtype=np.float32))
    np.testing.assert_array_equal(mx.nd.arange(2, 8, 2, repeat=2, dtype="int32").asnumpy(),
                                  [2, 2, 4, 4, 6, 6])
    # uint8 wraps like MXNet's (start and step cast to the element type)
    np.testing.assert_array_equal(mx.nd.arange(50, -50, -20, dtype="uint8").asnumpy(),
                                  [50, 30, 10, 246, 226])
    assert mx.nd.arange(0.5, 2.0, 0.5, dtype="float64").dtype == np.float64


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_argmax_argmin_first_nan_wins(mx, dtype):
    """A NaN is the extreme for argmax/argmin, the first one counting (NumPy's rule, and
    MXNet 1.9.1's: both give [1, 0, 3] along axis 1 of the array below); inf is ordinary."""
    x = np.array([[1, np.nan, 3, np.nan], [np.nan, -np.inf, 5, np.inf],
                  [2, 1, np.inf, np.nan]], dtype=dtype)
    a = mx.nd.array(x, dtype=dtype)
    for axis in (0, 1):
        np.testing.assert_array_equal(mx.nd.argmax(a, axis=axis).asnumpy(), np.argmax(x, axis))
        np.testing.assert_array_equal(mx.nd.argmin(a, axis=axis).asnumpy(), np.argmin(x, axis))
    np.testing.assert_array_equal(mx.nd.argmax(a, axis=1).asnumpy(), [1, 0, 3])
    np.testing.assert_array_equal(mx.nd.argmin(a, axis=0).asnumpy(), [1, 0, 0, 0])
    np.testing.assert_array_equal(mx.nd.argmax_channel(a).asnumpy(), [1, 0, 3])
    rng = np.random.RandomState(3)
    y = rng.uniform(-1, 1, (6, 5, 4)).astype(dtype)
    y.ravel()[rng.choice(y.size, 12, replace=False)] = np.nan
    y.ravel()[rng.choice(y.size, 6, replace=False)] = -np.inf
    for axis in range(3):
        np.testing.assert_array_equal(mx.nd.argmax(mx.nd.array(y, dtype=dtype), axis=axis)
                                      .asnumpy(), np.argmax(y, axis))
        np.testing.assert_array_equal(mx.nd.argmin(mx.nd.array(y, dtype=dtype), axis=axis)
                                      .asnumpy(), np.argmin(y, axis))


def test_broadcast_like_axes(mx):
    """broadcast_like with lhs_axes/rhs_axes takes the sizes of the named rhs axes (shapes
    from MXNet's test_broadcast_like_axis); empty axes raise MXNetError, as MXNet."""
    cases = [((1, 2, 1, 3), (5, 6, 7, 8), (0, 2), (1, 3), (6, 2, 8, 3)),
             ((1,), (5,), (0,), (-1,), (5,)),
             ((1, 7, 9, 1, 1), (9, 1), (-2, -1), (-2, -1), (1, 7, 9, 9, 1)),
             ((2, 1), (1, 7, 9, 1, 1), (1,), (-3,), (2, 9))]
    rng = np.random.RandomState(0)
    for ls, rs, la, ra, want in cases:
        lhs = rng.uniform(size=ls).astype(np.float32)
        out = mx.nd.broadcast_like(mx.nd.array(lhs), mx.nd.zeros(rs), lhs_axes=la, rhs_axes=ra)
        np.testing.assert_array_equal(out.asnumpy(), np.broadcast_to(lhs, want))
        with pytest.raises(mx.base.MXNetError, match="not be empty"):
            mx.nd.broadcast_like(mx.nd.array(lhs), mx.nd.zeros(rs), lhs_axes=(), rhs_axes=())


def test_gather_nd_out_of_bounds_is_index_error(mx):
    """An index outside its axis raises an IndexError (MXNet's type), which is also Loom's
    error class, imperatively and through an executor; negative indices wrap."""
    data = np.array([[0, 1, 2], [3, 4, 5]], dtype=np.float32)
    for bad in ([[0, 1, 0], [0, 1, 3]], [[0, 1, 0], [0, 1, -5]]):
        with pytest.raises(IndexError, match="out of bounds for axis 1 with size 3"):
            mx.nd.gather_nd(mx.nd.array(data), mx.nd.array(bad)).asnumpy()
        with pytest.raises(mx.base.MXNetError):
            mx.nd.gather_nd(mx.nd.array(data), mx.nd.array(bad))
    exe = mx.sym.gather_nd(mx.sym.var("d"), mx.sym.var("i")).bind(
        mx.cpu(), {"d": mx.nd.array(data), "i": mx.nd.array([[0, 1, 0], [0, 1, 3]])})
    with pytest.raises(mx.base.IndexOutOfRangeError, match="node 'gather_nd"):
        exe.forward()
    got = mx.nd.gather_nd(mx.nd.array(data), mx.nd.array([[0, 1, -1], [0, 1, -2]]))
    np.testing.assert_array_equal(got.asnumpy(), [data[0, 0], data[1, 1], data[-1, -2]])


def test_contrib_allclose_is_0d(mx):
    """mx.nd.contrib.allclose: a 0-d uint8 array (as MXNet) holding np.allclose's answer for
    |a - b| <= atol + rtol * |b|, NaNs equal under equal_nan (MXNet's default True)."""
    rng = np.random.RandomState(5)
    for dtype in (np.float16, np.float32, np.float64):
        a = rng.randn(4, 5).astype(dtype)
        for b, kw in [(a + dtype(1e-3), dict(rtol=1e-2, atol=1e-2)),
                      (a + dtype(1e-1), dict(rtol=1e-5, atol=1e-3)), (a.copy(), {})]:
            got = mx.nd.contrib.allclose(mx.nd.array(a, dtype=dtype), mx.nd.array(b, dtype=dtype),
                                         **kw)
            assert got.shape == () and got.dtype == np.uint8
            want = np.allclose(a, b, kw.get("rtol", 1e-5), kw.get("atol", 1e-8))
            assert got.asnumpy().shape == () and int(got.asnumpy()) == int(want)
            assert "{:d}".format(got.asnumpy() == 1) == str(int(want))  # MXNet's test formats it
    n = np.array([1.0, np.nan], dtype=np.float32)
    assert int(mx.nd.contrib.allclose(mx.nd.array(n), mx.nd.array(n)).asnumpy()) == 1
    assert int(mx.nd.contrib.allclose(mx.nd.array(n), mx.nd.array(n), equal_nan=False)
               .asnumpy()) == 0


def test_contrib_boolean_mask(mx):
    """The rows of data whose index is nonzero, in order (values from MXNet 1.9.1); zero-size
    when none; MXNet's axis and length checks; the symbolic form refused with the reason."""
    d = mx.nd.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    np.testing.assert_array_equal(mx.nd.contrib.boolean_mask(d, mx.nd.array([0, 1, 0])).asnumpy(),
                                  [[4, 5, 6]])
    np.testing.assert_array_equal(mx.nd.contrib.boolean_mask(d, mx.nd.array([0, 1, 2])).asnumpy(),
                                  [[4, 5, 6], [7, 8, 9]])
    got = mx.nd.contrib.boolean_mask(d.astype("int32"), mx.nd.array([1, 0, 1], dtype="int32"))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.asnumpy(), [[1, 2, 3], [7, 8, 9]])
    np.testing.assert_array_equal(  # NaN counts as nonzero
        mx.nd.contrib.boolean_mask(d, mx.nd.array([np.nan, -1, 0])).asnumpy(),
        [[1, 2, 3], [4, 5, 6]])
    empty = mx.nd.contrib.boolean_mask(d, mx.nd.array([0, 0, 0]))
    assert empty.shape == (0, 3) and empty.asnumpy().shape == (0, 3)
    assert mx.nd.contrib.boolean_mask(mx.nd.arange(24).reshape((2, 3, 4)),
                                      mx.nd.array([0, 1])).shape == (1, 3, 4)
    rng = np.random.RandomState(2)
    a = rng.randint(0, 100, (100, 30)).astype(np.float32)
    m = rng.randint(0, 100, 100) > 50
    np.testing.assert_array_equal(
        mx.nd.contrib.boolean_mask(mx.nd.array(a), mx.nd.array(m)).asnumpy(), a[m])
    with pytest.raises(mx.base.MXNetError, match="axis=1 is not supported"):
        mx.nd.contrib.boolean_mask(d, mx.nd.array([1, 0, 1]), axis=1)
    with pytest.raises(mx.base.MXNetError, match="one value per slice"):
        mx.nd.contrib.boolean_mask(d, mx.nd.array([1, 0]))
    with pytest.raises(mx.base.MXNetError, match="depends on the values of index"):
        mx.sym.contrib.boolean_mask(mx.sym.var("d"), mx.sym.var("i"))


def test_raw_handles_through_ctypes(mx):
    """MXNet monitor code turns a handle back into an array:
    NDArray(ctypes.cast(arr, NDArrayHandle), writable=False) shares the same memory."""
    import ctypes
    from loom.operator import NDArray, NDArrayHandle, py_str
    a = mx.nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = NDArray(ctypes.cast(a, NDArrayHandle), writable=False)
    assert b.shape == (2, 3)
    b[:] = 7
    np.testing.assert_array_equal(a.asnumpy(), np.full((2, 3), 7, np.float32))
    assert py_str(b"conv_output") == "conv_output" and py_str("x") == "x"
    stale = ctypes.cast(mx.nd.ones((1,)), NDArrayHandle)  # its array is gone at once
    import gc
    gc.collect()
    with pytest.raises(mx.base.MXNetError, match="not the handle of a live"):
        NDArray(stale)
    with pytest.raises(mx.base.MXNetError, match="not the handle of a live"):
        NDArray(ctypes.c_void_p(12345))


def test_monitor_callback_in_mxnet_raw_style(mx):
    """A Module executor's monitor callback written against MXNet's C API (bytes-or-str name
    through py_str, the array through ctypes) sees every input and output of the node, with
    the values the forward pass used, also after the input shape changed."""
    import ctypes
    from loom.operator import NDArray, NDArrayHandle, py_str
    seen = {}

    def cb(name, arr):
        seen[py_str(name)] = NDArray(ctypes.cast(arr, NDArrayHandle), writable=False).asnumpy()

    data = mx.sym.Variable("data", shape=(1, 3, 4, 4))
    sym = mx.sym.Convolution(data, kernel=(1, 1), num_filter=2, name="conv")
    mod = mx.mod.Module(sym, label_names=None)
    mod.bind(for_training=False, data_shapes=[("data", (1, 3, 4, 4))])
    mod.init_params(mx.init.Uniform(0.5))
    mod._exec_group.execs[0].set_monitor_callback(cb, monitor_all=True)
    x = np.random.RandomState(0).uniform(size=(1, 3, 4, 6)).astype(np.float32)
    mod.forward(mx.io.DataBatch([mx.nd.array(x)]), is_train=False)
    # MXNet 1.9.1 (subgraphs off) reports the variables and the node's inputs and output.
    assert set(seen) == {"data", "conv_data", "conv_weight", "conv_bias", "conv_output"}
    w, b = seen["conv_weight"].reshape(2, 3), seen["conv_bias"]
    want = np.einsum("oc,nchw->nohw", w, x) + b[None, :, None, None]
    np.testing.assert_allclose(seen["conv_data"], x)
    np.testing.assert_allclose(seen["conv_output"], want, rtol=1e-5, atol=1e-6)
