"""Module with several contexts on the per-device path (one executor per context on its slice
of the batch, gradients summed over the devices by an in-process communicator group before
every device's update): it must train exactly as one context on the whole batch does (float
rounding apart), keep every device's parameters identical, merge outputs in batch order, and
refuse what it cannot do with a clear message. CPU contexts take the path when asked
(per_device=True / LOOM_MODULE_PER_DEVICE=1), which is what runs here; the MXNet 1.9.1
comparisons of the same path are cases of tests/conformance/test_8_module.py."""
import numpy as np
import pytest

NO_DEVICE = "no CUDA device: gpu(0) is not available ("


def _net(mx):
    x = mx.sym.Variable("data")
    h = mx.sym.FullyConnected(x, num_hidden=7, name="fc1")
    h = mx.sym.Activation(h, act_type="tanh", name="act")
    h = mx.sym.FullyConnected(h, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(h, name="softmax")


def _data(n=12, dim=5, seed=0):
    rs = np.random.RandomState(seed)
    x = rs.randn(n, dim).astype(np.float32)
    y = rs.randint(0, 3, n).astype(np.float32)
    params = {"fc1_weight": rs.uniform(-0.6, 0.6, (7, dim)).astype(np.float32),
              "fc1_bias": rs.uniform(-0.1, 0.1, (7,)).astype(np.float32),
              "fc2_weight": rs.uniform(-0.6, 0.6, (3, 7)).astype(np.float32),
              "fc2_bias": rs.uniform(-0.1, 0.1, (3,)).astype(np.float32)}
    return x, y, params


def _module(mx, ctx, per_device=None, work_load_list=None, batch=12):
    m = mx.mod.Module(_net(mx), context=ctx, per_device=per_device,
                      work_load_list=work_load_list)
    m.bind(data_shapes=[("data", (batch, 5))], label_shapes=[("softmax_label", (batch,))])
    return m


def _device_params(m):
    g = m._exec_group
    return [{n: a.asnumpy() for n, a in d.items()} for d in g._dev_params]


def _train(mx, ctx, opt, params, x, y, steps=3, **kw):
    m = _module(mx, ctx, batch=len(x), **kw)
    m.init_params(arg_params={k: mx.nd.array(v) for k, v in params.items()})
    m.init_optimizer(optimizer=opt[0], optimizer_params=opt[1])
    history = []
    for _ in range(steps):
        m.forward_backward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)]))
        out = m.get_outputs()[0].asnumpy()
        m.update()
        if m._per_device:
            devs = _device_params(m)
            for d in devs[1:]:  # every device holds device 0's parameters, bit for bit
                for n in devs[0]:
                    np.testing.assert_array_equal(d[n], devs[0][n], err_msg=n)
        history.append((out, {k: v.asnumpy() for k, v in m.get_params()[0].items()}))
    return m, history


OPTS = [("sgd", {"learning_rate": 0.2, "momentum": 0.9, "wd": 0.01}),
        ("adam", {"learning_rate": 0.02, "wd": 0.01})]


@pytest.mark.parametrize("opt", OPTS, ids=[o[0] for o in OPTS])
@pytest.mark.parametrize("ndev,work", [(2, None), (3, [1, 3, 2])], ids=["even2", "uneven3"])
def test_per_device_training_equals_one_context(mx, opt, ndev, work):
    x, y, params = _data()
    _, want = _train(mx, mx.cpu(), opt, params, x, y)
    m, got = _train(mx, [mx.cpu(i) for i in range(ndev)], opt, params, x, y, per_device=True,
                    work_load_list=work)
    g = m._exec_group
    assert type(g).__name__ == "PerDeviceExecutorGroup" and len(g.execs) == ndev
    # MXNet's split_slices: shares rounded, the rest to the last context
    rows = [e.arg_dict["data"].shape[0] for e in g.execs]
    assert rows == ([6, 6] if work is None else [2, 6, 4])
    for (o1, p1), (o2, p2) in zip(want, got):
        np.testing.assert_allclose(o2, o1, rtol=1e-5, atol=1e-6)  # merged in batch order
        for n in p1:
            np.testing.assert_allclose(p2[n], p1[n], rtol=1e-5, atol=1e-6, err_msg=n)
    # the weights moved: a no-op update would not fail the comparison above
    assert not np.allclose(got[-1][1]["fc1_weight"], params["fc1_weight"])


def test_gradients_are_summed_over_devices(mx):
    """After update's reduction every device holds the gradient of the whole batch: against
    the single executor's gradient and against per-slice gradients added here."""
    x, y, params = _data()
    one = _module(mx, mx.cpu())
    two = _module(mx, [mx.cpu(0), mx.cpu(1)], per_device=True)
    for m in (one, two):
        m.init_params(arg_params={k: mx.nd.array(v) for k, v in params.items()})
        m.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.0})
        m.forward_backward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)]))
    g = two._exec_group
    before = [{n: a.asnumpy() for n, a in d.items()} for d in g._dev_grads]
    two.update()
    for k in range(2):
        for n, arr in g._dev_grads[k].items():
            np.testing.assert_allclose(arr.asnumpy(), before[0][n] + before[1][n], rtol=1e-6)
            np.testing.assert_allclose(arr.asnumpy(), one._exec_group._grads[n].asnumpy(),
                                       rtol=1e-5, atol=1e-6)


