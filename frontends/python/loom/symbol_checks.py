"""Executor-based checks of symbols for ``mx.test_utils`` (MXNet 1.x names):
simple_forward, numeric_grad, check_numeric_gradient, check_symbolic_forward,
check_symbolic_backward, check_speed and check_consistency. They bind the symbol on Loom's
own executors and compare with the tolerances of test_utils, which exports them."""
import time
import traceback

import numpy as np

from . import ndarray as _nd
from .base import LoomError
from .test_utils import (NDArray, Symbol, assert_almost_equal, default_context, default_dtype,
                         default_numeric_eps, get_tolerance)


def simple_forward(sym, ctx=None, is_train=False, **inputs):
    """Runs sym on NumPy inputs (by argument name); returns NumPy output(s)."""
    ctx = ctx or default_context()
    exe = sym.bind(ctx, args={k: _nd.array(v) for k, v in inputs.items()})
    exe.forward(is_train=is_train)
    outs = [o.asnumpy() for o in exe.outputs]
    return outs[0] if len(outs) == 1 else outs


def _to_nd(v, ctx, dtype):
    if isinstance(v, NDArray):
        return v
    v = np.asarray(v)
    return _nd.array(v, ctx=ctx, dtype=v.dtype if dtype == "asnumpy" else dtype)


def _check_dtype(dtype):
    if not (dtype == "asnumpy" or dtype in (np.float16, np.float32, np.float64)):
        raise ValueError("dtype must be 'asnumpy', np.float16, np.float32 or np.float64")


def _parse_location(sym, location, ctx, dtype=default_dtype()):
    """{argument name: NDArray} from a list (list_arguments order) or dict of arrays."""
    _check_dtype(dtype)
    names = sym.list_arguments()
    if isinstance(location, dict):
        if set(location) != set(names):
            raise ValueError("Symbol arguments and keys of the given location do not match. "
                             "symbol args:%s, location.keys():%s" %
                             (sorted(names), sorted(location)))
    elif isinstance(location, (list, tuple)):
        if len(location) != len(names):
            raise ValueError("%d values given for %d arguments (%s)" %
                             (len(location), len(names), ", ".join(names)))
        location = dict(zip(names, location))
    else:
        raise TypeError("location must be a list, tuple or dict")
    return {k: _to_nd(location[k], ctx, dtype) for k in sorted(location)}


def _parse_aux_states(sym, aux_states, ctx, dtype=default_dtype()):
    _check_dtype(dtype)
    if aux_states is None:
        return None
    names = sym.list_auxiliary_states()
    if isinstance(aux_states, dict):
        if set(aux_states) != set(names):
            raise ValueError("Symbol aux_states names and given aux_states do not match. "
                             "symbol aux_names:%s, aux_states.keys:%s" %
                             (sorted(names), sorted(aux_states)))
    else:
        aux_states = dict(zip(names, aux_states))
    return {k: _to_nd(v, ctx, dtype) for k, v in aux_states.items()}


def numeric_grad(executor, location, aux_states=None, eps=1e-4, use_forward_train=True,
                 dtype=default_dtype(), _weights=None):
    """Central finite differences of sum(outputs[0]) (times _weights elementwise when given)
    with respect to every floating point argument in `location` (dict name -> NumPy array),
    through the bound `executor`."""
    grads = {k: np.zeros(np.shape(v), dtype=dtype) for k, v in location.items()}
    location = {k: np.array(v, dtype=dtype, copy=True, order="C")
                for k, v in location.items()}
    for k, v in location.items():
        executor.arg_dict[k][:] = v

    def run():
        if aux_states is not None:
            for name, val in aux_states.items():
                executor.aux_dict[name][:] = val
        executor.forward(is_train=use_forward_train)
        out = executor.outputs[0].asnumpy().astype(np.float64)
        return out if _weights is None else out * _weights

    for k, v in location.items():
        if v.dtype.kind != "f":
            continue
        flat = v.reshape(-1)
        target = executor.arg_dict[k]
        for i in range(flat.size):
            orig = flat[i]
            flat[i] = orig + eps / 2.0
            target[:] = v
            f_plus = run()
            flat[i] = orig - eps / 2.0
            target[:] = v
            f_minus = run()
            grads[k].reshape(-1)[i] = (f_plus - f_minus).sum() / eps
            flat[i] = orig
        target[:] = v
    return grads


