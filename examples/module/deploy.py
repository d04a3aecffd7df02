"""Legacy FeedForward training plus deployment through Module and FeedForward; runs unchanged
on MXNet 1.9.1 and on Loom.

    python deploy.py            # Loom (import loom as mx)
    python deploy.py --mxnet    # MXNet 1.9.1

Trains with mx.model.FeedForward.create, saves a checkpoint, loads it back with
FeedForward.load and Module.load, and prints predictions and scores from each."""
import logging
import os
import sys
import tempfile
import warnings

import numpy as np

if "--mxnet" in sys.argv:
    import mxnet as mx
else:
    import loom as mx

logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout, force=True)
warnings.simplefilter("ignore", DeprecationWarning)


def net():
    data = mx.sym.Variable("data")
    fc1 = mx.sym.FullyConnected(data, num_hidden=12, name="fc1")
    act = mx.sym.Activation(fc1, act_type="relu", name="relu1")
    fc2 = mx.sym.FullyConnected(act, num_hidden=3, name="fc2")
    return mx.sym.SoftmaxOutput(fc2, name="softmax")


def rounded(a):
    return np.array2string(np.round(np.asarray(a), 4) + 0.0, precision=4, suppress_small=True)


def main():
    rs = np.random.RandomState(3)
    centers = rs.randn(3, 6) * 2
    y = rs.randint(0, 3, 150)
    x = (centers[y] + rs.randn(150, 6)).astype(np.float32)
    y = y.astype(np.float32)
    params = {"fc1_weight": mx.nd.array(rs.uniform(-0.4, 0.4, (12, 6))),
              "fc1_bias": mx.nd.zeros((12,)),
              "fc2_weight": mx.nd.array(rs.uniform(-0.4, 0.4, (3, 12))),
              "fc2_bias": mx.nd.zeros((3,))}
    train = mx.io.NDArrayIter(x[:120], y[:120], batch_size=20)
    val = mx.io.NDArrayIter(x[120:], y[120:], batch_size=20)

    model = mx.model.FeedForward.create(
        net(), X=train, eval_data=val, num_epoch=3, arg_params=params,
        learning_rate=0.1, momentum=0.9, wd=0.001,
        batch_end_callback=mx.callback.Speedometer(20, 3))
    print("feedforward score %.4f" % model.score(val))

    tmp = tempfile.mkdtemp()
    cwd = os.getcwd()
    os.chdir(tmp)
    prefix = "mlp"
    model.save(prefix)

    loaded = mx.model.FeedForward.load(prefix, 3)
    probs = loaded.predict(x[120:127])
    print("FeedForward.load predict\n%s" % rounded(probs))
    out, data, label = loaded.predict(val, num_batch=1, return_data=True)
    print("return_data shapes %s %s %s" % (out.shape, data.shape, label.shape))

    mod = mx.mod.Module.load(prefix, 3, context=mx.cpu())
    mod.bind(data_shapes=[("data", (5, 6))], label_shapes=[("softmax_label", (5,))],
             for_training=False)
    mod.forward(mx.io.DataBatch([mx.nd.array(x[120:125])], [mx.nd.array(y[120:125])]))
    print("Module.load forward\n%s" % rounded(mod.get_outputs()[0].asnumpy()))
    # a batch of another size rebinds the module for it
    mod.forward(mx.io.DataBatch([mx.nd.array(x[120:123])], [mx.nd.array(y[120:123])]))
    print("reshaped output %s" % (mod.get_outputs()[0].shape,))
    pred = mod.predict(mx.io.NDArrayIter(x[120:], y[120:], batch_size=7))
    print("Module.predict argmax %s" % pred.asnumpy().argmax(axis=1).tolist())
    os.chdir(cwd)
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
