"""Data-parallel communication between the processes of one job (``loom.dist``).

A process started by ``mpirun`` (or another MPI launcher: PMI, PMIx, SLURM) is one rank of a
job; a process started on its own is a job of one rank and needs no MPI::

    mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 python train.py

    import loom as mx
    mx.dist.init()                      # world size 1 without a launcher
    g = mx.dist.allreduce(grad, op='mean')

Collectives take an NDArray or anything NumPy accepts and return a new array of the same
kind (an NDArray on the input's context, or a NumPy array); every rank must call the same
collectives in the same order with the same shapes. A collective that does not complete
within ``LOOM_DIST_TIMEOUT_S`` seconds (default 300) ends the job with a message naming the
collective and rank (a peer died, stalled or called another collective). An uncaught
exception on a rank of a multi-rank job ends the whole job (MPI_Abort), so no other rank
waits forever; a rank that exits normally (sys.exit) while others still communicate is
caught by that timeout.
"""

import sys

import numpy as _np

from . import _loom

DistError = _loom.DistError

__all__ = ["init", "finalize", "is_initialized", "rank", "size", "backend", "backends",
           "barrier", "allreduce", "broadcast", "allgather", "reduce_scatter", "check_same",
           "stats", "reset_stats", "set_timeout", "DistError", "DataParallel"]


def init(backend="auto"):
    """Joins the job: the "mpi" back end under a launcher, "local" (world size 1) without one.

    ``backend`` ("auto", "local", "mpi", "nccl"; or env ``LOOM_DIST_BACKEND``). Calling it
    again is a no-op. With more than one rank, an uncaught Python exception on this rank
    prints its traceback and then aborts every rank.
    """
    _loom.dist_init(backend)
    if _loom.dist_size() > 1 and not getattr(sys.excepthook, "_loom_dist", False):
        previous = sys.excepthook

        def abort_job(etype, value, tb):
            previous(etype, value, tb)
            _loom.dist_abort(1, "uncaught %s: %s; aborting every rank" % (etype.__name__, value))

        abort_job._loom_dist = True
        sys.excepthook = abort_job


def finalize():
    """Leaves the job (MPI_Finalize); every rank calls it after its last collective. Also run
    at process exit."""
    _loom.dist_finalize()


def is_initialized():
    return _loom.dist_initialized()


def rank():
    """This process's rank (0 without a launcher)."""
    return _loom.dist_rank()


def size():
    """The number of ranks in the job (1 without a launcher)."""
    return _loom.dist_size()


def backend():
    """The back end in use: "local", "mpi" or "nccl"."""
    return _loom.dist_backend()


def backends():
    """The back ends compiled into this build."""
    return list(_loom.dist_backends())


def barrier():
    """Returns once every rank has called it."""
    _loom.dist_barrier()


def _to_numpy(data):
    """A C-contiguous NumPy copy of `data` and a function wrapping a result back into data's
    kind (an NDArray on the same context, or NumPy)."""
    from .ndarray import NDArray, array
    if isinstance(data, NDArray):
        ctx, dtype = data.context, data.dtype
        return (_np.ascontiguousarray(data.asnumpy()),
                lambda out: array(out, ctx=ctx, dtype=dtype))
    return _np.array(data, copy=True, order="C"), lambda out: out


def allreduce(data, op="sum", scale=1.0):
    """The element-wise reduction of `data` over ranks: ``op`` "sum" or "mean" (sum / size),
    times ``scale`` (floats only). float16 is summed in float32 and rounded per step."""
    buf, wrap = _to_numpy(data)
    _loom.dist_allreduce(buf, op, float(scale))
    return wrap(buf)


def broadcast(data, root=0):
    """Rank ``root``'s `data` on every rank (same shape and dtype on every rank)."""
    buf, wrap = _to_numpy(data)
    _loom.dist_broadcast(buf, int(root))
    return wrap(buf)


def allgather(data):
    """Every rank's `data` concatenated along axis 0 in rank order (shape (size*n0, ...));
    every rank passes the same shape."""
    buf, wrap = _to_numpy(data)
    if buf.ndim == 0:
        buf = buf.reshape(1)
    n = _loom.dist_size()
    full = _np.zeros((n * buf.shape[0],) + buf.shape[1:], dtype=buf.dtype)
    r = _loom.dist_rank()
    full[r * buf.shape[0]:(r + 1) * buf.shape[0]] = buf
    _loom.dist_allgather_inplace(full)
    return wrap(full)


