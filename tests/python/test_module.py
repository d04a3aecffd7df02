"""mx.mod.Module / BucketingModule, mx.model.FeedForward, mx.callback and mx.kv against NumPy
references (the MXNet-oracle comparisons are in tests/conformance/test_8_module.py)."""
import logging
import os

import numpy as np
import pytest


def _linreg(mx, nout=2):
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=nout, name="fc")
    return mx.sym.LinearRegressionOutput(fc, name="lro")


def _batch(mx, x, y=None):
    return mx.io.DataBatch([mx.nd.array(x)], None if y is None else [mx.nd.array(y)])


def _np_grads(w, b, x, y):
    """LinearRegressionOutput's gradients: d/dout = (out - y) / num_output (MXNet's
    regression heads scale by the outputs per sample, not by the batch)."""
    out = x.dot(w.T) + b
    d = (out - y) / y.shape[1]
    return out, d.T.dot(x), d.sum(0), d.dot(w)


def test_sgd_momentum_steps_match_numpy(mx):
    rs = np.random.RandomState(0)
    x = rs.randn(4, 3).astype(np.float32)
    y = rs.randn(4, 2).astype(np.float32)
    w = rs.randn(2, 3).astype(np.float32)
    b = rs.randn(2).astype(np.float32)
    mod = mx.mod.Module(_linreg(mx), label_names=["lro_label"])
    mod.bind([("data", (4, 3))], [("lro_label", (4, 2))])
    mod.init_params(arg_params={"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.array(b)})
    lr, mom, wd = 0.1, 0.9, 0.01
    mod.init_optimizer(optimizer="sgd",
                       optimizer_params={"learning_rate": lr, "momentum": mom, "wd": wd})
    vw, vb = np.zeros_like(w), np.zeros_like(b)
    ww, bb = w.astype(np.float64), b.astype(np.float64)
    for _ in range(3):
        mod.forward_backward(_batch(mx, x, y))
        out, gw, gb, _ = _np_grads(ww, bb, x, y)
        np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), out, rtol=1e-5, atol=1e-5)
        mod.update()
        # rescale_grad 1/batch_size; wd only on the weight (MXNet's wd_mult rule)
        vw = mom * vw - lr * (gw / 4 + wd * ww)
        vb = mom * vb - lr * (gb / 4)
        ww, bb = ww + vw, bb + vb
        args, _ = mod.get_params()
        np.testing.assert_allclose(args["fc_weight"].asnumpy(), ww, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(args["fc_bias"].asnumpy(), bb, rtol=1e-5, atol=1e-6)
    assert mod._updater.num_update == 3
    # the update graph reads the gradient arrays directly: no accumulators, no loss
    assert sorted(mod._updater.aux) == ["fc_bias_mom", "fc_weight_mom", "step_micro",
                                        "step_real"]
    # a script changing the learning rate between updates gets it (states carried over)
    mod._optimizer.lr = lr = 0.02
    mod.forward_backward(_batch(mx, x, y))
    _, gw, gb, _ = _np_grads(ww, bb, x, y)
    mod.update()
    vw = mom * vw - lr * (gw / 4 + wd * ww)
    np.testing.assert_allclose(mod.get_params()[0]["fc_weight"].asnumpy(), ww + vw, rtol=1e-5,
                               atol=1e-6)


def test_fixed_params_and_input_grads(mx):
    rs = np.random.RandomState(1)
    x = rs.randn(3, 4).astype(np.float32)
    y = rs.randn(3, 2).astype(np.float32)
    w = rs.randn(2, 4).astype(np.float32)
    mod = mx.mod.Module(_linreg(mx), label_names=["lro_label"], fixed_param_names=["fc_weight"])
    mod.bind([("data", (3, 4))], [("lro_label", (3, 2))], inputs_need_grad=True)
    mod.init_params(arg_params={"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.zeros((2,))})
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 1.0})
    mod.forward_backward(_batch(mx, x, y))
    _, _, gb, gx = _np_grads(w, np.zeros(2), x, y)
    np.testing.assert_allclose(mod.get_input_grads()[0].asnumpy(), gx, rtol=1e-5, atol=1e-5)
    mod.update()
    args, _ = mod.get_params()
    np.testing.assert_array_equal(args["fc_weight"].asnumpy(), w)  # fixed
    np.testing.assert_allclose(args["fc_bias"].asnumpy(), -gb / 3, rtol=1e-5, atol=1e-6)
    assert mod._exec_group.grad_req["fc_weight"] == "null"
    assert mod._exec_group.grad_req["data"] == "write"


def test_forward_reshapes_for_other_batch_sizes(mx):
    rs = np.random.RandomState(2)
    w = rs.randn(2, 3).astype(np.float32)
    fc = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=2, name="fc")
    mod = mx.mod.Module(fc, label_names=None)
    mod.bind([("data", (4, 3))], for_training=False)
    mod.init_params(arg_params={"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.zeros((2,))})
    for n in (4, 7, 2):
        x = rs.randn(n, 3).astype(np.float32)
        mod.forward(_batch(mx, x), is_train=False)
        np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), x.dot(w.T), rtol=1e-5,
                                   atol=1e-6)
        assert mod.data_shapes[0].shape == (n, 3)
    # predict over an iterator with padding drops the padded rows
    x = rs.randn(10, 3).astype(np.float32)
    it = mx.io.NDArrayIter(x, batch_size=4)
    np.testing.assert_allclose(mod.predict(it).asnumpy(), x.dot(w.T), rtol=1e-5, atol=1e-6)
    # an input left out of data_names is a parameter: it cannot follow the batch size
    lro = mx.mod.Module(_linreg(mx), label_names=None)
    lro.bind([("data", (4, 3))], for_training=False)
    lro.init_params(initializer=None, allow_missing=True)
    with pytest.raises(mx.LoomError, match="lro_label"):
        lro.forward(_batch(mx, np.zeros((5, 3))))