def check_numeric_gradient(sym, location, aux_states=None, numeric_eps=None, rtol=None,
                           atol=None, grad_nodes=None, use_forward_train=True, ctx=None,
                           grad_stype_dict=None, dtype=default_dtype()):
    """Checks the symbol's backward pass against finite differences.

    The first output is weighted by a random projection and summed, so every output element
    takes part; the gradient the executor computes for each node in grad_nodes
    (default: all arguments; a dict gives grad_req per node: 'write', 'add' or 'null') is
    compared with the numeric one. Raises AssertionError on a mismatch."""
    if dtype not in (np.float16, np.float32, np.float64):
        raise ValueError("check_numeric_gradient: dtype must be a float type")
    ctx = ctx or default_context()
    location = _parse_location(sym, location, ctx, dtype)
    location_np = {k: v.asnumpy() for k, v in location.items()}
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    aux_np = None if aux is None else {k: v.asnumpy() for k, v in aux.items()}
    if grad_nodes is None:
        grad_nodes = sym.list_arguments()
        grad_req = {k: "write" for k in grad_nodes}
    elif isinstance(grad_nodes, (list, tuple)):
        grad_nodes = list(grad_nodes)
        grad_req = {k: "write" for k in grad_nodes}
    elif isinstance(grad_nodes, dict):
        grad_req = dict(grad_nodes)
        grad_nodes = list(grad_nodes)
    else:
        raise ValueError("grad_nodes must be None, a list or a dict")
    _, out_shapes, _ = sym.infer_shape(**{k: v.shape for k, v in location.items()})
    if out_shapes is None:
        raise ValueError("check_numeric_gradient: cannot infer the output shape")
    # The first output is weighted by a random projection: the executor gets it as the head
    # gradient and the finite differences use sum(output * projection), so no extra op (with
    # its own dtype support) enters the graph.
    proj = np.random.rand(*out_shapes[0]) + 0.1
    start_grads = {k: np.random.normal(0, 0.01, size=location[k].shape) for k in grad_nodes}
    grad_arrays = {k: _nd.array(v, ctx=ctx, dtype=dtype) for k, v in start_grads.items()}
    req = {k: grad_req.get(k, "null") for k in sym.list_arguments()}
    exe = sym.bind(ctx, args=dict(location), args_grad=grad_arrays, grad_req=req,
                   aux_states=aux)
    if len(exe.outputs) != 1:
        raise ValueError("check_numeric_gradient: the symbol must have one output")
    exe.forward(is_train=True)
    eps = get_tolerance(exe.outputs[0], numeric_eps, default_numeric_eps())
    exe.backward([_nd.array(proj, ctx=ctx, dtype=exe.outputs[0].dtype)])
    symbolic = {k: grad_arrays[k].asnumpy() for k in grad_nodes}
    numeric = numeric_grad(exe, location_np, aux_np, eps=eps,
                           use_forward_train=use_forward_train, dtype=dtype, _weights=proj)
    for name in grad_nodes:
        names = ("NUMERICAL_%s" % name, "BACKWARD_%s" % name)
        r = grad_req[name]
        if r == "write":
            assert_almost_equal(numeric[name], symbolic[name], rtol, atol, names)
        elif r == "add":
            assert_almost_equal(numeric[name], symbolic[name] - start_grads[name], rtol, atol,
                                names)
        elif r == "null":
            assert_almost_equal(start_grads[name], symbolic[name], rtol, atol, names)
        else:
            raise ValueError("Invalid grad_req %s for argument %s" % (r, name))


def check_symbolic_forward(sym, location, expected, rtol=None, atol=None, aux_states=None,
                           ctx=None, equal_nan=False, dtype=default_dtype()):
    """Binds sym at `location`, runs forward (is_train=False) and compares each output with
    `expected` (list in output order or dict by output name). Returns the outputs."""
    ctx = ctx or default_context()
    location = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    if isinstance(expected, dict):
        expected = [expected[k] for k in sym.list_outputs()]
    grads = {k: _nd.zeros(v.shape, ctx=ctx, dtype=v.dtype) for k, v in location.items()}
    exe = sym.bind(ctx, args=location, args_grad=grads, aux_states=aux)
    exe.forward(is_train=False)
    for name, expect, out in zip(sym.list_outputs(), expected, exe.outputs):
        assert_almost_equal(expect, out, rtol, atol, ("EXPECTED_%s" % name, "FORWARD_%s" % name),
                            equal_nan=equal_nan)
    return exe.outputs


