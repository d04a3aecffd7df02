"""mx.random / mx.nd.random / mx.sym.random, mx.test_utils, mx.mon, mx.profiler, mx.runtime,
mx.util, mx.engine and the contrib namespaces.

Distributions are checked against closed-form moments (within a few standard errors, with
fixed seeds) and a chi-square goodness of fit; test_utils' checks against analytic gradients
and against a custom op whose backward is deliberately wrong."""
import json
import math
import os

import numpy as np
import pytest


def _se_check(samples, mean, var, k=5.0):
    """Sample mean within k standard errors of `mean`, sample variance within k standard
    errors (normal approximation, var of s^2 ~ 2 var^2 / n for a loose bound x3)."""
    x = np.asarray(samples, dtype=np.float64).ravel()
    n = x.size
    assert abs(x.mean() - mean) < k * math.sqrt(var / n), (x.mean(), mean)
    assert abs(x.var() - var) < k * 3 * var * math.sqrt(2.0 / n), (x.var(), var)


# ---------------------------------------------------------------------------------------
# random

def test_seed_reproducible_and_distinct(mx):
    mx.random.seed(7)
    a = mx.nd.random.normal(shape=(50,)).asnumpy()
    b = mx.nd.random.uniform(shape=(5,)).asnumpy()
    mx.random.seed(7)
    assert np.array_equal(a, mx.nd.random.normal(shape=(50,)).asnumpy())
    assert np.array_equal(b, mx.nd.random.uniform(shape=(5,)).asnumpy())
    mx.random.seed(8)
    assert not np.array_equal(a, mx.nd.random.normal(shape=(50,)).asnumpy())
    # mx.rnd is the same module; seeding one context leaves the other streams alone
    assert mx.rnd is mx.random
    mx.random.seed(3)
    mx.random.seed(99, ctx=mx.cpu())
    c = mx.nd.random.uniform(shape=(4,)).asnumpy()
    mx.random.seed(99, ctx=mx.cpu())
    assert np.array_equal(c, mx.nd.random.uniform(shape=(4,)).asnumpy())
    with pytest.raises(ValueError):
        mx.random.seed(1.5)


@pytest.mark.parametrize("name,kwargs,mean,var", [
    ("uniform", dict(low=-1.5, high=3.0), 0.75, 4.5 ** 2 / 12),
    ("normal", dict(loc=10.0, scale=0.5), 10.0, 0.25),
    ("gamma", dict(alpha=9.0, beta=0.5), 4.5, 9.0 * 0.25),
    ("exponential", dict(scale=2.0), 2.0, 4.0),
    ("poisson", dict(lam=4.0), 4.0, 4.0),
    # failures before the k-th success: mean k(1-p)/p, variance k(1-p)/p^2
    ("negative_binomial", dict(k=3, p=0.4), 3 * 0.6 / 0.4, 3 * 0.6 / 0.16),
    # Gamma-Poisson mixture: mean mu, variance mu + alpha mu^2
    ("generalized_negative_binomial", dict(mu=2.0, alpha=0.3), 2.0, 2.0 + 0.3 * 4.0),
])
def test_moments(mx, name, kwargs, mean, var):
    mx.random.seed(1234)
    x = getattr(mx.nd.random, name)(shape=(20000,), **kwargs)
    assert x.shape == (20000,) and x.dtype == np.float32
    _se_check(x.asnumpy(), mean, var)


def test_chi_square_uniform_and_normal(mx):
    from loom.test_utils import chi_square_check, gen_buckets_probs_with_ppf, verify_generator
    mx.random.seed(5)
    buckets, probs = gen_buckets_probs_with_ppf(lambda q: -2.0 + 6.0 * q, 8)
    p, obs, _ = chi_square_check(
        lambda n: mx.nd.random.uniform(-2, 4, shape=(n,)).asnumpy(), buckets, probs, 40000)
    assert p > 0.001 and obs.sum() == 40000
    # normal quantiles at 0, 1/4, 1/2, 3/4, 1 (Phi^-1(3/4) = 0.6744897501960817)
    q = 0.6744897501960817
    buckets = [(-np.inf, -q), (-q, 0.0), (0.0, q), (q, np.inf)]
    verify_generator(lambda n: mx.nd.random.normal(0, 1, shape=(n,)).asnumpy(), buckets,
                     [0.25] * 4, nsamples=20000, nrepeat=3)
    # a generator of the wrong distribution is rejected
    with pytest.raises(AssertionError):
        verify_generator(lambda n: mx.nd.random.normal(0.2, 1, shape=(n,)).asnumpy(),
                         buckets, [0.25] * 4, nsamples=20000, nrepeat=3)


