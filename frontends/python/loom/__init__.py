"""Loom's Python frontend, MXNet 1.x compatible: `import loom as mx`.

mx.sym / mx.symbol (Symbol, Variable, Group, every op), mx.nd / mx.ndarray (NDArray, every
op imperatively, save/load), mx.cpu() / mx.gpu(i) / mx.Context, mx.operator (custom ops in
Python), mx.model (checkpoints, FeedForward), mx.name, mx.AttrScope, mx.random / mx.rnd, and
when present mx.mod (Module), mx.callback, mx.kv, mx.optimizer, mx.io, mx.recordio, mx.image,
mx.mon, mx.profiler, mx.test_utils."""
import os as _os

# OpenMP threads that spin at barriers lose badly whenever another process wants the core
# (ResNet-18 inference measured 81 ms spinning vs 39 ms passive on 2 busy cores). gcc's
# OpenMP reads this once, when _loom loads it, so it must be set before that; an explicit
# setting by the user wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from . import _loom  # noqa: E402
from .base import (LoomError, MXNetError, JsonError, UnknownOpError, GraphError, ShapeError,
                   ParamError, BindError, FormatError, CustomOpError, OutOfMemoryError)
from . import base
from .context import Context, cpu, gpu, cpu_pinned, current_context, num_gpus
from . import name
from . import attribute
from .attribute import AttrScope
from . import ndarray
from . import ndarray as nd
from . import symbol
from . import symbol as sym
from . import executor
from .executor import Executor
from . import operator
from . import model
from . import random

__version__ = "0.1.0"

# Modules written separately; the package works without them. A module that is present
# but fails on a missing third-party import is skipped with a warning.


def _optional(modname, *aliases):
    import importlib
    import warnings
    try:
        mod = importlib.import_module("." + modname, __name__)
    except ImportError as e:
        if e.name != __name__ + "." + modname:
            warnings.warn("loom.%s not loaded: %s" % (modname, e))
        return
    for a in aliases:
        globals()[a] = mod


_optional("initializer", "initializer", "init")
_optional("metric", "metric")
_optional("io", "io")
_optional("visualization", "visualization", "viz")
_optional("lr_scheduler", "lr_scheduler")
_optional("optimizer", "optimizer")
_optional("train", "train")
_optional("callback", "callback")
_optional("dist", "dist")
_optional("kvstore", "kvstore", "kv")
_optional("module", "module", "mod")
_optional("monitor", "monitor", "mon")
_optional("profiler", "profiler")
_optional("recordio", "recordio")
_optional("image", "image", "img")
_optional("contrib", "contrib")
_optional("runtime", "runtime")
_optional("util", "util")
_optional("engine", "engine")
_optional("test_utils", "test_utils")
_optional("rnn", "rnn")
del _optional
rnd = random
if "util" in globals():
    # MXNet exports its NumPy-semantics switches at the top level; Loom has MXNet 1.x
    # semantics only (turning NumPy semantics on raises LoomError, see loom.util).
    from .util import (is_np_shape, set_np_shape, np_shape, use_np_shape,  # noqa: F401
                       is_np_array, np_array, use_np_array, use_np)
