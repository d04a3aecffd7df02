"""mx.optimizer used imperatively (MXNet 1.9.1's optimizer objects): each optimizer's update
against a float64 NumPy reimplementation of MXNet's formulas, the Optimizer API (registry,
learning rate and schedules, lr/wd multipliers, update counts, multi_precision), the Updater
(lazy states, list form, get/set_states), and the imperative update against the in-graph
update loom.train.make_step builds from the same optimizer."""
import math
import pickle
import warnings

import numpy as np
import pytest

from test_train import PARAMS, data, init, mlp

SHAPE = (3, 4)


def _clip(v, c):
    return np.clip(v, -c, c) if c else v


# --- float64 references: (w, g, states list, lr, wd, t, options) -> new w; states in place

def ref_sgd(w, g, st, lr, wd, t, o):
    gr = _clip(o.get("rescale_grad", 1.0) * g, o.get("clip_gradient"))
    mom = o.get("momentum", 0.0)
    if not mom:
        return (1 - lr * wd) * w - lr * gr
    st[0] = mom * st[0] - lr * wd * w - lr * gr
    return w + st[0]


def ref_nag(w, g, st, lr, wd, t, o):
    gr = _clip(o.get("rescale_grad", 1.0) * g, o.get("clip_gradient"))
    mom = o["momentum"]
    st[0] = mom * st[0]
    new = w - st[0] + (mom + 1) * (st[0] - lr * (gr + wd * w))
    st[0] = st[0] - lr * (gr + wd * new)  # MXNet's kernel reads the weight it just wrote
    return new


def ref_signum(w, g, st, lr, wd, t, o):
    mom = o.get("momentum", 0.9)
    gr = _clip(o.get("rescale_grad", 1.0) * g, o.get("clip_gradient"))
    st[0] = mom * st[0] - (1 - mom) * (wd * w + gr)
    return (1 - lr * o.get("wd_lh", 0.0)) * w + lr * np.sign(st[0])


def ref_ftml(w, g, st, lr, wd, t, o):
    b1, b2, eps = o.get("beta1", 0.6), o.get("beta2", 0.999), 1e-8
    gi = _clip(o.get("rescale_grad", 1.0) * g + wd * w, o.get("clip_gradient"))
    st[1] = b2 * st[1] + (1 - b2) * gi * gi
    d = (1 - b1 ** t) / lr * (np.sqrt(st[1] / (1 - b2 ** t)) + eps)
    st[2] = b1 * st[2] + (1 - b1) * gi - (d - b1 * st[0]) * w
    st[0] = d
    return -st[2] / d


def ref_adam(w, g, st, lr, wd, t, o):
    b1, b2, eps = 0.9, 0.999, 1e-8
    gr = _clip(o.get("rescale_grad", 1.0) * g + wd * w, o.get("clip_gradient"))
    st[0] = b1 * st[0] + (1 - b1) * gr
    st[1] = b2 * st[1] + (1 - b2) * gr * gr
    return w - lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t) * st[0] / (np.sqrt(st[1]) + eps)


def ref_adamw(w, g, st, lr, wd, t, o):
    b1, b2, eps = 0.9, 0.999, 1e-8
    gr = _clip(o.get("rescale_grad", 1.0) * g, o.get("clip_gradient"))
    st[0] = b1 * st[0] + (1 - b1) * gr
    st[1] = b2 * st[1] + (1 - b2) * gr * gr
    eta = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return w - eta * (st[0] / (np.sqrt(st[1]) + eps) + wd * w)


def ref_adagrad(w, g, st, lr, wd, t, o):
    gr = _clip(o.get("rescale_grad", 1.0) * g, o.get("clip_gradient"))
    st[0] = st[0] + gr * gr
    return w - lr * (gr / np.sqrt(st[0] + o.get("eps", 1e-7)) + wd * w)


