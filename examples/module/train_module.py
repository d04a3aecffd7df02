"""Trains a small MLP with MXNet 1.x's Module API; runs unchanged on MXNet 1.9.1 and on Loom.

    python train_module.py            # Loom (import loom as mx)
    python train_module.py --mxnet    # MXNet 1.9.1, for comparison

Both print the same log lines (Speedometer speed and time cost aside) and the same weight
summaries: Module.fit with SGD+momentum+wd, then Adam with a FactorScheduler and a
__lr_mult__ attribute, checkpoint/resume with optimizer states, and a BucketingModule."""
import logging
import os
import sys
import tempfile

import numpy as np

if "--mxnet" in sys.argv:
    import mxnet as mx
else:
    import loom as mx

logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout, force=True)


def mlp(num_hidden=16, num_classes=4):
    data = mx.sym.Variable("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=num_hidden, name="fc1")
    act = mx.sym.Activation(fc1, act_type="tanh", name="act1")
    w2 = mx.sym.Variable("fc2_weight", lr_mult=0.5)
    fc2 = mx.sym.FullyConnected(act, weight=w2, num_hidden=num_classes, name="fc2")
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


def dataset(rs, n, dim=8, num_classes=4):
    x = rs.randn(n, dim).astype(np.float32)
    w = rs.randn(dim, num_classes).astype(np.float32)
    y = np.argmax(x.dot(w) + 0.5 * rs.randn(n, num_classes), axis=1).astype(np.float32)
    return x, y


def initial_params(rs, dim=8, num_hidden=16, num_classes=4):
    return {"fc1_weight": mx.nd.array(rs.uniform(-0.3, 0.3, (num_hidden, dim))),
            "fc1_bias": mx.nd.array(rs.uniform(-0.1, 0.1, (num_hidden,))),
            "fc2_weight": mx.nd.array(rs.uniform(-0.3, 0.3, (num_classes, num_hidden))),
            "fc2_bias": mx.nd.array(rs.uniform(-0.1, 0.1, (num_classes,)))}


def _fmt(x):
    s = "%.4f" % x
    return "0.0000" if float(s) == 0 else s


def summary(tag, mod):
    args, _ = mod.get_params()
    for k in sorted(args):
        v = args[k].asnumpy()
        # 4 decimals: the two frameworks sum in different orders (float32 rounding)
        print("%s %s sum=%s abs=%.4f" % (tag, k, _fmt(v.sum()), np.abs(v).sum()))


def main():
    rs = np.random.RandomState(7)
    x, y = dataset(rs, 240)
    vx, vy = dataset(rs, 80)
    params = initial_params(rs)
    train = mx.io.NDArrayIter(x, y, batch_size=24)
    val = mx.io.NDArrayIter(vx, vy, batch_size=20)

    # 1. SGD with momentum and weight decay (rescale_grad = 1/batch_size from Module)
    mod = mx.mod.Module(mlp(), context=mx.cpu())
    mod.fit(train, eval_data=val, num_epoch=3, arg_params=params,
            optimizer="sgd", optimizer_params={"learning_rate": 0.2, "momentum": 0.9,
                                               "wd": 0.01},
            eval_metric="acc", batch_end_callback=mx.callback.Speedometer(24, 4))
    summary("sgd", mod)
    print("sgd score %s" % ["%s=%.5f" % nv for nv in mod.score(val, ["acc", "ce"])])

    # 2. Adam with a FactorScheduler, checkpoint and resume with optimizer states
    tmp = tempfile.mkdtemp()
    cwd = os.getcwd()
    os.chdir(tmp)  # relative checkpoint names: the log lines do not depend on the directory
    prefix = "mlp"
    mod = mx.mod.Module(mlp(), context=mx.cpu())
    sched = mx.lr_scheduler.FactorScheduler(step=5, factor=0.5, base_lr=0.02)
    mod.fit(train, num_epoch=2, arg_params=params, optimizer="adam",
            optimizer_params={"learning_rate": 0.02, "lr_scheduler": sched, "wd": 0.001},
            epoch_end_callback=mx.callback.module_checkpoint(mod, prefix, 2, True))
    summary("adam", mod)
    mod2 = mx.mod.Module.load(prefix, 2, load_optimizer_states=True, context=mx.cpu())
    mod2.bind(train.provide_data, train.provide_label)
    sched2 = mx.lr_scheduler.FactorScheduler(step=5, factor=0.5, base_lr=0.02)
    mod2.init_optimizer(optimizer="adam",
                        optimizer_params={"learning_rate": 0.02, "lr_scheduler": sched2,
                                          "wd": 0.001})
    train.reset()
    for batch in train:
        mod2.forward_backward(batch)
        mod2.update()
    summary("adam-resumed", mod2)
    for suffix in ("-symbol.json", "-0002.params", "-0002.states"):
        os.remove(prefix + suffix)
    os.chdir(cwd)
    os.rmdir(tmp)

    # 3. BucketingModule: two sequence lengths share one set of weights
    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        emb = mx.sym.Embedding(data, input_dim=10, output_dim=6, name="embed")
        pooled = mx.sym.mean(emb, axis=1)
        fc = mx.sym.FullyConnected(pooled, num_hidden=3, name="fc")
        return mx.sym.SoftmaxOutput(fc, name="softmax"), ("data",), ("softmax_label",)

    bmod = mx.mod.BucketingModule(sym_gen, default_bucket_key=5, context=mx.cpu())
    bmod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    bmod.init_params(arg_params={"embed_weight": mx.nd.array(rs.uniform(-1, 1, (10, 6))),
                                 "fc_weight": mx.nd.array(rs.uniform(-1, 1, (3, 6))),
                                 "fc_bias": mx.nd.zeros((3,))})
    bmod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.5,
                                                           "momentum": 0.5})
    metric = mx.metric.Accuracy()
    for i in range(6):
        seq_len = 5 if i % 2 == 0 else 3
        d = mx.nd.array(rs.randint(0, 10, (4, seq_len)))
        lab = mx.nd.array(rs.randint(0, 3, (4,)))
        batch = mx.io.DataBatch([d], [lab], bucket_key=seq_len,
                                provide_data=[mx.io.DataDesc("data", (4, seq_len))],
                                provide_label=[mx.io.DataDesc("softmax_label", (4,))])
        bmod.forward_backward(batch)
        bmod.update()
        bmod.update_metric(metric, batch.label)
    print("bucketing %s" % (metric.get(),))
    summary("bucketing", bmod)


if __name__ == "__main__":
    main()
