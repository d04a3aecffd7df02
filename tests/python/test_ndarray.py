import gc
import struct

import numpy as np
import pytest


def test_creation_shape_dtype_context(mx):
    a = mx.nd.array(np.arange(6).reshape(2, 3))
    assert a.shape == (2, 3) and a.dtype == np.float32 and a.context == mx.cpu()
    assert a.size == 6 and a.ndim == 2 and len(a) == 2
    b = mx.nd.array(np.arange(4), dtype=np.int64)
    assert b.dtype == np.int64 and b.asnumpy().dtype == np.int64
    assert mx.nd.array([[1, 2], [3, 4]], dtype="float64").dtype == np.float64
    assert np.all(mx.nd.zeros((2, 2)).asnumpy() == 0)
    assert np.all(mx.nd.ones(3, dtype="int32").asnumpy() == 1)
    assert mx.nd.empty((5, 1)).shape == (5, 1)
    assert mx.nd.full((2,), 7).asnumpy().tolist() == [7, 7]
    assert mx.cpu(0) == mx.Context("cpu", 0) and str(mx.gpu(1)) == "gpu(1)"
    assert mx.nd.array(a).dtype == np.float32 and not mx.nd.array(a)._same_memory(a)
    assert "NDArray 2x3 @cpu(0)" in repr(a)


def test_asnumpy_copy_and_zero_copy_view(mx):
    a = mx.nd.array(np.arange(6).reshape(2, 3))
    c = a.asnumpy()
    c[0, 0] = 100  # a copy (MXNet semantics): the array is unchanged
    assert a.asnumpy()[0, 0] == 0
    v = a.asnumpy(copy=False)
    assert v.ctypes.data == a._data_ptr()
    a[:] = 5
    assert np.all(v == 5)  # the view sees later writes
    v[1, 1] = -1
    assert a.asnumpy()[1, 1] == -1  # and writes go through
    w = np.asarray(a)
    assert w.ctypes.data == a._data_ptr()
    del a
    gc.collect()
    assert v[1, 1] == -1 and v.sum() == 5 * 5 - 1  # the view keeps the storage alive


def test_slicing_and_assignment(mx):
    x = mx.nd.array(np.arange(12).reshape(4, 3))
    row = x[1]
    assert row.shape == (3,)
    row[:] = 0  # a view: writes through
    assert x.asnumpy()[1].tolist() == [0, 0, 0]
    x[2:4] = np.ones((2, 3)) * 9
    assert x.asnumpy()[3].tolist() == [9, 9, 9]
    x[0] = 1.5
    assert x.asnumpy()[0].tolist() == [1.5, 1.5, 1.5]
    x[:, 1] = 7
    assert x.asnumpy()[:, 1].tolist() == [7, 7, 7, 7]
    sub = x[1:3, 0:2]  # general basic slice: a copy
    assert sub.shape == (2, 2)
    x[:] = mx.nd.array(np.zeros((4, 3)))
    assert x.asnumpy().sum() == 0
    x[:] = np.arange(3)  # broadcast
    assert x.asnumpy()[2].tolist() == [0, 1, 2]
    y = mx.nd.zeros((2, 3))
    y[:] += mx.nd.ones((2, 3))
    y[:] += 1
    assert np.all(y.asnumpy() == 2)
    assert x.reshape((3, 4)).shape == (3, 4) and x.reshape(-1, 2).shape == (6, 2)
    assert x.reshape((0, -1))._same_memory(x)


def test_arithmetic_vs_numpy(mx):
    rng = np.random.default_rng(0)
    an, bn = rng.random((3, 4)) + 0.5, rng.random((3, 4)) + 0.5
    a, b = mx.nd.array(an), mx.nd.array(bn)
    cases = [(a + b, an + bn), (a - b, an - bn), (a * b, an * bn), (a / b, an / bn),
             (a ** b, an ** bn), (a + 2, an + 2), (2 + a, 2 + an), (a - 1, an - 1),
             (1 - a, 1 - an), (a * 3, an * 3), (3 * a, 3 * an), (a / 2, an / 2),
             (2 / a, 2 / an), (a ** 2, an ** 2), (2 ** a, 2 ** an), (-a, -an),
             (a + bn, an + bn)]
    for got, ref in cases:
        np.testing.assert_allclose(got.asnumpy(), ref, rtol=1e-5)
    row = mx.nd.array(bn[:1])
    np.testing.assert_allclose((a + row).asnumpy(), an + bn[:1], rtol=1e-5)
    c = a.copy()
    c += b
    c *= 2
    np.testing.assert_allclose(c.asnumpy(), (an + bn) * 2, rtol=1e-5)
    assert (a > 1).asnumpy().dtype == np.float32


