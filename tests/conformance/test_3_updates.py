"""Optimizer update ops, step by step: the weight and every state after each step."""
import json
import os

import numpy as np
import pytest

import cases as C
import harness


@pytest.mark.parametrize("idx", range(len(C.UPDATES)),
                         ids=["%s_%d" % (u[0], i) for i, u in enumerate(C.UPDATES)])
def test_update_op(mx, oracle, idx):
    op, kw, states = C.UPDATES[idx]
    d = os.path.join(oracle.get("updates"), "%s_%d" % (op, idx))
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    m = harness.Mismatches("%s_%d" % (op, idx), 1e-4, 1e-5)
    arrs = {k: mx.nd.array(harness.npy(d, "init_" + k)) for k in ["weight"] + states}
    fn = getattr(mx.nd, op)
    for step in range(meta["steps"]):
        g = mx.nd.array(harness.npy(d, "grad_%d" % step))
        fn(*([arrs["weight"], g] + [arrs[s] for s in states]), out=arrs["weight"], **kw)
        for k, v in arrs.items():
            m.check("step %d %s" % (step, k), v.asnumpy(), harness.npy(d, "step%d_%s" % (step, k)))
    m.finish()


@pytest.mark.parametrize("idx", range(len(C.LAMB_CASES)))
def test_lamb(mx, oracle, idx):
    """lamb_update_phase1, the two norms, lamb_update_phase2, as MXNet's LAMB optimizer."""
    kw1, kw2 = C.LAMB_CASES[idx]
    d = os.path.join(oracle.get("updates"), "lamb_%d" % idx)
    m = harness.Mismatches("lamb_%d" % idx, 1e-4, 1e-5)
    w, mean, var = (mx.nd.array(harness.npy(d, "init_" + k)) for k in ("weight", "mean", "var"))
    for step in range(C.UPDATE_STEPS):
        g = mx.nd.array(harness.npy(d, "grad_%d" % step))
        upd = mx.nd.lamb_update_phase1(w, g, mean, var, t=step + 1, **kw1)
        r1 = mx.nd.array([np.linalg.norm(w.asnumpy())])
        r2 = mx.nd.array([np.linalg.norm(upd.asnumpy())])
        w = mx.nd.lamb_update_phase2(w, upd, r1, r2, **kw2)
        for k, v in (("weight", w), ("mean", mean), ("var", var), ("g", upd)):
            m.check("step %d %s" % (step, k), v.asnumpy(), harness.npy(d, "step%d_%s" % (step, k)))
    m.finish()