def test_misuse_raises_clear_errors(mx):
    from loom.module import ModuleError
    net = _linreg(mx)
    with pytest.raises(mx.LoomError, match="'nodata'"):  # also a ValueError, as in MXNet
        mx.mod.Module(net, data_names=["nodata"])
    mod = mx.mod.Module(net, label_names=["lro_label"])
    with pytest.raises(ModuleError, match="not bound"):
        mod.forward(_batch(mx, np.zeros((2, 3))))
    assert issubclass(ModuleError, mx.LoomError)
    with pytest.raises(TypeError, match="'data'"):
        mod.bind([("data", mx.nd.array([2, 3]))])
    with pytest.raises(mx.LoomError, match="data"):
        mod.bind([("label", (2, 3))])
    mod.bind([("data", (2, 3))], [("lro_label", (2, 2))])
    mod.init_params()
    with pytest.raises(ModuleError, match="init_optimizer"):
        mod.update()
    with pytest.raises(mx.LoomError, match=r"\(2, 3\)"):
        mod.init_params(arg_params={"fc_weight": mx.nd.zeros((3, 3))}, allow_missing=True,
                        force_init=True)
    with pytest.raises(mx.LoomError, match=r"\(2, 5\)"):  # features do not fit the weights
        mod.forward(_batch(mx, np.zeros((2, 5)), np.zeros((2, 2))))
    with pytest.raises(ValueError, match="zz_weight"):
        mod.set_params({"zz_weight": mx.nd.zeros((1,))}, {}, allow_missing=True)


def test_checkpoint_and_optimizer_states_resume(mx, tmp_path):
    rs = np.random.RandomState(3)
    x = rs.randn(6, 3).astype(np.float32)
    y = rs.randn(6, 2).astype(np.float32)
    params = {"fc_weight": mx.nd.array(rs.randn(2, 3)), "fc_bias": mx.nd.zeros((2,))}
    opt = {"learning_rate": 0.05, "momentum": 0.9}

    def new():
        m = mx.mod.Module(_linreg(mx), label_names=["lro_label"])
        m.bind([("data", (6, 3))], [("lro_label", (6, 2))])
        return m
    a = new()
    a.init_params(arg_params=params)
    a.init_optimizer(optimizer="sgd", optimizer_params=opt)
    for _ in range(2):
        a.forward_backward(_batch(mx, x, y))
        a.update()
    prefix = str(tmp_path / "m")
    a.save_checkpoint(prefix, 2, save_optimizer_states=True)
    assert sorted(os.listdir(str(tmp_path))) == ["m-0002.params", "m-0002.states",
                                                  "m-symbol.json"]
    b = mx.mod.Module.load(prefix, 2, load_optimizer_states=True, label_names=["lro_label"])
    b.bind([("data", (6, 3))], [("lro_label", (6, 2))])
    b.init_optimizer(optimizer="sgd", optimizer_params=opt)
    np.testing.assert_array_equal(b._updater.states[0].asnumpy(), a._updater.states[0].asnumpy())
    for m in (a, b):
        for _ in range(2):
            m.forward_backward(_batch(mx, x, y))
            m.update()
    for k in params:
        np.testing.assert_array_equal(a.get_params()[0][k].asnumpy(),
                                      b.get_params()[0][k].asnumpy())
    # save_params / load_params round trip
    a.save_params(str(tmp_path / "p.params"))
    c = new()
    c.init_params()
    c.load_params(str(tmp_path / "p.params"))
    np.testing.assert_array_equal(c.get_params()[0]["fc_weight"].asnumpy(),
                                  a.get_params()[0]["fc_weight"].asnumpy())
    with pytest.raises(mx.LoomError, match="Loom Module"):
        with open(str(tmp_path / "bad.states"), "wb") as f:
            f.write(b"not states")
        b.load_optimizer_states(str(tmp_path / "bad.states"))


