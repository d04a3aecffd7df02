"""Layout propagation, Winograd, BatchNorm+ReLU fusion and cached convolution weights give the
same results as the plain paths, and every Python way of changing a weight is seen."""
import numpy as np
import pytest


def block(mx, channels=16):
    data = mx.sym.Variable("data")
    x = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=channels, no_bias=True,
                           name="conv0")
    x = mx.sym.Activation(mx.sym.BatchNorm(x, fix_gamma=False, name="bn0"), act_type="relu",
                          name="relu0")
    y = mx.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=channels, name="conv1")
    y = mx.sym.Activation(mx.sym.BatchNorm(y, fix_gamma=False, name="bn1"), act_type="relu",
                          name="relu1")
    s = mx.sym.elemwise_add(y, x, name="plus")
    s = mx.sym.Pooling(s, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool")
    s = mx.sym.Pooling(s, global_pool=True, kernel=(1, 1), pool_type="avg", name="gap")
    fc = mx.sym.FullyConnected(mx.sym.Flatten(s), num_hidden=4, name="fc")
    return mx.sym.SoftmaxOutput(fc, name="softmax")


def run(mx, monkeypatch, env, shape=(2, 8, 20, 20)):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    sym = block(mx)
    exe = sym.simple_bind(mx.cpu(), data=shape, grad_req="write")
    for k in env:
        monkeypatch.delenv(k)
    rng = np.random.default_rng(0)
    for name, arr in exe.arg_dict.items():
        if name == "softmax_label":
            arr[:] = np.arange(shape[0]) % 4
        elif name.endswith("gamma"):
            arr[:] = 1 + 0.1 * rng.standard_normal(arr.shape)
        else:
            arr[:] = 0.3 * rng.standard_normal(arr.shape)
    for name, arr in exe.aux_dict.items():
        arr[:] = 1.0 if "var" in name else 0.0
    exe.forward(is_train=True)
    exe.backward()
    res = {"out": exe.outputs[0].asnumpy()}
    res.update({"grad_" + k: g.asnumpy() for k, g in exe.grad_dict.items() if g is not None})
    res.update({"aux_" + k: a.asnumpy() for k, a in exe.aux_dict.items()})
    exe.forward(is_train=False)
    res["infer"] = exe.outputs[0].asnumpy()
    return res


@pytest.mark.parametrize("off", [{"LOOM_LAYOUT_PROPAGATION": "0"}, {"LOOM_FUSE_EPILOGUE": "0"},
                                 {"LOOM_CONV_WINOGRAD": "0"}])
def test_fast_paths_match_plain(mx, monkeypatch, off):
    fast, plain = run(mx, monkeypatch, {}), run(mx, monkeypatch, off)
    tol = 1e-4 if "LOOM_CONV_WINOGRAD" in off else 1e-5
    for k in plain:
        scale = max(1.0, float(np.abs(plain[k]).max()))
        np.testing.assert_allclose(fast[k], plain[k], rtol=tol, atol=tol * scale, err_msg=k)


def test_cached_weights_see_every_python_write(mx):
    data = mx.sym.Variable("data")
    sym = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=32, name="conv")
    exe = sym.simple_bind(mx.cpu(), data=(1, 16, 8, 8), grad_req="null")
    rng = np.random.default_rng(1)
    exe.arg_dict["data"][:] = rng.standard_normal((1, 16, 8, 8))
    w = exe.arg_dict["conv_weight"]

    def check():
        exe.forward(is_train=False)
        x = exe.arg_dict["data"].asnumpy()
        want = mx.nd.Convolution(mx.nd.array(x), mx.nd.array(w.asnumpy()),
                                 exe.arg_dict["conv_bias"], kernel=(3, 3), pad=(1, 1),
                                 num_filter=32).asnumpy()
        np.testing.assert_allclose(exe.outputs[0].asnumpy(), want, rtol=1e-5, atol=1e-5)

    w[:] = rng.standard_normal(w.shape) * 0.2  # assignment
    check()
    check()  # served from the cache
    w[:] = 0.5  # fill
    check()
    w._copy_from(mx.nd.array(rng.standard_normal(w.shape)))  # copy between arrays
    check()
    w[1:3] = 0.0  # a slice of the weights
    check()
    view = w.asnumpy(copy=False)  # a live NumPy view: writes through it are seen too
    check()
    view[0, 0, 0, 0] = 7.0
    view[5] *= -1
    check()
