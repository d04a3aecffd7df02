"""mx.util: NumPy-semantics switches and small system helpers.

Loom implements MXNet 1.x's legacy semantics only: shapes are never zero-dimensional and 0 in
a shape means 'unknown' during inference; arrays are mx.nd.NDArray. So is_np_shape() and
is_np_array() are always False; turning either on raises LoomError (turning it off is
accepted)."""
import functools
import os

from .base import LoomError


def _refuse(what):
    raise LoomError("%s is not supported by Loom: it implements MXNet 1.x's legacy "
                    "(non-NumPy) semantics only" % what)


def is_np_shape():
    """False: Loom uses legacy shape semantics."""
    return False


def set_np_shape(active):
    """Returns the previous state (False); active=True raises LoomError."""
    if active:
        _refuse("NumPy shape semantics (set_np_shape(True))")
    return False


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


def np_shape(active=True):
    """Context manager; only active=False is supported."""
    return _Scope("NumPy shape semantics (np_shape)", active)


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


use_np_shape = _decorator("NumPy shape semantics (use_np_shape)")
use_np_array = _decorator("NumPy arrays (use_np_array)")
use_np = _decorator("NumPy semantics (use_np)")


def set_np(shape=True, array=True, dtype=False):
    if shape or array or dtype:
        _refuse("NumPy semantics (set_np)")


def reset_np():
    """Legacy semantics (already the only mode)."""


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