def test_python_optimizer_falls_back_to_updater(mx, tmp_path):
    class HalfStep(mx.optimizer.Optimizer):
        """w -= lr * g / 2 with a call counter as its state."""

        def create_state(self, index, weight):
            return mx.nd.zeros((1,))

        def update(self, index, weight, grad, state):
            weight[:] = weight.asnumpy() - self.lr * 0.5 * grad.asnumpy()
            state[:] = state.asnumpy() + 1

    rs = np.random.RandomState(4)
    x = rs.randn(2, 3).astype(np.float32)
    y = rs.randn(2, 2).astype(np.float32)
    w = rs.randn(2, 3).astype(np.float32)
    mod = mx.mod.Module(_linreg(mx), label_names=["lro_label"])
    mod.bind([("data", (2, 3))], [("lro_label", (2, 2))])
    mod.init_params(arg_params={"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.zeros((2,))})
    mod.init_optimizer(optimizer=HalfStep(learning_rate=0.2, rescale_grad=0.5))
    mod.forward_backward(_batch(mx, x, y))
    _, gw, _, _ = _np_grads(w, np.zeros(2), x, y)
    mod.update()
    np.testing.assert_allclose(mod.get_params()[0]["fc_weight"].asnumpy(), w - 0.1 * gw,
                               rtol=1e-5, atol=1e-6)
    path = str(tmp_path / "s.states")
    mod.save_optimizer_states(path)
    mod.load_optimizer_states(path)
    assert float(mod._updater.states[0].asnumpy()[0]) == 1.0


def test_bucketing_module_shares_parameters(mx):
    def sym_gen(n):
        data = mx.sym.Variable("data")
        s = mx.sym.sum(data, axis=1, keepdims=True)
        w = mx.sym.Variable("a", shape=(1,))
        out = mx.sym.make_loss(mx.sym.broadcast_mul(s, w))
        return out, ("data",), None

    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=3)
    mod.bind([("data", (2, 3))])
    mod.init_params(arg_params={"a": mx.nd.array([2.0])})
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1,
                                                          "rescale_grad": 1.0})
    a = 2.0
    for n in (3, 5, 3):
        x = np.arange(2 * n, dtype=np.float32).reshape(2, n)
        mod.forward_backward(mx.io.DataBatch([mx.nd.array(x)], None, bucket_key=n,
                                             provide_data=[mx.io.DataDesc("data", (2, n))]))
        np.testing.assert_allclose(mod.get_outputs()[0].asnumpy().ravel(),
                                   x.sum(1) * a, rtol=1e-6)
        mod.update()
        a -= 0.1 * x.sum()
        np.testing.assert_allclose(mod.get_params()[0]["a"].asnumpy(), [a], rtol=1e-6)
    assert sorted(mod._buckets) == [3, 5]
    assert mod._buckets[5]._exec_group.execs[0].arg_dict["a"] is not None


