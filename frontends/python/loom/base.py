"""Errors and small helpers shared by the loom package (MXNet's mxnet.base)."""
import ctypes
import numbers

import numpy as np

from . import _loom

LoomError = _loom.LoomError
#: MXNet code catches mx.base.MXNetError; in Loom it is the same class as LoomError.
MXNetError = LoomError
JsonError = _loom.JsonError
UnknownOpError = _loom.UnknownOpError
GraphError = _loom.GraphError
ShapeError = _loom.ShapeError
ParamError = _loom.ParamError
BindError = _loom.BindError
FormatError = _loom.FormatError
CustomOpError = _loom.CustomOpError
#: A bind whose arrays exceed the memory there is; also a MemoryError.
OutOfMemoryError = _loom.OutOfMemoryError
#: An index outside its axis in a kernel (gather_nd); also an IndexError, as MXNet raises.
IndexOutOfRangeError = _loom.IndexOutOfRangeError

#: MXNet's default real type.
mx_real_t = np.float32
string_types = (str,)
numeric_types = (float, int, np.generic)
integer_types = (int, np.integer)


class _NullType:
    """Placeholder for arguments not given (MXNet's _Null)."""

    def __repr__(self):
        return "_Null"

    def __bool__(self):
        return False


_Null = _NullType()


def param_str(value):
    """A keyword argument as MXNet stores it: str(value), with NumPy scalars as Python
    numbers (NumPy 2 would print 'np.int64(3)') and tuples/lists element by element."""
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, np.integer):
        return str(int(value))
    if isinstance(value, np.floating):
        return str(float(value))
    if isinstance(value, tuple):
        items = [param_str(v) for v in value]
        return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
    if isinstance(value, list):
        return "[" + ", ".join(param_str(v) for v in value) + "]"
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return param_str(tuple(value.tolist()))
    return str(value)


def dtype_str(value):
    """A dtype keyword as MXNet's generated functions pass it (np.dtype(v).name)."""
    if isinstance(value, str):
        return value
    return np.dtype(value).name


def is_number(x):
    return isinstance(x, numbers.Number) or isinstance(x, np.generic)


class NotImplementedForSymbol(NotImplementedError):
    """Raised by a Symbol method that only makes sense for arrays (MXNet's
    mx.base.NotImplementedForSymbol)."""

    def __init__(self, function, alias, *args):
        super().__init__()
        self.function = function.__name__ if callable(function) else str(function)
        self.alias = alias
        self.args = [str(type(a)) for a in args]

    def __str__(self):
        msg = "Function {}".format(self.function)
        if self.alias:
            msg += " (namely operator \"{}\")".format(self.alias)
        if self.args:
            msg += " with arguments ({})".format(", ".join(self.args))
        msg += " is not implemented for Symbol and only available in NDArray."
        return msg


def _as_list(obj):
    """obj itself if it is a list, else [obj]."""
    return obj if isinstance(obj, list) else [obj]


#: MXNet's handle type; Loom's NDArrays pass through ctypes as such tokens (ndarray.py).
NDArrayHandle = ctypes.c_void_p


def py_str(x):
    return x.decode("utf-8") if isinstance(x, bytes) else x