def ref_rmsprop(w, g, st, lr, wd, t, o):
    g1, g2, eps = 0.9, 0.9, 1e-8
    gr = _clip(o.get("rescale_grad", 1.0) * g + wd * w, o.get("clip_gradient"))
    st[0] = (1 - g1) * gr * gr + g1 * st[0]
    if o.get("centered"):
        st[1] = (1 - g1) * gr + g1 * st[1]
        st[2] = g2 * st[2] - lr * gr / np.sqrt(st[0] - st[1] * st[1] + eps)
        new = w + st[2]
    else:
        new = w - lr * gr / np.sqrt(st[0] + eps)
    return _clip(new, o.get("clip_weights"))


def ref_adadelta(w, g, st, lr, wd, t, o):
    rho, eps = o.get("rho", 0.9), o.get("epsilon", 1e-5)
    gr = _clip(o.get("rescale_grad", 1.0) * g, o.get("clip_gradient"))
    st[0] = rho * st[0] + (1 - rho) * gr * gr
    d = np.sqrt(st[1] + eps) / np.sqrt(st[0] + eps) * gr
    st[1] = rho * st[1] + (1 - rho) * d * d
    return w - d - wd * w


def ref_ftrl(w, g, st, lr, wd, t, o):
    l1, beta = o.get("lamda1", 0.01), o.get("beta", 1)
    gr = _clip(o.get("rescale_grad", 1.0) * g, o.get("clip_gradient"))
    st[0] = st[0] + gr - (np.sqrt(st[1] + gr * gr) - np.sqrt(st[1])) * w / lr
    st[1] = st[1] + gr * gr
    z, n = st
    return np.where(np.abs(z) > l1, (np.sign(z) * l1 - z) / ((beta + np.sqrt(n)) / lr + wd), 0.0)


def ref_adamax(w, g, st, lr, wd, t, o):
    b1, b2 = 0.9, 0.999
    gr = _clip(o.get("rescale_grad", 1.0) * g + wd * w, o.get("clip_gradient"))
    st[0] = b1 * st[0] + (1 - b1) * gr
    st[1] = np.maximum(b2 * st[1], np.abs(gr))
    return w - lr / (1 - b1 ** t) * st[0] / st[1]


def ref_lamb(w, g, st, lr, wd, t, o):
    b1, b2, eps = 0.9, 0.999, 1e-6
    gr = _clip(o.get("rescale_grad", 1.0) * g, o.get("clip_gradient"))
    st[0] = b1 * st[0] + (1 - b1) * gr
    st[1] = b2 * st[1] + (1 - b2) * gr * gr
    m, v = st[0], st[1]
    if o.get("bias_correction", True):
        m, v = m / (1 - b1 ** t), v / (1 - b2 ** t)
    u = m / (np.sqrt(v) + eps) + wd * w
    r1, r2 = np.linalg.norm(w), np.linalg.norm(u)
    if o.get("lower_bound"):
        r1 = max(r1, o["lower_bound"])
    if o.get("upper_bound"):
        r1 = min(r1, o["upper_bound"])
    ratio = r1 / r2 if r1 != 0 and r2 != 0 else 1.0
    return w - lr * ratio * u


def ref_dcasgd(w, g, st, lr, wd, t, o):
    gr = _clip(o.get("rescale_grad", 1.0) * g, o.get("clip_gradient"))
    step = -lr * (gr + wd * w + o.get("lamda", 0.04) * gr * gr * (w - st[0]))
    st[0] = w.copy()
    return w + step


