"""Overlapped gradient allreduce and averaged BatchNorm statistics in data-parallel steps, for
any world size: run on its own (one rank, no MPI) and under ``mpirun -np 2``. Exits non-zero on
the first wrong value.

1. DataParallel(overlap=True) (per-tensor accumulation, each bucket's non-blocking allreduce
   started as soon as its gradients are accumulated, one wait before the update) must equal
   DataParallel(overlap=False) (one blocking allreduce per bucket after backward) bit for bit:
   weights, optimizer state, accumulators, BatchNorm statistics and counters after every
   micro-step, for SGD with momentum and Adam, k = 1 and 3 micro-steps per real step, and
   with two lr_mult groups (two plans), the overlapped graph also after a JSON round trip. Both issue the same collectives: one
   allreduce per bucket on real steps (5 buckets here: first_bucket_mb and bucket_mb are
   tiny), none on the other micro-steps.
2. DataParallel(bn_stats='average'): after each real step every rank holds the mean over ranks
   of the moving statistics each rank computed on its own data. The test computes each rank's
   own statistics independently with a plain (single-process) step graph started from the same
   weights and statistics, gathers them and averages them in NumPy. bn_stats='local' keeps
   exactly the rank's own. The average costs one more allreduce per real step.
"""
import numpy as np

import loom as mx

PER_RANK, REAL = 4, 3


def net(groups=False):
    """groups: fc2's weight learns at twice the rate, so the step has two lr_mult groups (two
    plans, two waits)."""
    w2 = mx.sym.Variable("fc2_weight", lr_mult=2.0 if groups else None)
    h = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=16, name="fc1")
    h = mx.sym.BatchNorm(h, fix_gamma=False, momentum=0.8, name="bn")
    h = mx.sym.Activation(h, act_type="tanh", name="act")
    h = mx.sym.FullyConnected(h, weight=w2, num_hidden=12, name="fc2")
    h = mx.sym.Activation(h, act_type="relu", name="act2")
    h = mx.sym.FullyConnected(h, num_hidden=3, name="fc3")
    return mx.sym.SoftmaxOutput(h, normalization="batch", name="softmax")


PARAMS = ("fc1_weight", "fc1_bias", "bn_gamma", "bn_beta", "fc2_weight", "fc2_bias",
          "fc3_weight", "fc3_bias")


def optimizer(name):
    if name == "sgd":
        return mx.optimizer.SGD(learning_rate=0.3, momentum=0.9, wd=1e-3)
    return mx.optimizer.Adam(learning_rate=0.05, wd=1e-3)


def init(exe):
    rs = np.random.RandomState(5)
    for p in PARAMS:
        a = exe.arg_dict[p]
        a[:] = rs.normal(0.5 if p == "bn_gamma" else 0, 0.5, a.shape).astype(np.float32)


def state(exe):
    d = {k: v.asnumpy().copy() for k, v in exe.arg_dict.items() if k not in ("data", "softmax_label")}
    d.update({k: v.asnumpy().copy() for k, v in exe.aux_dict.items()})
    return d


def data(k, seed):
    n, r = mx.dist.size(), mx.dist.rank()
    rs = np.random.RandomState(seed)
    x = rs.normal(size=(n * PER_RANK * k * REAL, 6)).astype(np.float32)
    y = rs.randint(0, 3, size=n * PER_RANK * k * REAL).astype(np.float32)
    x += np.float32(r)  # ranks see differently distributed data: their statistics differ
    return x, y


def rows(m):
    r = mx.dist.rank()
    start = (m * mx.dist.size() + r) * PER_RANK
    return slice(start, start + PER_RANK)


def bind(step):
    return mx.train.bind(step, data=(PER_RANK, 6), softmax_label=(PER_RANK,))