def test_ops_vs_numpy(mx):
    rng = np.random.default_rng(1)
    xn = rng.standard_normal((4, 5)).astype(np.float32)
    wn = rng.standard_normal((3, 5)).astype(np.float32)
    bn = rng.standard_normal(3).astype(np.float32)
    x, w, b = mx.nd.array(xn), mx.nd.array(wn), mx.nd.array(bn)
    np.testing.assert_allclose(mx.nd.exp(x).asnumpy(), np.exp(xn), rtol=1e-5)
    np.testing.assert_allclose(mx.nd.FullyConnected(x, w, b, num_hidden=3).asnumpy(),
                               xn @ wn.T + bn, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        mx.nd.FullyConnected(data=x, weight=w, bias=b, num_hidden=3).asnumpy(),
        xn @ wn.T + bn, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mx.nd.sum(x, axis=1).asnumpy(), xn.sum(1), rtol=1e-5)
    np.testing.assert_allclose(x.sum(axis=0).asnumpy(), xn.sum(0), rtol=1e-5)
    np.testing.assert_allclose(mx.nd.Concat(x, x, dim=0).asnumpy(),
                               np.concatenate([xn, xn]), rtol=1e-6)
    np.testing.assert_allclose(mx.nd.add_n(x, x, x).asnumpy(), 3 * xn, rtol=1e-6)
    sm = mx.nd.softmax(x).asnumpy()
    ref = np.exp(xn) / np.exp(xn).sum(1, keepdims=True)
    np.testing.assert_allclose(sm, ref, rtol=1e-5)
    parts = mx.nd.SliceChannel(x, num_outputs=5)
    assert len(parts) == 5 and parts[2].shape == (4, 1)
    out = mx.nd.zeros((4, 5))
    r = mx.nd.relu(x, out=out)
    assert r is out and np.allclose(out.asnumpy(), np.maximum(xn, 0))
    np.testing.assert_allclose(mx.nd.Activation(x, act_type="tanh").asnumpy(), np.tanh(xn),
                               rtol=1e-5)
    assert x.astype("float64").dtype == np.float64
    np.testing.assert_allclose(x.T.asnumpy(), xn.T)
    with pytest.raises(mx.ShapeError):
        mx.nd.elemwise_add(x, w)
    for _ in range(3):  # cached instances are reused
        mx.nd.exp(x)


def test_save_load_dict_and_list(mx, tmp_path):
    d = {"a": mx.nd.array(np.arange(6).reshape(2, 3)),
         "b": mx.nd.array(np.arange(3), dtype="int32")}
    p = str(tmp_path / "x.params")
    mx.nd.save(p, d)
    back = mx.nd.load(p)
    assert isinstance(back, dict) and list(back) == ["a", "b"]
    np.testing.assert_array_equal(back["a"].asnumpy(), d["a"].asnumpy())
    assert back["b"].dtype == np.int32
    mx.nd.save(p, [d["a"], d["b"]])
    back = mx.nd.load(p)
    assert isinstance(back, list) and len(back) == 2
    mx.nd.save(p, d["a"])
    assert len(mx.nd.load(p)) == 1
    buf = mx.nd.save_tobuffer(d)
    assert list(mx.nd.load_frombuffer(buf)) == ["a", "b"]
    with pytest.raises(ValueError):
        mx.nd.save(p, {"a": np.zeros(3)})
    (tmp_path / "bad.params").write_bytes(b"\x12\x01\x00")
    with pytest.raises(mx.FormatError):
        mx.nd.load(str(tmp_path / "bad.params"))


def test_params_bytes_follow_mxnet_layout(mx, tmp_path):
    """Written by the C++ writer, read back byte by byte per the MXNet format; and a file
    built by hand from the format description is read by nd.load."""
    p = str(tmp_path / "w.params")
    mx.nd.save(p, {"arg:w": mx.nd.array([[1.0, 2.0]])})
    raw = open(p, "rb").read()
    magic, reserved, n = struct.unpack_from("<QQQ", raw, 0)
    assert (magic, reserved, n) == (0x112, 0, 1)
    v2, stype, ndim = struct.unpack_from("<Iii", raw, 24)
    assert (v2, stype, ndim) == (0xF993FAC9, 0, 2)
    assert struct.unpack_from("<qq", raw, 36) == (1, 2)
    assert struct.unpack_from("<iii", raw, 52) == (1, 0, 0)  # cpu, id 0, float32
    assert struct.unpack_from("<ff", raw, 64) == (1.0, 2.0)
    (nnames,) = struct.unpack_from("<Q", raw, 72)
    (ln,) = struct.unpack_from("<Q", raw, 80)
    assert nnames == 1 and raw[88:88 + ln] == b"arg:w"
    # by hand: one V2 float64 array of shape (3,), saved from a dict
    rec = struct.pack("<Iii", 0xF993FAC9, 0, 1) + struct.pack("<q", 3) + \
        struct.pack("<iii", 1, 0, 1) + struct.pack("<3d", 0.5, 1.5, 2.5)
    blob = struct.pack("<QQQ", 0x112, 0, 1) + rec + struct.pack("<QQ", 1, 1) + b"z"
    q = tmp_path / "hand.params"
    q.write_bytes(blob)
    got = mx.nd.load(str(q))
    assert got["z"].dtype == np.float64 and got["z"].asnumpy().tolist() == [0.5, 1.5, 2.5]


