"""Sharded optimizer state (loom.dist.DataParallel(shard_optimizer=True), ZeRO-1) for any world
size: run on its own (one rank, no MPI) and under ``mpirun -np 2``. Exits non-zero on the first
wrong value.

Right answers, computed side by side on the same micro-batches: one process running the plain
step graph on the concatenated batch (each micro-batch of N*b rows, rank r taking rows
[r*b, (r+1)*b)), and the unsharded data-parallel step of the same job. After every micro-step
the sharded job's weights and its optimizer state, gathered by save_checkpoint under the
unsharded names (p_mom, p_mean, p_var), must equal both within float32 rounding of the
reduction order. With one or two ranks the element-wise optimizers equal the unsharded job bit
for bit: the same kernels run on the same elements, and a sum over two ranks is one addition
whatever collective computes it (reduce-scatter here, allreduce there). LAMB differs by the
rounding of its norms (partial sums in double, then an allreduce). Checked for SGD with
momentum, Adam and LAMB, k = 1 and 3, one lr_mult group and two; also combined with the
sharded EMA; and NAG, AdamW (with clip_gradient) and centered RMSProp at k = 1. Also: each
rank's resident optimizer state is one (ceil(T/N),) array per state kind and no per-parameter
state exists; weights are bit-identical on every rank; ranks other than 0 start from other weights and
still train from rank 0's; collectives only on real steps (one reduce-scatter, one all-gather,
and for LAMB one allreduce of the norms); a checkpoint written by the sharded N-rank job resumes
as ONE process, and one written by one process resumes the sharded N-rank job, each giving the
uninterrupted run's next real step.
"""
import os
import tempfile

import numpy as np

import loom as mx

PER_RANK, REAL = 4, 2
PARAMS = ("fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias")
STATES = {"sgd": ("mom",), "adam": ("mean", "var"), "lamb": ("mean", "var"), "nag": ("mom",),
          "adamw": ("mean", "var"), "rmsprop": ("n", "g", "delta")}


def mlp(lr_mult=False):
    w = mx.sym.Variable("fc2_weight", lr_mult=0.5) if lr_mult else None
    h = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=16, name="fc1")
    h = mx.sym.Activation(h, act_type="tanh", name="act")
    extra = {"weight": w} if w is not None else {}
    h = mx.sym.FullyConnected(h, num_hidden=3, name="fc2", **extra)
    return mx.sym.SoftmaxOutput(h, normalization="batch", name="softmax")


def optimizer(name):
    if name == "sgd":
        return mx.optimizer.SGD(learning_rate=0.5, momentum=0.9, wd=1e-3, clip_gradient=0.2)
    if name == "adam":
        return mx.optimizer.Adam(learning_rate=0.05, wd=1e-3)
    if name == "nag":
        return mx.optimizer.NAG(learning_rate=0.2, momentum=0.9, wd=1e-3)
    if name == "adamw":
        return mx.optimizer.create("adamw", learning_rate=0.05, wd=1e-2, clip_gradient=0.5)
    if name == "rmsprop":
        return mx.optimizer.RMSProp(learning_rate=0.01, centered=True, wd=1e-3)
    return mx.optimizer.LAMB(learning_rate=0.05, wd=1e-3)


def init(exe, value=None):
    rs = np.random.RandomState(5)
    for p in PARAMS:
        a = exe.arg_dict[p]
        a[:] = rs.normal(0, 0.5, a.shape).astype(np.float32) if value is None else value


def weights(exe):
    return {p: exe.arg_dict[p].asnumpy().copy() for p in PARAMS}


class Files:
    """Checkpoint paths shared by the ranks (rank 0's pid names them)."""

    def __init__(self):
        self.base = int(mx.dist.broadcast(np.array([os.getpid()], dtype=np.int64))[0])
        self.made = []

    def path(self, tag):
        p = os.path.join(tempfile.gettempdir(), "loom_shard_opt_%d_%s.params" % (self.base, tag))
        self.made.append(p)
        return p

    def cleanup(self):
        mx.dist.barrier()
        if mx.dist.rank() == 0:
            for p in set(self.made):
                if os.path.exists(p):
                    os.remove(p)