def check_symbolic_backward(sym, location, out_grads, expected, rtol=None, atol=None,
                            aux_states=None, grad_req="write", ctx=None, grad_stypes=None,
                            equal_nan=False, dtype=default_dtype()):
    """Runs forward (is_train=True) and backward with out_grads, and compares the argument
    gradients with `expected` (list in list_arguments order or dict). grad_req: str, list or
    dict; 'add' accumulates onto random starting gradients (which are subtracted before the
    comparison), 'null' must leave them untouched. Returns the gradient arrays."""
    ctx = ctx or default_context()
    if grad_stypes:
        for v in grad_stypes.values():
            if v not in (None, "default"):
                raise LoomError("check_symbolic_backward: sparse gradients are not supported "
                                "by Loom")
    location = _parse_location(sym, location, ctx, dtype)
    aux = _parse_aux_states(sym, aux_states, ctx, dtype)
    names = sym.list_arguments()
    if isinstance(expected, (list, tuple)):
        expected = dict(zip(names, expected))
    start = {k: np.random.normal(size=np.shape(v)) for k, v in sorted(expected.items())}
    grads = {}
    for k, v in start.items():
        dt = np.asarray(expected[k]).dtype if dtype == "asnumpy" else dtype
        grads[k] = _nd.array(v, ctx=ctx, dtype=dt)
    if isinstance(grad_req, str):
        grad_req = {k: grad_req for k in names}
    elif isinstance(grad_req, (list, tuple)):
        grad_req = dict(zip(names, grad_req))
    req = {k: grad_req.get(k, "null") for k in names}
    exe = sym.bind(ctx, args=location, args_grad=grads, aux_states=aux, grad_req=req)
    exe.forward(is_train=True)
    if isinstance(out_grads, (list, tuple)):
        out_grads = [_to_nd(g, ctx, dtype) if g is not None else None for g in out_grads]
    elif isinstance(out_grads, dict):
        out_grads = {k: _to_nd(g, ctx, dtype) for k, g in out_grads.items()}
    elif isinstance(out_grads, np.ndarray):
        out_grads = [_to_nd(out_grads, ctx, dtype)]
    elif out_grads is not None and not isinstance(out_grads, NDArray):
        raise TypeError("out_grads must be None, a list, a dict or an array")
    exe.backward(out_grads)
    for name in expected:
        pair = ("EXPECTED_%s" % name, "BACKWARD_%s" % name)
        got = grads[name].asnumpy()
        r = req[name]
        if r == "write":
            assert_almost_equal(expected[name], got, rtol, atol, pair, equal_nan=equal_nan)
        elif r == "add":
            assert_almost_equal(expected[name], got - start[name], rtol, atol, pair,
                                equal_nan=equal_nan)
        elif r == "null":
            assert_almost_equal(start[name], got, rtol, atol, pair, equal_nan=equal_nan)
        else:
            raise ValueError("Invalid grad_req %s for argument %s" % (r, name))
    return grads


def check_speed(sym, location=None, ctx=None, N=20, grad_req=None, typ="whole", **kwargs):
    """Seconds per forward+backward (typ='whole') or per forward (typ='forward'), averaged
    over N runs after one warm-up run."""
    ctx = ctx or default_context()
    grad_req = grad_req or "write"
    if location is None:
        exe = sym.simple_bind(ctx=ctx, grad_req=grad_req, **kwargs)
        location = {k: np.random.normal(size=a.shape) for k, a in exe.arg_dict.items()}
    else:
        if not isinstance(location, dict):
            raise TypeError('Expect dict, get "location"=%s' % str(location))
        exe = sym.simple_bind(ctx=ctx, grad_req=grad_req,
                              **{k: v.shape for k, v in location.items()})
    for k, v in location.items():
        exe.arg_dict[k][:] = np.asarray(v).astype(exe.arg_dict[k].dtype)
    if typ == "whole":
        def step():
            exe.forward(is_train=True)
            exe.backward(out_grads=exe.outputs)
    elif typ == "forward":
        def step():
            exe.forward(is_train=False)
    else:
        raise ValueError('typ can only be "whole" or "forward".')
    step()
    tic = time.time()
    for _ in range(N):
        step()
    return (time.time() - tic) / N