def reduce_scatter(data, op="sum", scale=1.0):
    """This rank's part of the reduction: `data`'s axis 0 is split into size equal parts and
    rank r receives the reduction of part r (shape (n0/size, ...))."""
    buf, wrap = _to_numpy(data)
    n = _loom.dist_size()
    if buf.ndim == 0 or buf.shape[0] % n:
        raise DistError("loom.dist.reduce_scatter: axis 0 of shape %s does not split into %d "
                        "equal parts" % (buf.shape, n))
    out = _np.empty((buf.shape[0] // n,) + buf.shape[1:], dtype=buf.dtype)
    _loom.dist_reduce_scatter(buf, out, op, float(scale))
    return wrap(out)


def check_same(tag, data):
    """Raises DistError on every rank, naming the ranks that differ from rank 0, unless every
    rank passes the same `data` (bytes or str) under `tag`."""
    if isinstance(data, str):
        data = data.encode()
    _loom.dist_check_same(str(tag), bytes(data))


def stats():
    """Counts of the collectives issued so far (allreduce, reduce_scatter, all_gather,
    broadcast, barrier, collectives), the bytes this rank contributed, and ``exposed_s``: the
    seconds step graphs spent blocked in their allreduce nodes (``_loom_allreduce``, or the
    wait of an overlapped step), i.e. communication backward did not hide."""
    return dict(_loom.dist_stats())


def reset_stats():
    _loom.dist_reset_stats()


def set_timeout(seconds):
    """Seconds a collective may wait before the job is ended (0: no limit)."""
    _loom.dist_set_timeout(float(seconds))


class DataParallel:
    """Data-parallel options of ``loom.train.make_step(..., dist=DataParallel(...))``.

    The step graph reduces the accumulated gradients over the job's ranks once per real step
    (on the last micro-step), in buckets taken in reverse topological order: the first of
    ``first_bucket_mb`` MiB, then ``bucket_mb`` MiB each, one collective per bucket. With
    ``grad_mean`` the gradients are averaged over ranks as over micro-steps. The first call
    broadcasts rank 0's weights and states, after every rank checked at bind that all ranks
    have the same graph, shapes and bucket plan. The graph is built for the world size of
    ``init()`` (called here); binding it in a job of another size is refused.

    ``overlap`` (default True): each gradient is accumulated as soon as backward writes it,
    and each bucket's allreduce starts (non-blocking) as soon as its last gradient is
    accumulated, while backward goes on; the update waits for them. False: one blocking
    allreduce per bucket after the whole backward. Both give bit-identical weights and states
    (the same buckets, the same reductions). ``shard_optimizer`` ignores it (its
    reduce-scatter runs after backward).

    ``bn_stats``: 'local' (default) keeps each rank's BatchNorm moving statistics (every
    float32 auxiliary state), computed on its own micro-batches, as one process would on its
    batch, at no communication cost; 'average' replaces them on every rank by their mean over
    ranks once per real step, after the update (one allreduce of all statistics), so all ranks
    evaluate alike and the statistics see every rank's data.

    ``shard_ema`` (ZeRO-1 style): rank r of N keeps and updates the EMA of only its
    contiguous 1/N range of the trained weights' concatenation (aux state
    ``step_ema_shard``, ceil(T/N) elements, instead of ``<p>_ema`` per parameter), with the
    same decay schedules and init modes. ``loom.train.ema_params``, ``ema_weights``,
    ``bind_ema``, ``refresh_ema`` and ``save_checkpoint`` gather the shards (one all-gather:
    call them on every rank) and give the whole EMA under the unsharded names, so a
    checkpoint resumes with any number of ranks, sharded or not (``load_checkpoint`` on every
    rank takes its own range). Aux-state shadows (``include_aux``) stay whole, per rank.
    ``shard_optimizer`` (ZeRO-1): every optimizer ``make_step`` supports keeps its state
    (momentum, Adam's mean and var, RMSProp's n/g/delta, LAMB's moments) for the same
    contiguous 1/N range per rank only: aux states ``step_opt_shard_<state>`` of ceil(T/N)
    elements instead of ``<p>_<state>``. On the last micro-step the accumulated gradients are
    reduce-scattered (one collective over a padded buffer holding rank q's range at
    q*ceil(T/N), NCCL's in-place layout; not bucketed, not overlapped with backward), each
    rank updates its range with the unsharded update's own arithmetic (LAMB's per-tensor norms
    come from one small allreduce of partial sums), and the new weights are all-gathered in
    place into every rank's weight arrays, so weights stay identical on every rank. The
    accumulators ``<p>_acc`` then hold this rank's own (unreduced) sum. ``save_checkpoint``
    gathers the state (call it on every rank) and writes it under the unsharded names;
    ``load_checkpoint`` takes each rank's range, so checkpoints move between sharded and
    unsharded jobs of any size. Combined with ``shard_ema`` the EMA reads the freshly
    all-gathered weights' own range."""

    def __init__(self, bucket_mb=25, first_bucket_mb=1, shard_ema=False, shard_optimizer=False,
                 overlap=True, bn_stats="local"):
        if bucket_mb <= 0 or first_bucket_mb <= 0:
            raise ValueError("DataParallel: bucket_mb and first_bucket_mb must be > 0")
        if bn_stats not in ("local", "average"):
            raise ValueError("DataParallel: bn_stats must be 'local' or 'average', got %r" % (bn_stats,))
        self.bucket_mb, self.first_bucket_mb = float(bucket_mb), float(first_bucket_mb)
        self.shard_ema, self.shard_optimizer = bool(shard_ema), bool(shard_optimizer)
        self.overlap, self.bn_stats = bool(overlap), bn_stats

    def _spec(self):
        init()
        return {"bucket_mb": self.bucket_mb, "first_bucket_mb": self.first_bucket_mb,
                "shard_ema": self.shard_ema, "shard_optimizer": self.shard_optimizer,
                "overlap": self.overlap, "bn_stats": self.bn_stats, "world_size": size()}

    def __repr__(self):
        return ("DataParallel(bucket_mb=%g, first_bucket_mb=%g, shard_ema=%r, shard_optimizer=%r, "
                "overlap=%r, bn_stats=%r)" % (self.bucket_mb, self.first_bucket_mb, self.shard_ema,
                                              self.shard_optimizer, self.overlap, self.bn_stats))
