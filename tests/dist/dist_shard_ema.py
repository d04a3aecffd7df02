"""Sharded model EMA (loom.dist.DataParallel(shard_ema=True)) for any world size: run on its
own (one rank, no MPI) and under ``mpirun -np 2``. Exits non-zero on the first wrong value.

The right answer is the unsharded data-parallel step of the same job (shard_ema=False), run
side by side on the same micro-batches: its weights are computed the same way and its EMA
element for element by the same arithmetic, so the gathered sharded EMA must equal it bit for
bit after every micro-step (SGD with momentum and Adam; k = 1 and 3; init copy with a constant
decay and zero_debias with the tf schedule). Also checked: each rank's resident EMA is one
(ceil(T/N),) array of the T trained elements and no per-parameter shadow exists; the gathered
EMA is bit-identical on every rank; the step's forward issues no all_gather (the EMA is
gathered only by ema_params / ema_weights / bind_ema / save_checkpoint); ema_weights swaps
the gathered EMA in and restores the weights bit for bit; a checkpoint written by the sharded
job holds the whole EMA under the unsharded names (the same arrays the unsharded job writes),
resumes the sharded job bit for bit, and resumes as ONE process (a plain step on the
concatenated batch) whose next real step matches the N-rank run within float32 rounding.
"""
import os
import tempfile

import numpy as np

import loom as mx

PER_RANK, REAL = 4, 3
PARAMS = ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias")


