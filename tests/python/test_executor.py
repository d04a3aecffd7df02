import threading

import numpy as np
import pytest


def mlp(mx, hidden=16, classes=5):
    data = mx.sym.Variable("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=hidden, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = mx.sym.FullyConnected(act, num_hidden=classes, name="fc2")
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


def reference(x, y, w1, b1, w2, b2):
    """Forward probabilities and SoftmaxOutput gradients (normalization 'null': p - onehot)."""
    h_pre = x @ w1.T + b1
    h = np.maximum(h_pre, 0)
    z = h @ w2.T + b2
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    dz = p.copy()
    dz[np.arange(len(y)), y.astype(int)] -= 1
    g = {"fc2_weight": dz.T @ h, "fc2_bias": dz.sum(0)}
    dh = dz @ w2 * (h_pre > 0)
    g.update({"fc1_weight": dh.T @ x, "fc1_bias": dh.sum(0), "data": dh @ w1})
    return p, g


def setup(mx, exe, rng):
    vals = {}
    for name, arr in exe.arg_dict.items():
        if name == "softmax_label":
            v = rng.integers(0, 5, size=arr.shape).astype(np.float32)
        else:
            v = rng.standard_normal(arr.shape).astype(np.float32) * 0.5
        arr[:] = v
        vals[name] = v
    return vals


def test_simple_bind_forward_backward_matches_numpy(mx):
    rng = np.random.default_rng(0)
    net = mlp(mx)
    exe = net.simple_bind(mx.cpu(), data=(8, 20))
    assert exe.arg_dict["fc1_weight"].shape == (16, 20)
    assert all(np.all(a.asnumpy() == 0) for a in exe.arg_arrays)  # zero-filled
    v = setup(mx, exe, rng)
    outs = exe.forward(is_train=True)
    p, g = reference(v["data"], v["softmax_label"], v["fc1_weight"], v["fc1_bias"],
                     v["fc2_weight"], v["fc2_bias"])
    np.testing.assert_allclose(outs[0].asnumpy(), p, rtol=1e-4, atol=1e-6)
    exe.backward()
    for k, ref in g.items():
        np.testing.assert_allclose(exe.grad_dict[k].asnumpy(), ref, rtol=1e-3, atol=1e-5)
    assert list(exe.output_dict) == ["softmax_output"]
    assert exe.outputs[0] is outs[0]


def test_forward_kwargs_numpy_and_ndarray(mx):
    net = mlp(mx)
    exe = net.simple_bind(mx.cpu(), data=(4, 20), grad_req="null")
    x = np.random.rand(4, 20).astype(np.float32)
    exe.forward(data=x)
    np.testing.assert_array_equal(exe.arg_dict["data"].asnumpy(), x)
    exe.forward(data=mx.nd.array(x * 2))
    np.testing.assert_array_equal(exe.arg_dict["data"].asnumpy(), x * 2)
    with pytest.raises(mx.BindError):
        exe.forward(nope=x)
    with pytest.raises(mx.BindError):
        exe.forward(data=np.zeros((3, 20)))
    assert all(g is None for g in exe.grad_arrays)


def test_grad_req_add_accumulates(mx):
    rng = np.random.default_rng(1)
    net = mlp(mx)
    exe = net.simple_bind(mx.cpu(), grad_req="add", data=(8, 20))
    setup(mx, exe, rng)
    exe.forward(is_train=True)
    exe.backward()
    once = {k: v.asnumpy().copy() for k, v in exe.grad_dict.items() if v is not None}
    exe.forward(is_train=True)
    exe.backward()
    for k, g in once.items():
        if k == "softmax_label":
            continue
        np.testing.assert_allclose(exe.grad_dict[k].asnumpy(), 2 * g, rtol=1e-5, atol=1e-6)


def test_grad_req_list_and_dict(mx):
    net = mlp(mx)
    names = net.list_arguments()
    reqs = ["null" if n in ("data", "softmax_label") else "write" for n in names]
    exe = net.simple_bind(mx.cpu(), grad_req=reqs, data=(2, 20))
    assert exe.grad_dict["data"] is None and exe.grad_dict["fc1_weight"] is not None
    exe = net.simple_bind(mx.cpu(), grad_req={"fc2_weight": "write"}, data=(2, 20))
    assert [n for n, g in exe.grad_dict.items() if g is not None] == ["fc2_weight"]
    assert exe.grad_req["fc1_weight"] == "null"


def test_bind_uses_arrays_by_reference(mx):
    rng = np.random.default_rng(2)
    net = mlp(mx)
    shapes = dict(zip(net.list_arguments(), net.infer_shape(data=(8, 20))[0]))
    args = {k: mx.nd.array(rng.standard_normal(s) * 0.3) for k, s in shapes.items()}
    args["softmax_label"][:] = rng.integers(0, 5, 8)
    grads = {k: mx.nd.zeros(s) for k, s in shapes.items() if k not in ("softmax_label",)}
    exe = net.bind(mx.cpu(), args=args, args_grad=grads)
    assert exe.grad_dict["softmax_label"] is None  # no gradient array -> null
    exe.forward(is_train=True)
    first = exe.outputs[0].asnumpy()
    args["data"][:] = args["data"].asnumpy() * 2  # seen by the executor: bound by reference
    exe.forward(is_train=True)
    assert not np.allclose(first, exe.outputs[0].asnumpy())
    exe.backward()
    v = {k: a.asnumpy() for k, a in args.items()}
    _, g = reference(v["data"], v["softmax_label"], v["fc1_weight"], v["fc1_bias"],
                     v["fc2_weight"], v["fc2_bias"])
    np.testing.assert_allclose(grads["fc1_weight"].asnumpy(), g["fc1_weight"], rtol=1e-3, atol=1e-5)
    assert exe.grad_dict["fc1_weight"]._same_memory(grads["fc1_weight"])
    # list form, in list_arguments order
    exe2 = net.bind(mx.cpu(), [args[n] for n in net.list_arguments()])
    exe2.forward()
    np.testing.assert_allclose(exe2.outputs[0].asnumpy(), exe.outputs[0].asnumpy(), rtol=1e-6)
    with pytest.raises(mx.BindError):
        net.bind(mx.cpu(), {k: a for k, a in args.items() if k != "fc1_bias"})


def test_head_gradients(mx):
    x = mx.sym.var("x")
    y = mx.sym.FullyConnected(x, num_hidden=3, no_bias=True, name="fc")
    exe = y.simple_bind(mx.cpu(), x=(2, 4))
    w = np.random.rand(3, 4).astype(np.float32)
    xv = np.random.rand(2, 4).astype(np.float32)
    exe.copy_params_from({"fc_weight": mx.nd.array(w)})
    exe.forward(is_train=True, x=xv)
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), xv @ w.T, rtol=1e-5)
    with pytest.raises(mx.BindError) as e:
        exe.backward()
    assert "head gradient" in str(e.value)
    hg = np.random.rand(2, 3).astype(np.float32)
    exe.backward(mx.nd.array(hg))
    np.testing.assert_allclose(exe.grad_dict["fc_weight"].asnumpy(), hg.T @ xv, rtol=1e-5)
    exe.backward({"fc_output": mx.nd.array(2 * hg)})
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 2 * hg @ w, rtol=1e-5)
    with pytest.raises(mx.BindError):
        exe.copy_params_from({"nope": mx.nd.zeros((1,))})
    exe.copy_params_from({"nope": mx.nd.zeros((1,))}, allow_extra_params=True)


