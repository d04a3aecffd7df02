"""mx.util: NumPy-semantics switches and small system helpers.

Loom implements MXNet 1.x's legacy semantics. NumPy *shape* semantics (np_shape) are
supported as far as shapes are reported and arrays created: with them on, shape inference
reports unknown dimensions as -1 and unknown shapes as None (legacy: 0 and ()), and
mx.nd.zeros/ones/empty/full make zero-size and scalar (shape ()) arrays, which legacy mode
refuses as MXNet does. Inside graphs and operators 0 still means "unknown size", so zero-size
arrays cannot go through operators. NumPy *arrays* (np_array, use_np, mx.np) are not
supported: turning them on raises LoomError (turning them off is accepted)."""
import functools
import os
import threading

from .base import LoomError


def _refuse(what):
    raise LoomError("%s is not supported by Loom: it implements MXNet 1.x's legacy "
                    "(non-NumPy) semantics only" % what)


_state = threading.local()


def is_np_shape():
    """True while NumPy shape semantics are on (per thread, as MXNet's)."""
    return getattr(_state, "np_shape", False)


def set_np_shape(active):
    """Turns NumPy shape semantics on or off; returns the previous state."""
    prev = is_np_shape()
    _state.np_shape = bool(active)
    return prev


def is_np_array():
    return False


def is_np_default_dtype():
    return False


def set_np_default_dtype(is_np_default_dtype=True):
    if is_np_default_dtype:
        _refuse("NumPy default dtype (float64)")
    return False


class _Scope:
    def __init__(self, what, active):
        self.what, self.active = what, active

    def __enter__(self):
        if self.active:
            _refuse(self.what)
        return self

    def __exit__(self, *exc):
        return False


class _ShapeScope:
    def __init__(self, active):
        self.active, self.prev = bool(active), None

    def __enter__(self):
        self.prev = set_np_shape(self.active)
        return self

    def __exit__(self, *exc):
        set_np_shape(self.prev)
        return False


def np_shape(active=True):
    """Context manager turning NumPy shape semantics on (or off) inside the block."""
    return _ShapeScope(active)


def np_array(active=True):
    return _Scope("NumPy arrays (np_array)", active)


def _decorator(what):
    def deco(func):
        if isinstance(func, type):
            _refuse(what)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            _refuse(what)
        return wrapper
    return deco


def use_np_shape(func):
    """Decorator: the function runs with NumPy shape semantics on."""
    if isinstance(func, type):
        _refuse("use_np_shape on a class")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with np_shape(True):
            return func(*args, **kwargs)
    return wrapper


use_np_array = _decorator("NumPy arrays (use_np_array)")
use_np = _decorator("NumPy semantics (use_np)")


def set_np(shape=True, array=True, dtype=False):
    if array or dtype:
        _refuse("NumPy semantics (set_np with array or dtype)")
    set_np_shape(shape)


def reset_np():
    """Legacy semantics."""
    set_np_shape(False)


def get_gpu_count():
    from .context import num_gpus
    return num_gpus()


def get_gpu_memory(gpu_dev_id):
    raise LoomError("get_gpu_memory is not supported by Loom")


def get_cuda_compute_capability(ctx):
    if ctx.device_type != "gpu":
        raise ValueError("Expecting a gpu context to get cuda compute capability, "
                         "while received ctx {}".format(ctx))
    raise LoomError("get_cuda_compute_capability is not supported by Loom")


def makedirs(d):
    """os.makedirs that accepts an existing directory."""
    os.makedirs(os.path.expanduser(d), exist_ok=True)


def getenv(name):
    return os.environ.get(name)


def setenv(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(value)


def set_module(module):
    """Decorator setting func.__module__ (used for documentation)."""
    def decorator(func):
        if module is not None:
            func.__module__ = module
        return func
    return decorator
