"""loom.train.make_step: training steps as graphs (accumulation, in-graph optimizer updates,
LR schedules, EMA, checkpoints, EMA evaluation), checked against NumPy reimplementations of
MXNet's optimizer formulas applied to one big batch."""
import math

import numpy as np
import pytest

PARAMS = ["fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]


def mlp(mx, bn=False):
    h = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=8, name="fc1")
    if bn:
        h = mx.sym.BatchNorm(h, fix_gamma=False, name="bn")
    h = mx.sym.Activation(h, act_type="tanh", name="act")
    h = mx.sym.FullyConnected(h, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(h, name="softmax")


def data(n, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(n, 5).astype(np.float32), rng.randint(0, 3, n).astype(np.float32)


def init(exe, names=PARAMS):
    rng = np.random.RandomState(4)
    for p in names:
        a = exe.arg_dict[p]
        a[:] = (0.5 * rng.randn(*a.shape)).astype(np.float32)


def state(exe):
    d = {k: v.asnumpy().copy() for k, v in exe.arg_dict.items()}
    d.update({k: v.asnumpy().copy() for k, v in exe.aux_dict.items()})
    return d


def np_update(name, w, g, st, lr, wd, rs, t, mom=0.9, b1=0.9, b2=0.999, eps=1e-8):
    """MXNet 1.9 update formulas (float64) with MXNet's Python-side lr handling."""
    g = rs * g
    if name == "sgd":
        return (1 - lr * wd) * w - lr * g
    if name == "sgd_mom":
        st[0] = mom * st[0] - lr * wd * w - lr * g
        return w + st[0]
    lr_t = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    gg = g + wd * w if name == "adam" else g
    st[0] = b1 * st[0] + (1 - b1) * gg
    st[1] = b2 * st[1] + (1 - b2) * gg * gg
    if name == "adam":
        return w - lr_t * st[0] / (np.sqrt(st[1]) + eps)
    return w - lr_t * (st[0] / (np.sqrt(st[1]) + eps) + wd * w)  # adamw: lr=1, eta=lr_t


CASES = [("sgd", None), ("sgd_mom", None), ("adam", None), ("adamw", None), ("sgd_mom", "factor")]


@pytest.mark.parametrize("opt,sched", CASES)
def test_micro_steps_equal_one_big_batch_step(mx, opt, sched):
    k, b, steps, lr, wd = 3, 4, 3, 0.05, 0.01
    x, y = data(k * b * steps)
    scheduler = mx.lr_scheduler.FactorScheduler(step=1, factor=0.5) if sched else None
    kw = dict(learning_rate=lr, wd=wd, rescale_grad=1.0 / b, lr_scheduler=scheduler)
    o = {"sgd": lambda: mx.optimizer.SGD(**kw), "sgd_mom": lambda: mx.optimizer.SGD(momentum=0.9, **kw),
         "adam": lambda: mx.optimizer.Adam(**kw), "adamw": lambda: mx.optimizer.AdamW(**kw)}[opt]()
    step = mx.train.make_step(mlp(mx), optimizer=o, accumulate=k,
                              ema=mx.train.EMA(decay=0.9, schedule="tf"))
    aux = step.list_auxiliary_states()
    assert {"fc1_weight_acc", "fc1_weight_ema", "step_micro", "step_real"} <= set(aux)
    if opt == "sgd_mom":
        assert "fc1_weight_mom" in aux
    if opt.startswith("adam"):
        assert {"fc1_weight_mean", "fc1_weight_var"} <= set(aux)
    exe = mx.train.bind(step, data=(b, 5), softmax_label=(b,))
    init(exe)
    big = mlp(mx).simple_bind(mx.cpu(), grad_req={p: "write" for p in PARAMS}, data=(k * b, 5))
    init(big)
    ref = {p: big.arg_dict[p].asnumpy().astype(np.float64) for p in PARAMS}
    st = {p: [np.zeros_like(ref[p]), np.zeros_like(ref[p])] for p in PARAMS}
    for s in range(steps):
        for m in range(k):
            before = state(exe)
            lo = (s * k + m) * b
            exe.forward(is_train=True, data=x[lo:lo + b], softmax_label=y[lo:lo + b])
            if m < k - 1:  # weights, optimizer state, EMA and the real counter stay put
                for n, v in state(exe).items():
                    if not (n.endswith("_acc") or n in ("step_micro", "data", "softmax_label")):
                        np.testing.assert_array_equal(v, before[n], err_msg=n)
        for p in PARAMS:
            big.arg_dict[p][:] = ref[p].astype(np.float32)
        big.forward(is_train=True, data=x[s * k * b:(s + 1) * k * b],
                    softmax_label=y[s * k * b:(s + 1) * k * b])
        big.backward()
        lr_t = scheduler(s + 1) if scheduler else lr  # the schedule counts real steps
        for p in PARAMS:
            g = big.grad_dict[p].asnumpy().astype(np.float64)
            pwd = wd if p.endswith("_weight") else 0.0  # MXNet's default wd_mult
            ref[p] = np_update(opt, ref[p], g, st[p], lr_t, pwd, 1.0 / (k * b), s + 1)
            np.testing.assert_allclose(exe.arg_dict[p].asnumpy(), ref[p], rtol=1e-4, atol=2e-5,
                                       err_msg="%s after real step %d" % (p, s))
    assert exe.aux_dict["step_real"].asnumpy()[0] == steps
    assert exe.aux_dict["step_micro"].asnumpy()[0] == k * steps


def test_lr_schedulers_match_mxnet_semantics(mx):
    f = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    assert [f(t) for t in range(1, 7)] == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    mf = mx.lr_scheduler.MultiFactorScheduler(step=[2, 4], factor=0.1, base_lr=1.0)
    assert [round(mf(t), 6) for t in range(1, 6)] == [1.0, 1.0, 0.1, 0.1, 0.01]
    c = mx.lr_scheduler.CosineScheduler(max_update=10, base_lr=1.0, final_lr=0.0, warmup_steps=2,
                                        warmup_begin_lr=0.2)
    assert c(0) == 0.2 and c(1) == pytest.approx(0.6) and c(2) == 1.0 and c(10) == 0.0
    assert c(50) == 0.0


@pytest.mark.parametrize("schedule,init_mode", [("constant", "copy"), ("tf", "zero_debias")])
def test_ema_closed_form(mx, schedule, init_mode):
    k, b, steps, decay = 2, 4, 4, 0.8
    x, y = data(k * b * steps, 3)
    step = mx.train.make_step(mlp(mx), optimizer=mx.optimizer.SGD(learning_rate=0.1, momentum=0.9),
                              accumulate=k, ema=mx.train.EMA(decay=decay, schedule=schedule,
                                                             init=init_mode))
    exe = mx.train.bind(step, data=(b, 5), softmax_label=(b,))
    init(exe)
    e = {p: 0.0 for p in PARAMS}
    norm = 0.0
    for t in range(1, steps + 1):
        for m in range(k):
            lo = ((t - 1) * k + m) * b
            exe.forward(is_train=True, data=x[lo:lo + b], softmax_label=y[lo:lo + b])
        d = 0.0 if (init_mode == "copy" and t == 1) else (
            min(decay, (1 + t) / (10 + t)) if schedule == "tf" else decay)
        norm = 1.0 if d == 0 else d * norm + (1 - d)
        ev_arg, _ = mx.train.ema_params(exe)
        for p in PARAMS:
            w = exe.arg_dict[p].asnumpy().astype(np.float64)
            e[p] = d * e[p] + (1 - d) * w
            np.testing.assert_allclose(exe.aux_dict[p + "_ema"].asnumpy(), e[p], rtol=1e-5, atol=1e-6)
            want = e[p] / norm if init_mode == "zero_debias" else e[p]
            np.testing.assert_allclose(ev_arg[p].asnumpy(), want, rtol=1e-5, atol=1e-6)
            if t == 1:  # debiased (or copied) EMA after the first real step is w_1
                np.testing.assert_allclose(ev_arg[p].asnumpy(), w, rtol=3e-7, atol=0)


def test_ema_include_aux_batchnorm(mx):
    k, b = 2, 4
    x, y = data(k * b * 3, 5)
    step = mx.train.make_step(mlp(mx, bn=True), optimizer=mx.optimizer.SGD(learning_rate=0.1),
                              accumulate=k, ema=mx.train.EMA(decay=0.5, include_aux=True))
    assert {"bn_moving_mean_ema", "bn_moving_var_ema", "bn_gamma_ema"} <= set(step.list_auxiliary_states())
    exe = mx.train.bind(step, data=(b, 5), softmax_label=(b,))
    init(exe, PARAMS + ["bn_gamma"])
    exe.aux_dict["bn_moving_var"][:] = np.ones(8, np.float32)
    e = None
    for t in range(1, 4):
        for m in range(k):
            lo = ((t - 1) * k + m) * b
            exe.forward(is_train=True, data=x[lo:lo + b], softmax_label=y[lo:lo + b])
        mm = exe.aux_dict["bn_moving_mean"].asnumpy().astype(np.float64)
        e = mm if e is None else 0.5 * e + 0.5 * mm
        np.testing.assert_allclose(exe.aux_dict["bn_moving_mean_ema"].asnumpy(), e, rtol=1e-5, atol=1e-7)


def test_json_round_trip_runs_identically(mx, tmp_path):
    x, y = data(24, 2)
    sched = mx.lr_scheduler.CosineScheduler(max_update=5, warmup_steps=1)
    step = mx.train.make_step(mlp(mx), optimizer=mx.optimizer.Adam(learning_rate=0.01, lr_scheduler=sched),
                              accumulate=2, ema=mx.train.EMA(schedule="tf", init="zero_debias"))
    step.save(str(tmp_path / "step.json"))
    back = mx.sym.load(str(tmp_path / "step.json"))
    assert back.tojson() == step.tojson()
    a = mx.train.bind(step, data=(4, 5), softmax_label=(4,))
    c = mx.train.bind(back, data=(4, 5), softmax_label=(4,))
    init(a)
    init(c)
    for m in range(6):
        a.forward(is_train=True, data=x[4 * m:4 * m + 4], softmax_label=y[4 * m:4 * m + 4])
        c.forward(is_train=True, data=x[4 * m:4 * m + 4], softmax_label=y[4 * m:4 * m + 4])
    for n, v in state(a).items():
        np.testing.assert_array_equal(v, state(c)[n], err_msg=n)


def test_checkpoint_resume_bit_for_bit(mx, tmp_path):
    x, y = data(4 * 14, 6)
    step = mx.train.make_step(mlp(mx, bn=True), optimizer=mx.optimizer.Adam(learning_rate=0.01),
                              accumulate=3, ema=mx.train.EMA(schedule="tf", init="zero_debias",
                                                             include_aux=True))
    kinds = mx.train.state_kinds(step)
    assert kinds["fc1_weight_mean"] == "opt" and kinds["step_real"] == "step" and kinds["data"] == "input"

    def run(e, a, z):
        for m in range(a, z):
            e.forward(is_train=True, data=x[4 * m:4 * m + 4], softmax_label=y[4 * m:4 * m + 4])

    full = mx.train.bind(step, data=(4, 5), softmax_label=(4,))
    part = mx.train.bind(step, data=(4, 5), softmax_label=(4,))
    for e in (full, part):
        init(e, PARAMS + ["bn_gamma"])
    run(full, 0, 14)
    run(part, 0, 5)
    path = str(tmp_path / "ckpt.params")
    mx.train.save_checkpoint(path, part)
    names = set(mx.nd.load(path).keys())
    assert {"arg:fc1_weight", "aux:bn_moving_mean", "opt:fc1_weight_var", "acc:fc1_weight_acc",
            "ema:fc1_weight_ema", "ema:fc1_weight_ema_norm", "step:step_micro"} <= names
    resumed = mx.train.bind(step, data=(4, 5), softmax_label=(4,))
    mx.train.load_checkpoint(path, resumed)
    run(resumed, 5, 14)
    for n, v in state(full).items():
        if n not in ("data", "softmax_label"):
            np.testing.assert_array_equal(state(resumed)[n], v, err_msg=n)
    raw = open(path, "rb").read()
    (tmp_path / "cut.params").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(mx.FormatError):
        mx.train.load_checkpoint(str(tmp_path / "cut.params"), resumed)
    assert open(path, "rb").read() == raw


@pytest.mark.parametrize("init_mode", ["copy", "zero_debias"])
def test_eval_with_ema_weights(mx, init_mode):
    x, y = data(16, 9)
    step = mx.train.make_step(mlp(mx, bn=True), optimizer=mx.optimizer.SGD(learning_rate=0.1),
                              accumulate=2, ema=mx.train.EMA(decay=0.5, init=init_mode, include_aux=True))
    exe = mx.train.bind(step, data=(4, 5), softmax_label=(4,))
    init(exe, PARAMS + ["bn_gamma"])
    for m in range(4):
        exe.forward(is_train=True, data=x[4 * m:4 * m + 4], softmax_label=y[4 * m:4 * m + 4])
    before = state(exe)
    arg, aux = mx.train.ema_params(exe)
    arg = {k: v.asnumpy().copy() for k, v in arg.items()}
    aux = {k: v.asnumpy().copy() for k, v in aux.items()}
    ev = mx.train.bind_ema(mlp(mx, bn=True), exe, data=(4, 5))
    out = ev.forward(is_train=False, data=x[:4])[0].asnumpy()
    ref = mlp(mx, bn=True).simple_bind(mx.cpu(), grad_req="null", data=(4, 5))
    ref.copy_params_from({k: mx.nd.array(v) for k, v in arg.items()},
                         {k: mx.nd.array(v) for k, v in aux.items()})
    np.testing.assert_array_equal(ref.forward(is_train=False, data=x[:4])[0].asnumpy(), out)
    with mx.train.ema_weights(exe):
        np.testing.assert_array_equal(exe.arg_dict["fc1_weight"].asnumpy(), arg["fc1_weight"])
        np.testing.assert_array_equal(exe.aux_dict["bn_moving_var"].asnumpy(), aux["bn_moving_var"])
    for n, v in state(exe).items():
        np.testing.assert_array_equal(v, before[n], err_msg=n)


@pytest.mark.parametrize("opt", ["sgd_mom", "adam", "lamb"])
def test_data_parallel_step_of_one_rank_is_the_plain_step(mx, opt):
    """dist=DataParallel in a job of one rank (no launcher): the same state as the plain step
    bit for bit after every micro-step; one allreduce per bucket on real steps only (the 2-rank
    equality with one process on the concatenated batch is tests/dist/dist_train.py)."""
    make = {"sgd_mom": lambda: mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=1e-3),
            "adam": lambda: mx.optimizer.Adam(learning_rate=0.01),
            "lamb": lambda: mx.optimizer.LAMB(learning_rate=0.01)}[opt]
    k, b = 3, 4
    x, y = data(k * b * 2, seed=3)
    plain = mx.train.bind(mx.train.make_step(mlp(mx), make(), accumulate=k, ema=True),
                          data=(b, 5), softmax_label=(b,))
    dp = mx.train.make_step(mlp(mx), make(), accumulate=k, ema=True,
                            dist=mx.dist.DataParallel(bucket_mb=25, first_bucket_mb=1))
    assert mx.dist.size() == 1
    assert dp.list_outputs()[-1] == "step_broadcast_state_done"
    exe = mx.train.bind(dp, data=(b, 5), softmax_label=(b,))
    init(plain)
    init(exe)
    mx.dist.reset_stats()
    for m in range(2 * k):
        for e in (plain, exe):
            e.forward(is_train=True, data=x[m * b:(m + 1) * b], softmax_label=y[m * b:(m + 1) * b])
        want, got = state(plain), state(exe)
        for n in want:
            np.testing.assert_array_equal(got[n], want[n], err_msg="%s micro-step %d" % (n, m))
        # 1 MiB first bucket: the whole MLP's gradients are one collective per real step
        assert mx.dist.stats()["allreduce"] == (m + 1) // k, mx.dist.stats()
    assert repr(mx.dist.DataParallel()) == ("DataParallel(bucket_mb=25, first_bucket_mb=1, "
                                           "shard_ema=False, shard_optimizer=False, "
                                           "overlap=True, bn_stats='local')")
    with pytest.raises(ValueError):
        mx.dist.DataParallel(bucket_mb=0)


@pytest.mark.parametrize("init_mode", ["copy", "zero_debias"])
def test_sharded_ema_of_one_rank_is_the_plain_ema(mx, init_mode, tmp_path):
    """DataParallel(shard_ema=True) in a job of one rank: one shard of all trained elements
    (no per-parameter shadow), the plain step's EMA bit for bit after every micro-step, and a
    checkpoint in the unsharded format that the plain step loads (2 ranks:
    tests/dist/dist_shard_ema.py)."""
    k, b = 2, 4
    x, y = data(k * b * 3, seed=5)
    ema = mx.train.EMA(decay=0.9, schedule="tf", init=init_mode)
    plain = mx.train.bind(mx.train.make_step(mlp(mx), "sgd", learning_rate=0.1, momentum=0.9,
                                             accumulate=k, ema=ema), data=(b, 5), softmax_label=(b,))
    exe = mx.train.bind(mx.train.make_step(mlp(mx), "sgd", learning_rate=0.1, momentum=0.9,
                                           accumulate=k, ema=ema,
                                           dist=mx.dist.DataParallel(shard_ema=True)),
                        data=(b, 5), softmax_label=(b,))
    total = sum(exe.arg_dict[p].size for p in PARAMS)
    assert exe.aux_dict["step_ema_shard"].shape == (total,)
    assert not [n for n in exe.aux_dict if n.endswith("_ema")]
    init(plain)
    init(exe)
    for m in range(k * 3):
        for e in (plain, exe):
            e.forward(is_train=True, data=x[m * b:(m + 1) * b], softmax_label=y[m * b:(m + 1) * b])
        want, got = mx.train.ema_params(plain)[0], mx.train.ema_params(exe)[0]
        assert sorted(want) == sorted(got) == sorted(PARAMS)
        for p in PARAMS:
            np.testing.assert_array_equal(got[p].asnumpy(), want[p].asnumpy(), err_msg=p)
    mx.train.save_checkpoint(tmp_path / "sharded.params", exe)
    mx.train.save_checkpoint(tmp_path / "plain.params", plain)
    a, w = mx.nd.load(str(tmp_path / "sharded.params")), mx.nd.load(str(tmp_path / "plain.params"))
    assert sorted(a) == sorted(w)
    for n in w:
        np.testing.assert_array_equal(a[n].asnumpy(), w[n].asnumpy(), err_msg=n)
