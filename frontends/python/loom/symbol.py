"""mx.sym: Symbol, Variable/var, Group, load/load_json and every registered op as a
function (MXNet keyword names, positional symbol inputs, auto names like fullyconnected0)."""
import builtins
import sys
import warnings

import numpy as np

from . import _loom, _ops
from . import attribute as _attribute
from . import name as _name
from .base import MXNetError, _Null, dtype_str, is_number, param_str
from .context import current_context
from .executor import Executor

Symbol = _loom.Symbol
load = _loom.load
load_json = _loom.load_json
_module = sys.modules[__name__]


def Variable(name, attr=None, shape=None, lr_mult=None, wd_mult=None, dtype=None, init=None,
             stype=None, **kwargs):
    """A placeholder variable (input, weight, label). shape/lr_mult/wd_mult/dtype/init are
    stored as MXNet's hidden attributes (__shape__, ...); extra attributes must be
    `__name__`-style keys."""
    if not isinstance(name, str):
        raise TypeError("Expect a string for variable `name`")
    attr = _attribute.current().get(attr)
    attr = _hidden_attrs(attr) if attr else {}
    if shape is not None:
        shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        attr["__shape__"] = param_str(_from_np_shape(shape))
    if lr_mult is not None:
        attr["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attr["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attr["__dtype__"] = str(_dtype_flag(dtype))
    if init is not None:
        attr["__init__"] = init if isinstance(init, str) else init.dumps()
    if stype is not None:
        attr["__storage_type__"] = str(stype)
    for k, v in kwargs.items():
        if k.startswith("__") and k.endswith("__"):
            attr[k] = str(v)
        else:
            raise ValueError("Attribute name=%s is not supported. Additional attributes must "
                             "start and end with double underscores, e.g, __yourattr__" % k)
    return Symbol._variable(name, {k: str(v) for k, v in attr.items()})


var = Variable

#: Attributes MXNet stores as __key__ (and reports under both names).
_HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage")


def _hidden_key(key):
    """The key an attribute is stored under: lr_mult -> __lr_mult__ (as MXNet does); keys
    that merely end in a hidden key (fc_lr_mult) are refused as in MXNet."""
    for k in _HIDDEN_KEYS:
        if key == k:
            return "__%s__" % k
        if key.endswith(k) and not key.endswith("__"):
            raise ValueError("setting variable attributes with %s is deprecated. please instead "
                             "use\nw = Variable(%s=...)\nsym = YourSymbolName(%s=w)"
                             % (key, k, key[:-len(k) - 1]))
    return key


def _hidden_attrs(attr):
    return {_hidden_key(k): v for k, v in attr.items()}


def _with_shown_keys(attrs):
    """attrs plus the plain name of each hidden key (__lr_mult__ -> lr_mult), as MXNet's
    list_attr / attr_dict report them."""
    out = dict(attrs)
    for k in _HIDDEN_KEYS:
        hk = "__%s__" % k
        if hk in attrs:
            out[k] = attrs[hk]
    return out

_FLAGS = {"float32": 0, "float64": 1, "float16": 2, "uint8": 3, "int32": 4, "int8": 5,
          "int64": 6, "bool": 7}


def _dtype_flag(dtype):
    return _FLAGS[np.dtype(dtype).name]


def Group(symbols):
    """One symbol whose outputs are the outputs of `symbols`, in order."""
    symbols = list(symbols)
    if not symbols or any(not isinstance(s, Symbol) for s in symbols):
        raise TypeError("Expected a list of symbols as input")
    return Symbol._group(symbols)


def _create(op_name, hint, args, kwargs, func_name="", param_names=(), input_names=None):
    name = kwargs.pop("name", None)
    attr = kwargs.pop("attr", None)
    kwargs.pop("out", None)
    if input_names and any(a is None for a in args[:len(input_names)]):
        # MXNet's signatures: op(data, weight, bias, ...) where None leaves an input out
        # (Convolution(x, w, None, no_bias=True)): give the inputs by name instead
        for n, a in zip(input_names, args):
            if a is not None:
                if n in kwargs:
                    raise TypeError("%s: got multiple values for argument '%s'" % (func_name, n))
                kwargs[n] = a
        args = tuple(args[len(input_names):])
    positional = []
    extra = []
    plist = [p for p in param_names if p not in ("name", "attr")] \
        if isinstance(param_names, tuple) else []
    for a in args:
        if isinstance(a, Symbol):
            positional.append(a)
        elif isinstance(a, (list, tuple)) and a and all(isinstance(x, Symbol) for x in a):
            positional.extend(a)
        elif len(extra) < len(plist):
            extra.append(a)     # MXNet's signatures: inputs, then parameters in order
        else:
            raise TypeError("%s: positional arguments must be symbols, got %s" %
                            (func_name or op_name, type(a).__name__))
    for pname, v in zip(plist, extra):
        if pname in kwargs:
            raise TypeError("%s: got multiple values for argument '%s'" % (func_name, pname))
        kwargs[pname] = v
    named, attrs, hidden = {}, {}, {}
    for k, v in kwargs.items():
        if isinstance(v, Symbol):
            named[k] = v
        elif v is _Null or (v is None and k not in param_names):
            continue
        elif k in _HIDDEN_KEYS and k not in param_names:
            hidden["__%s__" % k] = str(v)
        elif k == "dtype" and v is not None:
            attrs[k] = dtype_str(v)
        else:
            attrs[k] = param_str(v)
    name = _name.current().get(name, hint)
    sym = Symbol._create(op_name, positional, attrs, name, named)
    extra = _attribute.current().get(attr)
    extra = _hidden_attrs(extra) if extra else {}
    extra.update(hidden)
    if extra:
        head = sym if sym._num_outputs == 1 else sym._output(0)
        for k, v in extra.items():
            head._set_attr(k, str(v))
        # variables the op created for its missing inputs (fc1_weight, ...) get the same
        # attributes, as in MXNet
        given = set()
        for a in positional + list(named.values()):
            given.update(a.list_outputs())
        children = head.get_children()
        for child in (children if children is not None else ()):
            if child.get_children() is None and child.name not in given:
                for k, v in extra.items():
                    child._set_attr(k, str(v))
    return sym


def _make_function(func_name, info):
    op_name = info.name
    hint = func_name.lower()
    param_names = tuple(info.param_names) if not info.variadic else frozenset(info.param_names)
    input_names = list(info.inputs) if info.inputs and not info.variadic else None

    def fn(*args, **kwargs):
        return _create(op_name, hint, args, kwargs, func_name, param_names, input_names)

    return fn


_ops.install(_module, _make_function, "Symbol")


def Custom(*inputs, **kwargs):
    """Applies the custom operator registered as `op_type` (mx.operator.register). Extra
    keyword arguments reach its CustomOpProp constructor as strings."""
    if "op_type" not in kwargs:
        raise TypeError("Custom: op_type is required")
    return _create("Custom", "custom", inputs, kwargs, "Custom", ("op_type",))


def zeros(shape, dtype=None, **kwargs):
    """A symbol of zeros (op _zeros)."""
    kwargs.update(shape=tuple(shape) if not isinstance(shape, int) else (shape,),
                  dtype=dtype or "float32")
    return _create("_zeros", "zeros", (), kwargs, "zeros", ("shape", "dtype"))


def ones(shape, dtype=None, **kwargs):
    """A symbol of ones (op _ones)."""
    kwargs.update(shape=tuple(shape) if not isinstance(shape, int) else (shape,),
                  dtype=dtype or "float32")
    return _create("_ones", "ones", (), kwargs, "ones", ("shape", "dtype"))


# ---------------------------------------------------------------------------------------
# operators on symbols: the op stored is the canonical one (elemwise_add), the automatic name
# follows MXNet's _internal function (_plus0, _plusscalar0, ...)

def _scalar(x):
    # True/False as 1/0 (the op's scalar is a number)
    return int(x) if isinstance(x, (bool, np.bool_)) else x


def _arith(sym_op, sym_hint, scalar_op, scalar_hint, rscalar_op=None, rscalar_hint=None):
    def fwd(self, other):
        if isinstance(other, Symbol):
            return _create(sym_op, sym_hint, (self, other), {})
        if is_number(other):
            return _create(scalar_op, scalar_hint, (self,), {"scalar": _scalar(other)})
        return NotImplemented

    def rev(self, other):
        if is_number(other):
            return _create(rscalar_op, rscalar_hint, (self,), {"scalar": _scalar(other)})
        return NotImplemented

    return fwd, rev


for _n, _spec in {
    "add": ("elemwise_add", "_plus", "_plus_scalar", "_plusscalar", "_plus_scalar", "_plusscalar"),
    "sub": ("elemwise_sub", "_minus", "_minus_scalar", "_minusscalar", "_rminus_scalar",
            "_rminusscalar"),
    "mul": ("elemwise_mul", "_mul", "_mul_scalar", "_mulscalar", "_mul_scalar", "_mulscalar"),
    "truediv": ("elemwise_div", "_div", "_div_scalar", "_divscalar", "_rdiv_scalar",
                "_rdivscalar"),
    "pow": ("_power", "_power", "_power_scalar", "_powerscalar", "_rpower_scalar",
            "_rpowerscalar"),
}.items():
    _f, _r = _arith(*_spec)
    setattr(Symbol, "__%s__" % _n, _f)
    setattr(Symbol, "__r%s__" % _n, _r)
# x % y (ops _mod, _mod_scalar, _rmod_scalar), as MXNet's Symbol.
Symbol.__mod__, Symbol.__rmod__ = _arith("_mod", "_mod", "_mod_scalar", "_modscalar",
                                         "_rmod_scalar", "_rmodscalar")
# Comparisons build comparison symbols (MXNet's Symbol.__eq__ etc.); 1 < x arrives as
# x.__gt__(1), so only the forward form is needed.
for _n, _op in {"eq": "_equal", "ne": "_not_equal", "gt": "_greater", "ge": "_greater_equal",
                "lt": "_lesser", "le": "_lesser_equal"}.items():
    setattr(Symbol, "__%s__" % _n, _arith(_op, _op, _op + "_scalar", _op + "_scalar")[0])
Symbol.__hash__ = object.__hash__
Symbol.__div__ = Symbol.__truediv__
Symbol.__rdiv__ = Symbol.__rtruediv__
Symbol.__neg__ = lambda self: self.__mul__(-1.0)


def _sym_iadd(self, other):
    raise NotImplementedError("in-place operators are not supported on symbols")


# ---------------------------------------------------------------------------------------
# Symbol methods

def _getitem(self, index):
    if isinstance(index, str):
        return self._output_named(index)
    if isinstance(index, builtins.slice):
        return Group([self[i] for i in range(*index.indices(len(self)))])
    index = int(index)
    n = self._num_outputs
    if index < 0:
        index += n
    if not 0 <= index < n:
        raise IndexError("Index %d out of range (symbol has %d outputs)" % (index, n))
    return self._output(index)


def _iter(self):
    return (self[i] for i in range(len(self)))


def _repr(self):
    name = self.name
    if name is None:
        return "<Symbol group [%s]>" % ", ".join(s.name or "?" for s in self)
    return "<Symbol %s>" % name


def _list_attr(self, recursive=False):
    if recursive:
        raise DeprecationWarning("Symbol.list_attr with recursive=True has been deprecated. "
                                 "Please use attr_dict instead.")
    return _with_shown_keys(self._node_attrs())


_cpp_attr_dict = Symbol.attr_dict
_cpp_get_children = Symbol.get_children


def _attr_dict(self):
    """{node name: {key: value}} for every node with attributes, hidden keys (__lr_mult__)
    also under their plain name."""
    return {k: _with_shown_keys(v) for k, v in _cpp_attr_dict(self).items()}


def _get_children(self):
    """The inputs of this symbol's node(s) as one grouped symbol (for a group: the inputs of
    every output's node, in order); None when there are none (variables)."""
    if self._num_outputs == 1:
        return _cpp_get_children(self)
    kids, seen = [], set()
    for i in range(self._num_outputs):
        out = self._output(i)
        if out.name in seen:        # another output of a node already visited
            continue
        seen.add(out.name)
        c = _cpp_get_children(out)
        if c is not None:
            kids.extend(c[j] for j in range(len(c)))
    return Group(kids) if kids else None


def _set_attr_kw(self, **kwargs):
    for k, v in kwargs.items():
        if not isinstance(v, str):
            raise ValueError("Set Attr only accepts string values")
        self._set_attr(_hidden_key(k), v)


def _bool(self):
    from .base import NotImplementedForSymbol
    raise NotImplementedForSymbol("__bool__", "bool")


def _np_shape_on():
    from .util import is_np_shape
    return is_np_shape()


def _from_np_shape(shape):
    """Under np_shape, -1 marks an unknown dim; inside Loom (MXNet 1.x legacy) that is 0."""
    if shape is None or not _np_shape_on():
        return shape
    return tuple(0 if d == -1 else d for d in shape)


def _to_np_shapes(shapes):
    """Under np_shape, inference reports an unknown shape as None and an unknown dim as -1."""
    if shapes is None or not _np_shape_on():
        return shapes
    return [None if s is None or len(s) == 0 else tuple(-1 if d == 0 else d for d in s)
            for s in shapes]


def _shape_args(self, args, kwargs):
    known = {}
    if args:
        for name, s in zip(self.list_arguments(), args):
            if s is not None:
                known[name] = _from_np_shape(tuple(s))
    for k, v in kwargs.items():
        if v is not None:
            known[k] = _from_np_shape(tuple(v))
    return known


def _shape_overridden(self, known):
    """self, or a copy whose variables' __shape__ attributes give way to the shapes passed
    (as in MXNet, a shape given at inference time wins over the one given to Variable)."""
    stored = {}
    for name, attrs in _cpp_attr_dict(self).items():
        if "__shape__" in attrs and name in known:
            stored[name] = attrs["__shape__"]
    change = {n: param_str(tuple(known[n])) for n in stored
              if param_str(tuple(known[n])) != stored[n]}
    if not change:
        return self
    copy = load_json(self.tojson())
    internals = copy.get_internals()
    for n, shp in change.items():
        internals[n]._set_attr("__shape__", shp)
    return copy


def _infer_shape(self, *args, **kwargs):
    """(arg_shapes, out_shapes, aux_shapes) from the shapes given (positional in
    list_arguments order, or by name). When some shape cannot be decided it warns and
    returns (None, None, None), as MXNet does; conflicts raise ShapeError."""
    known = _shape_args(self, args, kwargs)
    arg, out, aux, complete = _shape_overridden(self, known)._infer_shape(known, False)
    if not complete:
        unknowns = ["%s: %s" % (n, s) for n, s in zip(self.list_arguments(), arg)
                    if not s or not all(s)]
        warnings.warn("Cannot decide shape for the following arguments (0s in shape means "
                      "unknown dimensions). Consider providing them as input:\n\t" +
                      "\n\t".join(unknowns[:10]), stacklevel=2)
        return None, None, None
    return _to_np_shapes(arg), _to_np_shapes(out), _to_np_shapes(aux)


def _infer_shape_partial(self, *args, **kwargs):
    """Like infer_shape, but unknown shapes come back as () (or with 0 dims); under
    np_shape as None (or with -1 dims)."""
    known = _shape_args(self, args, kwargs)
    arg, out, aux, _ = _shape_overridden(self, known)._infer_shape(known, True)
    return _to_np_shapes(arg), _to_np_shapes(out), _to_np_shapes(aux)


def _infer_type(self, *args, **kwargs):
    """(arg_types, out_types, aux_types) as NumPy type objects (np.float32, ...), from the
    types given (positional in list_arguments order, or by name); (None, None, None) when
    some type cannot be decided."""
    arg, out, aux = _infer_type_partial(self, *args, **kwargs)
    if any(t is None for t in arg + out + aux):
        unknowns = ["%s: None" % n for n, t in zip(self.list_arguments(), arg) if t is None]
        warnings.warn("Cannot decide type for the following arguments. Consider providing them "
                      "as input:\n\t" + "\n\t".join(unknowns[:10]), stacklevel=2)
        return None, None, None
    return arg, out, aux


def _type_args(sym, args, kwargs):
    known = {}
    if args:
        for name, t in zip(sym.list_arguments(), args):
            if t is not None:
                known[name] = np.dtype(t).name
    for k, v in kwargs.items():
        if v is not None:
            known[k] = np.dtype(v).name
    return known


def _np_type(t):
    return None if t is None else np.dtype(t).type


def _infer_type_partial(self, *args, **kwargs):
    """Like infer_type, but the types the graph does not decide come back as None (infer_type
    makes them float32, MXNet's default)."""
    arg, out, aux = self._infer_type(_type_args(self, args, kwargs), True)
    return ([_np_type(t) for t in arg], [_np_type(t) for t in out], [_np_type(t) for t in aux])


def _grad_reqs(self, grad_req):
    """(default req, per-name dict) from a str, list (aligned with arguments) or dict."""
    if isinstance(grad_req, str):
        return grad_req, {}
    names = self.list_arguments()
    if isinstance(grad_req, (list, tuple)):
        if len(grad_req) != len(names):
            raise ValueError("grad_req list has %d entries for %d arguments" %
                             (len(grad_req), len(names)))
        return "null", dict(zip(names, grad_req))
    if isinstance(grad_req, dict):
        # Names that are not arguments are ignored, as MXNet does (scripts pass one dict
        # for a layer with and without bias).
        return "null", {k: v for k, v in grad_req.items() if k in names}
    raise TypeError("grad_req must be a str, list or dict")


def _simple_bind(self, ctx=None, grad_req="write", type_dict=None, stype_dict=None,
                 group2ctx=None, shared_arg_names=None, shared_exec=None, shared_buffer=None,
                 **kwargs):
    """Infers all shapes from the given ones, allocates zero-filled arguments, gradients
    (grad_req != 'null') and aux states, and returns an Executor."""
    ctx = current_context() if ctx is None else ctx
    default, reqs = _grad_reqs(self, grad_req)
    # Non-shape keywords (force_rebind=True, ...) are ignored, as MXNet does.
    shapes = {k: tuple(v) for k, v in kwargs.items() if isinstance(v, (tuple, list))}
    types = {k: np.dtype(v).name for k, v in (type_dict or {}).items()}
    # A shape given here wins over a variable's __shape__ attribute, as in infer_shape.
    h = _loom._Executor.simple_bind(_shape_overridden(self, shapes), ctx, shapes, default, reqs,
                                    types)
    return Executor(h, self, ctx)


def _as_dict(values, names, what):
    if values is None:
        return {}
    if isinstance(values, dict):
        # as in MXNet, entries for names the symbol does not have are ignored
        return {k: v for k, v in values.items() if k in names}
    values = list(values)
    if len(values) != len(names):
        raise ValueError("%s: %d arrays given for %d names (%s)" %
                         (what, len(values), len(names), ", ".join(names)))
    return {n: v for n, v in zip(names, values) if v is not None}


def _bind(self, ctx, args, args_grad=None, grad_req="write", aux_states=None, group2ctx=None,
          shared_exec=None):
    """Binds the given arrays by reference (no copies). args/args_grad/aux_states: lists in
    list_arguments / list_auxiliary_states order or dicts; an argument without a gradient
    array gets grad_req 'null'."""
    ctx = current_context() if ctx is None else ctx
    arg_names = self.list_arguments()
    a = _as_dict(args, arg_names, "bind args")
    g = _as_dict(args_grad, arg_names, "bind args_grad")
    x = _as_dict(aux_states, self.list_auxiliary_states(), "bind aux_states")
    default, reqs = _grad_reqs(self, grad_req)
    # A gradient array of another dtype than its argument (MXNet accepts float64 gradients
    # for float16 data): the executor writes one of the argument's dtype, and backward
    # copies it into the given array with a cast.
    from .ndarray import NDArray
    mirrors = []
    for name, garr in list(g.items()):
        arr = a.get(name)
        if isinstance(garr, NDArray) and isinstance(arr, NDArray) and garr.dtype != arr.dtype:
            sub = garr.astype(arr.dtype)
            mirrors.append((garr, sub))
            g[name] = sub
    # The arrays' shapes win over the variables' __shape__ attributes, as in infer_shape.
    given = {k: tuple(v.shape) for k, v in a.items() if hasattr(v, "shape")}
    h = _loom._Executor.bind(_shape_overridden(self, given), ctx, a, g, default, reqs, x)
    exe = Executor(h, self, ctx)
    exe._grad_mirrors = mirrors
    return exe


def _eval(self, ctx=None, **kwargs):
    exe = _bind(self, ctx, kwargs, grad_req="null")
    exe.forward()
    return exe.outputs


def _deepcopy(self, memo=None):
    return load_json(self.tojson())


def _save(self, fname, remove_amp_cast=True):
    if _np_shape_on():
        with open(str(fname), "w") as f:
            f.write(_tojson(self))
        return
    self._save(str(fname))


def _tojson(self, remove_amp_cast=True):
    text = self._tojson()
    if _np_shape_on():
        # MXNet marks graphs saved under NumPy shape semantics (0 = a zero-size dim there).
        text = text.replace('"attrs": {"mxnet_version": ["int", ',
                            '"attrs": {"is_np_shape": ["int", 1], "mxnet_version": ["int", ', 1)
    return text


def _call(self, *args, **kwargs):
    """Composition, as in MXNet: returns a copy of this symbol with free variables replaced by
    the given symbols, positionally (list_arguments order) or by name
    (net2(fc3_data=net1)). `name` is accepted and, as for MXNet's composite symbols, unused."""
    import json
    kwargs.pop("name", None)
    if args and kwargs:
        raise TypeError("compose only accept input Symbols either as positional or keyword "
                        "arguments, not both")
    arg_names = self.list_arguments()
    if args:
        if len(args) > len(arg_names):
            raise TypeError("compose: %d symbols given for %d arguments"
                            % (len(args), len(arg_names)))
        repl = dict(zip(arg_names, args))
    else:
        repl = dict(kwargs)
    for k, v in repl.items():
        if not isinstance(v, Symbol):
            raise TypeError("compose expect `Symbol` as arguments, got %s for '%s'"
                            % (type(v).__name__, k))
        if k not in arg_names:
            raise ValueError("compose: '%s' is not an argument of the symbol (arguments: %s)"
                             % (k, ", ".join(arg_names)))
        if len(v) != 1:
            raise ValueError("compose: '%s' must be a single-output symbol" % k)
    if not repl:
        return load_json(self.tojson())
    g = json.loads(self.tojson())
    nodes, rows = [], []
    entry_of = {}
    for k, v in repl.items():
        sub = json.loads(v.tojson())
        off = len(nodes)
        for i, n in enumerate(sub["nodes"]):
            n = dict(n)
            n["inputs"] = [[e[0] + off] + list(e[1:]) for e in n["inputs"]]
            if "control_deps" in n:
                n["control_deps"] = [c + off for c in n["control_deps"]]
            nodes.append(n)
            rows.append(sub["node_row_ptr"][i + 1] - sub["node_row_ptr"][i])
        h = sub["heads"][0]
        entry_of[k] = [h[0] + off] + list(h[1:])
    index = {}
    replaced = {}
    for i, n in enumerate(g["nodes"]):
        if n["op"] == "null" and n["name"] in entry_of:
            replaced[i] = entry_of[n["name"]]
            continue
        n = dict(n)
        ins = []
        for e in n["inputs"]:
            ins.append(list(replaced[e[0]]) if e[0] in replaced else [index[e[0]]] + list(e[1:]))
        n["inputs"] = ins
        if "control_deps" in n:
            n["control_deps"] = [index[c] for c in n["control_deps"] if c in index]
        index[i] = len(nodes)
        nodes.append(n)
        rows.append(g["node_row_ptr"][i + 1] - g["node_row_ptr"][i])
    heads = [list(replaced[h[0]]) if h[0] in replaced else [index[h[0]]] + list(h[1:])
             for h in g["heads"]]
    ptr = [0]
    for r in rows:
        ptr.append(ptr[-1] + r)
    out = dict(g, nodes=nodes, heads=heads, node_row_ptr=ptr,
               arg_nodes=[i for i, n in enumerate(nodes) if n["op"] == "null"])
    return load_json(json.dumps(out))


def _reduce(self):
    return (load_json, (self.tojson(),))


Symbol.__reduce__ = _reduce
Symbol.__bool__ = _bool
Symbol.__abs__ = lambda self: _module.abs(self)
Symbol.attr_dict = _attr_dict
Symbol.get_children = _get_children
def _gen_atomic_symbol(self):
    """A symbol of this symbol's head operator alone, same attributes, each input a fresh
    variable named after the op's input (MXNet's Symbol._gen_atomic_symbol)."""
    import json
    from . import _loom
    graph = json.loads(self.tojson())
    head = graph["nodes"][graph["heads"][0][0]]
    if head["op"] == "null":
        raise MXNetError("_gen_atomic_symbol: '%s' is a variable, not an operator"
                        % head["name"])
    attrs = dict(head.get("attrs", {}))
    names = _loom._op_inputs(head["op"], attrs)
    attrs["name"] = head["name"]
    return _create(head["op"], head["op"].lower(), tuple(var(n) for n in names), attrs)


Symbol._gen_atomic_symbol = _gen_atomic_symbol
Symbol.infer_type_partial = _infer_type_partial
Symbol.__getitem__ = _getitem
Symbol.__iter__ = _iter
Symbol.__len__ = lambda self: self._num_outputs
Symbol.__repr__ = _repr
Symbol.__str__ = _repr
Symbol.__copy__ = _deepcopy
Symbol.__deepcopy__ = _deepcopy
Symbol.__call__ = _call
Symbol.__hash__ = object.__hash__
Symbol.__iadd__ = _sym_iadd
Symbol.list_attr = _list_attr
Symbol.set_attr = _set_attr_kw
Symbol._set_attrs = _set_attr_kw
Symbol.infer_shape = _infer_shape
Symbol.infer_shape_partial = _infer_shape_partial
Symbol.infer_type = _infer_type
Symbol.simple_bind = _simple_bind
Symbol.bind = _bind
Symbol.eval = _eval
Symbol.copy = _deepcopy
Symbol.save = _save
Symbol.tojson = _tojson
Symbol.debug_str = lambda self: self.tojson()
Symbol.handle = property(lambda self: self)

_FLUENT = ["abs", "sign", "round", "floor", "ceil", "sqrt", "rsqrt", "square", "exp", "expm1",
           "log", "log1p", "reciprocal", "relu", "sigmoid", "tanh", "softmax", "log_softmax",
           "sum", "mean", "max", "min", "flatten", "expand_dims", "transpose", "clip",
           "slice_axis", "split", "reshape", "negative"]
for _fname in _FLUENT:
    if _ops.find(_fname) is not None and hasattr(_module, _fname):
        setattr(Symbol, _fname,
                (lambda f: lambda self, *a, **k: f(self, *a, **k))(getattr(_module, _fname)))


# MXNet's Python-level binary functions on symbols (mx.sym.maximum, mx.sym.pow, ...): two
# symbols give the elementwise op, a symbol and a number the scalar op, two numbers the
# number.

def _sym_binary(lhs, rhs, np_fn, op, hint, scalar, rscalar, scalar_hint):
    if isinstance(lhs, Symbol) and isinstance(rhs, Symbol):
        return _create(op, hint, (lhs, rhs), {})
    if isinstance(lhs, Symbol) and is_number(rhs):
        return _create(scalar, scalar_hint, (lhs,), {"scalar": float(rhs)})
    if is_number(lhs) and isinstance(rhs, Symbol):
        return _create(rscalar, scalar_hint, (rhs,), {"scalar": float(lhs)})
    if is_number(lhs) and is_number(rhs):
        r = np_fn(lhs, rhs)
        return r.item() if isinstance(r, np.generic) else r
    raise TypeError("types (%s, %s) not supported" % (type(lhs).__name__, type(rhs).__name__))


def maximum(left, right):
    """Elementwise maximum of two symbols, or of a symbol and a number."""
    return _sym_binary(left, right, np.maximum, "_maximum", "_maximum", "_maximum_scalar",
                       "_maximum_scalar", "_maximumscalar")


def minimum(left, right):
    """Elementwise minimum of two symbols, or of a symbol and a number."""
    return _sym_binary(left, right, np.minimum, "_minimum", "_minimum", "_minimum_scalar",
                       "_minimum_scalar", "_minimumscalar")


def pow(base, exp):  # noqa: A001 - MXNet's name
    """base ** exp for symbols and numbers."""
    return _sym_binary(base, exp, np.power, "_power", "_power", "_power_scalar",
                       "_rpower_scalar", "_powerscalar")


power = pow


def hypot(left, right):
    """sqrt(left**2 + right**2) for symbols and numbers."""
    return _sym_binary(left, right, np.hypot, "_hypot", "_hypot", "_hypot_scalar",
                       "_hypot_scalar", "_hypotscalar")


# MXNet's full list of fluent methods, installed where Loom has the op.
_FLUENT_ALL = ["reshape_like", "zeros_like", "ones_like", "broadcast_axes", "repeat", "pad",
               "swapaxes", "split_v2", "slice", "slice_like", "take", "one_hot", "pick", "sort",
               "topk", "argsort", "argmax", "argmax_channel", "argmin", "shape_array",
               "size_array", "tile", "flip", "depth_to_space", "space_to_depth", "diag",
               "nansum", "prod", "nanprod", "norm", "rint", "fix", "trunc", "sin", "cos", "tan",
               "arcsin", "arccos", "arctan", "degrees", "radians", "sinh", "cosh", "arcsinh",
               "arccosh", "arctanh", "log10", "log2", "cbrt", "rcbrt", "softmin", "squeeze",
               "broadcast_to", "broadcast_like"]
for _fname in _FLUENT_ALL:
    if _fname not in vars(Symbol) and _ops.find(_fname) is not None and hasattr(_module, _fname):
        setattr(Symbol, _fname,
                (lambda f: lambda self, *a, **k: f(self, *a, **k))(getattr(_module, _fname)))


_internal = _ops.internal_module(_module)
# mx.sym.linalg.X (ops _linalg_X) and mx.sym.image.X (ops _image_X), as in MXNet.
linalg = _ops.prefix_namespace(__name__ + ".linalg", _module, "_linalg_",
                               "mx.sym.linalg: linear-algebra operators.", "linalg")
image = _ops.prefix_namespace(__name__ + ".image", _module, "_image_",
                              "mx.sym.image: image operators.", "image")

# MXNet's Python-level split_v2 and histogram (over the _split_v2 / _histogram ops).
from ._split_v2 import split_v2_sym as split_v2, histogram_sym as histogram  # noqa: E402
Symbol.split_v2 = lambda self, *a, **k: split_v2(self, *a, **k)
# MXNet's Python-level creation functions over the _arange / _linspace / _eye / _full ops.
from ._creation import (sym_arange as arange, sym_linspace as linspace,  # noqa: E402
                        sym_eye as eye, sym_full as full)