def test_chi2_survival_function_closed_forms():
    from loom.test_utils import _chi2_sf
    for x in (0.1, 1.0, 3.0, 10.0, 40.0):
        assert abs(_chi2_sf(x, 2) - math.exp(-x / 2)) < 1e-10
        assert abs(_chi2_sf(x, 1) - math.erfc(math.sqrt(x / 2))) < 1e-10
        # dof 4: Q = exp(-x/2) (1 + x/2)
        assert abs(_chi2_sf(x, 4) - math.exp(-x / 2) * (1 + x / 2)) < 1e-10


def test_array_parameters_shapes_and_rows(mx):
    mx.random.seed(11)
    loc = mx.nd.array([[0.0, 5.0], [-3.0, 100.0]])
    scale = mx.nd.array([[1.0, 0.5], [2.0, 0.1]])
    x = mx.nd.random.normal(loc, scale, shape=(4000,))
    assert x.shape == (2, 2, 4000)
    xn = x.asnumpy()
    for i in range(2):
        for j in range(2):
            _se_check(xn[i, j], loc.asnumpy()[i, j], scale.asnumpy()[i, j] ** 2)
    y = mx.nd.sample_uniform(mx.nd.array([0.0, 10.0]), mx.nd.array([1.0, 11.0]), shape=3)
    assert y.shape == (2, 3)
    assert (y.asnumpy()[0] < 1).all() and (y.asnumpy()[1] >= 10).all()
    assert mx.nd.random.uniform().shape == (1,)
    assert mx.nd.random.randn(2, 3).shape == (2, 3)
    out = mx.nd.zeros((3, 4))
    r = mx.nd.random.uniform(5, 6, out=out)
    assert r is out and (out.asnumpy() >= 5).all()
    like = mx.nd.random.normal_like(mx.nd.zeros((3, 5)), loc=1.0)
    assert like.shape == (3, 5)
    # the _like samplers take MXNet's op parameters: exponential_like has the rate lam
    _se_check(mx.nd.random.exponential_like(mx.nd.zeros((20000,)), lam=4.0).asnumpy(),
              0.25, 0.0625)
    with pytest.raises(mx.base.LoomError):
        mx.nd.random.uniform(2, 1, shape=(2,))


def test_randint_multinomial_shuffle(mx):
    mx.random.seed(3)
    r = mx.nd.random.randint(-3, 5, shape=(16000,))
    assert r.dtype == np.int32
    v = r.asnumpy()
    assert v.min() >= -3 and v.max() <= 4
    counts = np.bincount(v + 3, minlength=8)
    assert np.all(np.abs(counts - 2000) < 5 * math.sqrt(2000 * 7 / 8))
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]], dtype=np.float32)
    s, logp = mx.nd.random.multinomial(mx.nd.array(probs), shape=(5000,), get_prob=True)
    assert s.shape == (2, 5000) and logp.shape == (2, 5000)
    sn = s.asnumpy()
    for row in range(2):
        freq = np.bincount(sn[row], minlength=3) / 5000.0
        se = np.sqrt(probs[row] * (1 - probs[row]) / 5000) + 1e-9
        assert np.all(np.abs(freq - probs[row]) < 5 * se)
        assert np.allclose(logp.asnumpy()[row], np.log(probs[row][sn[row]]), atol=1e-5)
    data = mx.nd.array(np.arange(20).reshape(10, 2))
    sh = mx.nd.random.shuffle(data).asnumpy()
    assert sorted(sh[:, 0].tolist()) == list(range(0, 20, 2))
    assert np.array_equal(sh[:, 1] - sh[:, 0], np.ones(10))


