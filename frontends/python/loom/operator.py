"""Custom operators in Python with MXNet's protocol (mx.operator): subclass CustomOpProp and
CustomOp, register with @mx.operator.register("name"), use with mx.sym.Custom(...,
op_type="name"). Python callbacks run with the GIL taken by the engine only while they run."""
import collections
import ctypes  # noqa: F401  (MXNet's mx.operator exports it; its tests use ctypes.cast)

from . import _loom
from .base import LoomError, NDArrayHandle, py_str  # noqa: F401  (MXNet's exports)
from .ndarray import NDArray  # noqa: F401


class CustomOp:
    """Base class of custom operator instances (returned by CustomOpProp.create_operator)."""

    def __init__(self):
        pass

    def forward(self, is_train, req, in_data, out_data, aux):
        """Computes out_data from in_data. req: one of 'null', 'write', 'inplace', 'add' per
        output. aux states are writable and persist across calls."""
        raise NotImplementedError()

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        """Computes in_grad. Arrays not declared in declare_backward_dependency are empty."""
        raise NotImplementedError()

    def assign(self, dst, req, src):
        """Writes src into dst according to req: 'null' nothing, 'write'/'inplace' copy,
        'add' accumulate."""
        if req == "null":
            return
        if req in ("write", "inplace"):
            dst[:] = src
        elif req == "add":
            dst[:] += src
        else:
            raise ValueError("unknown req '%s'" % req)


class CustomOpProp:
    """Describes a custom operator: inputs, outputs, aux states, inference and creation.

    need_top_grad: whether backward needs the output gradient; False makes the op a loss
    head (the executor needs no head gradient for it)."""

    def __init__(self, need_top_grad=True):
        self.need_top_grad_ = need_top_grad

    def infer_shape(self, in_shape):
        """Returns (arg_shapes, out_shapes[, aux_shapes]) from the argument shapes."""
        return in_shape, (in_shape[0],) * len(self.list_outputs()), ()

    def infer_type(self, in_type):
        """Returns (arg_types, out_types[, aux_types]) as numpy types."""
        return (in_type, [in_type[0]] * len(self.list_outputs()),
                [in_type[0]] * len(self.list_auxiliary_states()))

    def infer_storage_type(self, in_stype):
        return (in_stype, ["default"] * len(self.list_outputs()),
                ["default"] * len(self.list_auxiliary_states()))

    def infer_storage_type_backward(self, ograd_stype, in_stype, out_stype, igrad_stype,
                                    aux_stype):
        return (["default"] * len(ograd_stype), ["default"] * len(in_stype),
                ["default"] * len(out_stype), ["default"] * len(in_stype),
                ["default"] * len(aux_stype))

    def list_outputs(self):
        return ["output"]

    def list_arguments(self):
        return ["data"]

    def list_auxiliary_states(self):
        return []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        """Ids of the arrays backward needs: out_grad (when need_top_grad), in_data, out_data."""
        deps = []
        if self.need_top_grad_:
            deps.extend(out_grad)
        deps.extend(in_data)
        deps.extend(out_data)
        return deps

    def create_operator(self, ctx, in_shapes, in_dtypes):
        """Returns a CustomOp. in_shapes cover arguments then aux states; in_dtypes are
        integer MXNet type flags (0 = float32)."""
        return CustomOp()


_registry = {}


def register(reg_name):
    """Class decorator registering a CustomOpProp subclass under `reg_name`."""

    def do_register(prop_cls):
        if not (isinstance(prop_cls, type) and issubclass(prop_cls, CustomOpProp)):
            raise TypeError("register(%r) expects a CustomOpProp subclass" % reg_name)
        _loom._register_custom_op(reg_name, prop_cls)
        _loom._clear_op_cache()  # imperative instances of a previous class of this name
        _registry[reg_name] = prop_cls
        return prop_cls

    return do_register


def get_all_registered_operators():
    """Names (and aliases) of every registered operator, as MXNet's list (custom op types
    registered with `register` run through the operator 'Custom' and are not in it)."""
    from . import _ops
    return sorted(_ops.all_ops())


OperatorArguments = collections.namedtuple("OperatorArguments", ["narg", "names", "types"])


def _param_type(p):
    if p["choices"]:
        kind = "{%s}" % ", ".join("'%s'" % c for c in sorted(p["choices"]))
    else:
        kind = p["type"]
    if p["required"]:
        return kind + ", required"
    default = p["default"]
    if p["choices"]:
        default = "'%s'" % default
    return "%s, optional, default=%s" % (kind, default)


