"""mx.nd: NDArray, array creation, .params save/load and every registered op as an
imperative function (run through the same kernels as the executor)."""
import builtins
import ctypes
import sys
import weakref

import numpy as np

from . import _loom, _ops
from .base import MXNetError, LoomError, ShapeError, _Null, dtype_str, is_number, param_str
from .context import Context, cpu, current_context

NDArray = _loom.NDArray
_module = sys.modules[__name__]
#: Python's slice (MXNet's ndarray module names it py_slice, its own slice being the op).
py_slice = builtins.slice


def _ctx(ctx):
    return current_context() if ctx is None else ctx


# ---------------------------------------------------------------------------------------
# creation

def array(source_array, ctx=None, dtype=None):
    """An NDArray copied from `source_array` (NumPy array, nested lists, scalar or NDArray).
    dtype defaults to float32 for non-NDArray sources, as in MXNet."""
    if isinstance(source_array, NDArray):
        dt = source_array.dtype if dtype is None else dtype
        out = empty(source_array.shape, ctx if ctx is not None else source_array.context, dt)
        out[:] = source_array
        return out
    if np.ndim(source_array) == 0 and not isinstance(source_array, (list, tuple)):
        # a scalar or 0-d array gives a 0-d NDArray, as in MXNet
        one = _loom._array(np.reshape(np.asarray(source_array), (1,)),
                           "float32" if dtype is None else dtype, _ctx(ctx))
        return one._reshape_view(())
    return _loom._array(source_array, "float32" if dtype is None else dtype, _ctx(ctx))


def _creation_shape(shape, fn):
    """MXNet's legacy shape rule for new arrays: no scalar () and no zero-size dims; both
    are allowed under mx.np_shape()."""
    s = _shape(shape)
    from .util import is_np_shape
    if not is_np_shape() and (len(s) == 0 or 0 in s):
        raise MXNetError("%s: shape %s has %s; legacy (MXNet 1.x) shapes use 0 for an "
                         "unknown dimension (use mx.np_shape() for scalar and zero-size arrays)"
                         % (fn, s, "no dimensions" if len(s) == 0 else "a 0 dimension"))
    return s


def empty(shape, ctx=None, dtype=None):
    """Uninitialised array (zero-filled by the allocator is not guaranteed)."""
    return _loom._empty(_creation_shape(shape, "empty"), dtype, _ctx(ctx))


def zeros(shape, ctx=None, dtype=None, out=None, **kwargs):
    """An array of zeros; with out=, fills that array instead and returns it."""
    if out is not None:
        out[:] = 0
        return out
    return _loom._full(_creation_shape(shape, "zeros"), 0.0, dtype, _ctx(ctx))


def ones(shape, ctx=None, dtype=None, out=None, **kwargs):
    """An array of ones; with out=, fills that array instead and returns it."""
    if out is not None:
        out[:] = 1
        return out
    return _loom._full(_creation_shape(shape, "ones"), 1.0, dtype, _ctx(ctx))


def full(shape, val, ctx=None, dtype=None, out=None):
    if out is not None:
        out[:] = val
        return out
    return _loom._full(_creation_shape(shape, "full"), float(val), dtype, _ctx(ctx))


def zeros_like(data, **kwargs):
    return zeros(data.shape, data.context, data.dtype)


def ones_like(data, **kwargs):
    return ones(data.shape, data.context, data.dtype)


def arange(start, stop=None, step=1.0, repeat=1, infer_range=None, ctx=None, dtype=None):
    """Evenly spaced values in [start, stop) (op _arange, MXNet 1.9.1's values in every dtype:
    integer and float16 types take start and step truncated, uint8 wraps); each repeated
    `repeat` times. infer_range is accepted and ignored, as in MXNet."""
    attrs = {"start": start, "stop": stop, "step": step, "repeat": repeat,
             "dtype": np.dtype(dtype or "float32").name}
    return invoke("_arange", [], {k: str(v) for k, v in attrs.items()}, ctx=_ctx(ctx))


def concatenate(arrays, axis=0, always_copy=True):
    return array(np.concatenate([a.asnumpy() for a in arrays], axis=axis), arrays[0].context,
                 arrays[0].dtype)


def waitall():
    """Loom runs synchronously; nothing to wait for."""