def test_gradients_are_one_flat_buffer_per_dtype(mx):
    """Each device's gradients are views of one flat buffer per dtype, so update sums them with
    one collective (float32 only here), not one per parameter; a subset of the names is summed
    array by array and leaves the other gradients as they were."""
    x, y, params = _data()
    m = _module(mx, [mx.cpu(0), mx.cpu(1), mx.cpu(2)], per_device=True)
    m.init_params(arg_params={k: mx.nd.array(v) for k, v in params.items()})
    m.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.0})
    g = m._exec_group
    assert len(g._grad_buckets) == 1
    members, flats = g._grad_buckets[0]
    assert sorted(members) == sorted(params) and len(flats) == 3
    for k, flat in enumerate(flats):  # the gradients are views of the buffer
        flat[:] = k + 1.0
        for n in members:
            np.testing.assert_array_equal(g._dev_grads[k][n].asnumpy(),
                                          np.full(params[n].shape, k + 1.0, np.float32))
    m.forward_backward(mx.io.DataBatch([mx.nd.array(x)], [mx.nd.array(y)]))
    before = [{n: a.asnumpy() for n, a in d.items()} for d in g._dev_grads]
    comm = g.comm_group()
    count = comm.stats(0)["allreduce"]
    m.update()
    assert comm.stats(0)["allreduce"] == count + 1
    for k in range(3):
        for n, arr in g._dev_grads[k].items():
            np.testing.assert_array_equal(arr.asnumpy(), before[0][n] + before[1][n] + before[2][n])
    rs = np.random.RandomState(3)
    vals = [{n: rs.randn(*params[n].shape).astype(np.float32) for n in params} for _ in range(3)]
    for k in range(3):
        for n in params:
            g._dev_grads[k][n][:] = vals[k][n]
    g.reduce_grads(["fc1_weight", "fc2_bias"])
    assert comm.stats(0)["allreduce"] == count + 3
    for k in range(3):
        for n in params:
            want = vals[0][n] + vals[1][n] + vals[2][n] if n in ("fc1_weight", "fc2_bias") \
                else vals[k][n]
            np.testing.assert_array_equal(g._dev_grads[k][n].asnumpy(), want, err_msg=n)


def test_predict_and_score_merge_in_order(mx):
    x, y, params = _data(n=20)
    it = lambda: mx.io.NDArrayIter(x, y, batch_size=10)  # noqa: E731
    res = []
    for ctx, pd in ((mx.cpu(), None), ([mx.cpu(0), mx.cpu(1)], True)):
        m = mx.mod.Module(_net(mx), context=ctx, per_device=pd, work_load_list=None)
        m.bind(it().provide_data, it().provide_label, for_training=False)
        m.set_params({k: mx.nd.array(v) for k, v in params.items()}, {})
        res.append((m.predict(it()).asnumpy(), dict(m.score(it(), ["acc", "ce"]))))
    # a naive forward of the whole set, in order
    h = np.tanh(x @ params["fc1_weight"].T + params["fc1_bias"])
    z = h @ params["fc2_weight"].T + params["fc2_bias"]
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    for pred, score in res:
        np.testing.assert_allclose(pred, p, rtol=1e-5, atol=1e-6)
        assert score["accuracy"] == pytest.approx(np.mean(p.argmax(1) == y))
        assert score["cross-entropy"] == pytest.approx(
            -np.mean(np.log(p[np.arange(len(y)), y.astype(int)])), rel=1e-5)
    # unmerged: MXNet's per-device layout, device 0 first
    m = _module(mx, [mx.cpu(0), mx.cpu(1)], per_device=True, batch=10)
    m.set_params({k: mx.nd.array(v) for k, v in params.items()}, {})
    m.forward(mx.io.DataBatch([mx.nd.array(x[:10])], [mx.nd.array(y[:10])]), is_train=False)
    parts = m.get_outputs(merge_multi_context=False)[0]
    assert [a.shape for a in parts] == [(5, 3), (5, 3)]
    np.testing.assert_allclose(np.concatenate([a.asnumpy() for a in parts]), p[:10], rtol=1e-5,
                               atol=1e-6)
    assert m.output_shapes == [("softmax_output", (10, 3))]


def test_default_and_switch(mx, monkeypatch):
    """Several CPU contexts stay one executor by default; the kwarg or the variable switch."""
    monkeypatch.delenv("LOOM_MODULE_PER_DEVICE", raising=False)
    ctx = [mx.cpu(0), mx.cpu(1)]
    assert len(_module(mx, ctx)._exec_group.execs) == 1
    assert len(_module(mx, ctx, per_device=True)._exec_group.execs) == 2
    monkeypatch.setenv("LOOM_MODULE_PER_DEVICE", "1")
    assert len(_module(mx, ctx)._exec_group.execs) == 2
    assert len(_module(mx, ctx, per_device=False)._exec_group.execs) == 1
    assert len(_module(mx, mx.cpu())._exec_group.execs) == 1
    monkeypatch.setenv("LOOM_MODULE_PER_DEVICE", "yes")
    with pytest.raises(mx.module.ModuleError, match="LOOM_MODULE_PER_DEVICE must be 0 or 1"):
        _module(mx, ctx)


