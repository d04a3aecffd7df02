"""Range and constant creation functions built on the _arange / _linspace / _eye / _full ops
(MXNet 1.9.1's mx.sym.arange, linspace, eye, full and an op-based mx.nd.arange).

Hook (done by symbol.py / ndarray.py, which import these lazily to avoid import cycles):
    symbol.py:   from ._creation import sym_arange as arange, sym_linspace as linspace, \
                     sym_eye as eye, sym_full as full
    ndarray.py:  (optional) from ._creation import nd_arange as arange
"""
import numpy as _np


def _dtype_name(dtype):
    return _np.dtype(dtype if dtype is not None else "float32").name


def _sym_create(op, kwargs, name):
    from . import symbol as _sym
    if name is not None:
        kwargs = dict(kwargs, name=name)
    # auto names as MXNet's _internal functions: _arange0, _linspace0, ...
    return _sym._create(op, op, (), kwargs, op, tuple(kwargs))


def sym_arange(start, stop=None, step=1.0, repeat=1, infer_range=False, name=None, dtype=None,
               **kwargs):
    """Symbol of evenly spaced values in [start, stop) (op _arange); without stop, [0, start).
    With infer_range=True and no stop, the length comes from the graph (the consumer's
    shape)."""
    kw = dict(start=start, stop=stop, step=step, repeat=repeat, infer_range=infer_range,
              dtype=_dtype_name(dtype))
    kw.update(kwargs)
    return _sym_create("_arange", kw, name)


def sym_linspace(start, stop, num, endpoint=True, name=None, dtype=None, **kwargs):
    """Symbol of `num` evenly spaced values from start to stop (op _linspace)."""
    kw = dict(start=start, stop=stop, num=num, endpoint=endpoint, dtype=_dtype_name(dtype))
    kw.update(kwargs)
    return _sym_create("_linspace", kw, name)


def sym_eye(N, M=0, k=0, dtype=None, name=None, **kwargs):
    """Symbol of an N x M (M = 0: N x N) matrix with ones on diagonal k (op _eye)."""
    kw = dict(N=N, M=M, k=k, dtype=_dtype_name(dtype))
    kw.update(kwargs)
    return _sym_create("_eye", kw, name)


def sym_full(shape, val, dtype=None, name=None, **kwargs):
    """Symbol of the given shape filled with `val` (op _full)."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    kw = dict(shape=shape, dtype=_dtype_name(dtype), value=float(val))
    kw.update(kwargs)
    return _sym_create("_full", kw, name)


def nd_arange(start, stop=None, step=1.0, repeat=1, infer_range=None, ctx=None, dtype=None):
    """NDArray of evenly spaced values computed by the _arange op, MXNet 1.9.1's signature
    and values (computed in the element type; integer types and float16 take start and step
    truncated; uint8 wraps)."""
    if infer_range:
        import warnings
        warnings.warn("`infer_range` is deprecated for NDArray and is ignored.",
                      DeprecationWarning, stacklevel=2)
    s = sym_arange(start, stop, step, repeat, False, dtype=dtype)
    ex = s.bind(ctx if ctx is not None else _default_ctx(), args={})
    ex.forward(is_train=False)
    return ex.outputs[0]


def _default_ctx():
    from .context import current_context
    return current_context()


__all__ = ["sym_arange", "sym_linspace", "sym_eye", "sym_full", "nd_arange"]