def _shape(shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


# ---------------------------------------------------------------------------------------
# .params files

def save(fname, data):
    """Saves an NDArray, a list of NDArrays or a dict str -> NDArray as MXNet's .params."""
    names, arrays = _to_named(data)
    _loom._save_params(str(fname), names, arrays, _np_shape_flag())


def load(fname):
    """Loads a .params file: a dict when it was saved from a dict, else a list."""
    names, arrays = _loom._load_params(str(fname), _np_shape_flag())
    return dict(zip(names, arrays)) if names else list(arrays)


def load_frombuffer(buf):
    names, arrays = _loom._load_params_bytes(bytes(buf), _np_shape_flag())
    return dict(zip(names, arrays)) if names else list(arrays)


def save_tobuffer(data):
    names, arrays = _to_named(data)
    return _loom._save_params_bytes(names, arrays, _np_shape_flag())


def _np_shape_flag():
    # MXNet writes V3 records under np_shape and V2 otherwise, and loads each only in its
    # own mode; the C++ side applies that rule.
    from .util import is_np_shape
    return is_np_shape()


def _to_named(data):
    if isinstance(data, NDArray):
        return [], [data]
    if isinstance(data, dict):
        for k, v in data.items():
            if not isinstance(k, str) or not isinstance(v, NDArray):
                raise ValueError("save: a dict must map str to NDArray, got %r -> %s" %
                                 (k, type(v).__name__))
        return list(data.keys()), list(data.values())
    if isinstance(data, (list, tuple)):
        for v in data:
            if not isinstance(v, NDArray):
                raise ValueError("save: list items must be NDArrays, got %s" % type(v).__name__)
        return [], list(data)
    raise ValueError("data needs to either be a NDArray, dict of str, NDArray pairs or a list "
                     "of NDArrays")


# ---------------------------------------------------------------------------------------
# imperative op calls

def invoke(op, inputs, attrs=None, out=None, is_train=False, ctx=None):
    """Runs registered op `op` on NDArray inputs; returns one NDArray or a list."""
    res = _loom._invoke(op, list(inputs), attrs or {}, out, is_train, ctx)
    if out is not None:
        return out
    return res[0] if len(res) == 1 else res


def _make_function(func_name, info):
    op_name = info.name
    param_names = set(info.param_names)
    param_list = list(info.param_names)

    input_list = list(info.inputs) if info.inputs and not info.variadic else None

    def fn(*args, **kwargs):
        out = kwargs.pop("out", None)
        kwargs.pop("name", None)
        ctx = kwargs.pop("ctx", None)
        is_train = kwargs.pop("is_train", False)
        if input_list and any(a is None for a in args[:len(input_list)]):
            # op(data, weight, None, ...): None leaves an input out; pass inputs by name
            for n, a in zip(input_list, args):
                if a is not None:
                    if n in kwargs:
                        raise TypeError("%s: got multiple values for argument '%s'"
                                        % (func_name, n))
                    kwargs[n] = a
            args = tuple(args[len(input_list):])
        inputs = []
        extra = []
        for a in args:
            if isinstance(a, NDArray):
                inputs.append(a)
            elif isinstance(a, (list, tuple)) and a and all(isinstance(x, NDArray) for x in a):
                inputs.extend(a)
            elif isinstance(a, np.ndarray):
                inputs.append(array(a))
            elif not info.variadic and len(extra) < len(param_list):
                extra.append(a)     # MXNet's signatures: inputs, then parameters in order
            else:
                raise TypeError("%s: positional arguments must be NDArrays, got %s" %
                                (func_name, type(a).__name__))
        for pname, v in zip(param_list, extra):
            if pname in kwargs:
                raise TypeError("%s: got multiple values for argument '%s'" % (func_name, pname))
            kwargs[pname] = v
        named, attrs = {}, {}
        for k, v in kwargs.items():
            if isinstance(v, NDArray):
                named[k] = v
            elif v is _Null or (v is None and k not in param_names):
                continue
            elif k == "dtype" and v is not None:
                attrs[k] = dtype_str(v)
            else:
                attrs[k] = param_str(v)
        if named:
            try:
                names = list(_loom._op_inputs(op_name, attrs))   # e.g. no bias with no_bias
            except Exception:  # noqa: BLE001 - fall back to the registry's list
                if info.inputs is None or info.variadic:
                    raise
                names = list(info.inputs)
            slots = inputs + [None] * builtins.max(0, len(names) - len(inputs))
            for k, v in named.items():
                if k not in names:
                    raise TypeError("%s: unknown input '%s' (inputs: %s)" %
                                    (func_name, k, ", ".join(names)))
                slots[names.index(k)] = v
            missing = [names[i] for i, s in enumerate(slots) if s is None]
            if missing:
                raise TypeError("%s: missing input(s) %s" % (func_name, ", ".join(missing)))
            inputs = slots
        return invoke(op_name, inputs, attrs, out, is_train, ctx)

    return fn


_ops.install(_module, _make_function, "NDArray")


# ---------------------------------------------------------------------------------------
# NDArray methods (added to the compiled class)

def _op(name):
    return _ops.find(name) is not None


def _binary(lhs, rhs, elem, bcast, scalar, rscalar=None, reverse=False):
    if isinstance(rhs, np.ndarray):
        rhs = array(rhs, lhs.context, lhs.dtype)
    if isinstance(rhs, NDArray):
        a, b = (rhs, lhs) if reverse else (lhs, rhs)
        if a.shape == b.shape:
            return invoke(elem, [a, b])
        if bcast is None or not _op(bcast):
            return array(_NP_BINARY[elem](a.asnumpy(), b.asnumpy()), a.context, a.dtype)
        return invoke(bcast, [a, b])
    if is_number(rhs):
        op = rscalar if reverse else scalar
        return invoke(op, [lhs], {"scalar": str(float(rhs))})
    return NotImplemented


_NP_BINARY = {
    "elemwise_add": np.add, "elemwise_sub": np.subtract, "elemwise_mul": np.multiply,
    "elemwise_div": np.divide, "_power": np.power,
}

_ARITH = {
    "add": ("elemwise_add", "broadcast_add", "_plus_scalar", "_plus_scalar"),
    "sub": ("elemwise_sub", "broadcast_sub", "_minus_scalar", "_rminus_scalar"),
    "mul": ("elemwise_mul", "broadcast_mul", "_mul_scalar", "_mul_scalar"),
    "truediv": ("elemwise_div", "broadcast_div", "_div_scalar", "_rdiv_scalar"),
    "pow": ("_power", "broadcast_power", "_power_scalar", "_rpower_scalar"),
}


def _install_arith():
    for short, (elem, bcast, scalar, rscalar) in _ARITH.items():
        def fwd(self, other, _e=elem, _b=bcast, _s=scalar, _r=rscalar):
            return _binary(self, other, _e, _b, _s, _r)

        def rev(self, other, _e=elem, _b=bcast, _s=scalar, _r=rscalar):
            return _binary(self, other, _e, _b, _s, _r, reverse=True)

        def inplace(self, other, _e=elem, _b=bcast, _s=scalar, _r=rscalar):
            res = _binary(self, other, _e, _b, _s, _r)
            if res is NotImplemented:
                return res
            self._copy_from(res)
            return self

        setattr(NDArray, "__%s__" % short, fwd)
        setattr(NDArray, "__r%s__" % short, rev)
        setattr(NDArray, "__i%s__" % short, inplace)
    NDArray.__div__ = NDArray.__truediv__
    NDArray.__rdiv__ = NDArray.__rtruediv__
    NDArray.__idiv__ = NDArray.__itruediv__


_install_arith()


NDArray.__hash__ = object.__hash__
NDArray.__array_priority__ = 1000.0


def _neg(self):
    return invoke("_mul_scalar", [self], {"scalar": "-1.0"})


def _basic_view(self, key):
    """A view sharing memory for an int or step-1 slice along axis 0, else None."""
    shape = self.shape
    if isinstance(key, (int, np.integer)) and len(shape) > 0:
        i = int(key)
        if i < 0:
            i += shape[0]
        if not 0 <= i < shape[0]:
            raise IndexError("index %d is out of bounds for axis 0 with size %d" % (key, shape[0]))
        v = self._slice(i, i + 1)
        return v._reshape_view(shape[1:]) if len(shape) > 1 else v
    if isinstance(key, builtins.slice) and key.step in (None, 1) and len(shape) > 0:
        start, stop, _ = key.indices(shape[0])
        if stop <= start:
            return None
        if start == 0 and stop == shape[0]:
            return self._slice(0, shape[0]) if not self._is_none else self
        return self._slice(start, stop)
    if isinstance(key, tuple) and 0 < len(key) <= len(shape) and \
            any(isinstance(k, builtins.slice) for k in key) and \
            all(isinstance(k, (int, np.integer, builtins.slice)) for k in key):
        return _tuple_view(self, key, shape)
    return None


def _tuple_view(self, key, shape):
    """A view for basic indexing by a tuple of ints and slices when the selection is one
    contiguous block (as MXNet's: writing to it writes the array), else None."""
    key = tuple(key) + (builtins.slice(None),) * (len(shape) - len(key))
    slcs, out_shape = [], []
    for k, n in zip(key, shape):
        if isinstance(k, builtins.slice):
            slcs.append(k)
            out_shape.append(len(range(*k.indices(n))))
        else:
            i = int(k) + (n if int(k) < 0 else 0)
            if not 0 <= i < n:
                raise IndexError("index %d is out of bounds for an axis of size %d" % (k, n))
            slcs.append(builtins.slice(i, i + 1))
    if 0 in out_shape or not _slice_is_contiguous(slcs, shape):
        return None
    offset, stride = 0, 1
    for slc, n in zip(reversed(slcs), reversed(shape)):
        offset += range(*slc.indices(n))[0] * stride
        stride *= n
    size = int(np.prod([len(range(*sl.indices(n))) for sl, n in zip(slcs, shape)]))
    flat = self._reshape_view((int(np.prod(shape)),))._slice(offset, offset + size)
    return flat._reshape_view(tuple(out_shape))


def _getitem(self, key):
    v = _basic_view(self, key)
    if v is not None:
        return v
    if isinstance(key, NDArray):
        key = key.asnumpy().astype(np.int64)
    elif isinstance(key, tuple):
        key = tuple(k.asnumpy().astype(np.int64) if isinstance(k, NDArray) else k for k in key)
    elif isinstance(key, list):
        key = np.asarray(key)
    res = self.asnumpy(copy=False)[key]
    return array(np.asarray(res), self.context, self.dtype)


def _setitem(self, key, value):
    if isinstance(key, builtins.slice) and key == builtins.slice(None):
        target = self
    else:
        target = _basic_view(self, key)
    if target is None:
        if self.context.device_type != "cpu":
            host = self.asnumpy()
            host[key] = value.asnumpy() if isinstance(value, NDArray) else value
            self._set_numpy(host)
            return
        view = self._numpy_view()
        view[key] = value.asnumpy() if isinstance(value, NDArray) else value
        return
    if isinstance(value, NDArray):
        if value.shape == target.shape:
            if value.dtype != target.dtype:
                value = value.astype(target.dtype)
            target._copy_from(value)
        else:
            target._set_numpy(value.asnumpy())
    elif is_number(value):
        target._fill(float(value))
    else:
        target._set_numpy(value)


def _repr(self):
    if self._is_none:
        return "<NDArray (none) @%s>" % self.context
    shape = "x".join(str(s) for s in self.shape)
    return "\n%s\n<NDArray %s @%s>" % (str(self.asnumpy()), shape, self.context)


def _astype(self, dtype, copy=True):
    if not copy and np.dtype(dtype) == np.dtype(self.dtype):
        return self
    if _op("Cast"):
        return invoke("Cast", [self], {"dtype": dtype_str(dtype)})
    return array(self.asnumpy().astype(dtype), self.context, dtype)


def _copyto(self, other):
    if isinstance(other, NDArray):
        if other._same_memory(self):
            return other
        other[:] = self
        return other
    if isinstance(other, Context):
        return self._copy(other)
    raise TypeError("copyto does not support type " + type(other).__name__)


def _as_in_context(self, context):
    if self.context == context:
        return self
    return self._copy(context)


def _reshape(self, *shape, **kwargs):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    shape = kwargs.get("shape", shape)
    out = reshape_shape(self.shape, shape, kwargs.get("reverse", False))
    return self._reshape_view(tuple(out))


class _ReshapeError(ShapeError, ValueError):
    """A reshape to a different number of elements: Loom's ShapeError, and the ValueError
    MXNet raises."""


def reshape_shape(src, shape, reverse=False):
    """The shape MXNet's Reshape gives `src` for `shape`, with its special values: 0 copies
    a dimension, -1 is inferred, -2 copies all the remaining ones, -3 merges two, -4 splits
    one into the next two values (one of which may be -1); reverse=True matches from the
    right."""
    src = [int(d) for d in src]
    shape = [int(d) for d in shape]
    if reverse:
        src_r, shp = src[::-1], []
        i = 0
        while i < len(shape):       # keep each -4's two operands after it when reversing
            if shape[i] == -4:
                shp.append(shape[i:i + 3])
                i += 3
            else:
                shp.append([shape[i]])
                i += 1
        flat = []
        for part in shp[::-1]:
            flat += part if part[0] != -4 else [-4, part[2], part[1]]
        return reshape_shape(src_r, flat)[::-1]
    out, infer, k, i = [], None, 0, 0
    total = int(np.prod(src)) if src else 1

    def bad():
        return _ReshapeError("cannot reshape array of shape %s into %s"
                             % (tuple(src), tuple(shape)))
    while i < len(shape):
        s = shape[i]
        if s == 0:
            if k >= len(src):
                raise bad()
            out.append(src[k])
            k += 1
        elif s == -1:
            if infer is not None:
                raise ShapeError("reshape: only one dimension can be -1")
            infer = len(out)
            out.append(1)
            k += 1
        elif s == -2:
            out.extend(src[k:])
            k = len(src)
        elif s == -3:
            if k + 1 >= len(src):
                raise bad()
            out.append(src[k] * src[k + 1])
            k += 2
        elif s == -4:
            if i + 2 >= len(shape) or k >= len(src):
                raise bad()
            d0, d1 = shape[i + 1], shape[i + 2]
            whole = src[k]
            if d0 == -1:
                d0 = whole // d1 if d1 else 0
            if d1 == -1:
                d1 = whole // d0 if d0 else 0
            if d0 * d1 != whole:
                raise bad()
            out.extend([d0, d1])
            k += 1
            i += 2
        elif s > 0:
            out.append(s)
            k += 1
        else:
            raise bad()
        i += 1
    if infer is not None:
        known = int(np.prod([d for j, d in enumerate(out) if j != infer]))
        out[infer] = total // known if known else 0
    if int(np.prod(out)) != total:
        raise bad()
    return out


def _asscalar(self):
    if self.size != 1:
        raise ValueError("The current array is not a scalar")
    # a NumPy scalar of the array's dtype, as MXNet returns (np.float32 for float32 data)
    return self.asnumpy().reshape(())[()]


def _array_protocol(self, dtype=None, copy=None):
    a = self.asnumpy() if copy else self.asnumpy(copy=False)
    return a if dtype is None else a.astype(dtype, copy=False)


def _len(self):
    return self.shape[0] if self.shape else 0


def _iter(self):
    for i in range(_len(self)):
        yield self[i]


def _bool(self):
    if self.size == 0:
        return False
    if self.size == 1:
        return bool(self.asscalar())
    raise ValueError("The truth value of an NDArray with multiple elements is ambiguous.")


def _reduce(self):
    return (_unpickle, (self.asnumpy(), str(np.dtype(self.dtype))))


def _unpickle(data, dtype):
    return array(data, dtype=dtype)


def _expand_dims(self, axis, inplace=False):
    """A new array with a size-1 axis inserted at `axis`; inplace=True gives a view sharing
    this array's memory."""
    if not inplace:
        return invoke("expand_dims", [self], {"axis": str(int(axis))})
    shape = list(self.shape)
    a = int(axis)
    if not -len(shape) - 1 <= a <= len(shape):
        raise ValueError("axis %d is out of range for %d dimensions" % (a, len(shape)))
    shape.insert(a if a >= 0 else a + len(shape) + 1, 1)
    return self._reshape_view(tuple(shape))


def _flatten(self, inplace=False):
    """(d0, d1*d2*...); inplace=True gives a view sharing this array's memory."""
    if not inplace:
        return invoke("Flatten", [self])
    shape = self.shape
    rest = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return self._reshape_view((shape[0], rest) if shape else (1, 1))


def _squeeze(self, axis=None, inplace=False):
    """This array without its size-1 axes (or the given ones); inplace=True gives a view."""
    shape = list(self.shape)
    if axis is None:
        axes = [i for i, d in enumerate(shape) if d == 1]
    else:
        axes = [int(a) % len(shape) for a in (axis if isinstance(axis, (list, tuple)) else [axis])]
        for a in axes:
            if shape[a] != 1:
                raise ValueError("cannot select an axis to squeeze out which has size not "
                                 "equal to one")
    new = tuple(d for i, d in enumerate(shape) if i not in axes) or (1,)
    if not inplace:
        return self._reshape_view(new).copy()
    return self._reshape_view(new)


_LIST_HEADER = 24       # .params list format: magic 0x112, reserved, count (uint64 each)


def _getstate(self):
    """{'handle': the array in MXNet's single-NDArray binary form}, as MXNet's
    NDArray.__getstate__."""
    buf = save_tobuffer([self])
    return {"handle": bytearray(buf[_LIST_HEADER:-8])}


def _setstate(self, state):
    """Loads MXNet's single-NDArray bytes (from __getstate__) into this array; arrays saved
    on a GPU load on the CPU when there is none."""
    import struct
    raw = bytes(state["handle"])
    loaded = load_frombuffer(struct.pack("<QQQ", 0x112, 0, 1) + raw + struct.pack("<Q", 0))[0]
    if loaded.shape != self.shape:
        raise ValueError("__setstate__: saved shape %s differs from this array's %s (Loom arrays "
                         "keep their shape)" % (loaded.shape, self.shape))
    self[:] = loaded.astype(self.dtype) if loaded.dtype != self.dtype else loaded


NDArray.__getstate__ = _getstate
NDArray.__setstate__ = _setstate
NDArray.__reduce__ = _reduce
NDArray.__abs__ = lambda self: invoke("abs", [self])
NDArray.expand_dims = _expand_dims
NDArray.flatten = _flatten
NDArray.squeeze = _squeeze
NDArray.__neg__ = _neg
NDArray.__pos__ = lambda self: self
def _slice_is_contiguous(slc_key, shape):
    """Whether basic indexing with `slc_key` (one slice per axis of `shape`) selects a
    contiguous block: scanning axes from the last, once an axis keeps only part of its
    extent every axis before it must keep at most one element, and no axis may step by
    other than 1 over several elements. Empty or one-element selections are contiguous."""
    if len(slc_key) != len(shape):
        raise ValueError("one slice per axis is needed: %d slices for shape %s"
                         % (len(slc_key), tuple(shape)))
    lengths = [len(range(*slc.indices(n))) for slc, n in zip(slc_key, shape)]
    if int(np.prod(lengths)) <= 1:
        return True
    partial = False
    for slc, n, count in zip(reversed(slc_key), reversed(shape), reversed(lengths)):
        step = slc.indices(n)[2]
        if count == 0:
            return True
        if count > 1 and step != 1:
            return False
        if partial and count > 1:
            return False
        if count < n:
            partial = True
    return True


NDArray._basic_indexing_slice_is_contiguous = staticmethod(_slice_is_contiguous)
NDArray.__getitem__ = _getitem
NDArray.__setitem__ = _setitem
NDArray.__repr__ = _repr
NDArray.__str__ = _repr
NDArray.__len__ = _len
NDArray.__iter__ = _iter
NDArray.__bool__ = _bool
NDArray.__array__ = _array_protocol
NDArray.astype = _astype
NDArray.copy = lambda self: self._copy()
NDArray.copyto = _copyto
NDArray.as_in_context = _as_in_context
NDArray.as_in_ctx = _as_in_context
NDArray.reshape = _reshape
NDArray.asscalar = _asscalar
NDArray.wait_to_read = lambda self: None
NDArray.wait_to_write = lambda self: None
NDArray.T = property(lambda self: invoke("transpose", [self]))
NDArray.handle = property(lambda self: self)

# MXNet code that works with raw handles (a monitor callback doing
# `NDArray(ctypes.cast(arr, NDArrayHandle), writable=False)`) gets a token: ctypes takes an
# NDArray through _as_parameter_ (a c_void_p naming it in a weak table), and NDArray(handle)
# looks the token up. A token outlives nothing: once the array is gone it is refused.
_lent = weakref.WeakValueDictionary()


def _as_parameter(self):
    _lent[id(self)] = self
    return ctypes.c_void_p(id(self))


def _from_handle(handle):
    key = handle.value if isinstance(handle, ctypes.c_void_p) else handle
    arr = _lent.get(key) if isinstance(key, int) else None
    if arr is None:
        raise LoomError("NDArray(handle): %r is not the handle of a live Loom NDArray (Loom "
                        "hands out handles through ctypes, e.g. ctypes.cast(arr, NDArrayHandle))"
                        % (handle,))
    return arr


NDArray._as_parameter_ = property(_as_parameter)

# Fluent methods: x.exp(), x.sum(axis=1), x.flatten(), ... where the op exists.
_FLUENT = ["abs", "sign", "round", "floor", "ceil", "sqrt", "rsqrt", "square", "exp", "expm1",
           "log", "log1p", "reciprocal", "relu", "sigmoid", "tanh", "softmax", "log_softmax",
           "sum", "mean", "max", "min", "transpose", "clip",
           "slice_axis", "split", "negative"]
for _name in _FLUENT:
    if _op(_name) and hasattr(_module, _name):
        setattr(NDArray, _name, (lambda f: lambda self, *a, **k: f(self, *a, **k))(getattr(_module, _name)))

# MXNet's full list of fluent methods; each is installed when Loom has the op (the rest stay
# missing rather than failing at call time).
_FLUENT_ALL = ["reshape_like", "zeros_like", "ones_like", "broadcast_axes", "repeat", "pad",
               "swapaxes", "split_v2", "slice", "slice_like", "take", "one_hot", "pick", "sort",
               "topk", "argsort", "argmax", "argmax_channel", "argmin", "shape_array",
               "size_array", "tile", "flip", "depth_to_space", "space_to_depth", "diag",
               "nansum", "prod", "nanprod", "norm", "rint", "fix", "trunc", "sin", "cos", "tan",
               "arcsin", "arccos", "arctan", "degrees", "radians", "sinh", "cosh", "arcsinh",
               "arccosh", "arctanh", "log10", "log2", "cbrt", "rcbrt", "softmin", "squeeze",
               "broadcast_to", "broadcast_like"]
for _name in _FLUENT_ALL:
    if _name not in vars(NDArray) and _op(_name) and hasattr(_module, _name):
        setattr(NDArray, _name, (lambda f: lambda self, *a, **k: f(self, *a, **k))(getattr(_module, _name)))


# ---------------------------------------------------------------------------------------
# MXNet's Python-level elementwise functions (mx.nd.maximum, mx.nd.equal, ...): numbers and
# arrays in any combination, broadcasting. They use Loom's broadcast / scalar ops where
# those exist and NumPy on the host otherwise (comparisons return the input's dtype, as in
# MXNet).

def _np_mod(a, b):
    # MXNet's mod: the sign of the divisor (Python's %), and 0 where the divisor is 0
    b_safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.mod(a, b_safe))


