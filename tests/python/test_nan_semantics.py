"""NaN goes through maximum/minimum and the max/min reductions as NumPy (and MXNet 1.9.1)
propagate it, whichever operand holds it: nothing silently drops a NaN."""
import numpy as np
import pytest


def _pair(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    a[1, 0] = np.nan   # NaN on the left only
    b[0, 0] = np.nan   # NaN on the right only
    a[2, 3] = b[2, 3] = np.nan
    return a, b


@pytest.mark.parametrize("name,ref", [("maximum", np.maximum), ("minimum", np.minimum)])
def test_binary_max_min_propagate_nan_from_either_side(mx, name, ref):
    a, b = _pair(np.random.default_rng(0))
    fn = getattr(mx.nd, name)
    np.testing.assert_array_equal(fn(mx.nd.array(a), mx.nd.array(b)).asnumpy(), ref(a, b))
    # Broadcasting form: a row against the matrix.
    row = b[:1]
    out = getattr(mx.nd, "broadcast_" + name)(mx.nd.array(a), mx.nd.array(row)).asnumpy()
    np.testing.assert_array_equal(out, ref(a, row))
    # Scalar form: NaN in the array stays NaN.
    np.testing.assert_array_equal(fn(mx.nd.array(a), 0.5).asnumpy(), ref(a, np.float32(0.5)))
    # Symbolic path gives the same.
    x, y = mx.sym.var("x"), mx.sym.var("y")
    exe = getattr(mx.sym, "_" + name)(x, y).bind(mx.cpu(), {"x": mx.nd.array(a),
                                                            "y": mx.nd.array(b)})
    np.testing.assert_array_equal(exe.forward()[0].asnumpy(), ref(a, b))


@pytest.mark.parametrize("name,ref", [("max", np.max), ("min", np.min)])
def test_max_min_reductions_propagate_nan(mx, name, ref):
    a, _ = _pair(np.random.default_rng(1))
    for axis in (0, 1):
        got = getattr(mx.nd, name)(mx.nd.array(a), axis=axis).asnumpy()
        np.testing.assert_array_equal(got, ref(a, axis=axis))


def test_relu_keeps_nan(mx):
    a, _ = _pair(np.random.default_rng(2))
    np.testing.assert_array_equal(mx.nd.relu(mx.nd.array(a)).asnumpy(), np.maximum(a, 0))


def test_activation_relu_keeps_nan(mx):
    a, _ = _pair(np.random.default_rng(3))
    got = mx.nd.Activation(mx.nd.array(a), act_type="relu").asnumpy()
    np.testing.assert_array_equal(got, np.maximum(a, 0))


def test_relu_gradient_is_nan_at_nan(mx):
    a, _ = _pair(np.random.default_rng(4))
    x = mx.sym.var("x")
    g = mx.nd.zeros(a.shape)
    exe = mx.sym.relu(x).bind(mx.cpu(), {"x": mx.nd.array(a)}, args_grad={"x": g})
    exe.forward(is_train=True)
    exe.backward(mx.nd.ones(a.shape))
    want = np.where(np.isnan(a), np.nan, (a > 0).astype(np.float32))
    np.testing.assert_array_equal(g.asnumpy(), want)