def test_symbolic_samplers(mx):
    s = mx.sym.random.uniform(low=2, high=3, shape=(3, 400))
    assert s.infer_shape()[1] == [(3, 400)]
    exe = s.simple_bind(mx.cpu())
    mx.random.seed(21)
    a = exe.forward()[0].asnumpy()
    mx.random.seed(21)
    b = exe.forward()[0].asnumpy()
    assert np.array_equal(a, b) and a.min() >= 2 and a.max() < 3
    _se_check(a, 2.5, 1.0 / 12)
    # parameters as symbols: one set of samples per element, zero gradient for them
    loc, scale = mx.sym.var("loc"), mx.sym.var("scale")
    y = mx.sym.random.normal(loc, scale, shape=(2000,))
    exe = y.simple_bind(mx.cpu(), loc=(2,), scale=(2,))
    exe.arg_dict["loc"][:] = np.array([-5.0, 5.0])
    exe.arg_dict["scale"][:] = np.array([1.0, 2.0])
    exe.forward(is_train=True)
    out = exe.outputs[0].asnumpy()
    assert out.shape == (2, 2000)
    _se_check(out[0], -5, 1)
    _se_check(out[1], 5, 4)
    exe.backward(mx.nd.ones((2, 2000)))
    assert np.all(exe.grad_dict["loc"].asnumpy() == 0)
    x = mx.sym.var("x")
    z = mx.sym.random.uniform_like(x, low=0, high=1) + x
    res = z.eval(x=mx.nd.ones((2, 3)) * 10)[0].asnumpy()
    assert res.shape == (2, 3) and (res >= 10).all() and (res < 11).all()
    r = mx.sym.random.randn(loc=3.0, data=mx.sym.ones((2, 2000)))
    assert r.infer_shape()[1] == [(2, 2000)]
    _se_check(r.eval()[0].asnumpy(), 3.0, 1.0)
    p = mx.sym.random.multinomial(mx.sym.var("p"), shape=(4,))
    got = p.eval(p=mx.nd.array([[0, 1.0], [1.0, 0]]))[0].asnumpy()
    assert np.array_equal(got, [[1] * 4, [0] * 4])


# ---------------------------------------------------------------------------------------
# test_utils

def test_comparisons(mx):
    tu = mx.test_utils
    a = np.array([1.0, 2.0, 3.0])
    tu.assert_almost_equal(a, a + 1e-7)
    tu.assert_almost_equal(mx.nd.array(a), a)
    with pytest.raises(AssertionError) as e:
        tu.assert_almost_equal(a, np.array([1.0, 2.5, 3.0]), names=("A", "B"))
    msg = str(e.value)
    assert "Location of maximum error: (1,), A=2.00000000, B=2.50000000" in msg
    assert "mismatch 33.333333%" in msg
    assert tu.almost_equal(a, a + 1e-9) and not tu.almost_equal(a, a + 1)
    assert tu.same(a, a.copy()) and not tu.same(a, a + 1)
    b = np.array([1.0, 2.0, 5.0])
    assert abs(tu.reldiff(a, b) - 2.0 / 14.0) < 1e-12
    tu.assert_almost_equal(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]), equal_nan=True)
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(np.array([np.nan]), np.array([np.nan]))
    # 1 mismatching element in 100 passes with etol=0.05, fails with etol=0.001
    x = np.zeros(100)
    y = x.copy()
    y[3] = 1
    tu.assert_almost_equal_with_err(x, y, etol=0.05)
    with pytest.raises(AssertionError):
        tu.assert_almost_equal_with_err(x, y, etol=0.001)
    tu.assert_exception(lambda: 1 / 0, ZeroDivisionError)
    with pytest.raises(AssertionError):
        tu.assert_exception(lambda: 1, ZeroDivisionError)
    d = np.arange(24.0).reshape(2, 3, 4)
    assert np.array_equal(tu.np_reduce(d, (0, 2), True, np.sum), d.sum(axis=(0, 2),
                                                                       keepdims=True))
    assert np.array_equal(tu.collapse_sum_like(d, (3, 1)), d.sum(axis=(0, 2)).reshape(3, 1))
    with pytest.raises(mx.base.LoomError):
        tu.rand_ndarray((2, 2), "csr")
    assert tu.rand_ndarray((2, 3)).shape == (2, 3)
    assert len(tu.rand_shape_nd(4)) == 4 and all(1 <= s <= 10 for s in tu.rand_shape_3d())
    assert tu.default_context() == mx.cpu() and tu.default_dtype() == np.float32