def test_batchnorm_aux_updates_in_training(mx):
    x = mx.sym.var("data")
    net = mx.sym.MakeLoss(mx.sym.sum(mx.sym.BatchNorm(x, name="bn", fix_gamma=False)))
    exe = net.simple_bind(mx.cpu(), data=(6, 3))
    assert list(exe.aux_dict) == ["bn_moving_mean", "bn_moving_var"]
    exe.arg_dict["bn_gamma"][:] = 1
    exe.aux_dict["bn_moving_var"][:] = 1
    data = np.random.rand(6, 3).astype(np.float32) + 3
    exe.forward(is_train=True, data=data)
    exe.backward()
    mm = exe.aux_dict["bn_moving_mean"].asnumpy()
    np.testing.assert_allclose(mm, 0.1 * data.mean(0), rtol=1e-4)


def test_forward_in_other_thread(mx):
    net = mlp(mx)
    exe = net.simple_bind(mx.cpu(), data=(4, 20))
    errors = []

    def run():
        try:
            for _ in range(5):
                exe.forward(is_train=True)
                exe.backward()
        except Exception as e:  # pragma: no cover
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert not t.is_alive() and not errors


# ---------------------------------------------------------------------------------------
# common-subexpression elimination, reshape, backward monitor

@pytest.mark.parametrize("cse", ["0", "1"])
@pytest.mark.parametrize("req", ["write", "add"])
def test_common_subexpressions_merge_with_the_same_results(mx, monkeypatch, cse, req):
    monkeypatch.setenv("MXNET_ELIMINATE_COMMON_EXPR", cse)
    a, b = mx.sym.Variable("a"), mx.sym.Variable("b")
    rng = np.random.RandomState(0)
    av, bv = rng.rand(3, 4), rng.rand(3, 4)
    ga = rng.rand(3, 4)
    # (sin(a*b) + sin(a*b)) * b: 2 sin(ab) b; d/da = 2 cos(ab) b^2, d/db = 2 cos(ab) ab + 2 sin(ab)
    s = (mx.sym.sin(a * b) + mx.sym.sin(a * b)) * b
    exe = s.simple_bind(mx.cpu(), grad_req=req, a=(3, 4), b=(3, 4))
    exe.grad_dict["a"][:] = 1.0
    exe.grad_dict["b"][:] = 1.0
    out = exe.forward(is_train=True, a=av, b=bv)[0].asnumpy()
    exe.backward(mx.nd.array(ga))
    base = 1.0 if req == "add" else 0.0
    np.testing.assert_allclose(out, 2 * np.sin(av * bv) * bv, rtol=1e-5)
    np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(),
                               base + ga * 2 * np.cos(av * bv) * bv * bv, rtol=1e-5)
    np.testing.assert_allclose(exe.grad_dict["b"].asnumpy(),
                               base + ga * (2 * np.cos(av * bv) * av * bv + 2 * np.sin(av * bv)),
                               rtol=1e-5)
    internals = exe.get_optimized_symbol().get_internals().list_outputs()
    # a, b, a*b, sin, (a*b, sin again without the pass), +, *
    assert len(internals) == (6 if cse == "1" else 8)
    assert exe.output_dict.keys() == {s.list_outputs()[0]}
    # The symbol the user bound is unchanged.
    assert len(s.get_internals().list_outputs()) == 8