CASES = [  # name, options, reference, number of states (MXNet's layout), default lr
    ("sgd", {}, ref_sgd, 0, 0.01),
    ("sgd", {"momentum": 0.9, "wd": 0.03, "clip_gradient": 0.5, "rescale_grad": 0.8}, ref_sgd,
     1, 0.01),
    ("nag", {"momentum": 0.9, "wd": 0.05, "rescale_grad": 0.8}, ref_nag, 1, 0.01),
    ("signum", {"wd": 0.03, "wd_lh": 0.015, "clip_gradient": 0.5}, ref_signum, 1, 0.01),
    ("ftml", {"beta1": 0.5, "wd": 0.03, "clip_gradient": 0.5}, ref_ftml, 3, 0.01),
    ("adam", {"wd": 0.03, "clip_gradient": 0.5, "rescale_grad": 0.8}, ref_adam, 2, 0.001),
    ("adamw", {"wd": 0.03, "clip_gradient": 0.5}, ref_adamw, 2, 0.001),
    ("adagrad", {"wd": 0.01, "clip_gradient": 0.4}, ref_adagrad, 1, 0.01),
    ("rmsprop", {"wd": 0.03, "clip_weights": 0.6}, ref_rmsprop, 1, 0.001),
    ("rmsprop", {"centered": True, "clip_gradient": 0.5}, ref_rmsprop, 3, 0.001),
    ("adadelta", {"wd": 0.01, "clip_gradient": 0.5, "rho": 0.8}, ref_adadelta, 2, None),
    ("ftrl", {"lamda1": 0.2, "wd": 0.05, "rescale_grad": 0.8}, ref_ftrl, 2, 0.1),
    ("adamax", {"wd": 0.03, "clip_gradient": 0.5}, ref_adamax, 2, 0.002),
    ("lamb", {"wd": 0.03, "upper_bound": 1.0}, ref_lamb, 2, 0.001),
    ("lamb", {"bias_correction": False, "clip_gradient": 0.4}, ref_lamb, 2, 0.001),
]


def _run(mx, name, opts, dtype, steps=3, seed=0):
    rs = np.random.RandomState(seed)
    w0 = rs.uniform(-1, 1, SHAPE)
    grads = [rs.uniform(-1, 1, SHAPE) for _ in range(steps)]
    opt = mx.optimizer.create(name, **opts)
    w = mx.nd.array(w0, dtype=dtype)
    st = opt.create_state(0, w)
    out = []
    for g in grads:
        opt.update(0, w, mx.nd.array(g, dtype=dtype), st)
        out.append(w.asnumpy())
    return w0, grads, out, st


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=["%s%d" % (c[0], i) for i, c in enumerate(CASES)])
def test_update_matches_numpy_reference(mx, case, dtype):
    name, opts, ref, nstates, default_lr = case
    w0, grads, got, st = _run(mx, name, opts, dtype)
    w = w0.copy()
    states = [np.zeros(SHAPE) for _ in range(nstates)]
    lr = default_lr
    tol = dict(rtol=2e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-6, atol=1e-9)  # float32 states: AdaGrad, RMSProp, AdaDelta, Ftrl
    for t, (g, out) in enumerate(zip(grads, got), 1):
        w = ref(w, g, states, lr, opts.get("wd", 0.0), t, opts)
        np.testing.assert_allclose(out, w, err_msg="%s step %d" % (name, t), **tol)
    flat = [] if st is None else ([st] if not isinstance(st, tuple) else list(st))
    assert len(flat) == nstates
    for a, b in zip(flat, states):
        np.testing.assert_allclose(a.asnumpy(), b, **tol)


def test_dcasgd_and_test_optimizer(mx):
    w0, grads, got, st = _run(mx, "dcasgd", {"wd": 0.01, "clip_gradient": 0.5}, "float64")
    w, prev = w0.copy(), [w0.copy()]
    for g, out in zip(grads, got):
        w = ref_dcasgd(w, g, prev, 0.01, 0.01, 0, {"clip_gradient": 0.5})
        np.testing.assert_allclose(out, w, rtol=1e-12)
    assert st[0] is None
    w0, grads, got, st = _run(mx, "test", {"rescale_grad": 0.5}, "float32")
    np.testing.assert_allclose(got[-1], w0 + 0.5 * sum(grads), rtol=1e-5)
    np.testing.assert_array_equal(st.asnumpy(), got[-1])