def test_symbolic_forward_backward_checks(mx):
    tu = mx.test_utils
    x, w = mx.sym.var("x"), mx.sym.var("w")
    y = mx.sym.FullyConnected(x, w, no_bias=True, num_hidden=3)
    rng = np.random.RandomState(0)
    X, W, G = rng.randn(4, 5), rng.randn(3, 5), rng.randn(4, 3)
    tu.check_symbolic_forward(y, [X, W], [X @ W.T], rtol=1e-4, atol=1e-4)
    tu.check_symbolic_forward(y, {"x": X, "w": W}, {y.list_outputs()[0]: X @ W.T},
                              rtol=1e-4, atol=1e-4)
    with pytest.raises(AssertionError):
        tu.check_symbolic_forward(y, [X, W], [X @ W.T + 0.1], rtol=1e-4, atol=1e-4)
    tu.check_symbolic_backward(y, [X, W], [G], [G @ W, G.T @ X], rtol=1e-4, atol=1e-4)
    tu.check_symbolic_backward(y, [X, W], [G], {"x": G @ W, "w": G.T @ X},
                               grad_req={"x": "add", "w": "null"}, rtol=1e-4, atol=1e-4)
    tu.check_symbolic_backward(y, [X, W], [G], [G @ W, G.T @ X], grad_req=["write", "add"],
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(AssertionError):
        tu.check_symbolic_backward(y, [X, W], [G], [G @ W, 2 * G.T @ X], rtol=1e-4,
                                   atol=1e-4)
    # BatchNorm in inference mode reads its aux states: (x - mean) / sqrt(var + eps)
    bn = mx.sym.BatchNorm(mx.sym.var("d"), fix_gamma=True, eps=1e-3, name="bn")
    D = rng.randn(3, 2)
    mean, var = np.array([0.5, -1.0]), np.array([4.0, 0.25])
    tu.check_symbolic_forward(bn, {"d": D, "bn_gamma": np.ones(2), "bn_beta": np.zeros(2)},
                              [(D - mean) / np.sqrt(var + 1e-3)],
                              aux_states=[mean, var], rtol=1e-4, atol=1e-4)
    assert tu.simple_forward(y, x=X, w=W).shape == (4, 3)


def test_numeric_gradient_accepts_right_and_rejects_wrong(mx):
    tu = mx.test_utils
    x, w = mx.sym.var("x"), mx.sym.var("w")
    rng = np.random.RandomState(1)
    loc = {"x": rng.uniform(-1, 1, (3, 4)), "w": rng.uniform(-1, 1, (3, 4))}
    np.random.seed(0)
    tu.check_numeric_gradient(mx.sym.tanh(x) * mx.sym.exp(w), loc, numeric_eps=1e-2,
                              rtol=1e-2, atol=1e-3)
    tu.check_numeric_gradient(mx.sym.tanh(x) * w, loc, grad_nodes={"x": "add", "w": "null"},
                              numeric_eps=1e-2, rtol=1e-2, atol=1e-3)

    class Square(mx.operator.CustomOp):
        def __init__(self, factor):
            super().__init__()
            self.factor = factor

        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0] * in_data[0])

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            # d(x^2)/dx = 2x; factor != 2 makes it wrong on purpose
            self.assign(in_grad[0], req[0], out_grad[0] * in_data[0] * self.factor)

    @mx.operator.register("tu_square")
    class SquareProp(mx.operator.CustomOpProp):
        def __init__(self, factor="2"):
            super().__init__(need_top_grad=True)
            self.factor = float(factor)

        def create_operator(self, ctx, shapes, dtypes):
            return Square(self.factor)

    data = {"x": rng.uniform(0.5, 1.5, (2, 3))}
    good = mx.sym.Custom(x, op_type="tu_square", factor=2)
    tu.check_numeric_gradient(good, data, numeric_eps=1e-2, rtol=1e-2, atol=1e-3)
    bad = mx.sym.Custom(x, op_type="tu_square", factor=3)
    with pytest.raises(AssertionError) as e:
        tu.check_numeric_gradient(bad, data, numeric_eps=1e-2, rtol=1e-2, atol=1e-3)
    assert "NUMERICAL_x" in str(e.value) and "BACKWARD_x" in str(e.value)


def test_consistency_speed_env(mx, tmp_path, monkeypatch):
    tu = mx.test_utils
    y = mx.sym.FullyConnected(mx.sym.var("x"), num_hidden=3, name="fc")
    gt = tu.check_consistency(y, [{"ctx": mx.cpu(), "x": (2, 4)}])
    assert set(gt) >= {"fc_output"}
    gt = tu.check_consistency(y, [{"ctx": mx.cpu(), "x": (2, 4)},
                                  {"ctx": mx.cpu(0), "x": (2, 4)}])
    assert set(gt) >= {"fc_output", "x", "fc_weight", "fc_bias"}
    assert tu.check_speed(y, x=(2, 4), N=2) > 0
    assert tu.check_speed(y, x=(2, 4), N=2, typ="forward") > 0
    monkeypatch.delenv("LOOM_TU_A", raising=False)
    monkeypatch.setenv("LOOM_TU_B", "old")
    with tu.environment({"LOOM_TU_A": "1", "LOOM_TU_B": None}):
        assert os.environ["LOOM_TU_A"] == "1" and "LOOM_TU_B" not in os.environ
    assert "LOOM_TU_A" not in os.environ and os.environ["LOOM_TU_B"] == "old"
    assert tu.set_env_var("LOOM_TU_B", "new") == "old"
    assert tu.is_cd_run() in (True, False)

    # offline: a clear error naming the directory (no network access here)
    def offline(url, fname=None, **kw):
        raise IOError("network unreachable")
    monkeypatch.setattr(tu, "download", offline)
    with pytest.raises(IOError, match="could not be downloaded"):
        tu.get_mnist(str(tmp_path))