def test_fit_logs_and_callbacks(mx, caplog, tmp_path):
    rs = np.random.RandomState(5)
    x = rs.randn(12, 3).astype(np.float32)
    y = rs.randn(12, 2).astype(np.float32)
    it = mx.io.NDArrayIter(x, y, batch_size=4, label_name="lro_label")
    mod = mx.mod.Module(_linreg(mx), label_names=["lro_label"])
    seen = []
    with caplog.at_level(logging.INFO):
        mod.fit(it, eval_data=it, eval_metric="mse", num_epoch=2,
                optimizer_params={"learning_rate": 0.01},
                batch_end_callback=[mx.callback.Speedometer(4, 1),
                                    lambda p: seen.append((p.epoch, p.nbatch))],
                epoch_end_callback=mx.callback.do_checkpoint(str(tmp_path / "ck"), 2))
    msgs = [r.getMessage() for r in caplog.records]
    assert seen == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    import re
    assert any(re.fullmatch(r"Epoch\[0\] Batch \[1-2\]\tSpeed: [0-9.]+ samples/sec\tmse=[0-9.]+", m)
               for m in msgs), msgs
    for pat in (r"Epoch\[1\] Train-mse=[0-9.]+", r"Epoch\[1\] Time cost=[0-9.]+",
                r"Epoch\[1\] Validation-mse=[0-9.]+"):
        assert any(re.fullmatch(pat, m) for m in msgs), (pat, msgs)
    assert os.path.exists(str(tmp_path / "ck-0002.params"))
    assert not os.path.exists(str(tmp_path / "ck-0001.params"))
    # the final Train-mse is the metric over the last epoch's batches
    res = dict(mod.score(it, "mse"))
    assert res["mse"] >= 0


def test_progress_bar_and_log_metric_formats(mx, caplog):
    from loom.callback import BatchEndParam
    m = mx.metric.create("acc")
    m.update([mx.nd.array([0, 1])], [mx.nd.array([[0.9, 0.1], [0.2, 0.8]])])
    with caplog.at_level(logging.INFO):
        mx.callback.ProgressBar(total=4, length=8)(BatchEndParam(0, 1, m, None))
        mx.callback.log_train_metric(1)(BatchEndParam(2, 3, m, None))
        mx.callback.LogValidationMetricsCallback()(BatchEndParam(1, 3, m, None))
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == ["[==------] 25%\r", "Iter[2] Batch[3] Train-accuracy=1.000000",
                    "Epoch[1] Validation-accuracy=1.000000"]


def test_feedforward_numpy_and_roundtrip(mx, tmp_path):
    import warnings
    rs = np.random.RandomState(6)
    x = rs.randn(40, 4).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32)
    data = mx.sym.Variable("data")
    net = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(data, num_hidden=2, name="fc"),
                               name="softmax")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mx.model.FeedForward.create(net, X=x, y=y, num_epoch=20, numpy_batch_size=10,
                                            learning_rate=0.5, initializer=mx.init.Xavier())
    assert model.score(mx.io.NDArrayIter(x, y, batch_size=10)) > 0.9
    p = model.predict(x)
    assert p.shape == (40, 2)
    prefix = str(tmp_path / "ff")
    model.save(prefix)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = mx.model.FeedForward.load(prefix, 20)
    np.testing.assert_array_equal(loaded.predict(x), p)
    w = model.arg_params["fc_weight"].asnumpy()
    b = model.arg_params["fc_bias"].asnumpy()
    z = x.dot(w.T) + b
    ref = np.exp(z - z.max(1, keepdims=True))
    np.testing.assert_allclose(p, ref / ref.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_kvstore_local(mx, tmp_path):
    kv = mx.kv.create("local")
    assert (kv.type, kv.rank, kv.num_workers) == ("local", 0, 1)
    kv.init(3, mx.nd.zeros((2, 2)))
    kv.init([5, 7], [mx.nd.ones((2, 2)), mx.nd.ones((2, 2))])
    kv.push(3, [mx.nd.ones((2, 2)) * i for i in range(1, 4)])  # summed: 6
    outs = [mx.nd.zeros((2, 2)) for _ in range(3)]
    kv.pull(3, out=outs)
    for o in outs:
        np.testing.assert_array_equal(o.asnumpy(), np.full((2, 2), 6.0))
    kv.pushpull([5, 7], [mx.nd.ones((2, 2)) * 2, mx.nd.ones((2, 2)) * 3])
    o5, o7 = mx.nd.zeros((2, 2)), mx.nd.zeros((2, 2))
    kv.pull([5, 7], out=[o5, o7])
    assert o5.asnumpy()[0, 0] == 2 and o7.asnumpy()[0, 0] == 3
    with pytest.raises(mx.LoomError, match="int or str|str but"):
        kv.init("a", mx.nd.zeros((1,)))
    with pytest.raises(mx.LoomError, match="not been initialized"):
        kv.pull(9, out=mx.nd.zeros((1,)))
    with pytest.raises(mx.LoomError, match="row_sparse"):
        kv.row_sparse_pull(3, out=mx.nd.zeros((2, 2)), row_ids=mx.nd.array([0]))
    # a Python updater sees the summed push and the stored value
    kv2 = mx.kv.create("device")
    kv2.init("w", mx.nd.ones((3,)))
    kv2._set_updater(lambda k, recv, stored: stored.__setitem__(
        slice(None), stored.asnumpy() + 10 * recv.asnumpy()))
    kv2.push("w", [mx.nd.ones((3,)), mx.nd.ones((3,))])
    out = mx.nd.zeros((3,))
    kv2.pull("w", out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(3, 21.0))
    # an optimizer: sgd with momentum runs as an update graph per key
    kv3 = mx.kv.create()
    kv3.init(0, mx.nd.ones((2,)))
    kv3.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.5))
    for _ in range(2):
        kv3.push(0, mx.nd.array([1.0, 2.0]))
    kv3.pull(0, out=out[:2])
    g = np.array([1.0, 2.0])
    v1 = -0.1 * g
    v2 = 0.5 * v1 - 0.1 * g
    np.testing.assert_allclose(out.asnumpy()[:2], 1 + v1 + v2, rtol=1e-6)
    kv3.save_optimizer_states(str(tmp_path / "kv.states"))
    kv3.load_optimizer_states(str(tmp_path / "kv.states"))


