"""Devices: mx.cpu(), mx.gpu(i), mx.Context and the default-context stack."""
import threading

from . import _loom

Context = _loom.Context
_state = threading.local()


def _stack():
    if not hasattr(_state, "stack"):
        _state.stack = []
    return _state.stack


def _enter(self):
    _stack().append(self)
    return self


def _exit(self, *exc):
    _stack().pop()


Context.__enter__ = _enter
Context.__exit__ = _exit
Context.devtype2str = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
Context.devstr2type = {"cpu": 1, "gpu": 2, "cpu_pinned": 3, "cpu_shared": 5}


def cpu(device_id=0):
    """The CPU context (device_id is accepted and ignored, as in MXNet)."""
    return Context("cpu", device_id)


def cpu_pinned(device_id=0):
    return Context("cpu", device_id)


def gpu(device_id=0):
    """GPU `device_id`. Creating the context needs no device; using it (arrays, binds,
    Module) on a machine without one raises LoomError("no CUDA device: gpu(i) is not
    available (...)")."""
    return Context("gpu", device_id)


def num_gpus():
    """CUDA devices usable here (0 without a device or a driver, as in MXNet)."""
    return _loom.num_gpus()


def current_context():
    """The innermost `with ctx:` context, else cpu()."""
    s = _stack()
    return s[-1] if s else cpu()


Context.default_ctx = cpu()