def test_signsgd_without_momentum(mx):
    w0, grads, got, st = _run(mx, "signum", {"momentum": 0.0, "wd": 0.02}, "float64", steps=1)
    assert st is None
    np.testing.assert_allclose(got[0], (1 - 0.01 * 0.02) * w0 - 0.01 * np.sign(grads[0]))


def test_sgld_noise_has_the_langevin_scale(mx):
    mx.random.seed(7)
    opt = mx.optimizer.SGLD(learning_rate=0.04)
    w = mx.nd.zeros((200, 50))
    opt.update(0, w, mx.nd.zeros((200, 50)), None)
    noise = w.asnumpy()
    assert abs(noise.mean()) < 0.01 and abs(noise.std() - 0.2) < 0.01  # N(0, sqrt(lr))


def test_nadam_two_steps(mx):
    b1, b2, eps, sd, lr = 0.9, 0.999, 1e-8, 0.004, 0.001
    w0, grads, got, _ = _run(mx, "nadam", {}, "float64", steps=2)
    w, m, v, msched = w0.copy(), 0.0, 0.0, 1.0
    for t, (g, out) in enumerate(zip(grads, got), 1):
        mu = b1 * (1 - 0.5 * 0.96 ** (t * sd))
        mu1 = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * sd))
        msched *= mu
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mbar = (1 - mu) * g / (1 - msched) + mu1 * m / (1 - msched * mu1)
        w = w - lr * mbar / (np.sqrt(v / (1 - b2 ** t)) + eps)
        np.testing.assert_allclose(out, w, rtol=1e-12)


# --- the Optimizer API

def test_registry_and_create(mx):
    assert type(mx.optimizer.create("SGD")) is mx.optimizer.SGD
    assert type(mx.optimizer.Optimizer.create_optimizer("AdaGrad")) is mx.optimizer.AdaGrad
    for name in ("sgd", "signum", "ftml", "lars", "lbsgd", "dcasgd", "nag", "sgld", "ccsgd",
                 "adam", "adagrad", "rmsprop", "adadelta", "ftrl", "adamax", "nadam", "lamb",
                 "test", "adamw"):
        assert name in mx.optimizer.Optimizer.opt_registry
    with pytest.raises(ValueError, match="Cannot find optimizer nosuch"):
        mx.optimizer.create("nosuch")
    with pytest.raises(TypeError):
        mx.optimizer.SGD(no_such_argument=1)

    @mx.optimizer.register
    class MyOpt(mx.optimizer.Optimizer):
        def update(self, index, weight, grad, state):
            weight[:] = weight.asnumpy() - self._get_lr(index) * grad.asnumpy()

    try:
        o = mx.optimizer.create("myopt", learning_rate=0.5)
        w = mx.nd.ones((2,))
        mx.optimizer.get_updater(o)(0, mx.nd.ones((2,)), w)
        np.testing.assert_allclose(w.asnumpy(), [0.5, 0.5])
        with pytest.warns(UserWarning, match="overriding"):
            mx.optimizer.Optimizer.register(MyOpt)
    finally:
        del mx.optimizer.Optimizer.opt_registry["myopt"]


def test_learning_rate_and_schedules(mx):
    o = mx.optimizer.Optimizer(learning_rate=0.01)
    o.set_learning_rate(0.2)
    assert o.learning_rate == 0.2
    assert mx.optimizer.SGD().learning_rate == 0.01
    s = mx.lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1024)
    o = mx.optimizer.SGD(lr_scheduler=s)  # no learning_rate: the schedule's base_lr
    assert o.learning_rate == 1024 and o._spec()["learning_rate"] == 1024
    with pytest.raises(UserWarning):
        o.set_learning_rate(0.5)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        o = mx.optimizer.SGD(learning_rate=0.4, lr_scheduler=mx.lr_scheduler.FactorScheduler(
            step=2, factor=0.5))
    assert s.base_lr == 1024 and o.lr_scheduler.base_lr == 0.4
    w, g = mx.nd.zeros((1,)), mx.nd.ones((1,))
    lrs = []
    for _ in range(5):  # lr follows the schedule of num_update (counted before the step)
        before = w.asnumpy()[0]
        o.update(0, w, g, None)
        lrs.append(before - w.asnumpy()[0])
    np.testing.assert_allclose(lrs, [0.4, 0.4, 0.2, 0.2, 0.1], rtol=1e-6)
    assert o.num_update == 5 and o._index_update_count[0] == 5