def _elementwise(lhs, rhs, np_fn, bcast=None, scalar=None, rscalar=None, out=None):
    if is_number(lhs) and is_number(rhs):
        r = np_fn(lhs, rhs)
        return r.item() if isinstance(r, np.generic) else r
    if isinstance(lhs, np.ndarray):
        lhs = array(lhs)
    if isinstance(rhs, np.ndarray):
        rhs = array(rhs)
    res = None
    if isinstance(lhs, NDArray) and isinstance(rhs, NDArray):
        if bcast and _op(bcast):
            res = invoke(bcast, [lhs, rhs])
        else:
            dt = lhs.dtype
            res = array(np.asarray(np_fn(lhs.asnumpy(), rhs.asnumpy())).astype(dt), lhs.context, dt)
    elif isinstance(lhs, NDArray) and is_number(rhs):
        if scalar and _op(scalar):
            res = invoke(scalar, [lhs], {"scalar": str(float(rhs))})
        else:
            dt = lhs.dtype
            res = array(np.asarray(np_fn(lhs.asnumpy(), rhs)).astype(dt), lhs.context, dt)
    elif is_number(lhs) and isinstance(rhs, NDArray):
        if rscalar and _op(rscalar):
            res = invoke(rscalar, [rhs], {"scalar": str(float(lhs))})
        else:
            dt = rhs.dtype
            res = array(np.asarray(np_fn(lhs, rhs.asnumpy())).astype(dt), rhs.context, dt)
    else:
        raise TypeError("type %s and %s not supported" % (type(lhs).__name__, type(rhs).__name__))
    if out is not None:
        out[:] = res
        return out
    return res