@pytest.mark.parametrize("name", ["dist_async", "dist_device_async", "byteps", "p3"])
def test_kvstore_async_and_server_types_refused(mx, name):
    with pytest.raises(mx.LoomError, match="synchronous allreduce"):
        mx.kv.create(name)


@pytest.mark.parametrize("name", ["dist_sync", "dist_device_sync", "nccl", "horovod"])
def test_kvstore_allreduce_types_in_one_process(mx, name):
    # One process is a job of one worker (tests/dist runs these stores under mpirun -np 2).
    kv = mx.kv.create(name)
    assert (kv.type, kv.rank, kv.num_workers) == (name, 0, 1)
    kv.init(0, mx.nd.array([1.0, 2.0]))
    kv.push(0, [mx.nd.array([1.0, 1.0]), mx.nd.array([2.0, 3.0])])
    out = mx.nd.zeros(2)
    kv.pull(0, out=out)
    np.testing.assert_array_equal(out.asnumpy(), [3.0, 4.0])


def test_bucketing_fit_save_load(mx, tmp_path):
    rs = np.random.RandomState(7)

    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        emb = mx.sym.Embedding(data, input_dim=9, output_dim=4, name="embed")
        fc = mx.sym.FullyConnected(mx.sym.mean(emb, axis=1), num_hidden=3, name="fc")
        return mx.sym.SoftmaxOutput(fc, name="softmax"), ("data",), ("softmax_label",)

    class BucketIter(mx.io.DataIter):
        """Batches of 4 sequences, lengths cycling through the buckets."""

        def __init__(self):
            super().__init__(4)
            self.default_bucket_key = 6
            self.provide_data = [mx.io.DataDesc("data", (4, 6))]
            self.provide_label = [mx.io.DataDesc("softmax_label", (4,))]
            self.batches = []
            for n in (6, 3, 6, 2):
                self.batches.append(mx.io.DataBatch(
                    [mx.nd.array(rs.randint(0, 9, (4, n)))],
                    [mx.nd.array(rs.randint(0, 3, (4,)))], pad=0, bucket_key=n,
                    provide_data=[mx.io.DataDesc("data", (4, n))],
                    provide_label=[mx.io.DataDesc("softmax_label", (4,))]))
            self.i = 0

        def reset(self):
            self.i = 0

        def next(self):
            if self.i == len(self.batches):
                raise StopIteration
            self.i += 1
            return self.batches[self.i - 1]

    it = BucketIter()
    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=6)
    mod.fit(it, num_epoch=2, optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            initializer=mx.init.Xavier())
    assert sorted(mod._buckets) == [2, 3, 6]
    prefix = str(tmp_path / "b")
    mod.save_checkpoint(prefix, 2)
    mod2 = mx.mod.BucketingModule.load(prefix, 2, sym_gen=sym_gen, default_bucket_key=6)
    mod2.bind(it.provide_data, it.provide_label, for_training=False)
    for k, v in mod.get_params()[0].items():
        np.testing.assert_array_equal(mod2.get_params()[0][k].asnumpy(), v.asnumpy())
    it.reset()
    for b in it:
        mod.forward(b, is_train=False)
        mod2.forward(b, is_train=False)
        np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(),
                                      mod2.get_outputs()[0].asnumpy())
    # the loaded module trains on (its default bucket's optimizer shared by all buckets)
    mod3 = mx.mod.BucketingModule.load(prefix, 2, sym_gen=sym_gen, default_bucket_key=6)
    it.reset()  # fit starts from where the iterator is, as MXNet's
    mod3.fit(it, num_epoch=1, optimizer_params={"learning_rate": 0.1})
    assert not np.array_equal(mod3.get_params()[0]["fc_weight"].asnumpy(),
                              mod.get_params()[0]["fc_weight"].asnumpy())