def test_batch_smaller_than_devices_is_a_clear_error(mx):
    ModuleError = mx.module.ModuleError
    with pytest.raises(ModuleError) as e:
        _module(mx, [mx.cpu(0), mx.cpu(1), mx.cpu(2)], per_device=True, batch=2)
    msg = str(e.value)
    assert "a batch of 2 cannot be split over the 3 contexts [cpu(0), cpu(1), cpu(2)]" in msg
    with pytest.raises(ModuleError, match=r"work_load_list \[1, 100\] over a batch of 4"):
        _module(mx, [mx.cpu(0), mx.cpu(1)], per_device=True, batch=4, work_load_list=[1, 100])


def test_host_optimizer_and_optimizer_states(mx, tmp_path):
    """An optimizer without an in-graph form (adagrad: the imperative updater) updates device 0
    and copies out; optimizer states saved from device 0 load into every device."""
    x, y, params = _data()
    opt = ("adagrad", {"learning_rate": 0.1})
    _, want = _train(mx, mx.cpu(), opt, params, x, y)
    _, got = _train(mx, [mx.cpu(0), mx.cpu(1)], opt, params, x, y, per_device=True)
    for n in want[-1][1]:
        np.testing.assert_allclose(got[-1][1][n], want[-1][1][n], rtol=1e-5, atol=1e-6)
    m, _ = _train(mx, [mx.cpu(0), mx.cpu(1)], OPTS[1], params, x, y, per_device=True)
    f = str(tmp_path / "s.states")
    m.save_optimizer_states(f)
    m2 = _module(mx, [mx.cpu(0), mx.cpu(1)], per_device=True)
    m2.init_params(arg_params=m.get_params()[0])
    m2.init_optimizer(optimizer=OPTS[1][0], optimizer_params=OPTS[1][1])
    m2.load_optimizer_states(f)
    ups = m2._updater.updaters
    assert len(ups) == 2
    for k in ups[0]._opt_states:
        np.testing.assert_array_equal(ups[1].aux[k].asnumpy(), m._updater.updaters[0].aux[k].asnumpy())


@pytest.mark.parametrize("switch", ["env", "kwarg"])
def test_bucketing_module_per_device(mx, monkeypatch, switch):
    """BucketingModule's buckets share the per-device arrays and updaters."""
    if switch == "env":
        monkeypatch.setenv("LOOM_MODULE_PER_DEVICE", "1")
    x, y, params = _data()

    def sym_gen(key):
        return _net(mx), ("data",), ("softmax_label",)

    res = []
    for ctx in (mx.cpu(), [mx.cpu(0), mx.cpu(1)]):
        kw = {"per_device": True} if switch == "kwarg" and isinstance(ctx, list) else {}
        bm = mx.mod.BucketingModule(sym_gen, default_bucket_key=12, context=ctx, **kw)
        bm.bind(data_shapes=[("data", (12, 5))], label_shapes=[("softmax_label", (12,))])
        bm.init_params(arg_params={k: mx.nd.array(v) for k, v in params.items()})
        bm.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.2,
                                                             "momentum": 0.9})
        for key, n in ((12, 12), (8, 8), (12, 12)):
            b = mx.io.DataBatch([mx.nd.array(x[:n])], [mx.nd.array(y[:n])], bucket_key=key,
                                provide_data=[("data", (n, 5))],
                                provide_label=[("softmax_label", (n,))])
            bm.forward_backward(b)
            bm.update()
        assert len(bm._curr_module._exec_group.execs) == (2 if isinstance(ctx, list) else 1)
        res.append({k: v.asnumpy() for k, v in bm.get_params()[0].items()})
    for n in res[0]:
        np.testing.assert_allclose(res[1][n], res[0][n], rtol=1e-5, atol=1e-6, err_msg=n)


def test_gpu_contexts_without_a_device(mx):
    """Several GPUs take the per-device path: without a device, bind fails with the one clear
    no-device error (not 'not supported')."""
    if mx.context.num_gpus() > 0:
        pytest.skip("a CUDA device is present")
    m = mx.mod.Module(_net(mx), context=[mx.gpu(0), mx.gpu(1)])
    assert m._per_device
    with pytest.raises(mx.base.LoomError) as e:
        m.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    assert str(e.value).startswith(NO_DEVICE), str(e.value)
    ModuleError = mx.module.ModuleError
    with pytest.raises(ModuleError, match="mixing CPU and GPU"):
        mx.mod.Module(_net(mx), context=[mx.cpu(0), mx.gpu(0)])
    with pytest.raises(ModuleError, match="listed twice"):
        mx.mod.Module(_net(mx), context=[mx.gpu(1), mx.gpu(1)])
