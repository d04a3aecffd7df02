"""mx.optimizer imperatively, against MXNet 1.9.1's own optimizer objects: the same weights
and gradients, several update steps of two parameters, every optimizer of 1.9.1's
mx.optimizer, several option sets, float32 and float64 (where MXNet runs them), float16 with
multi_precision, the Updater's list form, LR schedules, lr/wd multipliers, begin_num_update;
then Updater.get_states pickles (with the optimizer and its schedule) exchanged both ways, each
side continuing from the other's.

The oracle runs RUNNER below (the same code Loom runs) in its own interpreter; it sees only
NumPy inputs derived from seeds, never Loom."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

# Shared by both sides: deterministic data and one case's run (mx is mxnet or loom).
RUNNER = r'''
import numpy as np

def case_data(seed, shape, dtype, nw, steps):
    rs = np.random.RandomState(seed)
    ws = [rs.uniform(-1, 1, shape).astype(dtype) for _ in range(nw)]
    gs = [[rs.uniform(-1, 1, shape).astype(dtype) for _ in range(nw)] for _ in range(steps)]
    return ws, gs

def flat_state(s):
    if s is None:
        return []
    if isinstance(s, (list, tuple)):
        out = []
        for x in s:
            out += flat_state(x)
        return out
    return [s.asnumpy()]

def make_optimizer(mx, case):
    kw = dict(case["kw"])
    if "param_idx2name" in kw:
        kw["param_idx2name"] = {int(k): v for k, v in kw["param_idx2name"]}
    sched = case.get("sched")
    if sched:
        kind = sched.pop("type")
        kw["lr_scheduler"] = getattr(mx.lr_scheduler, kind)(**sched)
    opt = mx.optimizer.create(case["name"], **kw)
    if case.get("lr_mult"):
        opt.set_lr_mult(dict(case["lr_mult"]))
    if case.get("wd_mult"):
        opt.set_wd_mult(dict(case["wd_mult"]))
    return opt

def run_case(mx, case):
    case = json.loads(json.dumps(case))
    dtype = np.dtype(case.get("dtype", "float32"))
    nw, steps = case.get("nw", 2), case.get("steps", 3)
    ws_np, gs_np = case_data(case["seed"], tuple(case.get("shape", (3, 4))), dtype, nw, steps)
    opt = make_optimizer(mx, case)
    ws = [mx.nd.array(w, dtype=dtype) for w in ws_np]
    out = {}
    if case.get("updater"):
        upd = mx.optimizer.get_updater(opt)
        for s in range(steps):
            upd(list(range(nw)), [mx.nd.array(g, dtype=dtype) for g in gs_np[s]], ws)
            for i in range(nw):
                out["s%d_w%d" % (s, i)] = ws[i].asnumpy()
                for k, a in enumerate(flat_state(upd.states[i])):
                    out["s%d_st%d_%d" % (s, i, k)] = a
        return out, upd
    states = [opt.create_state_multi_precision(i, ws[i]) for i in range(nw)]
    for s in range(steps):
        for i in range(nw):
            opt.update_multi_precision(i, ws[i], mx.nd.array(gs_np[s][i], dtype=dtype),
                                       states[i])
            out["s%d_w%d" % (s, i)] = ws[i].asnumpy()
            for k, a in enumerate(flat_state(states[i])):
                out["s%d_st%d_%d" % (s, i, k)] = a
    out["num_update"] = np.array([opt.num_update])
    out["learning_rate"] = np.array([opt.learning_rate])
    return out, None

def extra_step(mx, case, upd, last):
    """One more Updater step from the last weights of `last` (a restored updater)."""
    case = json.loads(json.dumps(case))
    dtype = np.dtype(case.get("dtype", "float32"))
    nw, steps = case.get("nw", 2), case.get("steps", 3)
    _, gs_np = case_data(case["seed"], tuple(case.get("shape", (3, 4))), dtype, nw, steps)
    ws = [mx.nd.array(last["s%d_w%d" % (steps - 1, i)], dtype=dtype) for i in range(nw)]
    upd(list(range(nw)), [mx.nd.array(g, dtype=dtype) for g in gs_np[0]], ws)
    return {"next_w%d" % i: ws[i].asnumpy() for i in range(nw)}
'''

ORACLE_MAIN = r'''
import json, os, sys, pickle
import numpy as np
import mxnet as mx
mode, cases_path, out_dir = sys.argv[1], sys.argv[2], sys.argv[3]
with open(cases_path) as f:
    cases = json.load(f)
if mode in ("run", "both"):
    for i, case in enumerate(cases):
        out, upd = run_case(mx, case)
        np.savez(os.path.join(out_dir, "case%d.npz" % i), **out)
        if upd is not None:
            with open(os.path.join(out_dir, "case%d.states" % i), "wb") as f:
                f.write(upd.get_states(dump_optimizer=True))
            np.savez(os.path.join(out_dir, "case%d_next.npz" % i),
                     **extra_step(mx, case, upd, out))
if mode in ("load", "both"):  # Loom's pickled states into an MXNet Updater
    for i, case in enumerate(cases):
        p = os.path.join(out_dir, "loom%d.states" % i)
        if not os.path.exists(p):
            continue
        upd = mx.optimizer.get_updater(mx.optimizer.create(case["name"]))
        with open(p, "rb") as f:
            upd.set_states(f.read())
        arrs = {}
        for idx, st in upd.states.items():
            for k, a in enumerate(flat_state(st)):
                arrs["i%s_%d" % (idx, k)] = a
        last = dict(np.load(os.path.join(out_dir, "loom%d_last.npz" % i)))
        arrs.update(extra_step(mx, case, upd, last))
        np.savez(os.path.join(out_dir, "mx_from_loom%d.npz" % i), **arrs)
'''

C = []


def case(name, kw=None, **more):
    d = {"name": name, "kw": kw or {}, "seed": 100 + len(C)}
    d.update(more)
    C.append(d)


MIX = {"wd": 0.03, "clip_gradient": 0.5, "rescale_grad": 0.8}
case("sgd")
case("sgd", dict(MIX, momentum=0.9))
case("sgd", dict(MIX, momentum=0.9), dtype="float64")
case("sgd", {"momentum": 0.9, "wd": 0.01, "multi_precision": True}, dtype="float16")
case("sgd", {"wd": 0.01, "multi_precision": True}, dtype="float16")
case("sgd", dict(MIX, momentum=0.9), updater=True, nw=3)
case("ccsgd", {"momentum": 0.9, "wd": 0.01})
case("nag", dict(MIX, momentum=0.9))
case("nag", {"wd": 0.02})
case("nag", dict(MIX, momentum=0.9), dtype="float64")
case("nag", {"momentum": 0.9, "wd": 0.01, "multi_precision": True}, dtype="float16")
case("signum")
case("signum", {"momentum": 0.9, "wd": 0.03, "wd_lh": 0.015, "clip_gradient": 0.5,
                "rescale_grad": 0.8, "learning_rate": 0.05})
case("signum", {"momentum": 0.0, "wd": 0.02})
case("ftml")
case("ftml", {"beta1": 0.5, "beta2": 0.9, "wd": 0.03, "clip_gradient": 0.5,
              "rescale_grad": 0.8})
case("lars", {"momentum": 0.9, "wd": 0.01, "eta": 0.01,
              "param_idx2name": [[0, "fc_weight"], [1, "fc_bias"]]})
case("lars", {"momentum": 0.9, "wd": 0.01, "eta": 0.01, "learning_rate": 0.1,
              "param_idx2name": [[0, "fc_weight"], [1, "fc2_weight"]]},
     sched={"type": "FactorScheduler", "step": 1, "factor": 0.5, "base_lr": 0.1}, steps=4)
case("lbsgd", {"momentum": 0.9, "batch_scale": 2, "warmup_epochs": 1,
               "updates_per_epoch": 4}, steps=4)
case("lbsgd", {"warmup_strategy": "lars", "wd": 0.01})
case("dcasgd", {"lamda": 0.04, "wd": 0.01, "clip_gradient": 0.5})
case("adam")
case("adam", MIX)
case("adam", MIX, dtype="float64")
case("adam", {"wd": 0.01, "multi_precision": True}, dtype="float16")
case("adagrad")
case("adagrad", {"eps": 1e-8, "clip_gradient": 0.4, "wd": 0.01, "rescale_grad": 0.8})
case("rmsprop")
case("rmsprop", dict(MIX, centered=True, clip_weights=0.5))
case("rmsprop", dict(MIX, clip_weights=0.5))
case("adadelta")
case("adadelta", {"rho": 0.8, "epsilon": 1e-8, "wd": 0.01, "clip_gradient": 0.5})
case("ftrl")
case("ftrl", {"lamda1": 0.5, "beta": 0.5, "wd": 0.05, "clip_gradient": 0.5,
              "rescale_grad": 0.8})
case("adamax")
case("adamax", {"wd": 0.03, "clip_gradient": 0.5})
case("nadam")
case("nadam", {"wd": 0.01, "clip_gradient": 0.5})
case("lamb")
case("lamb", {"wd": 0.03, "lower_bound": 1e-3, "upper_bound": 10, "bias_correction": False,
              "clip_gradient": 0.4, "rescale_grad": 0.8})
case("lamb", {"wd": 0.03, "lower_bound": 1e-3, "upper_bound": 0.5}, dtype="float64")
case("lamb", {"wd": 0.03}, updater=True, nw=3)
case("test", {"rescale_grad": 0.5})
for _name, _kw in (("lbsgd", {"momentum": 0.9, "batch_scale": 2}), ("signum", {"wd_lh": 0.01}),
                   ("ftml", {"wd": 0.01}), ("adamax", {"wd": 0.01}), ("nadam", {"wd": 0.01}),
                   ("dcasgd", {"wd": 0.01}), ("lars", {"momentum": 0.9, "eta": 0.01})):
    case(_name, _kw, dtype="float64", steps=4)
case("groupadagrad", {"clip_gradient": 0.5, "rescale_grad": 0.8})
# schedules, multipliers, the update counter
case("sgd", {"momentum": 0.9, "learning_rate": 0.2},
     sched={"type": "FactorScheduler", "step": 2, "factor": 0.5}, steps=5)
case("adam", {}, sched={"type": "MultiFactorScheduler", "step": [2, 4], "factor": 0.1,
                        "base_lr": 0.05}, steps=5)
case("sgd", {}, sched={"type": "CosineScheduler", "max_update": 4, "base_lr": 0.3,
                       "final_lr": 0.01, "warmup_steps": 1, "warmup_begin_lr": 0.1}, steps=5)
case("rmsprop", {}, sched={"type": "PolyScheduler", "max_update": 4, "base_lr": 0.01,
                           "pwr": 2}, steps=5)
case("sgd", {"wd": 0.1, "learning_rate": 0.5,
             "param_idx2name": [[0, "a_weight"], [1, "a_bias"]]},
     lr_mult=[["a_weight", 0.5]])
case("sgd", {"wd": 0.1, "param_idx2name": [[0, "a_weight"], [1, "b_gamma"]]},
     wd_mult=[["b_gamma", 3.0]])
case("adam", {"begin_num_update": 3})
case("sgd", {"momentum": 0.9}, updater=True, nw=2)  # pickle exchange
case("sgd", {"momentum": 0.9, "learning_rate": 0.1}, updater=True, steps=3,
     sched={"type": "FactorScheduler", "step": 1, "factor": 0.5})
case("adam", {"wd": 0.01}, updater=True, steps=3,
     sched={"type": "MultiFactorScheduler", "step": [1, 3], "factor": 0.5, "base_lr": 0.01})
PICKLE_CASES = [i for i, c in enumerate(C) if c.get("updater")]


def _tol(c):
    return (1e-3, 1e-3) if c.get("dtype") == "float16" else (1e-5, 1e-6)


@pytest.fixture(scope="module")
def loom_pickles(mx, tmp_path_factory):
    """(directory, updaters): Loom's Updater pickles of the PICKLE_CASES, for MXNet to load."""
    d = str(tmp_path_factory.mktemp("optimizer"))
    ns = _loom_runner()
    upds = {}
    for idx in PICKLE_CASES:
        last, upds[idx] = ns["run_case"](mx, C[idx])
        with open(os.path.join(d, "loom%d.states" % idx), "wb") as f:
            f.write(upds[idx].get_states(dump_optimizer=True))
        np.savez(os.path.join(d, "loom%d_last.npz" % idx), **last)
    return d, upds


