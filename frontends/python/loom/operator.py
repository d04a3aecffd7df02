"""Custom operators in Python with MXNet's protocol (mx.operator): subclass CustomOpProp and
CustomOp, register with @mx.operator.register("name"), use with mx.sym.Custom(...,
op_type="name"). Python callbacks run with the GIL taken by the engine only while they run."""
import collections

from . import _loom
from .base import LoomError


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