def test_force_rebind_keeps_training_the_module(mx):
    rs = np.random.RandomState(8)
    x = rs.randn(4, 3).astype(np.float32)
    y = rs.randn(4, 2).astype(np.float32)
    params = {"fc_weight": mx.nd.array(rs.randn(2, 3)), "fc_bias": mx.nd.zeros((2,))}

    def run(rebind):
        m = mx.mod.Module(_linreg(mx), label_names=["lro_label"])
        m.bind([("data", (4, 3))], [("lro_label", (4, 2))])
        m.init_params(arg_params=params)
        m.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1,
                                                            "momentum": 0.9})
        for step in range(3):
            if rebind and step == 1:
                m.get_params()  # sync the host copies that the rebind restores
                m.bind([("data", (4, 3))], [("lro_label", (4, 2))], force_rebind=True)
            m.forward_backward(_batch(mx, x, y))
            m.update()
        return m.get_params()[0]["fc_weight"].asnumpy()
    np.testing.assert_array_equal(run(True), run(False))


def test_rebind_for_inference_after_training(mx):
    """MXNet's pattern: train, then bind(for_training=False, force_rebind=True) to predict;
    binding for training again resumes updates with the optimizer's states."""
    rs = np.random.RandomState(9)
    x = rs.randn(4, 3).astype(np.float32)
    y = rs.randn(4, 2).astype(np.float32)
    m = mx.mod.Module(_linreg(mx), label_names=["lro_label"])
    m.bind([("data", (4, 3))], [("lro_label", (4, 2))])
    m.init_params()
    m.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    m.forward_backward(_batch(mx, x, y))
    m.update()
    w = m.get_params()[0]["fc_weight"].asnumpy()
    with pytest.warns(UserWarning, match="label_names"):  # no label given, as MXNet warns
        m.bind([("data", (1, 3))], for_training=False, force_rebind=True)
    m.forward(_batch(mx, x[:1]))
    np.testing.assert_allclose(m.get_outputs()[0].asnumpy(),
                               x[:1].dot(w.T) + m.get_params()[0]["fc_bias"].asnumpy(),
                               rtol=1e-5, atol=1e-6)
    m.bind([("data", (4, 3))], [("lro_label", (4, 2))], force_rebind=True)
    m.forward_backward(_batch(mx, x, y))
    m.update()
    assert not np.array_equal(m.get_params()[0]["fc_weight"].asnumpy(), w)