# ---------------------------------------------------------------------------------------
# monitor

def test_monitor(mx):
    x = mx.sym.var("data")
    fc = mx.sym.FullyConnected(x, num_hidden=3, name="fc1")
    out = mx.sym.Activation(fc, act_type="relu", name="act")
    exe = out.simple_bind(mx.cpu(), data=(2, 4))
    rng = np.random.RandomState(2)
    vals = {k: rng.randn(*v.shape) for k, v in exe.arg_dict.items()}
    for k, v in exe.arg_dict.items():
        v[:] = vals[k]
    mon = mx.mon.Monitor(2, pattern=".*output|fc1_weight", sort=True)
    mon.install(exe)
    results = []
    for _ in range(3):
        mon.tic()
        exe.forward()
        results.append(mon.toc())
    assert results[1] == []  # interval 2: batch 2 not collected
    names = [n for _, n, _ in results[0]]
    assert names == ["act_output", "fc1_output", "fc1_weight"]
    assert [s for s, _, _ in results[2]] == [3, 3, 3]
    pre = vals["data"] @ vals["fc1_weight"].T + vals["fc1_bias"]
    expect = {"fc1_output": pre, "act_output": np.maximum(pre, 0), "fc1_weight":
              vals["fc1_weight"]}
    for _, name, stat in results[0]:
        ref = np.linalg.norm(expect[name]) / math.sqrt(expect[name].size)
        assert abs(float(stat.strip()) - ref) < 1e-4 * max(1, ref)
    seen = []
    exe.set_monitor_callback(lambda n, a: seen.append(n), monitor_all=True)
    exe.forward()
    # MXNet's order: a variable input under its own name, then every input as
    # <node>_<input>; Activation's inputs are input0... there (no declared input names).
    assert seen == ["data", "fc1_data", "fc1_weight", "fc1_weight", "fc1_bias", "fc1_bias",
                    "fc1_output", "act_input0", "act_output"]
    exe.set_monitor_callback(None)
    seen.clear()
    exe.forward()
    assert seen == []


# ---------------------------------------------------------------------------------------
# profiler

def test_profiler_trace_and_stats(mx, tmp_path):
    prof = mx.profiler
    fname = str(tmp_path / "trace.json")
    prof.set_config(profile_all=True, filename=fname, aggregate_stats=True)
    prof.dumps(reset=True)
    a = mx.nd.ones((8, 8))
    mx.nd.sqrt(a)  # before 'run': not recorded
    prof.set_state("run")
    mx.nd.sqrt(a)
    b = a + 1
    b = b + 1
    prof.pause()
    mx.nd.exp(a)  # paused: not recorded
    prof.resume()
    y = mx.sym.FullyConnected(mx.sym.var("x"), num_hidden=2, name="fc")
    exe = y.simple_bind(mx.cpu(), x=(3, 4))
    exe.forward(is_train=True)
    exe.backward(mx.nd.ones((3, 2)))
    dom = prof.Domain("MyDomain")
    task = dom.new_task("work")
    task.start()
    task.stop()
    counter = dom.new_counter("items", 5)
    counter += 2
    dom.new_marker("here").mark("process")
    prof.set_state("stop")
    mx.nd.sqrt(a)  # stopped: not recorded
    prof.dump()
    with open(fname) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    by = {}
    for ev in events:
        by.setdefault(ev["name"], []).append(ev)
    assert len(by["sqrt"]) == 1 and len(by["_plus_scalar"]) == 2 and "exp" not in by
    assert by["fc_output::forward"][0]["ph"] == "X"
    assert by["fc_output::backward"][0]["cat"] == "executor"
    assert by["work"][0]["cat"] == "MyDomain"
    assert [e["args"]["items"] for e in by["items"]] == [5, 7]
    assert by["here"][0]["ph"] == "i"
    for ev in events:
        if ev["ph"] == "X":
            assert ev["dur"] >= 0 and ev["ts"] >= 0
    stats = json.loads(prof.dumps(format="json"))
    assert stats["Time"]["operator"]["_plus_scalar"]["Count"] == 2
    assert stats["Time"]["operator"]["sqrt"]["Count"] == 1
    t = stats["Time"]["operator"]["_plus_scalar"]
    assert t["Min"] <= t["Avg"] <= t["Max"] and abs(t["Total"] - 2 * t["Avg"]) < 1e-9
    counts = [v["Count"] for v in json.loads(prof.dumps(format="json", sort_by="count",
                                                        ascending=True))["Time"]
              ["operator"].values()]
    assert counts == sorted(counts)
    assert "sqrt" in prof.dumps()
    prof.dumps(reset=True)
    assert json.loads(prof.dumps(format="json"))["Time"] == {}
    prof.set_config(profile_all=False, aggregate_stats=False, filename="profile.json")


