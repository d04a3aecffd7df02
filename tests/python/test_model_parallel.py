"""MXNet's model-parallel binding (ctx_group attributes + group2ctx) on CPU contexts: every
CPU context is the same host memory, so arrays made under cpu(1) bind to a cpu(0) executor,
and the results equal a plain bind's (closed form here)."""
import numpy as np
import pytest

import loom as mx


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_group2ctx_chain_on_two_cpu_contexts(dtype):
    a, b, c = (mx.sym.Variable(n, dtype=dtype) for n in ("a", "b", "c"))
    with mx.AttrScope(ctx_group="dev1"):
        net = (a + b) * dtype(3)
    with mx.AttrScope(ctx_group="dev2"):
        net = net + c
    shape = (4, 5)
    with mx.Context(mx.cpu(0)):
        args = [mx.nd.empty(shape, dtype=dtype) for _ in range(2)]
        grads = [mx.nd.empty(shape, dtype=dtype) for _ in range(2)]
    with mx.Context(mx.cpu(1)):
        args.append(mx.nd.empty(shape, dtype=dtype))
        grads.append(mx.nd.empty(shape, dtype=dtype))
    exe = net.bind(mx.cpu(0), args=args, args_grad=grads,
                   group2ctx={"dev1": mx.cpu(0), "dev2": mx.cpu(1)})
    for arr, v in zip(args, (1, 2, 3)):
        arr[:] = dtype(v)
    exe.forward(is_train=True)
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), np.full(shape, 12, dtype))
    # A float32 head gradient is cast to the output's dtype, as MXNet does.
    head = mx.nd.ones(shape, dtype=np.float32) * 2
    exe.backward([head])
    for g, expect in zip(grads, (6, 6, 2)):
        np.testing.assert_array_equal(g.asnumpy(), np.full(shape, expect, dtype))

