"""Executors bound from one symbol, sharing read-only weights, run inference from several
Python threads at once (forward releases the GIL) and give exactly the sequential results."""
import threading

import numpy as np


def _net(mx):
    data = mx.sym.var("data")
    c1 = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=16, name="c1")
    r = mx.sym.Activation(mx.sym.BatchNorm(c1, fix_gamma=False, name="bn"), act_type="relu", name="relu")
    c2 = mx.sym.Convolution(r, kernel=(3, 3), pad=(1, 1), num_filter=16, name="c2")
    pool = mx.sym.Pooling(c2 + r, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool")
    return mx.sym.softmax(mx.sym.FullyConnected(pool, num_hidden=10, name="fc"), name="prob")


def test_threads_share_weights_and_match_sequential(mx):
    net = _net(mx)
    shape = (2, 8, 12, 12)
    rng = np.random.default_rng(3)
    proto = net.simple_bind(mx.cpu(), grad_req="null", data=shape)
    args = {k: mx.nd.array(rng.normal(0, 0.2, v.shape).astype(np.float32))
            for k, v in proto.arg_dict.items() if k != "data"}
    aux = {k: mx.nd.array((1.0 if k.endswith("var") else 0.0) + rng.normal(0, 0.1, v.shape).astype(np.float32))
           for k, v in proto.aux_dict.items()}
    inputs = [rng.normal(0, 1, shape).astype(np.float32) for _ in range(5)]

    exes = [net.bind(mx.cpu(), dict(args, data=mx.nd.zeros(shape)), aux_states=aux, grad_req="null")
            for _ in range(4)]
    want = []
    for x in inputs:
        exes[0].forward(is_train=False, data=x)
        want.append(exes[0].outputs[0].asnumpy().copy())
    assert not np.array_equal(want[0], want[1])

    errors = []

    def work(k):
        try:
            for rnd in range(3):
                for j in range(len(inputs)):
                    i = (j + k) % len(inputs)
                    exes[k].forward(is_train=False, data=inputs[i])
                    got = exes[k].outputs[0].asnumpy()
                    if not np.array_equal(got, want[i]):
                        errors.append("executor %d input %d round %d" % (k, i, rnd))
        except Exception as e:  # reported below, with the thread that raised it
            errors.append("executor %d raised %r" % (k, e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(exes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, v in args.items():  # the shared weights were only read
        assert np.array_equal(exes[3].arg_dict[k].asnumpy(), v.asnumpy()), k