def check_consistency(sym, ctx_list, scale=1.0, grad_req="write", arg_params=None,
                      aux_params=None, rtol=None, atol=None, raise_on_err=True,
                      ground_truth=None, equal_nan=False, use_uniform=False,
                      rand_type=np.float64):
    """Binds sym (or one symbol per entry) once per ctx_list entry ({'ctx': ..., shapes by
    argument name, optional 'type_dict'}), runs the same inputs through all of them and
    compares outputs and gradients with the most precise run (or ground_truth). Returns the
    reference values. One entry only runs it; Loom runs every entry on the CPU."""
    if not ctx_list:
        raise ValueError("check_consistency: ctx_list is empty")
    syms = [sym] * len(ctx_list) if isinstance(sym, Symbol) else list(sym)
    if len(syms) != len(ctx_list):
        raise ValueError("check_consistency: one symbol per ctx_list entry")
    output_names = syms[0].list_outputs()
    arg_names = syms[0].list_arguments()
    exes = []
    for s, spec in zip(syms, ctx_list):
        spec = dict(spec)
        ctx = spec.pop("ctx", default_context())
        types = spec.pop("type_dict", None)
        if s.list_arguments() != arg_names:
            raise ValueError("check_consistency: the symbols' arguments differ")
        exes.append(s.simple_bind(ctx=ctx, grad_req=grad_req, type_dict=types, **spec))
    arg_params = {} if arg_params is None else dict(arg_params)
    aux_params = {} if aux_params is None else dict(aux_params)
    for n, arr in sorted(exes[0].arg_dict.items()):
        if n not in arg_params:
            if use_uniform:
                arg_params[n] = np.random.uniform(-0.92 * scale, 0.92 * scale,
                                                  size=arr.shape).astype(rand_type)
            else:
                arg_params[n] = np.random.normal(size=arr.shape, scale=scale).astype(rand_type)
    for n in exes[0].aux_dict:
        aux_params.setdefault(n, 0)
    for exe in exes:
        for n, arr in exe.arg_dict.items():
            arr[:] = np.asarray(arg_params[n]).astype(arr.dtype) \
                if not np.isscalar(arg_params[n]) else arg_params[n]
        for n, arr in exe.aux_dict.items():
            arr[:] = aux_params[n]
    dtypes = [np.dtype(e.outputs[0].dtype) for e in exes]
    ref = int(np.argmax([d.itemsize for d in dtypes]))

    def compare(stage, values, idx, gt):
        for name, arr in values:
            if arr is None or gt.get(name) is None:
                continue
            try:
                assert_almost_equal(arr, gt[name], rtol=rtol, atol=atol, equal_nan=equal_nan)
            except AssertionError as e:
                print("%s Err: ctx %d vs ctx %d at %s" % (stage, idx, ref, name))
                traceback.print_exc()
                if raise_on_err:
                    raise e

    for exe in exes:
        exe.forward(is_train=False)
    gt = ground_truth
    if gt is None:
        gt = {n: o.asnumpy() for n, o in zip(output_names, exes[ref].outputs)}
    for i, exe in enumerate(exes):
        if i != ref or ground_truth is not None:
            compare("Predict", zip(output_names, exe.outputs), i, gt)
    if grad_req != "null":
        for exe in exes:
            exe.forward(is_train=True)
        heads = [np.random.normal(size=o.shape) for o in exes[ref].outputs]
        for exe in exes:
            exe.backward([_nd.array(h, ctx=o.context, dtype=o.dtype)
                          for h, o in zip(heads, exe.outputs)])
        if ground_truth is None:
            gt = {n: o.asnumpy() for n, o in zip(output_names, exes[ref].outputs)}
            gt.update({n: (g.asnumpy() if g is not None else None)
                       for n, g in exes[ref].grad_dict.items()})
        for i, exe in enumerate(exes):
            if i == ref and ground_truth is None:
                continue
            values = list(zip(output_names, exe.outputs)) + \
                [(n, exe.grad_dict.get(n)) for n in arg_names]
            compare("Train", values, i, gt)
    return gt
