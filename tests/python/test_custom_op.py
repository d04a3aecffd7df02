"""Python custom operators through the `Custom` graph op (MXNet's CustomOp protocol)."""
import json
import threading

import numpy as np
import pytest

import loom as mx

SEEN = {}


# MXNet's canonical example (example/numpy-ops/custom_softmax.py), unchanged but for the
# import: a loss head (need_top_grad=False) whose backward edits asnumpy()'s result.
class Softmax(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0].asnumpy()
        y = np.exp(x - x.max(axis=1).reshape((x.shape[0], 1)))
        y /= y.sum(axis=1).reshape((x.shape[0], 1))
        SEEN.setdefault("fwd_req", set()).update(req)
        self.assign(out_data[0], req[0], mx.nd.array(y))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        l = in_data[1].asnumpy().ravel().astype(np.int64)
        y = out_data[0].asnumpy()
        y[np.arange(l.shape[0]), l] -= 1.0
        SEEN["out_grad_empty"] = out_grad[0]._is_none
        self.assign(in_grad[0], req[0], mx.nd.array(y))


@mx.operator.register("softmax_py")
class SoftmaxProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def list_outputs(self):
        return ["output"]

    def infer_shape(self, in_shape):
        data_shape = in_shape[0]
        label_shape = (in_shape[0][0],)
        output_shape = in_shape[0]
        return [data_shape, label_shape], [output_shape], []

    def create_operator(self, ctx, shapes, dtypes):
        SEEN["ctx"], SEEN["shapes"], SEEN["dtypes"] = ctx, shapes, dtypes
        return Softmax()


# y = scale * x**2 (needs the head gradient); aux `calls` counts forward and backward calls.
class Square(mx.operator.CustomOp):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0] * in_data[0] * self.scale)
        aux[0][:] = aux[0].asnumpy() + 1
        aux[1][:] += in_data[0].sum(axis=0)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0] * in_data[0] * (2 * self.scale))
        aux[0][:] = aux[0].asnumpy() + 100


@mx.operator.register("square_py")
class SquareProp(mx.operator.CustomOpProp):
    def __init__(self, scale="1", fail=None):
        super().__init__(need_top_grad=True)
        SEEN["kwargs"] = (scale, fail)
        self.scale = float(scale)
        self.fail = fail

    def list_auxiliary_states(self):
        return ["calls", "colsum"]

    def infer_shape(self, in_shape):
        if self.fail == "shape":
            return [in_shape[0]], [in_shape[0], in_shape[0]], [(1,), (in_shape[0][1],)]
        if self.fail == "notuple":
            return [in_shape[0]]
        return [in_shape[0]], [in_shape[0]], [(1,), (in_shape[0][1],)]

    def create_operator(self, ctx, shapes, dtypes):
        op = Square(self.scale)
        if self.fail in ("forward", "backward"):
            real = getattr(op, self.fail)

            def broken(*args):
                if FAIL_NOW["on"]:
                    raise ValueError("deliberate failure in " + self.fail)
                return real(*args)
            setattr(op, self.fail, broken)
        return op


FAIL_NOW = {"on": True}