def test_update_counts_per_index_and_begin_num_update(mx):
    o = mx.optimizer.Adam(begin_num_update=10)
    assert o.num_update == 10
    o._update_count([0, 1])
    o._update_count(0)
    assert o._index_update_count == {0: 12, 1: 11} and o.num_update == 12
    with pytest.raises(ValueError, match="begin_num_update"):
        o._spec()  # make_step resumes from training-state checkpoints instead
    with pytest.raises(ValueError, match="make_step builds"):
        mx.optimizer.Ftrl()._spec()


def test_lr_and_wd_multipliers(mx):
    data_ = mx.sym.Variable("data")
    bias = mx.sym.Variable("fc1_bias", lr_mult=2.0)
    fc = mx.sym.FullyConnected(data=data_, bias=bias, name="fc1", num_hidden=3, wd_mult=0.5)
    idx2name = {0: "fc1_weight", 1: "fc1_bias", 2: "bn_gamma", 3: "bn_beta"}
    o = mx.optimizer.SGD(learning_rate=1.0, wd=0.1, sym=fc, param_idx2name=idx2name)
    assert o.lr_mult == {"fc1_bias": 2.0}
    # the op's wd_mult reaches the variables it creates (fc1_weight), not the given fc1_bias
    assert o.wd_mult == {"fc1_weight": 0.5, "fc1_bias": 0.0, "bn_beta": 0.0}
    assert [o._get_lr(i) for i in range(4)] == [1.0, 2.0, 1.0, 1.0]
    np.testing.assert_allclose([o._get_wd(i) for i in range(4)], [0.05, 0.0, 0.1, 0.0])
    o.set_lr_mult({3: 0.25})  # by index
    assert o._get_lr(3) == 0.25 and o._get_lr(1) == 2.0
    plain = mx.optimizer.SGD(wd=0.1)
    assert plain._get_wd(7) == 0.1  # no names: no default zeros
    lars = mx.optimizer.LARS(wd=0.1, param_idx2name={0: "a_weight", 1: "b_gamma"})
    assert lars.wd_mult == {"b_gamma": 0.0}
    spec = o._spec()
    assert spec["lr_mult"] == {"fc1_bias": 2.0} and spec["wd_mult"]["bn_beta"] == 0.0


def test_multi_precision_float16(mx):
    rs = np.random.RandomState(3)
    w0 = rs.uniform(-1, 1, SHAPE).astype(np.float16)
    g = rs.uniform(-1, 1, SHAPE).astype(np.float16)
    for name, kw in (("sgd", {"momentum": 0.9}), ("adam", {}), ("nag", {"momentum": 0.9}),
                     ("lamb", {}), ("rmsprop", {})):
        o = mx.optimizer.create(name, multi_precision=True, wd=0.01, **kw)
        w = mx.nd.array(w0, dtype=np.float16)
        st = o.create_state_multi_precision(0, w)
        masters = [s for s in (st if isinstance(st, tuple) else (st,))
                   if s is not None and not isinstance(s, tuple)
                   and s.shape == SHAPE and np.dtype(s.dtype) == np.float32]
        assert masters, name
        o.update_multi_precision(0, w, mx.nd.array(g, dtype=np.float16), st)
        # the same update in float32 on the float32 copy of the weight
        o32 = mx.optimizer.create(name, wd=0.01, **kw)
        w32 = mx.nd.array(w0.astype(np.float32))
        o32.update(0, w32, mx.nd.array(g.astype(np.float32)), o32.create_state(0, w32))
        assert np.dtype(w.dtype) == np.float16
        np.testing.assert_array_equal(w.asnumpy(), w32.asnumpy().astype(np.float16))
    with pytest.warns(UserWarning, match="float16"):
        mx.optimizer.SGD().create_state_multi_precision(0, mx.nd.array(w0, dtype=np.float16))