@pytest.fixture(scope="module")
def oracle_out(oracle, loom_pickles):
    """One oracle run: every case, and the loading of Loom's pickles."""
    d = loom_pickles[0]
    with open(os.path.join(d, "cases.json"), "w") as f:
        json.dump(C, f)
    script = os.path.join(d, "oracle_optimizer.py")
    with open(script, "w") as f:
        f.write("import json\n" + RUNNER + ORACLE_MAIN)
    r = subprocess.run([oracle.py, script, "both", os.path.join(d, "cases.json"), d],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=""))
    if r.returncode != 0:
        pytest.fail("oracle optimizer run failed:\n%s%s" % (r.stdout, r.stderr[-4000:]),
                    pytrace=False)
    return d


def _loom_runner():
    ns = {"json": json}
    exec(RUNNER, ns)
    return ns


@pytest.mark.parametrize("idx", range(len(C)), ids=["%d_%s" % (i, c["name"])
                                                    for i, c in enumerate(C)])
def test_optimizer_matches_mxnet(mx, oracle_out, idx):
    c = C[idx]
    got, _ = _loom_runner()["run_case"](mx, c)
    want = dict(np.load(os.path.join(oracle_out, "case%d.npz" % idx)))
    assert sorted(got) == sorted(want), (sorted(got), sorted(want))
    rtol, atol = _tol(c)
    for k in sorted(want):
        np.testing.assert_allclose(got[k].astype(np.float64), want[k].astype(np.float64),
                                   rtol=rtol, atol=atol, err_msg="%s %s: %s" % (c["name"],
                                                                                c["kw"], k))
        assert got[k].dtype == want[k].dtype, (k, got[k].dtype, want[k].dtype)