def add(lhs, rhs):
    """lhs + rhs, broadcasting (MXNet's mx.nd.add)."""
    return _elementwise(lhs, rhs, np.add, "broadcast_add", "_plus_scalar", "_plus_scalar")


def subtract(lhs, rhs):
    """lhs - rhs, broadcasting."""
    return _elementwise(lhs, rhs, np.subtract, "broadcast_sub", "_minus_scalar", "_rminus_scalar")


def multiply(lhs, rhs):
    """lhs * rhs, broadcasting."""
    return _elementwise(lhs, rhs, np.multiply, "broadcast_mul", "_mul_scalar", "_mul_scalar")


def divide(lhs, rhs):
    """lhs / rhs, broadcasting."""
    return _elementwise(lhs, rhs, np.true_divide, "broadcast_div", "_div_scalar", "_rdiv_scalar")


true_divide = divide


def modulo(lhs, rhs):
    """lhs % rhs, broadcasting (the result has the divisor's sign; x % 0 is 0)."""
    return _elementwise(lhs, rhs, _np_mod, "broadcast_mod", "_mod_scalar", "_rmod_scalar")


def power(base, exp):
    """base ** exp, broadcasting."""
    return _elementwise(base, exp, np.power, "broadcast_power", "_power_scalar", "_rpower_scalar")