# ---------------------------------------------------------------------------------------
# runtime, util, engine, contrib

def test_runtime_util_engine_contrib(mx):
    f = mx.runtime.Features()
    assert f is mx.runtime.Features() and len(f) >= 30
    assert f.is_enabled("mkldnn") == f["MKLDNN"].enabled
    with open("/proc/self/maps") as maps:
        loaded = maps.read()
    assert f["MKLDNN"].enabled == ("libdnnl" in loaded)
    assert f["CUDA"].enabled == ("libcudart" in loaded)
    assert not f.is_enabled("DIST_KVSTORE")
    with pytest.raises(RuntimeError):
        f.is_enabled("no such feature")
    assert [x.name for x in mx.runtime.feature_list()] == list(f.keys())

    assert mx.util.is_np_shape() is False and mx.util.is_np_array() is False
    assert mx.util.set_np_shape(False) is False
    assert mx.util.set_np_shape(True) is False and mx.util.is_np_shape() is True
    assert mx.util.set_np_shape(False) is True
    with mx.util.np_shape(False):
        assert not mx.util.is_np_shape()
    with pytest.raises(mx.base.LoomError):
        mx.util.set_np(array=True)

    old = mx.engine.set_bulk_size(4)
    assert mx.engine.set_bulk_size(old) == 4
    with mx.engine.bulk(10):
        x = mx.nd.ones((3,))
        x += 1
    assert mx.engine.set_bulk_size(old) == old
    assert (x.asnumpy() == 2).all()

    assert mx.contrib.ndarray is mx.nd.contrib and mx.contrib.symbol is mx.sym.contrib
    from loom import _ops
    for op in _ops.all_ops():
        if op.startswith("_contrib_"):
            assert callable(getattr(mx.nd.contrib, op[len("_contrib_"):]))
            assert callable(getattr(mx.sym.contrib, op[len("_contrib_"):]))
    with pytest.raises(AttributeError, match="_contrib_no_such_op"):
        mx.sym.contrib.no_such_op


def test_rand_zipfian(mx):
    mx.random.seed(9)
    range_max, n = 20, 20000
    prob = np.log((np.arange(range_max) + 2.0) / (np.arange(range_max) + 1.0)) / \
        np.log(range_max + 1.0)
    assert abs(prob.sum() - 1) < 1e-12
    true = mx.nd.array([0, 4, 19], dtype="int32")
    sampled, exp_true, exp_sampled = mx.nd.contrib.rand_zipfian(true, n, range_max)
    s = sampled.asnumpy()
    assert sampled.dtype == np.int64 and s.min() >= 0 and s.max() < range_max
    assert np.allclose(exp_true.asnumpy(), n * prob[[0, 4, 19]], rtol=1e-5)
    assert np.allclose(exp_sampled.asnumpy(), n * prob[s], rtol=1e-5)
    freq = np.bincount(s, minlength=range_max) / float(n)
    assert np.all(np.abs(freq - prob) < 5 * np.sqrt(prob * (1 - prob) / n))
    outs = mx.sym.Group(mx.sym.contrib.rand_zipfian(mx.sym.var("t"), 500, range_max))
    exe = outs.bind(mx.cpu(), {"t": true})
    exe.forward()
    s2 = exe.outputs[0].asnumpy()
    assert s2.shape == (500,) and s2.min() >= 0 and s2.max() < range_max
    assert np.allclose(exe.outputs[1].asnumpy(), 500 * prob[[0, 4, 19]], rtol=1e-4)
    assert np.allclose(exe.outputs[2].asnumpy(), 500 * prob[s2], rtol=1e-4)
    assert np.array_equal(mx.nd.contrib.isfinite(mx.nd.array([1, np.inf, np.nan])).asnumpy(),
                          [1, 0, 0])


