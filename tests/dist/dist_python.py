"""loom.dist against closed forms, for any world size: run on its own (world size 1, no MPI)
and under ``mpirun -np 2``. Rank r contributes values such as r + 1 + i, so the sum over ranks
is size * (1 + i) + size * (size - 1) / 2. Exits non-zero on the first wrong value.

``--fault=throw``: rank 1 raises a Python exception while rank 0 waits in an allreduce (the
fault drill of run_fault.sh)."""
import sys

import numpy as np

import loom as mx


def rank_sum(base, n):
    return n * base + n * (n - 1) / 2


def check_collectives():
    mx.dist.init()
    r, n = mx.dist.rank(), mx.dist.size()
    launched = mx._loom.dist_launch_env()
    assert (r, n) == launched[:2], (r, n, launched)
    assert mx.dist.backend() == ("mpi" if launched[2] else "local"), mx.dist.backend()
    assert "local" in mx.dist.backends()
    mx.dist.reset_stats()

    i = np.arange(10, dtype=np.float32)
    # NumPy in, NumPy out; the input is not modified.
    x = r + 1 + i
    s = mx.dist.allreduce(x)
    assert isinstance(s, np.ndarray) and s.dtype == np.float32
    np.testing.assert_array_equal(x, r + 1 + i)
    np.testing.assert_array_equal(s, rank_sum(1 + i, n))
    np.testing.assert_allclose(mx.dist.allreduce(x, op="mean"), rank_sum(1 + i, n) / n, rtol=1e-7)
    np.testing.assert_allclose(mx.dist.allreduce(x, scale=0.25), rank_sum(1 + i, n) * 0.25,
                               rtol=1e-7)

    # NDArray in, NDArray out (same context and dtype), float64 and float16.
    nd = mx.nd.array((r + 1 + i).reshape(2, 5), dtype="float64")
    out = mx.dist.allreduce(nd, op="mean")
    assert isinstance(out, mx.nd.NDArray) and out.dtype == np.float64 and out.shape == (2, 5)
    np.testing.assert_allclose(out.asnumpy().ravel(), rank_sum(1 + i, n) / n, rtol=1e-15)
    h = mx.dist.allreduce(mx.nd.array(r + 1 + i, dtype="float16"))
    assert h.dtype == np.float16
    np.testing.assert_array_equal(h.asnumpy(), rank_sum(1 + i, n))
    ints = mx.dist.allreduce(np.full(3, r + 1, dtype=np.int32))
    np.testing.assert_array_equal(ints, [n * (n + 1) // 2] * 3)

    # broadcast from the last rank
    b = mx.dist.broadcast(np.full((2, 3), float(r), dtype=np.float32), root=n - 1)
    np.testing.assert_array_equal(b, np.full((2, 3), n - 1.0))

    # allgather: rank order along axis 0
    g = mx.dist.allgather(mx.nd.array([[10 * r, 10 * r + 1]], dtype="int32"))
    assert g.shape == (n, 2)
    np.testing.assert_array_equal(g.asnumpy(), [[10 * k, 10 * k + 1] for k in range(n)])

    # reduce_scatter: rank r gets the sum of part r of axis 0
    full = np.arange(4 * n, dtype=np.float64).reshape(2 * n, 2) + r
    part = mx.dist.reduce_scatter(full, op="mean")
    assert part.shape == (2, 2)
    want = (np.arange(4 * n, dtype=np.float64).reshape(2 * n, 2) * n + n * (n - 1) / 2) / n
    np.testing.assert_allclose(part, want[2 * r:2 * r + 2])

    mx.dist.barrier()
    st = mx.dist.stats()
    assert st["allreduce"] == 6 and st["broadcast"] == 1 and st["all_gather"] == 1, st
    assert st["reduce_scatter"] == 1 and st["barrier"] == 1 and st["collectives"] == 10, st

    # errors name what is wrong
    for call, text in [(lambda: mx.dist.allreduce(np.ones(2, np.int32), op="mean"), "int32"),
                       (lambda: mx.dist.allreduce(np.ones(2), op="max"), "unknown reduction"),
                       (lambda: mx.dist.broadcast(np.ones(2), root=n), "root")]:
        try:
            call()
        except mx.dist.DistError as e:
            assert text in str(e), str(e)
            assert isinstance(e, mx.LoomError)
        else:
            raise AssertionError("no DistError for " + text)
    if n > 1:
        mx.dist.check_same("graph", "same on every rank")
        try:
            mx.dist.check_same("graph", "rank %d" % min(r, 1))
        except mx.dist.DistError as e:
            assert "rank(s) 1 differ from rank 0" in str(e), str(e)
        else:
            raise AssertionError("check_same passed different bytes")
    print("rank %d of %d (%s): loom.dist collectives ok" % (r, n, mx.dist.backend()))


def fault_throw():
    mx.dist.init()
    mx.dist.allreduce(np.zeros(4, np.float32))
    if mx.dist.rank() == 1:
        raise RuntimeError("rank 1 failed on purpose (fault drill)")
    mx.dist.allreduce(np.zeros(4, np.float32))  # rank 0 waits for a peer that never comes
    print("fault drill: rank 0 was not stopped", file=sys.stderr)
    sys.exit(3)


if __name__ == "__main__":
    if "--fault=throw" in sys.argv:
        fault_throw()
    else:
        check_collectives()
