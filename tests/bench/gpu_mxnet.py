"""MXNet 1.9.1's side of the GPU inference figures of loom_gpu_bench (gpu_bench.cc):
Gluon's resnet18_v1 / resnet50_v1 (random weights, hybridized), batch 1 and 32, 224x224, on
mx.gpu(0); the median of synchronised calls after a warm-up, in the same format.

    ORACLE_PYTHON tests/bench/gpu_mxnet.py [--iters N]

Needs an MXNet build with CUDA; otherwise (the CPU-only wheel of the oracle venv here) it
prints one "skipped" line and exits 0.
"""
import argparse
import time

import mxnet as mx


def median_seconds(f, iters, warmup=3):
    for _ in range(warmup):
        f()
    mx.nd.waitall()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        f()
        mx.nd.waitall()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    if not mx.runtime.Features().is_enabled("CUDA") or mx.context.num_gpus() == 0:
        print("gpu_mxnet: skipped: this MXNet %s build has no usable GPU (CUDA feature %s, "
              "num_gpus() = %d)" % (mx.__version__, mx.runtime.Features().is_enabled("CUDA"),
                                    mx.context.num_gpus()))
        return
    ctx = mx.gpu(0)
    for depth in (18, 50):
        net = mx.gluon.model_zoo.vision.get_model("resnet%d_v1" % depth, pretrained=False)
        net.initialize(mx.init.Xavier(magnitude=2), ctx=ctx)
        net.hybridize(static_alloc=True, static_shape=True)
        for batch in (1, 32):
            x = mx.nd.random.normal(shape=(batch, 3, 224, 224), ctx=ctx)
            s = median_seconds(lambda: net(x), args.iters)
            print("%-44s %9.3f ms  %9.1f img/s  (MXNet %s)"
                  % ("ResNet-%d inference b%d, MXNet" % (depth, batch), s * 1e3, batch / s,
                     mx.__version__))


if __name__ == "__main__":
    main()