DLPACK_DTYPES = ["float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool"]


@pytest.mark.parametrize("dtype", DLPACK_DTYPES)
@pytest.mark.parametrize("shape", [(3, 4, 5, 6), (2, 10), (15,)])
def test_dlpack_round_trip_shares_memory(mx, dtype, shape):
    """to_dlpack_for_read/_for_write then from_dlpack give a view of the same memory (MXNet's
    zero copy); the capsule is consumed once; the view outlives the array and the capsule."""
    src = (np.arange(int(np.prod(shape))).reshape(shape) % 7).astype(dtype)
    for export in (lambda a: a.to_dlpack_for_read(), lambda a: a.to_dlpack_for_write(),
                   mx.nd.to_dlpack_for_read, mx.nd.to_dlpack_for_write):
        a = mx.nd.array(src, dtype=dtype)
        pack = export(a)
        b = mx.nd.from_dlpack(pack)
        assert b.shape == shape and b.dtype == np.dtype(dtype) and b._same_memory(a)
        with pytest.raises(ValueError, match="consumed only once"):
            mx.nd.from_dlpack(pack)
        b[:] = 1  # writes through the view reach the array
        assert np.all(a.asnumpy() == 1)
        b[:] = src
        del a, pack
        gc.collect()
        np.testing.assert_array_equal(b.asnumpy(), src)


def test_dlpack_with_numpy_both_ways(mx):
    """NumPy (>= 1.22) consumes an NDArray through __dlpack__ and Loom consumes a NumPy array
    (or its capsule) without a copy; a strided NumPy tensor is copied with the right values."""
    a = mx.nd.array(np.arange(6).reshape(2, 3))
    v = np.from_dlpack(a)
    assert v.ctypes.data == a._data_ptr() and v.shape == (2, 3)
    a[:] = 4
    assert np.all(v == 4)
    assert a.__dlpack_device__() == (1, 0)  # kDLCPU, device 0
    if np.lib.NumpyVersion(np.__version__) >= "2.1.0":  # from_dlpack(copy=) is NumPy 2.1's
        w = np.from_dlpack(a, copy=True)
        assert w.ctypes.data != a._data_ptr() and np.all(w == 4)

    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    for source in (x, x.__dlpack__()):
        c = mx.nd.from_dlpack(source)
        assert c._data_ptr() == x.ctypes.data and c.dtype == np.float64 and c.shape == (3, 4)
    c[0, 0] = -1
    assert x[0, 0] == -1  # one memory
    del x
    gc.collect()
    assert c.asnumpy().sum() == sum(range(12)) - 1  # the NDArray keeps NumPy's memory alive

    t = np.arange(6, dtype=np.int32).reshape(2, 3).T  # strides (1, 3): copied
    d = mx.nd.from_dlpack(t)
    assert d.dtype == np.int32 and d._data_ptr() != t.ctypes.data
    np.testing.assert_array_equal(d.asnumpy(), [[0, 3], [1, 4], [2, 5]])

    with pytest.raises(TypeError, match="DLPack capsule"):
        mx.nd.from_dlpack(5)
    with pytest.raises(mx.base.LoomError, match="unsupported DLPack type"):
        mx.nd.from_dlpack(np.zeros(3, dtype=np.uint16))


def test_from_numpy_zero_copy(mx):
    """MXNet's from_numpy: zero_copy=True shares the NumPy array's memory and makes it
    read-only (writes through the NDArray are seen by it); non-contiguous arrays raise
    ValueError; zero_copy=False copies and leaves the array writable."""
    arrays = [np.array([[1, 2], [3, 4], [5, 6]], dtype="float32"),
              np.array((1,)).reshape(()), np.array(()).reshape((1, 0, 2))]
    for zero_copy in (False, True):
        for src in arrays:
            got = mx.nd.from_numpy(src.copy(), zero_copy=zero_copy)
            assert got.shape == src.shape and got.dtype == src.dtype
            np.testing.assert_array_equal(got.asnumpy(), src)

    src = np.array([[1, 2], [3, 4], [5, 6]], dtype="float32")
    a = mx.nd.from_numpy(src)
    assert a._data_ptr() == src.ctypes.data and not src.flags.writeable
    with pytest.raises(ValueError):
        src[2, 1] = 0
    a[2, 1] = 100
    np.testing.assert_array_equal(src, [[1, 2], [3, 4], [5, 100]])
    del src
    gc.collect()
    np.testing.assert_array_equal(a.asnumpy(), [[1, 2], [3, 4], [5, 100]])

    with pytest.raises(ValueError, match="C-contiguous"):
        mx.nd.from_numpy(np.array([[1, 2], [3, 4], [5, 6]]).transpose())
    with pytest.raises(ValueError, match="uint16"):
        mx.nd.from_numpy(np.zeros(3, dtype=np.uint16))
    kept = np.ones(3, dtype=np.int64)
    c = mx.nd.from_numpy(kept, zero_copy=False)
    assert kept.flags.writeable and c._data_ptr() != kept.ctypes.data