def saved(exe, path, every_rank=True):
    """The checkpoint content of `exe` (save_checkpoint: a collective when sharded)."""
    if every_rank:
        mx.train.save_checkpoint(path, exe)
    elif mx.dist.rank() == 0:
        mx.train.save_checkpoint(path, exe)
    mx.dist.barrier()
    return {k: v.asnumpy() for k, v in mx.nd.load(path).items()}


def close(got, want, where, exact=False):
    assert sorted(got) == sorted(want), (where, sorted(got), sorted(want))
    for k in want:
        if exact:
            assert np.array_equal(got[k], want[k]), "%s: %s differs (max |diff| %g)" % (
                where, k, np.max(np.abs(got[k] - want[k])))
        else:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6,
                                       err_msg=where + " " + k)


def data(k, n, steps):
    whole = PER_RANK * n
    rs = np.random.RandomState(11)
    x = rs.normal(size=(whole * k * steps, 6)).astype(np.float32)
    y = rs.randint(0, 3, size=whole * k * steps).astype(np.float32)
    return x, y


def rows(m, r, n):
    return slice(m * PER_RANK * n + r * PER_RANK, m * PER_RANK * n + (r + 1) * PER_RANK)


def whole_rows(m, n):
    return slice(m * PER_RANK * n, (m + 1) * PER_RANK * n)


def bind_dp(opt, k, shard, ema=None, shard_ema=False, lr_mult=False):
    step = mx.train.make_step(mlp(lr_mult), optimizer(opt), accumulate=k, ema=ema,
                              dist=mx.dist.DataParallel(shard_optimizer=shard, shard_ema=shard_ema))
    exe = mx.train.bind(step, data=(PER_RANK, 6), softmax_label=(PER_RANK,))
    init(exe, None if mx.dist.rank() == 0 else 3.0)  # only rank 0's weights count
    return step, exe


def bind_one(opt, k, ema=None, lr_mult=False):
    n = mx.dist.size()
    exe = mx.train.bind(mx.train.make_step(mlp(lr_mult), optimizer(opt), accumulate=k, ema=ema),
                        data=(PER_RANK * n, 6), softmax_label=(PER_RANK * n,))
    init(exe)
    return exe


def no_acc(state):
    # Accumulators: the sharded job keeps each rank's own sum (reduced only in its chunk).
    return {k: v for k, v in state.items() if not k.startswith("acc:")}


