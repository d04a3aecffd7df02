"""Overlap benchmark: a ResNet-18 data-parallel training step on 2 ranks with the gradient
allreduce overlapped with backward (DataParallel(overlap=True), the default) against the same
step communicating after backward (overlap=False), and, for scale, the same step with no
communication at all (a plain one-process step graph on the rank's batch).

    mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OMP_NUM_THREADS=1 \
        -x PYTHONPATH=build/python .venv/bin/python tests/bench/dist_overlap_bench.py \
        [--batch 4] [--size 224] [--rounds 9]

The three variants are bound once (same weights, same data) and run in turn within each round,
the order rotating from round to round so every variant sees the same machine load; a step's
time is the slowest rank's (each step starts after a barrier). Reported: median and spread
(min-max) per variant, the time the step spent blocked in its allreduce nodes (the blocking
node, or the overlapped step's wait: CommStats exposed_s, slowest rank, median), the median of the per-round ratios, the communication cost (blocking -
no communication) and the share of it the overlap hides ((blocking - overlapped) / cost). After
the rounds the overlapped and blocking executors must hold bit-identical weights (they ran the
same steps). ResNet-18 v1 (ImageNet shapes, 1000 classes, 11.69 M parameters: 46.8 MB of
gradients in buckets of 1 MiB, then 25 MiB).
"""
import argparse
import os
import time

import numpy as np

import loom as mx


def resnet18(classes=1000):
    def conv_bn(x, ch, k, stride, name, relu=True):
        x = mx.sym.Convolution(x, num_filter=ch, kernel=(k, k), stride=(stride, stride),
                               pad=(k // 2, k // 2), no_bias=True, name=name + "_conv")
        x = mx.sym.BatchNorm(x, fix_gamma=False, name=name + "_bn")
        return mx.sym.Activation(x, act_type="relu", name=name + "_relu") if relu else x

    x = conv_bn(mx.sym.Variable("data"), 64, 7, 2, "stem")
    x = mx.sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", name="pool0")
    cin = 64
    for stage, ch in enumerate((64, 128, 256, 512)):
        for b in range(2):
            stride = 2 if (b == 0 and stage > 0) else 1
            name = "s%d_b%d" % (stage, b)
            y = conv_bn(x, ch, 3, stride, name + "_a")
            y = conv_bn(y, ch, 3, 1, name + "_b", relu=False)
            short = x
            if b == 0 and (stride != 1 or cin != ch):
                short = conv_bn(x, ch, 1, stride, name + "_down", relu=False)
            x = mx.sym.Activation(y + short, act_type="relu", name=name + "_out")
            cin = ch
    x = mx.sym.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1), name="gap")
    x = mx.sym.FullyConnected(mx.sym.Flatten(x), num_hidden=classes, name="fc")
    return mx.sym.SoftmaxOutput(x, normalization="batch", name="softmax")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=4, help="images per rank")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--progress-variants", action="store_true",
                    help="also the overlapped step without progress calls between backward's "
                         "nodes (LOOM_DIST_OVERLAP_TEST=0) and with a communication thread "
                         "(LOOM_DIST_OVERLAP_THREAD=1)")
    a = ap.parse_args()
    mx.dist.init()
    r, n = mx.dist.rank(), mx.dist.size()
    net = resnet18()
    opt = dict(optimizer="sgd", learning_rate=0.01, momentum=0.9, wd=1e-4)
    shapes = dict(data=(a.batch, 3, a.size, a.size), softmax_label=(a.batch,))
    exes = {
        "overlapped": mx.train.bind(mx.train.make_step(
            net, dist=mx.dist.DataParallel(overlap=True), **opt), **shapes),
        "blocking": mx.train.bind(mx.train.make_step(
            net, dist=mx.dist.DataParallel(overlap=False), **opt), **shapes),
        "no communication": mx.train.bind(mx.train.make_step(net, **opt), **shapes),
    }
    if a.progress_variants:  # the switches are read when the executor is bound
        for name, var, val in (("overlap, no tests", "LOOM_DIST_OVERLAP_TEST", "0"),
                               ("overlap, thread", "LOOM_DIST_OVERLAP_THREAD", "1")):
            os.environ[var] = val
            exes[name] = mx.train.bind(mx.train.make_step(
                net, dist=mx.dist.DataParallel(overlap=True), **opt), **shapes)
            del os.environ[var]
    rs = np.random.RandomState(1)
    params = {k: rs.normal(0, 0.05, v.shape).astype(np.float32)
              for k, v in exes["blocking"].arg_dict.items() if k not in shapes}
    for e in exes.values():
        for k, v in params.items():
            e.arg_dict[k][:] = v
    x = np.random.RandomState(2 + r).normal(size=shapes["data"]).astype(np.float32)
    y = (np.arange(a.batch) % 1000).astype(np.float32)
    n_params = sum(v.size for v in params.values())
    if r == 0:
        print("ResNet-18, %d ranks, batch %d per rank, %dx%d, %d rounds (+1 warm-up); %.2f M "
              "weights" % (n, a.batch, a.size, a.size, a.rounds, n_params / 1e6), flush=True)

    names = list(exes)
    times = {k: [] for k in names}
    exposed = {k: [] for k in names}
    for rnd in range(a.rounds + 1):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        for k in order:
            mx.dist.barrier()
            w0 = mx.dist.stats()["exposed_s"]
            t0 = time.perf_counter()
            exes[k].forward(is_train=True, data=x, softmax_label=y)
            exes[k].outputs[0].wait_to_read()
            dt = time.perf_counter() - t0
            dw = mx.dist.stats()["exposed_s"] - w0
            slow = mx.dist.allgather(np.array([[dt, dw]]))
            if rnd > 0:
                times[k].append(float(slow[:, 0].max()))
                exposed[k].append(float(slow[:, 1].max()))

    for k in params:
        for v in names:
            if v != "no communication":
                assert np.array_equal(exes[v].arg_dict[k].asnumpy(),
                                      exes["blocking"].arg_dict[k].asnumpy()), (v, k)
    if r == 0:
        med = {k: float(np.median(v)) for k, v in times.items()}
        for k in names:
            print("  %-18s median %7.1f ms   min %7.1f   max %7.1f   blocked in allreduce nodes "
                  "%5.1f ms" % (k, med[k] * 1e3, min(times[k]) * 1e3, max(times[k]) * 1e3,
                               np.median(exposed[k]) * 1e3))
        ratio = np.array(times["blocking"]) / np.array(times["overlapped"])
        print("  blocking / overlapped per round: median %.3f (min %.3f, max %.3f)" % (
            np.median(ratio), ratio.min(), ratio.max()))
        cost = med["blocking"] - med["no communication"]
        print("  communication after backward costs %.1f ms; the overlap saves %.1f ms (%.0f%% of "
              "it, %.1f%% of the blocking step)" % (
                  cost * 1e3, (med["blocking"] - med["overlapped"]) * 1e3,
                  100 * (med["blocking"] - med["overlapped"]) / cost if cost > 0 else float("nan"),
                  100 * (med["blocking"] - med["overlapped"]) / med["blocking"]))
        print("  weights of every communicating variant identical: yes")


if __name__ == "__main__":
    main()