def maximum(lhs, rhs):
    """Elementwise maximum, broadcasting."""
    return _elementwise(lhs, rhs, np.maximum, "broadcast_maximum", "_maximum_scalar",
                        "_maximum_scalar")


def minimum(lhs, rhs):
    """Elementwise minimum, broadcasting."""
    return _elementwise(lhs, rhs, np.minimum, "broadcast_minimum", "_minimum_scalar",
                        "_minimum_scalar")


def hypot(lhs, rhs):
    """sqrt(lhs**2 + rhs**2), broadcasting."""
    return _elementwise(lhs, rhs, np.hypot, "broadcast_hypot", "_hypot_scalar", "_hypot_scalar")


def equal(lhs, rhs):
    """1 where lhs == rhs else 0, in the arrays' dtype, broadcasting."""
    return _elementwise(lhs, rhs, np.equal, "broadcast_equal", "_equal_scalar", "_equal_scalar")


def not_equal(lhs, rhs):
    """1 where lhs != rhs else 0, broadcasting."""
    return _elementwise(lhs, rhs, np.not_equal, "broadcast_not_equal", "_not_equal_scalar",
                        "_not_equal_scalar")


def greater(lhs, rhs):
    """1 where lhs > rhs else 0, broadcasting."""
    return _elementwise(lhs, rhs, np.greater, "broadcast_greater", "_greater_scalar",
                        "_lesser_scalar")