def test_common_subexpressions_outputs_stay_apart_and_random_ops_stay(mx, monkeypatch):
    monkeypatch.delenv("MXNET_ELIMINATE_COMMON_EXPR", raising=False)
    a = mx.sym.Variable("a")
    d = a + 1
    g = mx.sym.Group([a * d, a * d])
    exe = g.simple_bind(mx.cpu(), a=(2, 3))
    av = np.arange(6.0).reshape(2, 3)
    o1, o2 = exe.forward(is_train=True, a=av)
    exe.backward([mx.nd.ones((2, 3)), mx.nd.ones((2, 3)) * 2])
    np.testing.assert_allclose(o1.asnumpy(), av * (av + 1))
    np.testing.assert_allclose(o2.asnumpy(), av * (av + 1))
    o1[:] = 0  # two arrays, not one
    assert np.all(o2.asnumpy() == av * (av + 1))
    np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(), 3 * (2 * av + 1))
    opt = exe.get_optimized_symbol()
    assert opt.get_internals().list_outputs()[-1].endswith("_0_copy_output")
    assert len(opt.get_internals().list_outputs()) == len(g.get_internals().list_outputs())
    # Two Dropouts on one input are two draws.
    s = mx.sym.Dropout(a, p=0.5) + mx.sym.Dropout(a, p=0.5)
    e = s.simple_bind(mx.cpu(), a=(2, 3))
    assert len(e.get_optimized_symbol().get_internals().list_outputs()) == \
        len(s.get_internals().list_outputs())


