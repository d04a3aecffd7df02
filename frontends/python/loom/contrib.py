"""mx.contrib, mx.nd.contrib and mx.sym.contrib: the registered operators named _contrib_X,
as X (mx.nd.contrib.X imperative, mx.sym.contrib.X symbolic), plus mx.contrib.ndarray and
mx.contrib.symbol aliases. Names are looked up in the operator registry on access, so ops
registered later (plugins) appear too; a name with no _contrib_ op raises AttributeError."""
import sys
import types

from . import _ops
from . import ndarray as _nd
from . import symbol as _sym

_PREFIX = "_contrib_"


def _contrib_names():
    return sorted(n[len(_PREFIX):] for n in _ops.all_ops() if n.startswith(_PREFIX))


def _namespace(modname, source, doc):
    m = types.ModuleType(modname, doc)

    def lookup(name):
        if name.startswith("__"):
            raise AttributeError(name)
        if _ops.find(_PREFIX + name) is not None:
            fn = getattr(source, _PREFIX + name, None)
            if fn is not None:
                return fn
        raise AttributeError("module '%s' has no attribute '%s' (Loom has no operator %s%s; "
                             "contrib operators available: %s)" %
                             (modname, name, _PREFIX, name,
                              ", ".join(_contrib_names()) or "none"))

    def listing():
        return sorted(set(vars(m)) | set(_contrib_names()))

    m.__getattr__ = lookup
    m.__dir__ = listing
    for n in _contrib_names():
        fn = getattr(source, _PREFIX + n, None)
        if fn is not None:
            setattr(m, n, fn)
    sys.modules[modname] = m
    return m


ndarray = _namespace(_nd.__name__ + ".contrib", _nd,
                     "mx.nd.contrib: contrib operators, imperative.")
symbol = _namespace(_sym.__name__ + ".contrib", _sym, "mx.sym.contrib: contrib operators.")
_nd.contrib = ndarray
_sym.contrib = symbol
nd = ndarray
sym = symbol
sys.modules[__name__ + ".ndarray"] = ndarray
sys.modules[__name__ + ".symbol"] = symbol