def greater_equal(lhs, rhs):
    """1 where lhs >= rhs else 0, broadcasting."""
    return _elementwise(lhs, rhs, np.greater_equal, "broadcast_greater_equal",
                        "_greater_equal_scalar", "_lesser_equal_scalar")


def lesser(lhs, rhs):
    """1 where lhs < rhs else 0, broadcasting."""
    return _elementwise(lhs, rhs, np.less, "broadcast_lesser", "_lesser_scalar",
                        "_greater_scalar")


def lesser_equal(lhs, rhs):
    """1 where lhs <= rhs else 0, broadcasting."""
    return _elementwise(lhs, rhs, np.less_equal, "broadcast_lesser_equal",
                        "_lesser_equal_scalar", "_greater_equal_scalar")


def logical_and(lhs, rhs):
    """1 where both are nonzero else 0, broadcasting."""
    return _elementwise(lhs, rhs, np.logical_and, "broadcast_logical_and",
                        "_logical_and_scalar", "_logical_and_scalar")


def logical_or(lhs, rhs):
    """1 where either is nonzero else 0, broadcasting."""
    return _elementwise(lhs, rhs, np.logical_or, "broadcast_logical_or", "_logical_or_scalar",
                        "_logical_or_scalar")


def logical_xor(lhs, rhs):
    """1 where exactly one is nonzero else 0, broadcasting."""
    return _elementwise(lhs, rhs, np.logical_xor, "broadcast_logical_xor",
                        "_logical_xor_scalar", "_logical_xor_scalar")