def mlp():
    h = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=16, name="fc1")
    h = mx.sym.Activation(h, act_type="tanh", name="act")
    h = mx.sym.FullyConnected(h, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(h, normalization="batch", name="softmax")


def optimizer(name):
    if name == "sgd":
        return mx.optimizer.SGD(learning_rate=0.5, momentum=0.9, wd=1e-3)
    return mx.optimizer.Adam(learning_rate=0.05, wd=1e-3)


def emas():
    return {"copy": mx.train.EMA(decay=0.9),
            "zero_debias": mx.train.EMA(decay=0.95, schedule="tf", init="zero_debias")}


def init(exe, value=None):
    rs = np.random.RandomState(5)
    for p in PARAMS:
        a = exe.arg_dict[p]
        a[:] = rs.normal(0, 0.5, a.shape).astype(np.float32) if value is None else value


def ema_arrays(exe):
    arg, aux = mx.train.ema_params(exe)
    assert not aux, sorted(aux)
    return {k: v.asnumpy().copy() for k, v in arg.items()}


def weights(exe):
    return {p: exe.arg_dict[p].asnumpy().copy() for p in PARAMS}


def batches(k, n):
    whole = PER_RANK * n
    rs = np.random.RandomState(11)
    x = rs.normal(size=(whole * k * (REAL + 1), 6)).astype(np.float32)
    y = rs.randint(0, 3, size=whole * k * (REAL + 1)).astype(np.float32)
    return x, y


def mine(m, r):
    n = mx.dist.size()
    return slice(m * PER_RANK * n + r * PER_RANK, m * PER_RANK * n + (r + 1) * PER_RANK)


def bind_dist(opt, k, ema, shard):
    step = mx.train.make_step(mlp(), optimizer(opt), accumulate=k, ema=ema,
                              dist=mx.dist.DataParallel(first_bucket_mb=1e-4, shard_ema=shard))
    exe = mx.train.bind(step, data=(PER_RANK, 6), softmax_label=(PER_RANK,))
    init(exe, None if mx.dist.rank() == 0 else 3.0)  # only rank 0's weights count
    return step, exe


def same(a, b, where):
    assert sorted(a) == sorted(b), (where, sorted(a), sorted(b))
    for name in a:
        assert a[name].shape == b[name].shape and np.array_equal(a[name], b[name]), (
            "%s: %s differs (max |diff| %g)" % (where, name, np.max(np.abs(a[name] - b[name]))))


def check(opt, k, ema_kind):
    r, n = mx.dist.rank(), mx.dist.size()
    x, y = batches(k, n)
    ema = emas()[ema_kind]
    ref_step, ref = bind_dist(opt, k, ema, False)
    step, exe = bind_dist(opt, k, ema, True)
    tag = "%s k=%d %s rank %d of %d" % (opt, k, ema_kind, r, n)

    # Resident EMA: one shard of ceil(T/N) elements, no per-parameter shadow.
    total = sum(exe.arg_dict[p].size for p in PARAMS)
    shard = exe.aux_dict["step_ema_shard"]
    assert shard.shape == (-(-total // n),), (tag, shard.shape, total)
    assert not [a for a in exe.aux_dict if a.endswith("_ema")], sorted(exe.aux_dict)
    assert ("step_ema_shard_norm" in exe.aux_dict) == (ema_kind == "zero_debias")
    full = sum(v.size for a, v in ref.aux_dict.items() if a.endswith("_ema"))
    assert full == total and shard.size * n - total < n, (tag, full, shard.size)
    assert mx.train.state_kinds(step)["step_ema_shard"] == "ema"

    for m in range(k * REAL):
        last = (m + 1) % k == 0
        ref.forward(is_train=True, data=x[mine(m, r)], softmax_label=y[mine(m, r)])
        before = mx.dist.stats()
        exe.forward(is_train=True, data=x[mine(m, r)], softmax_label=y[mine(m, r)])
        after = mx.dist.stats()
        got = {c: after[c] - before[c] for c in ("allreduce", "all_gather", "reduce_scatter")}
        want = {"allreduce": 2 if last else 0, "all_gather": 0, "reduce_scatter": 0}
        assert got == want, (tag, m, got)
        where = "%s micro-step %d" % (tag, m)
        same(weights(exe), weights(ref), where + " weights")
        before = mx.dist.stats()["all_gather"]
        gathered = ema_arrays(exe)
        assert mx.dist.stats()["all_gather"] - before == 1, where
        same(gathered, ema_arrays(ref), where + " EMA")
        flat = np.concatenate([gathered[p].ravel() for p in PARAMS])
        every = mx.dist.allgather(flat[None, :])
        for w in range(n):
            assert np.array_equal(every[w], flat), "%s: rank %d's gathered EMA differs" % (where, w)

    # ema_weights: the gathered EMA inside, the live weights back bit for bit after.
    live = weights(exe)
    with mx.train.ema_weights(exe):
        same(weights(exe), ema_arrays(ref), tag + " ema_weights")
    same(weights(exe), live, tag + " after ema_weights")

    # bind_ema: an inference executor on the gathered EMA.
    ev = mx.train.bind_ema(mlp(), exe, data=(PER_RANK, 6), softmax_label=(PER_RANK,))
    ev_ref = mx.train.bind_ema(mlp(), ref, data=(PER_RANK, 6), softmax_label=(PER_RANK,))
    ev.forward(is_train=False, data=x[:PER_RANK], softmax_label=y[:PER_RANK])
    ev_ref.forward(is_train=False, data=x[:PER_RANK], softmax_label=y[:PER_RANK])
    assert np.array_equal(ev.outputs[0].asnumpy(), ev_ref.outputs[0].asnumpy()), tag

    check_checkpoint(opt, k, ema, ref, exe, x, y, tag)


def check_checkpoint(opt, k, ema, ref, exe, x, y, tag):
    r, n = mx.dist.rank(), mx.dist.size()
    base = int(mx.dist.broadcast(np.array([os.getpid()], dtype=np.int64))[0])
    d = tempfile.gettempdir()
    path = os.path.join(d, "loom_shard_ema_%d_%s_%d.params" % (base, opt, k))
    ref_path = os.path.join(d, "loom_shard_ema_%d_%s_%d_ref.params" % (base, opt, k))
    mx.train.save_checkpoint(path, exe)  # every rank: a gather, rank 0 writes
    if r == 0:
        mx.train.save_checkpoint(ref_path, ref)
    mx.dist.barrier()
    try:
        saved = {kk: v.asnumpy() for kk, v in mx.nd.load(path).items()}
        want = {kk: v.asnumpy() for kk, v in mx.nd.load(ref_path).items()}
        same(saved, want, tag + " checkpoint vs the unsharded job's")

        # Resume the sharded job from the file: the same next real step, bit for bit.
        _, again = bind_dist(opt, k, ema, True)
        mx.train.load_checkpoint(path, again)
        # Resume as one process: a plain step on the concatenated batch.
        one = mx.train.bind(mx.train.make_step(mlp(), optimizer(opt), accumulate=k, ema=ema),
                            data=(PER_RANK * n, 6), softmax_label=(PER_RANK * n,))
        mx.train.load_checkpoint(path, one)
        whole = PER_RANK * n
        for m in range(k * REAL, k * (REAL + 1)):
            for e in (exe, again):
                e.forward(is_train=True, data=x[mine(m, r)], softmax_label=y[mine(m, r)])
            one.forward(is_train=True, data=x[m * whole:(m + 1) * whole],
                        softmax_label=y[m * whole:(m + 1) * whole])
        same(weights(again), weights(exe), tag + " resumed sharded weights")
        same(ema_arrays(again), ema_arrays(exe), tag + " resumed sharded EMA")
        got, want_one = ema_arrays(exe), ema_arrays(one)
        for p in PARAMS:
            np.testing.assert_allclose(weights(one)[p], weights(exe)[p], rtol=1e-5, atol=1e-6,
                                       err_msg=tag + " one-process resume weights " + p)
            np.testing.assert_allclose(want_one[p], got[p], rtol=1e-5, atol=1e-6,
                                       err_msg=tag + " one-process resume EMA " + p)
            if n == 1:
                assert np.array_equal(want_one[p], got[p]), tag + " " + p
    finally:
        mx.dist.barrier()
        if r == 0:
            os.remove(path)
            os.remove(ref_path)


def check_refusals():
    # A graph sharded over another world size is refused at bind, naming the op and rank.
    n = mx.dist.size()
    step = mx.train.make_step(mlp(), "sgd", ema=mx.train.EMA(),
                              dist=mx.dist.DataParallel(shard_ema=True))
    js = step.tojson().replace('"world_size": "%d"' % n, '"world_size": "%d"' % (n + 1))
    try:
        mx.train.bind(mx.sym.load_json(js), data=(PER_RANK, 6), softmax_label=(PER_RANK,))
    except mx.dist.DistError as e:
        assert "rank %d of %d" % (mx.dist.rank(), n) in str(e), str(e)
    else:
        raise AssertionError("bound a step sharded over %d ranks in a job of %d" % (n + 1, n))


if __name__ == "__main__":
    mx.dist.init()
    check_refusals()
    for opt in ("sgd", "adam"):
        for k in (1, 3):
            check(opt, k, "copy" if opt == "sgd" else "zero_debias")
    check("sgd", 3, "zero_debias")
    print("rank %d of %d: sharded EMA ok" % (mx.dist.rank(), mx.dist.size()))
