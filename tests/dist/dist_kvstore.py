"""mx.kv's multi-process stores and Module training over them, for any world size: run on its
own (one worker) and under ``mpirun -np 2``. Exits non-zero on the first wrong value.

- the store: init gives rank 0's value everywhere; push sums over every worker's values (with
  an optimizer: one update with that sum on every worker); rank / num_workers;
- Module (update() and fit) with kvstore='dist_sync', each of N workers training on its 1/N of every batch,
  equals one process training on the whole batch (weights after every step, SGD with
  momentum and Adam), and every worker holds bit-identical weights; a worker that starts
  from other weights still trains from rank 0's.
"""
import numpy as np

import loom as mx


def check_store(name):
    kv = mx.kv.create(name)
    r, n = kv.rank, kv.num_workers
    assert (r, n) == (mx.dist.rank(), mx.dist.size()), (r, n)
    assert kv.type == name
    # init: rank 0's value on every worker
    kv.init("w", mx.nd.array([10.0 * r + 1, 10.0 * r + 2]))
    out = mx.nd.zeros(2)
    kv.pull("w", out=out)
    np.testing.assert_array_equal(out.asnumpy(), [1.0, 2.0])
    # push without an updater: the sum over every worker's (already summed) values
    kv.push("w", [mx.nd.array([r + 1.0, 0.0]), mx.nd.array([0.0, 2.0 * (r + 1)])])
    kv.pull("w", out=out)
    total = n * (n + 1) / 2
    np.testing.assert_array_equal(out.asnumpy(), [total, 2 * total])
    # pushpull into the value itself
    v = mx.nd.array([1.0, 1.0])
    kv.pushpull("w", v)
    np.testing.assert_array_equal(v.asnumpy(), [n, n])
    # with an optimizer: w <- w - lr * sum of gradients, once
    kv.init("opt", mx.nd.ones(3))
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1, rescale_grad=1.0))
    kv.push("opt", mx.nd.full((3,), r + 1.0))
    w = mx.nd.zeros(3)
    kv.pull("opt", out=w)
    np.testing.assert_allclose(w.asnumpy(), 1.0 - 0.1 * total, rtol=1e-6)
    kv.barrier()
    kv._barrier()


def mlp():
    x = mx.sym.Variable("data")
    x = mx.sym.FullyConnected(x, num_hidden=16, name="fc1")
    x = mx.sym.Activation(x, act_type="tanh")
    x = mx.sym.FullyConnected(x, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(x, name="softmax")


def initial_params():
    rs = np.random.RandomState(5)
    shapes = {"fc1_weight": (16, 6), "fc1_bias": (16,), "fc2_weight": (3, 16), "fc2_bias": (3,)}
    return {k: mx.nd.array(rs.normal(0, 0.5, s).astype(np.float32)) for k, s in shapes.items()}


def train(x, y, batch, kvstore, arg_params, optimizer, params, steps):
    """Weights after each step of Module training on (x, y) in batches of `batch`."""
    mod = mx.mod.Module(mlp(), context=mx.cpu())
    mod.bind(data_shapes=[("data", (batch,) + x.shape[1:])],
             label_shapes=[("softmax_label", (batch,))])
    mod.init_params(arg_params=arg_params)
    mod.init_optimizer(kvstore=kvstore, optimizer=optimizer, optimizer_params=params)
    history = []
    for s in range(steps):
        lo = (s * batch) % x.shape[0]
        b = mx.io.DataBatch([mx.nd.array(x[lo:lo + batch])], [mx.nd.array(y[lo:lo + batch])])
        mod.forward(b, is_train=True)
        mod.backward()
        mod.update()
        history.append({k: v.asnumpy() for k, v in mod.get_params()[0].items()})
    return history


def fit(x, y, batch, kvstore, arg_params, optimizer, params):
    """Weights after one epoch of Module.fit over (x, y) in order."""
    mod = mx.mod.Module(mlp(), context=mx.cpu())
    it = mx.io.NDArrayIter(x, y, batch_size=batch, shuffle=False, label_name="softmax_label")
    mod.fit(it, kvstore=kvstore, optimizer=optimizer, optimizer_params=params,
            arg_params=arg_params, num_epoch=1)
    return {k: v.asnumpy() for k, v in mod.get_params()[0].items()}


def check_module(optimizer, params):
    r, n = mx.dist.rank(), mx.dist.size()
    rs = np.random.RandomState(11)
    per_worker, steps = 4, 3
    whole = per_worker * n
    x = rs.normal(size=(whole * steps, 6)).astype(np.float32)
    y = rs.randint(0, 3, size=whole * steps).astype(np.float32)
    ref = train(x, y, whole, None, initial_params(), optimizer, params, steps)
    # This worker's share of every whole batch: rows [r*per_worker, (r+1)*per_worker).
    mine = np.concatenate([np.arange(s * whole + r * per_worker, s * whole + (r + 1) * per_worker)
                           for s in range(steps)])
    start = initial_params()
    if r != 0:  # trains from rank 0's weights anyway (broadcast at init_optimizer)
        start = {k: v * 0 + 3.0 for k, v in start.items()}
    got = train(x[mine], y[mine], per_worker, "dist_sync", start, optimizer, params, steps)
    for s in range(steps):
        for k in ref[s]:
            np.testing.assert_allclose(got[s][k], ref[s][k], rtol=2e-5, atol=1e-6,
                                       err_msg="%s step %d %s" % (optimizer, s, k))
    fitted = fit(x[mine], y[mine], per_worker, "dist_sync", start, optimizer, params)
    for k in ref[-1]:
        np.testing.assert_allclose(fitted[k], ref[-1][k], rtol=2e-5, atol=1e-6,
                                   err_msg="fit %s %s" % (optimizer, k))
    # bit-identical on every worker
    flat = np.concatenate([got[-1][k].ravel() for k in sorted(got[-1])])
    every = mx.dist.allgather(flat[None, :])
    for w in range(n):
        assert np.array_equal(every[w], flat), "worker %d's weights differ from rank %d's" % (w, r)


if __name__ == "__main__":
    mx.dist.init()
    for name in ("dist_sync", "dist_device_sync", "nccl", "horovod"):
        check_store(name)
    before = mx.dist.stats()["allreduce"]
    check_module("sgd", {"learning_rate": 0.5, "momentum": 0.9, "wd": 1e-3})
    # 3 steps of update() and 3 of fit(), one flat allreduce of all float32 gradients each
    assert mx.dist.stats()["allreduce"] - before == 6, mx.dist.stats()
    check_module("adam", {"learning_rate": 0.05})
    print("rank %d of %d: kvstore and Module data parallel ok" % (mx.dist.rank(), mx.dist.size()))