def get_operator_arguments(op_name):
    """OperatorArguments(narg, names, types) of a registered operator: its array inputs
    (type 'NDArray-or-Symbol', '[]' for a variable count) then its parameters, with MXNet's
    type strings ("{'relu', 'sigmoid', ...}, required", "int, optional, default=1")."""
    from . import _ops
    info = _ops.find(op_name)
    if info is None:
        raise LoomError("get_operator_arguments: no operator named '%s'" % op_name)
    names, types = [], []
    # Required parameters get placeholder values so the op can name its inputs.
    probe = {}
    for p in info.params:
        if p["required"]:
            probe[p["name"]] = (p["choices"][0] if p["choices"] else
                                "(1, 1)" if p["type"].startswith("Shape") else "1")
    try:
        if "num_args" in probe:  # a variable number of inputs (Concat, add_n, ...)
            raise LoomError("variadic")
        inputs = _loom._op_inputs(info.name, probe)
        variadic = False
    except Exception:  # noqa: BLE001 - inputs depend on a count attribute (Concat, add_n)
        inputs, variadic = ["data"], True
    params = [p for p in info.params if not p["name"].startswith("__")]
    param_names = {p["name"] for p in params}
    for n in inputs:
        if n not in param_names:
            names.append(n)
            types.append("NDArray-or-Symbol[]" if variadic else "NDArray-or-Symbol")
    for p in params:
        names.append(p["name"])
        types.append(_param_type(p))
    return OperatorArguments(len(names), names, types)


load_plugin = _loom.load_plugin


# ---------------------------------------------------------------------------------------
# MXNet's older Python operator interface (PythonOp / NumpyOp / NDArrayOp, deprecated there
# in favour of CustomOp): each instance becomes a custom op type of its own, run through
# the same Custom machinery.

class PythonOp:
    """Base of operators written in Python with the pre-CustomOp interface: override
    forward(in_data, out_data), backward(out_grad, in_data, out_data, in_grad), infer_shape,
    list_arguments, list_outputs; op.get_symbol(*inputs, name=...) makes the symbol."""

    def __init__(self, need_top_grad=True):
        self.need_top_grad_ = need_top_grad

    def __call__(self, *args, **kwargs):
        return self.get_symbol(*args, **kwargs)

    def get_symbol(self, *args, **kwargs):
        raise NotImplementedError("use NumpyOp or NDArrayOp")

    def forward(self, in_data, out_data):
        """Default: the identity on the first input."""
        out_data[0][:] = in_data[0]

    def backward(self, out_grad, in_data, out_data, in_grad):
        """Default: the gradient of the identity."""
        in_grad[0][:] = out_grad[0]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]]

    def list_outputs(self):
        return ["output"]

    def list_arguments(self):
        return ["data"]

    def need_top_grad(self):
        return self.need_top_grad_

    def _symbol(self, as_numpy, args, kwargs):
        from . import symbol
        op_type = "_python_op_%d" % id(self)
        if op_type not in _PYTHON_OPS:
            _PYTHON_OPS[op_type] = self
            register(op_type)(_python_op_prop(self, as_numpy))
        return symbol.Custom(*args, op_type=op_type, **kwargs)


_PYTHON_OPS = {}  # keeps each registered PythonOp alive while its op type exists


def _python_op_prop(pyop, as_numpy):
    """A CustomOpProp class running `pyop`'s forward/backward on NumPy arrays (NumpyOp) or
    NDArrays (NDArrayOp)."""
    from . import ndarray as nd

    def convert(arrays):
        return [a.asnumpy() for a in arrays] if as_numpy else [a.copy() for a in arrays]

    class _Op(CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            outs = convert(out_data)
            pyop.forward(in_data=convert(in_data), out_data=outs)
            for dst, r, src in zip(out_data, req, outs):
                self.assign(dst, r, nd.array(src, dtype=dst.dtype) if as_numpy else src)

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            grads = convert(in_grad)
            pyop.backward(out_grad=convert(out_grad), in_data=convert(in_data),
                          out_data=convert(out_data), in_grad=grads)
            for dst, r, src in zip(in_grad, req, grads):
                self.assign(dst, r, nd.array(src, dtype=dst.dtype) if as_numpy else src)

    class _Prop(CustomOpProp):
        def __init__(self):
            super().__init__(need_top_grad=pyop.need_top_grad())

        def list_arguments(self):
            return pyop.list_arguments()

        def list_outputs(self):
            return pyop.list_outputs()

        def infer_shape(self, in_shape):
            ins, outs = pyop.infer_shape(in_shape)
            return ins, outs, []

        def create_operator(self, ctx, in_shapes, in_dtypes):
            return _Op()

    return _Prop


class NumpyOp(PythonOp):
    """PythonOp whose forward/backward get NumPy arrays (outputs written in place)."""

    def get_symbol(self, *args, **kwargs):
        return self._symbol(True, args, kwargs)


class NDArrayOp(PythonOp):
    """PythonOp whose forward/backward get NDArrays (outputs written in place)."""

    def get_symbol(self, *args, **kwargs):
        return self._symbol(False, args, kwargs)
