"""Inference in sample chunks from Python: Module.predict and a grad_req='null' simple_bind
executor give the same outputs chunked as whole (LOOM_INFER_CHUNK=0), the executor reports its
choice, and a training Module keeps whole batches."""
import os

import numpy as np
import pytest


def _net(mx, classes=5):
    data = mx.sym.Variable("data")
    c = mx.sym.Convolution(data, num_filter=8, kernel=(3, 3), pad=(1, 1), name="c0")
    r = mx.sym.Activation(mx.sym.BatchNorm(c, fix_gamma=False, name="bn0"), act_type="relu")
    d = mx.sym.Convolution(r, num_filter=8, num_group=8, kernel=(3, 3), pad=(1, 1), name="dw")
    p = mx.sym.LeakyReLU(mx.sym.BatchNorm(d, fix_gamma=False, name="bn1"), act_type="prelu",
                         name="p1")
    g = mx.sym.Pooling(p, global_pool=True, kernel=(1, 1), pool_type="avg")
    f = mx.sym.FullyConnected(mx.sym.Flatten(g), num_hidden=classes, name="fc")
    return mx.sym.SoftmaxOutput(f, name="softmax")


@pytest.fixture
def chunk_env():
    """Sets LOOM_INFER_CHUNK for a test (None: the automatic choice), restores it after."""
    old = os.environ.get("LOOM_INFER_CHUNK")

    def set_to(value):
        if value is None:
            os.environ.pop("LOOM_INFER_CHUNK", None)
        else:
            os.environ["LOOM_INFER_CHUNK"] = value
    yield set_to
    set_to(old)


def _predict(mx, arg_params, aux_params, x, chunk_env, value, for_training=False):
    chunk_env(value)
    mod = mx.mod.Module(_net(mx), context=mx.cpu())
    mod.bind(data_shapes=[("data", (8,) + x.shape[1:])], label_shapes=[("softmax_label", (8,))],
             for_training=for_training)
    mod.set_params(arg_params, aux_params)
    out = mod.predict(mx.io.NDArrayIter(x, batch_size=8)).asnumpy()
    return out, mod._exec_group.execs[0]


def test_module_predict_in_chunks_matches_whole_batches(mx, chunk_env):
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, (24, 3, 10, 10)).astype(np.float32)
    mod = mx.mod.Module(_net(mx), context=mx.cpu())
    mod.bind(data_shapes=[("data", (8, 3, 10, 10))], label_shapes=[("softmax_label", (8,))])
    mod.init_params(mx.init.Uniform(0.5))
    arg, aux = mod.get_params()
    for k in aux:
        aux[k][:] = rng.uniform(0.5, 2.0, aux[k].shape) if "var" in k else \
            rng.uniform(-0.3, 0.3, aux[k].shape)
    whole, exe0 = _predict(mx, arg, aux, x, chunk_env, "0")
    assert exe0.inference_chunk == 0 and "LOOM_INFER_CHUNK=0" in exe0.inference_chunk_note
    for value, expect in (("2", 2), ("4", 4), ("3", 2)):
        got, exe = _predict(mx, arg, aux, x, chunk_env, value)
        assert exe.inference_chunk == expect, exe.inference_chunk_note
        np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-6)
    # A Module bound for training keeps whole batches for predict too (its executor computes
    # gradients), with the same answer.
    got, exe = _predict(mx, arg, aux, x, chunk_env, "2", for_training=True)
    assert exe.inference_chunk == 0 and "gradients" in exe.inference_chunk_note
    np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-6)


def test_simple_bind_chooses_chunks_by_itself(mx, chunk_env):
    chunk_env(None)
    # 8 channels of 224x224: 3.2 MB a sample for the largest layer, 103 MB for 32, past
    # twice the 32 MB cache budget: chunks of 10 fit it, 8 divide the batch.
    shapes = {"data": (32, 3, 224, 224), "softmax_label": (32,)}
    exe = _net(mx).simple_bind(mx.cpu(), grad_req="null", **shapes)
    rng = np.random.RandomState(1)
    for k, v in exe.arg_dict.items():
        v[:] = rng.uniform(0.5, 1.5, v.shape) if "gamma" in k else rng.uniform(-0.5, 0.5, v.shape)
    for k, v in exe.aux_dict.items():
        v[:] = rng.uniform(0.5, 2.0, v.shape) if "var" in k else rng.uniform(-0.3, 0.3, v.shape)
    exe.forward(is_train=False)
    assert exe.inference_chunk == 8, exe.inference_chunk_note
    chunk_env("0")
    ref = _net(mx).bind(mx.cpu(), args=exe.arg_dict, aux_states=exe.aux_dict, grad_req="null")
    ref.forward(is_train=False)
    assert ref.inference_chunk == 0
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), ref.outputs[0].asnumpy(), rtol=1e-5,
                               atol=1e-6)