def mlp_logits(mx, classes=4):
    data = mx.sym.var("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=8, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    return mx.sym.FullyConnected(act, num_hidden=classes, name="fc2")


def fill(exe, rng):
    for k, a in exe.arg_dict.items():
        if k.endswith("label"):
            a[:] = rng.integers(0, 4, a.shape)
        else:
            a[:] = rng.standard_normal(a.shape) * 0.5


def test_custom_softmax_loss_head_matches_softmax_output():
    rng = np.random.default_rng(0)
    logits = mlp_logits(mx)
    custom = mx.sym.Custom(logits, name="softmax", op_type="softmax_py")
    assert custom.list_arguments() == ["data", "fc1_weight", "fc1_bias", "fc2_weight",
                                       "fc2_bias", "softmax_label"]
    assert custom.list_outputs() == ["softmax_output"]
    builtin = mx.sym.SoftmaxOutput(logits, name="softmax")
    e1 = custom.simple_bind(mx.cpu(), data=(6, 5))
    e2 = builtin.simple_bind(mx.cpu(), data=(6, 5))
    fill(e1, rng)
    for k, a in e1.arg_dict.items():
        e2.arg_dict[k][:] = a
    for e in (e1, e2):
        e.forward(is_train=True)
        e.backward()  # no head gradient: the custom op is a loss head
    np.testing.assert_allclose(e1.outputs[0].asnumpy(), e2.outputs[0].asnumpy(), rtol=1e-5)
    for k in ("fc1_weight", "fc2_bias", "data"):
        np.testing.assert_allclose(e1.grad_dict[k].asnumpy(), e2.grad_dict[k].asnumpy(),
                                   rtol=1e-4, atol=1e-6)
    assert SEEN["out_grad_empty"]
    assert SEEN["dtypes"] == [0, 0] and SEEN["shapes"] == [[6, 4], [6]]
    assert SEEN["ctx"] == mx.cpu()
    assert SEEN["fwd_req"] <= {"write", "inplace"}


def test_json_form_and_kwargs_as_strings():
    x = mx.sym.var("x")
    y = mx.sym.Custom(x, op_type="square_py", scale=1.5, name="sq")
    node = [n for n in json.loads(y.tojson())["nodes"] if n["name"] == "sq"][0]
    assert node["op"] == "Custom"
    assert node["attrs"] == {"op_type": "square_py", "scale": "1.5"}
    assert SEEN["kwargs"] == ("1.5", None)
    back = mx.sym.load_json(y.tojson())
    assert back.list_auxiliary_states() == ["sq_calls", "sq_colsum"]
    assert back.tojson() == y.tojson()


def test_head_gradient_aux_persistence_and_add_mode(tmp_path):
    x = mx.sym.var("x")
    y = mx.sym.Custom(x, op_type="square_py", scale=3, name="sq")
    exe = y.simple_bind(mx.cpu(), x=(2, 3), grad_req="add")
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    hg = np.full((2, 3), 0.5, np.float32)
    exe.forward(is_train=True, x=xv)
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), 3 * xv ** 2)
    exe.backward(mx.nd.array(hg))
    exe.forward(is_train=True)
    exe.backward([mx.nd.array(hg)])
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 2 * hg * 6 * xv)  # added twice
    assert exe.aux_dict["sq_calls"].asnumpy().tolist() == [202.0]
    np.testing.assert_allclose(exe.aux_dict["sq_colsum"].asnumpy(), 2 * xv.sum(0))
    with pytest.raises(mx.BindError):
        exe.backward()  # need_top_grad=True: the head gradient is required
    prefix = str(tmp_path / "sq")
    mx.model.save_checkpoint(prefix, 1, y, {}, exe.aux_dict)
    raw = mx.nd.load(prefix + "-0001.params")
    assert sorted(raw) == ["aux:sq_calls", "aux:sq_colsum"]
    assert raw["aux:sq_calls"].asnumpy().tolist() == [202.0]


def test_imperative_custom():
    x = mx.nd.array([[1.0, 2.0]])
    y = mx.nd.Custom(x, mx.nd.zeros((1,)), mx.nd.zeros((2,)), op_type="square_py", scale="2")
    np.testing.assert_allclose(y.asnumpy(), [[2.0, 8.0]])


def test_wrong_number_of_shapes_is_a_clear_error():
    x = mx.sym.var("x")
    y = mx.sym.Custom(x, op_type="square_py", fail="shape", name="bad")
    with pytest.raises(mx.ShapeError) as e:
        y.infer_shape(x=(2, 3))
    assert "infer_shape returned 2 output shapes, expected 1" in str(e.value)
    assert "square_py" in str(e.value)
    y = mx.sym.Custom(x, op_type="square_py", fail="notuple", name="bad2")
    with pytest.raises(mx.LoomError) as e:
        y.simple_bind(mx.cpu(), x=(2, 3))
    assert "2 or 3 lists" in str(e.value)


@pytest.mark.parametrize("where", ["forward", "backward"])
def test_exception_in_callback_becomes_python_exception(where):
    x = mx.sym.var("x")
    y = mx.sym.Custom(x, op_type="square_py", fail=where, name="f")
    exe = y.simple_bind(mx.cpu(), x=(2, 2))
    FAIL_NOW["on"] = True
    with pytest.raises(mx.CustomOpError) as e:
        exe.forward(is_train=True)
        exe.backward(mx.nd.ones((2, 2)))
    msg = str(e.value)
    assert "ValueError: deliberate failure in " + where in msg
    assert "Traceback" in msg and "test_custom_op.py" in msg
    assert isinstance(e.value, mx.LoomError)
    FAIL_NOW["on"] = False  # the process and the executor keep working
    exe.forward(is_train=True, x=np.ones((2, 2)))
    exe.backward(mx.nd.ones((2, 2)))
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 2 * np.ones((2, 2)))