@pytest.mark.parametrize("idx", PICKLE_CASES)
def test_states_pickles_exchange_with_mxnet(mx, oracle_out, loom_pickles, idx):
    c = C[idx]
    ns = _loom_runner()
    # MXNet's pickle -> Loom
    upd = mx.optimizer.get_updater(mx.optimizer.create(c["name"]))
    with open(os.path.join(oracle_out, "case%d.states" % idx), "rb") as f:
        upd.set_states(f.read())
    want = dict(np.load(os.path.join(oracle_out, "case%d.npz" % idx)))
    last = c.get("steps", 3) - 1
    for i in range(c.get("nw", 2)):
        got = ns["flat_state"](upd.states[i])
        for k, a in enumerate(got):
            np.testing.assert_array_equal(a, want["s%d_st%d_%d" % (last, i, k)])
    # the restored optimizer (dump_optimizer=True: counts, schedule) continues as MXNet's
    nxt = ns["extra_step"](mx, c, upd, want)
    want_next = dict(np.load(os.path.join(oracle_out, "case%d_next.npz" % idx)))
    for k in want_next:
        np.testing.assert_allclose(nxt[k], want_next[k], rtol=1e-5, atol=1e-6, err_msg=k)
    # Loom's pickle -> MXNet: the same states, and MXNet continues as Loom's would
    back = dict(np.load(os.path.join(oracle_out, "mx_from_loom%d.npz" % idx)))
    for i in range(c.get("nw", 2)):
        for k, a in enumerate(ns["flat_state"](loom_pickles[1][idx].states[i])):
            np.testing.assert_array_equal(back["i%d_%d" % (i, k)], a)
    for k in want_next:
        np.testing.assert_allclose(back[k], want_next[k], rtol=1e-5, atol=1e-6, err_msg=k)