def test_random_pdf_ops(mx):
    from loom.random import _digamma
    tu = mx.test_utils
    # psi(1) = -Euler's gamma, psi(1/2) = -gamma - 2 ln 2, psi(x + 1) = psi(x) + 1/x
    g = 0.5772156649015329
    assert np.allclose(_digamma([1.0, 0.5, 7.5]),
                       [-g, -g - 2 * math.log(2), float(_digamma([6.5])[0]) + 1 / 6.5],
                       atol=1e-10)
    v = [mx.sym.var("v%d" % i) for i in range(3)]
    rng = np.random.RandomState(4)
    mu = np.array([[0.0, 2.5], [-9.75, -7.0]])
    sigma = np.array([[1.0, 3.7], [4.2, 1.5]])
    x = rng.randn(2, 2, 3) + mu[..., None]
    z = (x - mu[..., None]) / sigma[..., None]
    dens = np.exp(-0.5 * z * z) / (sigma[..., None] * math.sqrt(2 * math.pi))
    for dt in (np.float32, np.float64):
        tu.check_symbolic_forward(mx.sym.random_pdf_normal(*v), [x, mu, sigma], [dens],
                                  rtol=1e-4, atol=1e-6, dtype=dt)
        tu.check_symbolic_forward(mx.sym.random_pdf_normal(*v, is_log=True), [x, mu, sigma],
                                  [np.log(dens)], rtol=1e-4, atol=1e-5, dtype=dt)
    tu.check_numeric_gradient(mx.sym.random_pdf_normal(*v), [x, mu, sigma], numeric_eps=1e-5,
                              rtol=1e-2, atol=1e-4, dtype=np.float64)
    # closed forms: Poisson 3^2 e^-3 / 2!, NB C(4,2) 0.4^3 0.6^2, Gamma(rate) b^a x^(a-1) e^-bx / (a-1)!
    P = mx.nd.random_pdf_poisson(mx.nd.array([[2.0]]), mx.nd.array([3.0])).asscalar()
    assert abs(P - 9 * math.exp(-3) / 2) < 1e-6
    P = mx.nd.random_pdf_negative_binomial(mx.nd.array([[2.0]]), mx.nd.array([3.0]),
                                           mx.nd.array([0.4])).asscalar()
    assert abs(P - 6 * 0.4 ** 3 * 0.36) < 1e-6
    P = mx.nd.random_pdf_gamma(mx.nd.array([[2.0]]), mx.nd.array([3.0]),
                               mx.nd.array([0.5])).asscalar()
    assert abs(P - 0.5 ** 3 * 4 * math.exp(-1) / 2) < 1e-6
    k = np.array([[2.0, 3.0]])
    p = np.array([[0.3, 0.6]])
    counts = np.array([[[0.0, 1, 2], [3, 4, 5]]])
    tu.check_numeric_gradient(mx.sym.random_pdf_generalized_negative_binomial(*v),
                              [counts, k, p], grad_nodes=["v1", "v2"], numeric_eps=1e-5,
                              rtol=1e-2, atol=1e-4, dtype=np.float64)
    a = np.array([[1.5, 2.0, 0.7]])
    xs = np.array([[[0.2, 0.3, 0.5]]])
    beta = math.gamma(a.sum()) / np.prod([math.gamma(t) for t in a[0]])
    P = mx.nd.random_pdf_dirichlet(mx.nd.array(xs), mx.nd.array(a)).asnumpy()
    assert abs(P[0, 0] - beta * np.prod(xs[0, 0] ** (a[0] - 1))) < 1e-5
    tu.check_numeric_gradient(mx.sym.random_pdf_dirichlet(v[0], v[1]), [xs, a],
                              numeric_eps=1e-6, rtol=1e-2, atol=1e-3, dtype=np.float64)


def test_sample_unique_zipfian(mx):
    mx.random.seed(17)
    classes, trials = mx.nd._internal._sample_unique_zipfian(1000, shape=(3, 200))
    c, t = classes.asnumpy(), trials.asnumpy()
    assert c.shape == (3, 200) and t.shape == (3,)
    assert all(np.unique(row).size == 200 for row in c) and c.min() >= 0 and c.max() < 1000
    assert (t >= 200).all()
    # two classes: after the first draw, a geometric wait for the other one, so
    # E[trials] = 1 + p0 / p1 + p1 / p0 with p0 = log 2 / log 3, p1 = log 1.5 / log 3
    p0 = math.log(2) / math.log(3)
    p1 = 1 - p0
    mean = 1 + p0 / p1 + p1 / p0
    _, trials = mx.nd._internal._sample_unique_zipfian(2, shape=(4000, 2))
    # variance of a geometric(q) wait: (1 - q) / q^2, mixed over which class came first
    var = p0 * (p0 / p1 ** 2) + p1 * (p1 / p0 ** 2) + p0 * (1 / p1) ** 2 + p1 * (1 / p0) ** 2 \
        - (p0 / p1 + p1 / p0) ** 2
    assert abs(trials.asnumpy().mean() - mean) < 5 * math.sqrt(var / 4000)