def test_updater_lazy_states_lists_and_pickles(mx):
    o = mx.optimizer.SGD(learning_rate=0.1, momentum=0.9)
    upd = mx.optimizer.get_updater(o)
    ws = [mx.nd.ones((2, 2)), mx.nd.ones((3,))]
    upd([0, 1], [mx.nd.ones((2, 2)), mx.nd.ones((3,))], ws)
    upd(1, mx.nd.ones((3,)), ws[1])
    assert sorted(upd.states) == [0, 1]
    np.testing.assert_allclose(upd.states[1].asnumpy(), [-0.19] * 3, rtol=1e-6)
    np.testing.assert_allclose(ws[1].asnumpy(), [1 - 0.1 - 0.19] * 3, rtol=1e-6)
    blob = upd.get_states(dump_optimizer=True)
    other = mx.optimizer.get_updater(mx.optimizer.SGD())
    other.set_states(blob)
    assert isinstance(other.optimizer, mx.optimizer.SGD) and other.optimizer.momentum == 0.9
    assert other.optimizer.num_update == 2
    np.testing.assert_array_equal(other.states[1].asnumpy(), upd.states[1].asnumpy())
    assert other.states_synced == {0: False, 1: False}
    other(1, mx.nd.ones((3,)), ws[1])  # continues from the restored momentum
    assert other.states_synced[1]
    plain = pickle.loads(pickle.dumps(o))
    assert plain.param_dict == {} and plain.momentum == 0.9
    st = upd.sync_state_context((upd.states[0], None), mx.cpu())
    assert isinstance(st, tuple) and st[1] is None


# --- imperative update == in-graph update (make_step)

GRAPH_CASES = [
    ("sgd", {"momentum": 0.9, "wd": 0.01}),
    ("nag", {"momentum": 0.9}),  # wd 0: see NAG's docstring (MXNet's aliasing of mom's wd*w)
    ("adam", {"wd": 0.01, "clip_gradient": 1.0}),
    ("adamw", {"wd": 0.01}),
    ("rmsprop", {"centered": True, "wd": 0.01}),
    ("lamb", {"wd": 0.01}),
]


@pytest.mark.parametrize("name,kw", GRAPH_CASES, ids=[c[0] for c in GRAPH_CASES])
def test_imperative_update_equals_in_graph_update(mx, name, kw):
    b, steps = 4, 3
    x, y = data(b * steps, 1)
    kw = dict(kw, learning_rate=0.05, rescale_grad=1.0 / b)
    step = mx.train.make_step(mlp(mx), optimizer=mx.optimizer.create(name, **kw))
    exe = mx.train.bind(step, data=(b, 5), softmax_label=(b,))
    init(exe)
    net = mlp(mx).simple_bind(mx.cpu(), grad_req={p: "write" for p in PARAMS}, data=(b, 5))
    init(net)
    opt = mx.optimizer.create(name, **kw)
    idx = {p: i for i, p in enumerate(PARAMS)}
    opt.idx2name = {i: p for p, i in idx.items()}
    opt.set_wd_mult({})  # MXNet's defaults by name, as the step graph applies them
    upd = mx.optimizer.get_updater(opt)
    for s in range(steps):
        xb, yb = x[s * b:(s + 1) * b], y[s * b:(s + 1) * b]
        exe.forward(is_train=True, data=xb, softmax_label=yb)
        net.forward(is_train=True, data=xb, softmax_label=yb)
        net.backward()
        for p in PARAMS:
            upd(idx[p], net.grad_dict[p], net.arg_dict[p])
        for p in PARAMS:
            np.testing.assert_allclose(net.arg_dict[p].asnumpy(), exe.arg_dict[p].asnumpy(),
                                       rtol=1e-5, atol=1e-6, err_msg="%s %s" % (p, s))


