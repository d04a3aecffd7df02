"""Data-parallel training of a small convnet with gradient accumulation and a sharded model
EMA, then resuming the checkpoint with another number of processes.

    mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 \\
        .venv/bin/python examples/data_parallel/data_parallel.py --checkpoint dp.params
    .venv/bin/python examples/data_parallel/data_parallel.py --resume dp.params --epochs 1

Every rank runs the same step graph (make_step with dist=DataParallel): each forward is one
micro-step on this rank's micro-batch; on the last micro-step of --accumulate the
accumulated gradients are averaged over the ranks by the graph's allreduce nodes, the
optimizer updates the weights, and each rank updates its own 1/N of the model EMA
(shard_ema=True). Only rank 0 initialises the weights: the step copies rank 0's state to
every rank on its first call. Evaluation binds the network on the gathered EMA (bind_ema),
and save_checkpoint writes the whole state (EMA included) from rank 0, so the checkpoint
resumes with any number of processes. Without mpirun the script is a job of one rank.
"""
import argparse

import numpy as np

import loom as mx

SIDE = 8


def make_data(n, seed):
    """Two classes of noisy 8x8 images: horizontal stripes (0) and vertical stripes (1)."""
    rs = np.random.RandomState(seed)
    y = rs.randint(0, 2, n)
    x = rs.normal(0, 1.0, (n, 1, SIDE, SIDE))
    x[y == 0, :, ::2, :] += 0.5
    x[y == 1, :, :, ::2] += 0.5
    return x.astype(np.float32), y.astype(np.float32)


def network():
    h = mx.sym.Convolution(mx.sym.Variable("data"), kernel=(3, 3), pad=(1, 1), num_filter=8,
                           name="conv1")
    h = mx.sym.Activation(h, act_type="relu", name="relu1")
    h = mx.sym.Pooling(h, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    h = mx.sym.FullyConnected(mx.sym.flatten(h), num_hidden=2, name="fc1")
    return mx.sym.SoftmaxOutput(h, normalization="batch", name="softmax")


def init_weights(exe):
    rs = np.random.RandomState(0)
    for name, arr in exe.arg_dict.items():
        if name.endswith("_weight"):
            fan_in = int(np.prod(arr.shape[1:]))
            arr[:] = rs.normal(0, np.sqrt(2.0 / fan_in), arr.shape).astype(np.float32)
        elif name.endswith("_bias"):
            arr[:] = 0


def evaluate(exe, x, y):
    """Validation accuracy and cross-entropy of the EMA weights (call it on every rank: the
    sharded EMA is gathered)."""
    ev = mx.train.bind_ema(network(), exe, data=x.shape, softmax_label=y.shape)
    prob = ev.forward(is_train=False, data=x, softmax_label=y)[0].asnumpy()
    loss = -np.log(np.maximum(prob[np.arange(len(y)), y.astype(int)], 1e-12)).mean()
    return "EMA validation accuracy %.4f, loss %.6f" % ((prob.argmax(axis=1) == y).mean(), loss)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8, help="samples per rank and micro-step")
    ap.add_argument("--accumulate", type=int, default=2, help="micro-steps per real step")
    ap.add_argument("--checkpoint", help="write the training state here at the end")
    ap.add_argument("--resume", help="start from this checkpoint")
    args = ap.parse_args()

    mx.dist.init()
    rank, size = mx.dist.rank(), mx.dist.size()
    say = print if rank == 0 else (lambda *a, **k: None)

    step = mx.train.make_step(
        network(), mx.optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=1e-4),
        accumulate=args.accumulate, ema=mx.train.EMA(decay=0.9),
        dist=mx.dist.DataParallel(shard_ema=True))
    b, k = args.batch, args.accumulate
    exe = mx.train.bind(step, data=(b, 1, SIDE, SIDE), softmax_label=(b,))
    if rank == 0:
        init_weights(exe)  # the others receive rank 0's weights on the first step
    if args.resume:
        mx.train.load_checkpoint(args.resume, exe)
        say("resumed %s with %d process(es)" % (args.resume, size))

    x, y = make_data(1024, seed=1)
    vx, vy = make_data(256, seed=2)
    per_step = size * k * b
    for epoch in range(args.epochs):
        for s in range(len(x) // per_step):
            for m in range(k):
                at = ((s * k + m) * size + rank) * b
                exe.forward(is_train=True, data=x[at:at + b], softmax_label=y[at:at + b])
        say("epoch %d: %s" % (epoch, evaluate(exe, vx, vy)))
    if not args.epochs:
        say(evaluate(exe, vx, vy))
    if args.checkpoint:
        mx.train.save_checkpoint(args.checkpoint, exe)
        say("checkpoint %s written by %d process(es)" % (args.checkpoint, size))


if __name__ == "__main__":
    main()