def test_unregistered_op_type():
    with pytest.raises(mx.ParamError) as e:
        mx.sym.Custom(mx.sym.var("x"), op_type="nope_not_here", name="c1")
    assert "'nope_not_here' is not registered" in str(e.value)
    assert "c1" in str(e.value)
    with pytest.raises(TypeError):
        mx.sym.Custom(mx.sym.var("x"))
    with pytest.raises(TypeError):
        mx.operator.register("x")(object)


def test_assign_req_semantics():
    op = mx.operator.CustomOp()
    dst = mx.nd.ones((2,))
    op.assign(dst, "null", mx.nd.full((2,), 5))
    assert dst.asnumpy().tolist() == [1, 1]
    op.assign(dst, "inplace", mx.nd.full((2,), 5))  # 'inplace' is 'write'
    assert dst.asnumpy().tolist() == [5, 5]
    op.assign(dst, "write", np.array([2.0, 3.0]))
    assert dst.asnumpy().tolist() == [2, 3]
    op.assign(dst, "add", mx.nd.full((2,), 1))
    assert dst.asnumpy().tolist() == [3, 4]


def test_defaults_of_prop():
    p = mx.operator.CustomOpProp()
    assert p.need_top_grad_ is True
    assert p.list_arguments() == ["data"] and p.list_outputs() == ["output"]
    assert p.declare_backward_dependency([0], [1], [2]) == [0, 1, 2]
    assert mx.operator.CustomOpProp(need_top_grad=False).declare_backward_dependency(
        [0], [1], [2]) == [1, 2]
    # Custom op types run through the operator "Custom"; MXNet lists operators only.
    assert "softmax_py" in mx._loom._custom_op_types()
    ops = mx.operator.get_all_registered_operators()
    assert "Custom" in ops and "Activation" in ops and "softmax_py" not in ops


def test_custom_op_forward_from_thread_with_gil_released():
    x = mx.sym.var("x")
    exe = mx.sym.Custom(x, op_type="square_py", name="t").simple_bind(mx.cpu(), x=(4, 4))
    done = []

    def run():
        for _ in range(20):
            exe.forward(is_train=True, x=np.ones((4, 4)))
        done.append(True)

    threads = [threading.Thread(target=run) for _ in range(1)]
    for t in threads:
        t.start()
    for _ in range(1000):  # Python work on the main thread meanwhile
        sum(range(100))
    for t in threads:
        t.join(60)
    assert done == [True]


def test_legacy_numpy_and_ndarray_ops():
    class Square(mx.operator.NumpyOp):
        def forward(self, in_data, out_data):
            out_data[0][:] = in_data[0] ** 2

        def backward(self, out_grad, in_data, out_data, in_grad):
            in_grad[0][:] = 2 * in_data[0] * out_grad[0]

    x = np.array([1.0, -2.0, 3.0], np.float32)
    s = Square().get_symbol(mx.sym.Variable("X"), name="sq")
    assert s.list_arguments() == ["X"]
    dx = mx.nd.zeros((3,))
    exe = s.bind(mx.cpu(), args=[mx.nd.array(x)], args_grad={"X": dx}, grad_req="add")
    for _ in range(2):  # req=add: the gradient accumulates
        exe.forward(is_train=True)
        exe.backward(mx.nd.ones((3,)))
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), x ** 2)
    np.testing.assert_array_equal(dx.asnumpy(), 2 * (2 * x))
    # NDArrayOp with the default identity forward/backward.
    ident = mx.operator.NDArrayOp().get_symbol(mx.sym.Variable("Y"))
    dy = mx.nd.zeros((3,))
    e2 = ident.bind(mx.cpu(), args=[mx.nd.array(x)], args_grad={"Y": dy})
    e2.forward(is_train=True)
    e2.backward(mx.nd.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(e2.outputs[0].asnumpy(), x)
    np.testing.assert_array_equal(dy.asnumpy(), [1.0, 2.0, 3.0])