def check(opt, k, files, ema=None, lr_mult=False):
    r, n = mx.dist.rank(), mx.dist.size()
    x, y = data(k, n, REAL)
    tag = "%s k=%d%s%s rank %d of %d" % (opt, k, " ema" if ema else "",
                                         " lr_mult" if lr_mult else "", r, n)
    one = bind_one(opt, k, ema, lr_mult)
    _, plain = bind_dp(opt, k, False, ema, False, lr_mult)
    step, exe = bind_dp(opt, k, True, ema, ema is not None, lr_mult)

    # Resident optimizer state: one (ceil(T/N),) shard per state kind, nothing per parameter.
    total = sum(exe.arg_dict[p].size for p in PARAMS)
    kinds = mx.train.state_kinds(step)
    for s in STATES[opt]:
        a = exe.aux_dict["step_opt_shard_" + s]
        assert a.shape == (-(-total // n),), (tag, s, a.shape)
        assert kinds["step_opt_shard_" + s] == "opt", (tag, s)
    resident = sum(v.size for name, v in exe.aux_dict.items() if kinds.get(name) == "opt")
    whole = sum(plain.aux_dict[p + "_" + s].size for p in PARAMS for s in STATES[opt])
    assert whole == len(STATES[opt]) * total, (tag, whole)
    assert resident == len(STATES[opt]) * -(-total // n), (tag, resident, whole)
    assert resident * n - whole < n * len(STATES[opt]), (tag, resident, whole)
    assert not [p + "_" + s for p in PARAMS for s in STATES[opt] if p + "_" + s in exe.aux_dict], (
        tag, sorted(exe.aux_dict))

    for m in range(k * REAL):
        last = (m + 1) % k == 0
        one.forward(is_train=True, data=x[whole_rows(m, n)], softmax_label=y[whole_rows(m, n)])
        plain.forward(is_train=True, data=x[rows(m, r, n)], softmax_label=y[rows(m, r, n)])
        before = mx.dist.stats()
        exe.forward(is_train=True, data=x[rows(m, r, n)], softmax_label=y[rows(m, r, n)])
        after = mx.dist.stats()
        got = {c: after[c] - before[c]
               for c in ("allreduce", "reduce_scatter", "all_gather", "barrier")}
        want = {"allreduce": int(last and opt == "lamb"), "reduce_scatter": int(last),
                "all_gather": int(last), "barrier": 0}
        assert got == want, "%s micro-step %d: collectives %s, expected %s" % (tag, m, got, want)
        where = "%s micro-step %d" % (tag, m)
        st = no_acc(saved(exe, files.path("s")))
        st_plain = no_acc(saved(plain, files.path("p"), every_rank=False))
        st_one = no_acc(saved(one, files.path("o"), every_rank=False))
        # Bit for bit up to two ranks (see the module doc); LAMB's norms round differently.
        close(st, st_plain, where + " vs the unsharded job", exact=(n <= 2 and opt != "lamb"))
        close(st, st_one, where + " vs one process")
        for p in PARAMS:  # the checkpoint holds the live weights
            assert np.array_equal(st["arg:" + p], exe.arg_dict[p].asnumpy()), (where, p)
        flat = np.concatenate([v.ravel() for _, v in sorted(weights(exe).items())])
        every = mx.dist.allgather(flat[None, :])
        for w in range(n):
            assert np.array_equal(every[w], flat), "%s: rank %d's weights differ" % (where, w)


def check_resume(opt, k, files):
    """N-rank sharded checkpoint -> one process, and one process -> N-rank sharded job."""
    r, n = mx.dist.rank(), mx.dist.size()
    x, y = data(k, n, 2)
    tag = "%s k=%d resume rank %d of %d" % (opt, k, r, n)
    _, exe = bind_dp(opt, k, True)
    one = bind_one(opt, k)
    for m in range(k):
        exe.forward(is_train=True, data=x[rows(m, r, n)], softmax_label=y[rows(m, r, n)])
        one.forward(is_train=True, data=x[whole_rows(m, n)], softmax_label=y[whole_rows(m, n)])
    sharded_ckpt, one_ckpt = files.path("rs"), files.path("ro")
    saved(exe, sharded_ckpt)
    saved(one, one_ckpt, every_rank=False)
    # The sharded job's file resumes one process; the one process's file the sharded job.
    one_again = bind_one(opt, k)
    init(one_again, 7.0)
    mx.train.load_checkpoint(sharded_ckpt, one_again)
    _, exe_again = bind_dp(opt, k, True)
    mx.train.load_checkpoint(one_ckpt, exe_again)
    for m in range(k, 2 * k):
        for e in (exe, exe_again):
            e.forward(is_train=True, data=x[rows(m, r, n)], softmax_label=y[rows(m, r, n)])
        for e in (one, one_again):
            e.forward(is_train=True, data=x[whole_rows(m, n)], softmax_label=y[whole_rows(m, n)])
    ref_sharded = no_acc(saved(exe, files.path("rs2")))
    ref_one = no_acc(saved(one, files.path("ro2"), every_rank=False))
    close(no_acc(saved(one_again, files.path("ro3"), every_rank=False)), ref_sharded,
          tag + ": one process resumed from the sharded job")
    close(no_acc(saved(exe_again, files.path("rs3"))), ref_one,
          tag + ": the sharded job resumed from one process")
    if n == 1 and opt != "lamb":
        close(no_acc(saved(one_again, files.path("ro3"), every_rank=False)), ref_sharded,
              tag + " (one rank: bit for bit)", exact=True)


if __name__ == "__main__":
    mx.dist.init()
    files = Files()
    try:
        for opt in ("sgd", "adam", "lamb"):
            for k in (1, 3):
                check(opt, k, files)
        check("adam", 3, files, ema=mx.train.EMA(decay=0.9), lr_mult=True)
        check("lamb", 1, files, lr_mult=True)
        for opt in ("nag", "adamw", "rmsprop"):
            check(opt, 1, files)
        check_resume("adam", 3, files)
        check_resume("lamb", 1, files)
    finally:
        files.cleanup()
    print("rank %d of %d: sharded optimizer ok" % (mx.dist.rank(), mx.dist.size()))
