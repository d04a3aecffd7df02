"""make_step with NAG, RMSProp (plain and centered) and LAMB: weights and every optimizer state
after each real step against a float64 NumPy reimplementation of MXNet 1.9.1's update ops
(src/operator/optimizer_op-inl.h) called the way python/mxnet/optimizer/optimizer.py calls
them, driven by the gradient of one big batch of k*b computed in NumPy."""
import numpy as np
import pytest

from test_train import PARAMS, data, init, mlp, state

K, B, STEPS = 3, 4, 4  # micro-steps per real step, micro-batch, real steps


def np_grads(w, x, y):
    """float64 gradients of mlp()'s loss over a batch: SoftmaxOutput's default gradient
    p - onehot(y), summed over the batch (no normalization)."""
    h = np.tanh(x @ w["fc1_weight"].T + w["fc1_bias"])
    z = h @ w["fc2_weight"].T + w["fc2_bias"]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    dz = p / p.sum(axis=1, keepdims=True) - np.eye(3)[y.astype(int)]
    da = (dz @ w["fc2_weight"]) * (1 - h * h)
    return {"fc1_weight": da.T @ x, "fc1_bias": da.sum(0), "fc2_weight": dz.T @ h,
            "fc2_bias": dz.sum(0)}


def clip(v, c, hits, what):
    """mshadow clip to [-c, c]; MXNet's Python passes clip_* only when truthy."""
    if not c:
        return v
    hits[what] = hits.get(what, 0) + int(np.sum(np.abs(v) > c))
    return np.clip(v, -c, c)


def ref_update(kind, o, w, g, st, wd, t, hits):
    """One MXNet 1.9.1 update of one parameter (float64). g: the gradient before
    rescale_grad; st: the optimizer states, updated in place; t: MXNet's per-index update
    count (1 on the first real step). Returns the new weight."""
    lr, rs, cg = o["learning_rate"], o["rescale_grad"], o.get("clip_gradient")
    if kind == "nag":  # nag_mom_update: wd*w added after clipping. MXNet's kernel, called with
        # out=weight, reads the already written new weight for mom's wd*w term; Loom follows
        # the formula with the old weight (ops/update/sgd.cc), and so does this reference.
        gg = clip(rs * g, cg, hits, "clip_gradient") + wd * w
        mu = o["momentum"]
        st["mom"] = mu * st["mom"] - lr * gg
        return w + mu * st["mom"] - lr * gg
    if kind == "rmsprop":  # rmsprop_update / rmspropalex_update: wd*w clipped with the grad
        gg = clip(rs * g + wd * w, cg, hits, "clip_gradient")
        g1, eps = o["gamma1"], o["epsilon"]
        st["n"] = (1 - g1) * gg * gg + g1 * st["n"]
        if o["centered"]:
            st["g"] = (1 - g1) * gg + g1 * st["g"]
            st["delta"] = o["gamma2"] * st["delta"] - lr * gg / np.sqrt(
                st["n"] - st["g"] * st["g"] + eps)
            new = w + st["delta"]
        else:
            new = w - lr * gg / np.sqrt(st["n"] + eps)
        return clip(new, o.get("clip_weights"), hits, "clip_weights")
    # lamb_update_phase1 (wd*w added after the bias correction, not clipped), then
    # r1 = ||w||, r2 = ||g||, then lamb_update_phase2.
    b1, b2, eps = o["beta1"], o["beta2"], o["epsilon"]
    gg = clip(rs * g, cg, hits, "clip_gradient")
    st["mean"] = b1 * st["mean"] + (1 - b1) * gg
    st["var"] = b2 * st["var"] + (1 - b2) * gg * gg
    m, v = st["mean"], st["var"]
    if o["bias_correction"]:
        m, v = m / (1 - b1 ** t), v / (1 - b2 ** t)
    d = m / (np.sqrt(v) + eps) + wd * w
    r1, r2 = np.sqrt(np.sum(w * w)), np.sqrt(np.sum(d * d))
    if o.get("lower_bound") and r1 < o["lower_bound"]:
        r1, hits["lower_bound"] = o["lower_bound"], hits.get("lower_bound", 0) + 1
    if o.get("upper_bound") and r1 > o["upper_bound"]:
        r1, hits["upper_bound"] = o["upper_bound"], hits.get("upper_bound", 0) + 1
    if r1 == 0 or r2 == 0:  # phase2 keeps lr unscaled
        hits["r1_or_r2_zero"] = hits.get("r1_or_r2_zero", 0) + 1
        return w - lr * d
    return w - lr * (r1 / r2) * d