def _mod(self, other):
    return modulo(self, other)


def _rmod(self, other):
    return modulo(other, self)


def _imod(self, other):
    self._copy_from(modulo(self, other))
    return self


NDArray.__mod__ = _mod
NDArray.__rmod__ = _rmod
NDArray.__imod__ = _imod


def moveaxis(tensor, source, destination):
    """The array with axes `source` moved to `destination` (ints or equal-length lists),
    the other axes keeping their order (numpy.moveaxis)."""
    nd_ = tensor.ndim

    def norm(ax, what):
        axes = [ax] if isinstance(ax, (int, np.integer)) else list(ax)
        out = []
        for a in axes:
            a = int(a)
            if not -nd_ <= a < nd_:
                raise ValueError("%s axis %d is out of range for an array of %d dimensions"
                                 % (what, a, nd_))
            out.append(a % nd_)
        if len(set(out)) != len(out):
            raise ValueError("repeated axis in %s argument" % what)
        return out

    src, dst = norm(source, "source"), norm(destination, "destination")
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of "
                         "elements")
    order = [a for a in range(nd_) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return invoke("transpose", [tensor], {"axes": param_str(tuple(order))})


def onehot_encode(indices, out):
    """Writes the one-hot rows of `indices` (shape (n,)) into `out` (shape (n, depth)) and
    returns it (MXNet's legacy mx.nd.onehot_encode)."""
    idx = indices.asnumpy().astype(np.int64)
    depth = out.shape[1]
    res = np.zeros(out.shape, dtype=np.dtype(out.dtype))
    ok = (idx >= 0) & (idx < depth)
    res[np.arange(len(idx))[ok], idx[ok]] = 1
    out[:] = res
    return out


def linspace(start, stop, num, endpoint=True, ctx=None, dtype=None):
    """`num` evenly spaced values from start to stop (numpy.linspace), float32 by default."""
    a = np.linspace(start, stop, int(num), endpoint=endpoint)
    dt = np.dtype(dtype or "float32")
    return array(a.astype(dt), ctx, dt)


def eye(N, M=0, k=0, ctx=None, dtype=None, **kwargs):
    """An N x M (M=0: N x N) array with ones on diagonal k."""
    dt = np.dtype(dtype or "float32")
    return array(np.eye(int(N), int(M) if M else None, int(k), dtype=dt), ctx, dt)


def from_numpy(ndarray, zero_copy=True):
    """An NDArray with the NumPy array's contents. zero_copy=True (MXNet's default) shares
    the NumPy array's memory instead of copying: the array must be C-contiguous (else
    ValueError) and becomes read-only, since writes to it would bypass Loom (writes through
    the NDArray are seen by it). zero_copy=False copies."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError("from_numpy expects a numpy.ndarray, got %s" % type(ndarray).__name__)
    if not zero_copy:
        return array(ndarray, dtype=ndarray.dtype)
    if not ndarray.flags["C_CONTIGUOUS"]:
        raise ValueError("from_numpy(zero_copy=True): only C-contiguous arrays can be shared "
                         "without a copy (use np.ascontiguousarray or zero_copy=False)")
    if ndarray.dtype.name not in _DLPACK_DTYPES:
        raise ValueError("from_numpy: dtype %s is not supported (Loom takes %s)"
                         % (ndarray.dtype, ", ".join(_DLPACK_DTYPES)))
    ndarray.flags["WRITEABLE"] = False
    return _loom._adopt_numpy(ndarray)


_DLPACK_DTYPES = ("float32", "float64", "float16", "uint8", "int8", "int32", "int64", "bool")


def to_dlpack_for_read(data):
    """A DLPack capsule viewing `data`'s memory without a copy (MXNet's
    mx.nd.to_dlpack_for_read). Loom runs synchronously: nothing is pending to wait for."""
    return data.to_dlpack_for_read()


def to_dlpack_for_write(data):
    """A DLPack capsule viewing `data`'s memory without a copy, for writing through it
    (MXNet's mx.nd.to_dlpack_for_write)."""
    return data.to_dlpack_for_write()


def from_dlpack(dlpack):
    """An NDArray on the memory of a DLPack capsule (consumed: it cannot be used twice) or of
    an object with __dlpack__ (a NumPy >= 1.22 array, ...), without a copy: a Loom capsule
    gives back a view of its array; another producer's compact tensor is kept alive by the
    NDArray; a strided one is copied."""
    return _loom._from_dlpack(dlpack)


def _operator(fn):
    """An NDArray comparison operator (==, >, ...) running the module function `fn`
    (MXNet's dtype rules: the scalar is converted to the array's dtype, 1/0 in that dtype);
    other operand types fall back to Python's default."""
    def op(self, other):
        if isinstance(other, np.ndarray):
            other = array(other, self.context, self.dtype)
        if isinstance(other, NDArray) or is_number(other):
            return fn(self, other)
        return NotImplemented
    return op


for _n, _fn in (("eq", equal), ("ne", not_equal), ("gt", greater), ("ge", greater_equal),
                ("lt", lesser), ("le", lesser_equal)):
    setattr(NDArray, "__%s__" % _n, _operator(_fn))


_internal = _ops.internal_module(_module)
# mx.nd.linalg.X (ops _linalg_X) and mx.nd.image.X (ops _image_X), as in MXNet.
linalg = _ops.prefix_namespace(__name__ + ".linalg", _module, "_linalg_",
                               "mx.nd.linalg: linear-algebra operators, imperative.", "linalg")
image = _ops.prefix_namespace(__name__ + ".image", _module, "_image_",
                              "mx.nd.image: image operators, imperative.", "image")

# MXNet's Python-level split_v2 and histogram (over the _split_v2 / _histogram ops).
from ._split_v2 import split_v2_nd as split_v2, histogram_nd as histogram  # noqa: E402
NDArray.split_v2 = lambda self, *a, **k: split_v2(self, *a, **k)
