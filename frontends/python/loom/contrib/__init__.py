"""mx.contrib, mx.nd.contrib and mx.sym.contrib: the registered operators named _contrib_X,
as X (mx.nd.contrib.X imperative, mx.sym.contrib.X symbolic), the Python-level functions
rand_zipfian (nd and sym), isinf / isnan / isfinite (nd), allclose (nd, 0-d as MXNet) and
boolean_mask (nd; the symbolic form is refused, its output shape depending on values), plus
mx.contrib.ndarray and mx.contrib.symbol aliases. Names are looked up in the operator
registry on access, so ops registered later (plugins) appear too; a name with no _contrib_
op raises AttributeError."""
import sys
import types

from .. import _loom, _ops
from ..base import MXNetError
from .. import ndarray as _nd
from .. import symbol as _sym

_PREFIX = "_contrib_"


def _contrib_names():
    return _ops.prefixed_names(_PREFIX)


def _namespace(modname, source, doc):
    return _ops.prefix_namespace(modname, source, _PREFIX, doc, "contrib")


def _nd_rand_zipfian(true_classes, num_sampled, range_max, ctx=None):
    """Draws num_sampled classes from the log-uniform (Zipfian) distribution over
    [0, range_max): P(c) = log((c + 2) / (c + 1)) / log(range_max + 1). Returns (sampled
    classes as int64, expected count of each true class, expected count of each sampled
    class), the counts being num_sampled * P(c)."""
    import numpy as np
    from .. import random as _random
    ctx = ctx if ctx is not None else true_classes.context
    log_range = np.log(range_max + 1.0)
    u = _random.uniform(0, log_range, shape=(num_sampled,), dtype="float64", ctx=ctx)
    sampled = np.floor(np.exp(u.asnumpy())).astype(np.int64) - 1
    sampled = np.clip(sampled, 0, range_max - 1)

    def expected(c):
        c = np.asarray(c, dtype=np.float64)
        return np.log((c + 2.0) / (c + 1.0)) / log_range * num_sampled

    true_np = true_classes.asnumpy()
    return (_nd.array(sampled, ctx=ctx, dtype="int64"),
            _nd.array(expected(true_np), ctx=ctx, dtype="float32"),
            _nd.array(expected(sampled), ctx=ctx, dtype="float32"))


def _sym_rand_zipfian(true_classes, num_sampled, range_max):
    """Symbolic rand_zipfian: a group-able list (sampled classes, expected counts of the true
    classes, expected counts of the sampled classes); see mx.nd.contrib.rand_zipfian."""
    import math
    from .. import random as _random
    log_range = math.log(range_max + 1)
    u = _random.sym_random.uniform(0, log_range, shape=(num_sampled,), dtype="float32")
    sampled_f = _sym.clip(_sym.floor(_sym.exp(u)) - 1, a_min=0, a_max=range_max - 1)
    sampled = _sym.Cast(sampled_f, dtype="int64")

    def expected(c):
        return _sym.log((c + 2.0) / (c + 1.0)) * (num_sampled / log_range)

    true_f = _sym.Cast(true_classes, dtype="float32")
    return [sampled, expected(true_f), expected(sampled_f)]


def _nd_check(fn, name):
    def check(data):
        """Elementwise %s of data as 0/1 in data's dtype."""
        return _nd.array(fn(data.asnumpy()).astype(data.dtype), ctx=data.context,
                         dtype=data.dtype)
    check.__name__ = name
    check.__doc__ = check.__doc__ % name
    return check


def _nd_allclose(a, b, *args, **kwargs):
    """1 (uint8) when every |a - b| <= atol + rtol * |b| (NaNs equal with equal_nan), else 0:
    a 0-d array, as MXNet returns (the _contrib_allclose op's own output has shape (1,),
    MXNet's legacy shapes having no 0-d arrays)."""
    res = _nd._contrib_allclose(a, b, *args, **kwargs)
    return res if kwargs.get("out") is not None else res._reshape_view(())


def _nd_boolean_mask(data, index, axis=0, out=None, **kwargs):
    """The slices data[i] along axis 0 whose index[i] is nonzero (NaN counts as nonzero),
    in order (MXNet's _contrib_boolean_mask); (0,) + data.shape[1:] when none is. The output
    shape depends on index's values, so this runs imperatively only (forward; Loom's NDArray
    API records no gradients)."""
    import numpy as np
    if int(axis) != 0:
        raise MXNetError("boolean_mask: axis=%s is not supported (only axis 0, as MXNet)"
                             % axis)
    if data.ndim < 1 or index.shape[:1] != data.shape[:1] or index.size != data.shape[0]:
        raise MXNetError("boolean_mask: index of shape %s must hold one value per slice "
                             "of data along axis 0 (data shape %s)" % (index.shape, data.shape))
    keep = np.flatnonzero(index.asnumpy())
    if keep.size == 0:
        res = _loom._empty((0,) + data.shape[1:], data.dtype, data.context)
    else:
        pos = _nd.array(keep, ctx=data.context, dtype="int64")
        res = _nd.invoke("take", [data, pos], {"axis": "0"})
    if out is not None:
        out[:] = res
        return out
    return res


def _sym_boolean_mask(*args, **kwargs):
    """Refused: see mx.nd.contrib.boolean_mask."""
    raise MXNetError(
        "boolean_mask: the output shape depends on the values of index, and Loom's executor "
        "fixes every shape when it binds the graph, so the symbolic form is not supported; "
        "use mx.nd.contrib.boolean_mask (imperative)")


_PY_ND = {"rand_zipfian": _nd_rand_zipfian, "allclose": _nd_allclose,
          "boolean_mask": _nd_boolean_mask}
_PY_SYM = {"rand_zipfian": _sym_rand_zipfian, "boolean_mask": _sym_boolean_mask}


def _add_py_functions():
    import numpy as np
    _PY_ND.update(isinf=_nd_check(np.isinf, "isinf"), isnan=_nd_check(np.isnan, "isnan"),
                  isfinite=_nd_check(np.isfinite, "isfinite"))


_add_py_functions()


ndarray = _namespace(_nd.__name__ + ".contrib", _nd,
                     "mx.nd.contrib: contrib operators, imperative.")
symbol = _namespace(_sym.__name__ + ".contrib", _sym, "mx.sym.contrib: contrib operators.")
for _k, _v in _PY_ND.items():
    setattr(ndarray, _k, _v)
for _k, _v in _PY_SYM.items():
    setattr(symbol, _k, _v)
_nd.contrib = ndarray
_sym.contrib = symbol
nd = ndarray
sym = symbol
sys.modules[__name__ + ".ndarray"] = ndarray
sys.modules[__name__ + ".symbol"] = symbol