def test_reshape_shares_memory_like_mxnet(mx):
    x = mx.sym.Variable("x")
    y = mx.sym.FullyConnected(x, num_hidden=4, name="fc")
    exe = y.simple_bind(mx.cpu(), x=(5, 4), grad_req="null")
    exe.arg_dict["x"][:] = 1
    exe.arg_dict["fc_weight"][:] = np.arange(16.0).reshape(4, 4)
    exe.arg_dict["fc_bias"][:] = 0.5
    expect = np.arange(16.0).reshape(4, 4).sum(1) + 0.5   # every row of x is ones
    new = exe.reshape(x=(3, 4))
    new.forward()
    np.testing.assert_allclose(new.outputs[0].asnumpy(), np.tile(expect, (3, 1)))
    # The smaller output is the start of the old one; the weight is the same array.
    np.testing.assert_allclose(exe.outputs[0].asnumpy()[:3], np.tile(expect, (3, 1)))
    new.arg_dict["fc_bias"][:] = 1.5
    assert np.all(exe.arg_dict["fc_bias"].asnumpy() == 1.5)
    # Larger: new arrays for the data (allow_up_sizing), the weights still shared.
    with pytest.raises(mx.base.MXNetError, match="allow_up_sizing"):
        exe.reshape(x=(6, 4))
    big = exe.reshape(allow_up_sizing=True, x=(6, 4))
    big.arg_dict["x"][:] = 0
    assert np.all(exe.arg_dict["x"].asnumpy() == 1)
    assert big.arg_dict["fc_weight"].asnumpy()[1, 1] == 5
    # An argument whose shape changes without being named needs partial_shaping.
    z = mx.sym.Variable("z")
    s2 = mx.sym.elemwise_add(x, z)
    e2 = s2.simple_bind(mx.cpu(), x=(4, 3), z=(4, 3), grad_req="null")
    with pytest.raises(mx.base.MXNetError, match="partial_shaping"):
        e2.reshape(x=(2, 3))
    e3 = e2.reshape(partial_shaping=True, x=(2, 3), z=(2, 3))
    assert e3.outputs[0].shape == (2, 3)


def test_reshape_and_module_reshape_keep_the_monitor_callback(mx):
    data = mx.sym.Variable("data", shape=(1, 3, 4, 4))
    sym = mx.sym.Convolution(data, kernel=(1, 1), num_filter=1, name="conv")
    exe = sym.simple_bind(mx.cpu(), data=(1, 3, 4, 4))
    seen = []
    exe.set_monitor_callback(lambda n, a: seen.append((n, a.shape)))
    # A shape given at bind wins over the variable's __shape__ (as in MXNet).
    new = exe.reshape(allow_up_sizing=True, data=(1, 3, 4, 6))
    new.forward()
    assert seen == [("conv_output", (1, 1, 4, 6))]
    mod = mx.mod.Module(sym, label_names=None)
    mod.bind(for_training=False, data_shapes=[("data", (1, 3, 4, 4))])
    mod.init_params()
    seen.clear()
    mod._exec_group.execs[0].set_monitor_callback(lambda n, a: seen.append((n, a.shape)))
    mod.forward(mx.io.DataBatch([mx.nd.ones((1, 3, 4, 7))]), is_train=False)
    assert seen == [("conv_output", (1, 1, 4, 7))]


def test_backward_monitor_reports_input_gradients(mx):
    x = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(x, num_hidden=2, name="fc")
    act = mx.sym.Activation(fc, act_type="sigmoid", name="act")
    exe = act.simple_bind(mx.cpu(), data=(3, 4), grad_req={"data": "null", "fc_weight": "write",
                                                             "fc_bias": "write"})
    rng = np.random.RandomState(1)
    xv, w, b, g = rng.randn(3, 4), rng.randn(2, 4), rng.randn(2), rng.randn(3, 2)
    exe.arg_dict["data"][:] = xv
    exe.arg_dict["fc_weight"][:] = w
    exe.arg_dict["fc_bias"][:] = b
    seen = {}
    exe.set_monitor_callback(lambda n, a: seen.__setitem__(n, a.asnumpy().copy()))
    exe.forward(is_train=True)
    seen.clear()
    exe.backward(mx.nd.array(g))
    sig = 1 / (1 + np.exp(-(xv @ w.T + b)))
    dpre = g * sig * (1 - sig)
    assert sorted(seen) == ["act_backward_output", "fc_backward_output0",
                            "fc_backward_output1", "fc_backward_output2"]
    np.testing.assert_allclose(seen["act_backward_output"], dpre, rtol=1e-5, atol=1e-6)
    assert np.all(seen["fc_backward_output0"] == 0)  # grad_req null: not computed
    np.testing.assert_allclose(seen["fc_backward_output1"], dpre.T @ xv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(seen["fc_backward_output2"], dpre.sum(0), rtol=1e-5, atol=1e-6)
    exe.set_monitor_callback(None)
    seen.clear()
    exe.forward(is_train=True)
    exe.backward(mx.nd.array(g))
    assert seen == {}
