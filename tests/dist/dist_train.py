"""Data-parallel training steps (loom.train.make_step(..., dist=loom.dist.DataParallel())) for
any world size: run on its own (one rank, no MPI) and under ``mpirun -np 2``. Exits non-zero on
the first wrong value.

The right answer is one process running the plain step graph on the concatenated batch: each
micro-batch of N*b rows, rank r taking rows [r*b, (r+1)*b) of it. With a batch-mean loss
(SoftmaxOutput normalization='batch') and grad_mean, the N-rank step must equal it after every
micro-step -- weights, optimizer state, EMA, counters, and the accumulated gradient on real
steps -- within float32 rounding of the reduction order (bit for bit with one rank), for SGD
with momentum, Adam and LAMB, with k = 1 and 3 micro-steps per real step; every rank holds
bit-identical state; ranks other than 0 start from other weights and still train from rank
0's (the first call broadcasts them); collectives happen only on real steps (CommStats):
two allreduces per real step (two buckets), nothing on the other micro-steps. Ranks binding
different graphs (bucket plans), or a graph built for another world size, fail at bind with
an error naming the rank.
"""
import numpy as np

import loom as mx

PER_RANK, MICRO, REAL = 4, 3, 2


def mlp():
    h = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=16, name="fc1")
    h = mx.sym.Activation(h, act_type="tanh", name="act")
    h = mx.sym.FullyConnected(h, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(h, normalization="batch", name="softmax")


def optimizer(name):
    if name == "sgd":
        return mx.optimizer.SGD(learning_rate=0.5, momentum=0.9, wd=1e-3)
    if name == "adam":
        return mx.optimizer.Adam(learning_rate=0.05, wd=1e-3)
    return mx.optimizer.LAMB(learning_rate=0.05, wd=1e-3)


def init(exe, value=None):
    rs = np.random.RandomState(5)
    for p in ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"):
        a = exe.arg_dict[p]
        a[:] = rs.normal(0, 0.5, a.shape).astype(np.float32) if value is None else value


def state(exe):
    d = {k: v.asnumpy().copy() for k, v in exe.arg_dict.items() if k not in ("data", "softmax_label")}
    d.update({k: v.asnumpy().copy() for k, v in exe.aux_dict.items()})
    return d


def check(opt, k, via_json):
    r, n = mx.dist.rank(), mx.dist.size()
    whole = PER_RANK * n
    rs = np.random.RandomState(11)
    x = rs.normal(size=(whole * k * REAL, 6)).astype(np.float32)
    y = rs.randint(0, 3, size=whole * k * REAL).astype(np.float32)
    ema = mx.train.EMA(decay=0.9)

    ref = mx.train.bind(mx.train.make_step(mlp(), optimizer(opt), accumulate=k, ema=ema),
                        data=(whole, 6), softmax_label=(whole,))
    init(ref)
    # A tiny first bucket: the reversed parameters split as {fc2_bias, fc2_weight}, {fc1_*}.
    step = mx.train.make_step(mlp(), optimizer(opt), accumulate=k, ema=ema,
                              dist=mx.dist.DataParallel(first_bucket_mb=1e-4))
    assert "_loom_allreduce" in step.tojson() and "_loom_broadcast_once" in step.tojson()
    if via_json:
        step = mx.sym.load_json(step.tojson())
    exe = mx.train.bind(step, data=(PER_RANK, 6), softmax_label=(PER_RANK,))
    init(exe, None if r == 0 else 3.0)  # only rank 0's weights count
    n_broadcast = len(step.list_arguments()) - 2 + len(step.list_auxiliary_states())

    for m in range(k * REAL):
        rows = slice(m * whole, (m + 1) * whole)
        ref.forward(is_train=True, data=x[rows], softmax_label=y[rows])
        mine = slice(m * whole + r * PER_RANK, m * whole + (r + 1) * PER_RANK)
        before = mx.dist.stats()
        exe.forward(is_train=True, data=x[mine], softmax_label=y[mine])
        after = mx.dist.stats()
        last = (m + 1) % k == 0
        want = {"allreduce": 2 if last else 0, "broadcast": (n_broadcast if n > 1 else 0) if m == 0 else 0,
                "all_gather": 0, "reduce_scatter": 0, "barrier": 0}
        got = {c: after[c] - before[c] for c in want}
        assert got == want, "%s k=%d micro-step %d: collectives %s, expected %s" % (opt, k, m, got, want)

        want_state, got_state = state(ref), state(exe)
        assert sorted(want_state) == sorted(got_state), (sorted(want_state), sorted(got_state))
        for name in want_state:
            if name.endswith("_acc") and not last:
                continue  # between real steps a rank holds its own share of the sum
            where = "%s k=%d micro-step %d rank %d: %s" % (opt, k, m, r, name)
            if n == 1:
                assert np.array_equal(got_state[name], want_state[name]), where
            else:
                np.testing.assert_allclose(got_state[name], want_state[name], rtol=1e-5, atol=1e-6,
                                           err_msg=where)
        flat = np.concatenate([got_state[name].ravel() for name in sorted(got_state)
                               if last or not name.endswith("_acc")])
        every = mx.dist.allgather(flat[None, :])
        for w in range(n):
            assert np.array_equal(every[w], flat), "%s k=%d: rank %d's state differs from rank %d's" % (
                opt, k, w, r)


def check_refusals():
    n = mx.dist.size()
    # A graph built for another world size is refused at bind, naming node, op and rank.
    step = mx.train.make_step(mlp(), "sgd", dist=mx.dist.DataParallel())
    wrong = mx.sym.load_json(step.tojson().replace('"world_size": "%d"' % n, '"world_size": "%d"' % (n + 1)))
    try:
        mx.train.bind(wrong, data=(PER_RANK, 6), softmax_label=(PER_RANK,))
    except mx.dist.DistError as e:
        assert "built for %d ranks" % (n + 1) in str(e) and "_loom_allreduce" in str(e), str(e)
        assert "rank %d of %d" % (mx.dist.rank(), n) in str(e), str(e)
    else:
        raise AssertionError("bound a step built for %d ranks in a job of %d" % (n + 1, n))
    if n > 1:
        # Rank 1 builds another bucket plan: every rank's bind fails, naming the rank.
        other = mx.train.make_step(mlp(), "sgd", dist=mx.dist.DataParallel(
            first_bucket_mb=1e-4 if mx.dist.rank() == 1 else 1))
        try:
            mx.train.bind(other, data=(PER_RANK, 6), softmax_label=(PER_RANK,))
        except mx.dist.DistError as e:
            assert "rank(s) 1 differ from rank 0" in str(e) and "step graph" in str(e), str(e)
        else:
            raise AssertionError("ranks bound different graphs")


if __name__ == "__main__":
    mx.dist.init()
    check_refusals()
    for opt in ("sgd", "adam", "lamb"):
        for k in (1, MICRO):
            check(opt, k, via_json=(opt == "adam"))
    print("rank %d of %d: data-parallel training steps ok" % (mx.dist.rank(), mx.dist.size()))