def test_states_on_two_contexts_split_and_merge(mx):
    """A stateful module on [cpu(0), cpu(1)]: states come and go in MXNet's per-context
    layout (batch slices 2 + 3), and merged outputs are new arrays the next forward leaves
    alone. state' = tanh(state * 0.5 + data) is checked in closed form."""
    data, state = mx.sym.var("data"), mx.sym.var("state")
    out = mx.sym.tanh(state * 0.5 + data)
    mod = mx.mod.Module(out, data_names=["data"], label_names=None, state_names=["state"],
                        context=[mx.cpu(0), mx.cpu(1)])
    mod.bind(data_shapes=[("data", (5, 4))], for_training=False)
    mod.init_params()
    x = np.random.RandomState(0).randn(5, 4).astype(np.float32)
    batch = mx.io.DataBatch(data=[mx.nd.array(x)], label=[])
    mod.set_states(value=1)
    mod.forward(batch)
    first = mod.get_outputs()[0]
    split = mod.get_outputs(merge_multi_context=False)
    assert [tuple(a.shape) for a in split[0]] == [(2, 4), (3, 4)]  # MXNet: round(2.5) = 2
    expect1 = np.tanh(0.5 + x)
    np.testing.assert_allclose(first.asnumpy(), expect1, rtol=1e-6)
    mod.set_states(states=split)
    per_ctx = mod.get_states(merge_multi_context=False)
    assert [tuple(a.shape) for a in per_ctx[0]] == [(2, 4), (3, 4)]
    mod.forward(batch)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), np.tanh(expect1 * 0.5 + x),
                               rtol=1e-6)
    np.testing.assert_allclose(first.asnumpy(), expect1, rtol=1e-6)


def test_monitor_covers_outputs_arguments_and_gradients(mx):
    """MXNet's Monitor on a Module reports, per collected batch, every op output, every
    backward node's input gradients ('<node>_backward_output<i>') and the arguments: 21
    entries for two FullyConnected+sigmoid layers and a regression head."""
    x = mx.sym.Variable("data")
    x = mx.sym.FullyConnected(x, num_hidden=2, name="fc_0")
    x = mx.sym.Activation(x, act_type="sigmoid", name="act_0")
    x = mx.sym.FullyConnected(x, num_hidden=2, name="fc_1")
    x = mx.sym.Activation(x, act_type="sigmoid", name="act_1")
    x = mx.sym.LinearRegressionOutput(x, name="softmax", grad_scale=2)
    mean_abs = lambda a: mx.nd.sum(mx.nd.abs(a)) / a.size  # noqa: E731
    mon = mx.mon.Monitor(1, stat_func=mean_abs, pattern=".*", sort=True)
    mod = mx.mod.Module(x, context=[mx.cpu()])
    mod.bind([("data", (1, 2))], label_shapes=[("softmax_label", (1, 2))], for_training=True)
    mod.install_monitor(mon)
    w0, b0 = np.array([[.15, .20], [.25, .30]]), np.array([.35, .35])
    w1, b1 = np.array([[.40, .45], [.50, .55]]), np.array([.60, .60])
    mod.init_params(arg_params={"fc_0_weight": mx.nd.array(w0), "fc_0_bias": mx.nd.array(b0),
                                "fc_1_weight": mx.nd.array(w1), "fc_1_bias": mx.nd.array(b1)})
    xv, yv = np.array([[0.05, .10]]), np.array([[.01, 0.99]])
    mon.tic()
    mod.forward_backward(_batch(mx, xv, yv))
    res = {name: float(stat.split()[0]) for _, name, stat in mon.toc()}
    assert len(res) == 21
    counts = {}
    for name in res:
        key = next(k for k in ["act_0", "act_1", "data", "fc_0", "fc_1", "softmax"]
                   if name.startswith(k))
        counts[key] = counts.get(key, 0) + 1
    assert counts == {"act_0": 2, "act_1": 2, "data": 1, "fc_0": 6, "fc_1": 6, "softmax": 4}
    # Backpropagation by hand: regression gradient (out - label) * grad_scale / 2 outputs.
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    h = sig(xv @ w0.T + b0)
    out = sig(h @ w1.T + b1)
    d_out = (out - yv) * 2 / 2
    d_pre1 = d_out * out * (1 - out)
    d_pre0 = (d_pre1 @ w1) * h * (1 - h)
    expect = {"softmax_output": out, "softmax_backward_output0": d_out,
              "act_1_backward_output": d_pre1, "fc_1_backward_output0": d_pre1 @ w1,
              "fc_1_backward_output1": d_pre1.T @ h, "fc_1_backward_output2": d_pre1.sum(0),
              "act_0_backward_output": d_pre0, "fc_0_backward_output1": d_pre0.T @ xv,
              "fc_0_backward_output2": d_pre0.sum(0),
              # not computed: the data needs no gradient, the label never gets one
              "fc_0_backward_output0": np.zeros(2), "softmax_backward_output1": np.zeros(2)}
    for name, ref in expect.items():
        assert abs(res[name] - np.abs(ref).mean()) < 1e-6, name