def test_lr_scheduler_values_and_checks(mx):
    ls = mx.lr_scheduler
    f = ls.FactorScheduler(step=100, factor=0.1, stop_factor_lr=1e-4, base_lr=1,
                           warmup_steps=20, warmup_begin_lr=0.1, warmup_mode="constant")
    assert f(0) == 0.1 and f(19) == 0.1 and f(21) == 1 and f(100) == 1
    assert f(101) == pytest.approx(0.1) and f(201) == pytest.approx(0.01) and f(1000) == 1e-4
    m = ls.MultiFactorScheduler([15, 25], factor=0.1, base_lr=0.1, warmup_steps=10,
                                warmup_begin_lr=0.05)
    assert m(5) == pytest.approx(0.075) and m(15) == 0.1 and m(16) == pytest.approx(0.01)
    assert m(26) == pytest.approx(0.001)
    p = ls.PolyScheduler(1000, base_lr=3, pwr=2, warmup_steps=100)
    assert p(50) == pytest.approx(1.5) and p(100) == 3 and p(550) == pytest.approx(0.75)
    assert p(1000) == 0 and p(5000) == 0
    c = ls.CosineScheduler(1000, base_lr=3, final_lr=0.1)
    assert c(0) == 3 and c(500) == pytest.approx(1.55) and c(1000) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="warmup_begin_lr"):
        ls.FactorScheduler(step=1, base_lr=0.1, warmup_begin_lr=0.2)
    with pytest.raises(ValueError, match="Factor"):
        ls.MultiFactorScheduler([1, 2], factor=2)
    with pytest.raises(ValueError, match="increasing"):
        ls.MultiFactorScheduler([2, 2])
    with pytest.raises(ValueError, match="warmup"):
        ls.FactorScheduler(step=1, warmup_mode="cubic")


def test_lamb_multi_precision_keeps_its_master_copy_current(mx):
    rs = np.random.RandomState(0)
    w0 = rs.uniform(-1, 1, SHAPE).astype(np.float16).astype(np.float64)
    grads = [rs.uniform(-1, 1, SHAPE).astype(np.float16).astype(np.float64) for _ in range(3)]
    o = mx.optimizer.LAMB(multi_precision=True, wd=0.01)
    w = mx.nd.array(w0, dtype=np.float16)
    st = o.create_state_multi_precision(0, w)
    ref, states = w0.copy(), [np.zeros(SHAPE), np.zeros(SHAPE)]
    for t, g in enumerate(grads, 1):
        o.update_multi_precision(0, w, mx.nd.array(g, dtype=np.float16), st)
        ref = ref_lamb(ref, g, states, 0.001, 0.01, t, {})
    np.testing.assert_allclose(st[0].asnumpy(), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.asnumpy(), ref, rtol=1e-3)


def test_dcasgd_with_momentum(mx):
    rs = np.random.RandomState(1)
    w0, grads = rs.uniform(-1, 1, SHAPE), [rs.uniform(-1, 1, SHAPE) for _ in range(3)]
    o = mx.optimizer.DCASGD(momentum=0.9, lamda=0.1)
    w = mx.nd.array(w0, dtype=np.float64)
    st = o.create_state(0, w)
    ref, mom, prev = w0.copy(), np.zeros(SHAPE), w0.copy()
    for g in grads:
        o.update(0, w, mx.nd.array(g, dtype=np.float64), st)
        mom = 0.9 * mom - 0.01 * (g + 0.1 * g * g * (ref - prev))
        prev = ref.copy()
        ref = ref + mom
    np.testing.assert_allclose(w.asnumpy(), ref, rtol=1e-12)