STATES = {"nag": ["mom"], "rmsprop": ["n"], "lamb": ["mean", "var"]}  # + g, delta if centered
# (id, loom optimizer class, kwargs (all hyperparameters explicit), parameters zeroed before
#  training, reference branches that must have been taken at least once)
CASES = [
    ("nag", "NAG", dict(learning_rate=0.1, momentum=0.9, wd=0.01, rescale_grad=1.0 / B,
                        clip_gradient=0.1), [], ["clip_gradient"]),
    ("rmsprop", "RMSProp", dict(learning_rate=0.01, gamma1=0.9, gamma2=0.9, epsilon=1e-8,
                                centered=False, wd=0.02, rescale_grad=1.0 / B), [], []),
    ("rmsprop_centered", "RMSProp",
     dict(learning_rate=0.01, gamma1=0.95, gamma2=0.8, epsilon=1e-8, centered=True,
          clip_weights=0.9, wd=0.01, rescale_grad=0.5 / B, clip_gradient=0.05), [],
     ["clip_gradient", "clip_weights"]),
    ("lamb", "LAMB", dict(learning_rate=0.02, beta1=0.9, beta2=0.999, epsilon=1e-6,
                          bias_correction=True, wd=0.01, rescale_grad=1.0 / B, clip_gradient=0.2),
     ["fc2_bias"], ["clip_gradient", "r1_or_r2_zero"]),
    ("lamb_bounds", "LAMB", dict(learning_rate=0.05, beta1=0.8, beta2=0.99, epsilon=1e-6,
                                 bias_correction=False, lower_bound=1.0, upper_bound=3.0,
                                 wd=0.05, rescale_grad=2.0 / B), [],
     ["lower_bound", "upper_bound"]),
]


def check(got, want, what, worst):
    """float32 tolerance; atol scales with the array (optimizer states can be ~1e-5)."""
    scale = max(float(np.abs(want).max()), 1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * scale, err_msg=what)
    worst[0] = max(worst[0], float(np.abs(got - want).max()))
    worst[1] = max(worst[1], float(np.abs(got - want).max()) / scale)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_optimizer_in_step_matches_mxnet_formulas(mx, case):
    cid, cls, kw, zeroed, branches = case
    kind = "rmsprop" if cls == "RMSProp" else cls.lower()
    names = STATES[kind] + (["g", "delta"] if kw.get("centered") else [])
    x, y = data(K * B * STEPS, 11)
    step = mx.train.make_step(mlp(mx), optimizer=getattr(mx.optimizer, cls)(**kw), accumulate=K)
    want_aux = {p + s for p in PARAMS for s in ["_acc"] + ["_" + n for n in names]}
    assert set(step.list_auxiliary_states()) == want_aux | {"step_micro", "step_real"}
    exe = mx.train.bind(step, data=(B, 5), softmax_label=(B,))
    init(exe)
    for p in zeroed:
        exe.arg_dict[p][:] = np.zeros(exe.arg_dict[p].shape, np.float32)
    ref = {p: exe.arg_dict[p].asnumpy().astype(np.float64) for p in PARAMS}
    st = {p: {n: np.zeros_like(ref[p]) for n in names} for p in PARAMS}
    hits, worst = {}, [0.0, 0.0]
    for s in range(STEPS):
        lo = s * K * B
        for m in range(K):
            before = state(exe)
            exe.forward(is_train=True, data=x[lo + m * B:lo + (m + 1) * B],
                        softmax_label=y[lo + m * B:lo + (m + 1) * B])
            if m < K - 1:  # only the accumulators and the micro-step counter move
                for n, v in state(exe).items():
                    if not (n.endswith("_acc") or n in ("step_micro", "data", "softmax_label")):
                        np.testing.assert_array_equal(v, before[n], err_msg="%s, micro %d" % (n, m))
        # The step accumulates the mean of the k micro-batch sums: big-batch gradient / k.
        grads = np_grads(ref, x[lo:lo + K * B].astype(np.float64), y[lo:lo + K * B])
        for p in PARAMS:
            wd = kw["wd"] if p.endswith("_weight") else 0.0  # MXNet's default wd_mult
            ref[p] = ref_update(kind, kw, ref[p], grads[p] / K, st[p], wd, s + 1, hits)
            where = "%s after real step %d" % (p, s + 1)
            check(exe.arg_dict[p].asnumpy(), ref[p], where, worst)
            for n in names:
                check(exe.aux_dict[p + "_" + n].asnumpy(), st[p][n], "%s_%s, %s" % (p, n, where),
                      worst)
    assert exe.aux_dict["step_real"].asnumpy()[0] == STEPS
    assert exe.aux_dict["step_micro"].asnumpy()[0] == K * STEPS
    for br in branches:  # the configured clipping / bounds were really exercised
        assert hits.get(br, 0) > 0, "%s never taken (hits %s)" % (br, hits)
    print("%s: max abs diff %.3g, max diff / array scale %.3g, branches %s" % (
        cid, worst[0], worst[1], hits))