def test_mnist_from_cache_and_dummy_iter(mx, tmp_path, monkeypatch):
    import gzip
    import struct
    rng = np.random.RandomState(6)
    root = tmp_path / "datasets" / "mnist"
    root.mkdir(parents=True)
    raw = {}
    for prefix, n in (("train", 60), ("t10k", 20)):
        pixels = rng.randint(0, 256, (n, 28, 28)).astype(np.uint8)
        labels = rng.randint(0, 10, n).astype(np.uint8)
        raw[prefix] = (pixels, labels)
        with gzip.open(str(root / ("%s-images-idx3-ubyte.gz" % prefix)), "wb") as f:
            f.write(struct.pack(">IIII", 2051, n, 28, 28) + pixels.tobytes())
        with gzip.open(str(root / ("%s-labels-idx1-ubyte.gz" % prefix)), "wb") as f:
            f.write(struct.pack(">II", 2049, n) + labels.tobytes())
    monkeypatch.setenv("MXNET_HOME", str(tmp_path))
    m = mx.test_utils.get_mnist()
    assert m["train_data"].shape == (60, 1, 28, 28) and m["train_data"].dtype == np.float32
    assert np.allclose(m["train_data"][:, 0], raw["train"][0] / 255.0)
    assert np.array_equal(m["test_label"], raw["t10k"][1])
    train, val = mx.test_utils.get_mnist_iterator(10, (784,), num_parts=2, part_index=1)
    assert sum(1 for _ in train) == 3 and next(iter(val)).data[0].shape == (10, 784)
    dummy = mx.test_utils.DummyIter(val)
    assert next(dummy) is next(dummy)


def test_compare_optimizer_accepts_equal_and_rejects_different_updates(mx):
    from loom.test_utils import compare_optimizer
    make = lambda lr: mx.optimizer.create("sgd", momentum=0.9, wd=0.01, learning_rate=lr)  # noqa: E731
    compare_optimizer(make(0.1), make(0.1), (3, 4), "float32")
    # single-tensor reference against the multi-tensor form of the same optimizer
    compare_optimizer(make(0.1), make(0.1), [(3, 4), (5,)], "float32", ntensors=2)
    with pytest.raises(AssertionError):
        compare_optimizer(make(0.1), make(0.2), (3, 4), "float32")


def test_numpy_semantics_switches_at_top_level(mx):
    assert mx.is_np_shape() is False and mx.is_np_array() is False
    with mx.np_shape(False):
        pass

    @mx.use_np_shape
    def f():
        """doc"""
        return mx.is_np_shape(), mx.nd.ones(()).shape, mx.nd.zeros((0, 3)).shape
    assert f() == (True, (), (0, 3)) and f.__name__ == "f" and f.__doc__ == "doc"
    assert mx.is_np_shape() is False
    with pytest.raises(mx.LoomError):
        mx.np_array(True).__enter__()


def test_np_shape_creation_and_inference(mx):
    # Legacy shapes: no scalar or zero-size arrays (MXNet raises too).
    for fn in (mx.nd.zeros, mx.nd.ones, mx.nd.empty):
        with pytest.raises(mx.base.MXNetError, match="np_shape"):
            fn((2, 0))
        with pytest.raises(mx.base.MXNetError, match="np_shape"):
            fn(())
    x, y = mx.sym.var("x"), mx.sym.var("y")
    z = mx.sym.dot(x, y)
    assert z.infer_shape_partial(x=(0, 3, 4), y=(4, 5))[1] == [(0, 3, 5)]
    assert mx.sym.sin(x).infer_shape_partial()[1] == [()]
    with mx.np_shape():
        a = mx.nd.ones((0, 2))
        assert a.shape == (0, 2) and a.asnumpy().shape == (0, 2)
        assert float(mx.nd.full((), 7).asnumpy()) == 7.0
        assert z.infer_shape_partial(x=(-1, 3, 4), y=(4, 5))[1] == [(-1, 3, 5)]
        assert mx.sym.sin(x).infer_shape_partial()[1] == [None]
        v = mx.sym.var("v", shape=(-1, 20))
        assert mx.sym.slice_axis(v, axis=1, begin=0, end=5).infer_shape_partial()[1] == \
            [(-1, 5)]
        assert z.infer_shape(x=(2, 3, 4), y=(4, 5))[1] == [(2, 3, 5)]
        assert '"is_np_shape": ["int", 1]' in z.tojson()
    assert "is_np_shape" not in z.tojson()


def test_contrib_amp_imports_and_refuses_conversion(mx):
    from loom.contrib.amp import amp
    assert amp.list_lp16_ops() == []
    with pytest.raises(mx.LoomError, match="mixed precision"):
        amp.init()