def check_overlap(opt, k, groups=False):
    # Reverse topological order, first_bucket_mb 10 bytes then about 100 bytes: 5 buckets,
    # {fc3_bias}, {fc3_weight}, {fc2_bias, fc2_weight}, {bn_beta, bn_gamma},
    # {fc1_bias, fc1_weight}.
    def make(overlap):
        return mx.train.make_step(net(groups), optimizer(opt), accumulate=k, dist=mx.dist.DataParallel(
            first_bucket_mb=1e-5, bucket_mb=100e-6, overlap=overlap))

    blocking, overlapped = make(False), make(True)
    js = overlapped.tojson()
    assert '"_loom_allreduce_start"' in js and '"_loom_allreduce_wait"' in js, "no overlap nodes"
    assert '"_loom_allreduce"' not in js, "the overlapped step still has a blocking allreduce"
    assert '"_loom_allreduce"' in blocking.tojson() and '"_loom_allreduce_start"' not in blocking.tojson()
    exes = {"blocking": bind(blocking), "overlap": bind(overlapped),
            "overlap-json": bind(mx.sym.load_json(js))}
    for e in exes.values():
        init(e)
    x, y = data(k, 7)
    for m in range(k * REAL):
        last = (m + 1) % k == 0
        counts = {}
        for name, e in exes.items():
            before = mx.dist.stats()
            e.forward(is_train=True, data=x[rows(m)], softmax_label=y[rows(m)])
            after = mx.dist.stats()
            counts[name] = {c: after[c] - before[c]
                            for c in ("allreduce", "all_gather", "reduce_scatter", "barrier")}
        # With groups: {fc3_bias}, {fc3_weight}, {fc2_bias, bn_beta}, {bn_gamma, fc1_bias},
        # {fc1_weight}, and fc2_weight's own group: 6.
        want = {"allreduce": (6 if groups else 5) if last else 0, "all_gather": 0,
                "reduce_scatter": 0, "barrier": 0}
        for name, got in counts.items():
            assert got == want, "%s %s k=%d micro-step %d: collectives %s, expected %s" % (
                name, opt, k, m, got, want)
        ref = state(exes["blocking"])
        for name in ("overlap", "overlap-json"):
            got = state(exes[name])
            assert sorted(got) == sorted(ref), (sorted(got), sorted(ref))
            for s in ref:
                assert np.array_equal(got[s], ref[s]), "%s %s k=%d micro-step %d rank %d: %s differs " \
                    "from the blocking step by %g" % (name, opt, k, m, mx.dist.rank(), s,
                                                      np.abs(got[s] - ref[s]).max())


def check_bn_stats(k):
    stats = ("bn_moving_mean", "bn_moving_var")
    n = mx.dist.size()
    avg = bind(mx.train.make_step(net(), optimizer("sgd"), accumulate=k,
                                  dist=mx.dist.DataParallel(bn_stats="average")))
    local = bind(mx.train.make_step(net(), optimizer("sgd"), accumulate=k,
                                    dist=mx.dist.DataParallel(bn_stats="local")))
    # The independent answer: this rank's own statistics from a plain one-process step graph.
    plain = bind(mx.train.make_step(net(), optimizer("sgd"), accumulate=k))
    for e in (avg, local, plain):
        init(e)
    x, y = data(k, 9)
    for real in range(REAL):
        for e in (avg, local):
            for p in PARAMS:
                plain.arg_dict[p][:] = e.arg_dict[p].asnumpy()
            for s in stats:
                plain.aux_dict[s][:] = e.aux_dict[s].asnumpy()
            counts = []
            for j in range(k):
                m = real * k + j
                plain.forward(is_train=True, data=x[rows(m)], softmax_label=y[rows(m)])
                before = mx.dist.stats()["allreduce"]
                e.forward(is_train=True, data=x[rows(m)], softmax_label=y[rows(m)])
                counts.append(mx.dist.stats()["allreduce"] - before)
            own = np.concatenate([plain.aux_dict[s].asnumpy() for s in stats])
            got = np.concatenate([e.aux_dict[s].asnumpy() for s in stats])
            every = mx.dist.allgather(own[None, :])
            where = "bn_stats k=%d real step %d rank %d" % (k, real, mx.dist.rank())
            grad_buckets = 1  # first_bucket_mb=1: the whole (tiny) model in one bucket
            if e is avg:
                assert counts == [0] * (k - 1) + [grad_buckets + 1], (where, counts)
                if n > 1 and real == 0:
                    assert not np.allclose(every[0], every[1]), where + ": ranks' own statistics agree"
                np.testing.assert_allclose(got, every.mean(axis=0), rtol=1e-6, atol=1e-7,
                                           err_msg=where + " (average)")
                all_got = mx.dist.allgather(got[None, :])
                assert all(np.array_equal(all_got[0], g) for g in all_got), where + ": ranks differ"
            else:
                assert counts == [0] * (k - 1) + [grad_buckets], (where, counts)
                np.testing.assert_allclose(got, own, rtol=1e-6, atol=1e-7, err_msg=where + " (local)")


def check_refusals():
    try:
        mx.dist.DataParallel(bn_stats="sync")
    except ValueError as e:
        assert "bn_stats" in str(e), str(e)
    else:
        raise AssertionError("bn_stats='sync' accepted")


if __name__ == "__main__":
    mx.dist.init()
    check_refusals()
    for opt in ("sgd", "adam"):
        for k in (1, 3):
            check_overlap(opt, k)
    check_overlap("sgd", 3, groups=True)
    for k in (1, 3):
        check_bn_stats(k)
    print("rank %d of %d: overlapped allreduce and bn_stats ok" % (mx.dist.rank(), mx.dist.size()))
