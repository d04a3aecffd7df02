"""The operator registry as seen from Python, and what symbol.py / ndarray.py need to
generate one function per op: MXNet-style docstrings and signatures."""
import inspect
import keyword

from . import _loom
from .base import _Null


class OpInfo:
    __slots__ = ("name", "aliases", "doc", "params", "inputs", "outputs", "variadic", "aux")

    def __init__(self, d):
        self.name = d["name"]
        self.aliases = list(d["aliases"])
        self.doc = d["doc"]
        self.params = list(d["params"])
        self.inputs = d["inputs"]
        self.outputs = d["outputs"]
        self.variadic = d["variadic"]
        self.aux = d["aux"]

    @property
    def param_names(self):
        return [p["name"] for p in self.params]


_OPS = None


def all_ops():
    """name -> OpInfo for every registered op (canonical names; aliases map to the same)."""
    global _OPS
    if _OPS is None:
        ops = {}
        for d in _loom._list_ops():
            info = OpInfo(d)
            ops[info.name] = info
            for a in info.aliases:
                ops.setdefault(a, info)
        _OPS = ops
    return _OPS


def find(name):
    return all_ops().get(name)


def input_names(info):
    """Input names used for positional arguments and docs (defaults for ops whose inputs
    depend on attributes)."""
    if info.inputs is None:
        return ["data"]
    if info.variadic:
        return ["data"]
    return list(info.inputs)


def build_doc(func_name, info, kind):
    """A NumPy-style docstring like MXNet's generated ones. kind: 'Symbol' or 'NDArray'."""
    lines = [info.doc.strip() or ("Applies operator " + info.name + "."), ""]
    if func_name != info.name:
        lines += ["Alias of ``%s``." % info.name, ""]
    lines += ["Parameters", "----------"]
    if info.variadic:
        lines += ["data : %s[]" % kind, "    Positional input %ss." % kind.lower()]
    else:
        for n in input_names(info):
            lines += ["%s : %s" % (n, kind), "    The %s input." % n]
    for p in info.params:
        if p["required"]:
            typ = "%s, required" % p["type"]
        else:
            typ = "%s, optional, default=%s" % (p["type"], p["default"] or "None")
        if p["choices"]:
            typ = "{%s}, %s" % (", ".join("'%s'" % c for c in p["choices"]), typ.split(", ", 1)[1])
        lines.append("%s : %s" % (p["name"], typ))
        if p["doc"]:
            lines.append("    " + p["doc"])
    if kind == "Symbol":
        lines += ["name : string, optional.", "    Name of the resulting symbol.", "",
                  "Returns", "-------", "Symbol", "    The result symbol."]
    else:
        lines += ["out : NDArray, optional", "    The output NDArray to hold the result.", "",
                  "Returns", "-------", "out : NDArray or list of NDArrays",
                  "    The output of this function."]
    return "\n".join(lines)


def build_signature(info, kind):
    P = inspect.Parameter
    params = []
    if info.variadic or info.inputs is None:
        params.append(P("data", P.VAR_POSITIONAL))
    else:
        for n in input_names(info):
            params.append(P(n, P.POSITIONAL_OR_KEYWORD, default=None))
    seen = {p.name for p in params}
    for p in info.params:
        n = p["name"]
        if n in seen or keyword.iskeyword(n) or not n.isidentifier():
            continue
        seen.add(n)
        params.append(P(n, P.KEYWORD_ONLY, default=_Null))
    tail = ["name", "attr"] if kind == "Symbol" else ["out", "name"]
    for n in tail:
        if n not in seen:
            params.append(P(n, P.KEYWORD_ONLY, default=None))
    params.append(P("kwargs", P.VAR_KEYWORD))
    return inspect.Signature(params)


def function_names():
    """(python name, OpInfo) for every op name and alias."""
    return sorted(all_ops().items())


def install(module, make_function, kind):
    """Adds one function per registered op (and alias) to `module`, made by
    make_function(func_name, info), with the registry's docstring and signature; names the
    module already defines are left alone."""
    protected = set(vars(module))
    for fname, info in function_names():
        if fname in protected:
            continue
        fn = make_function(fname, info)
        fn.__name__ = fname
        fn.__qualname__ = fname
        fn.__doc__ = build_doc(fname, info, kind)
        fn.__signature__ = build_signature(info, kind)
        fn.__module__ = module.__name__
        setattr(module, fname, fn)


def internal_module(module):
    """mx.<nd|sym>._internal: a module holding `module`'s functions of the ops whose names
    start with '_' (_plus_scalar, _maximum, ...), as in MXNet."""
    import types
    mod = types.ModuleType(module.__name__ + "._internal")
    mod.__doc__ = "Ops whose names start with an underscore."
    for fname, _info in function_names():
        if fname.startswith("_") and hasattr(module, fname):
            setattr(mod, fname, getattr(module, fname))
    return mod


def prefixed_names(prefix):
    """Names (prefix removed) of the registered ops whose names start with `prefix`."""
    return sorted(n[len(prefix):] for n in all_ops() if n.startswith(prefix))


def prefix_namespace(modname, source, prefix, doc, label):
    """A module `modname` exposing `source`'s function of every registered op named
    prefix + X as X (mx.nd.contrib.X for _contrib_X, mx.sym.linalg.gemm for _linalg_gemm).
    Names are looked up in the registry on access, so ops registered later (plugins) appear
    too; a name with no such op raises AttributeError naming what exists."""
    import sys
    import types
    m = types.ModuleType(modname, doc)

    def lookup(name):
        if name.startswith("__"):
            raise AttributeError(name)
        if find(prefix + name) is not None:
            fn = getattr(source, prefix + name, None)
            if fn is not None:
                return fn
        raise AttributeError("module '%s' has no attribute '%s' (Loom has no operator %s%s; "
                             "%s operators available: %s)" %
                             (modname, name, prefix, name, label,
                              ", ".join(prefixed_names(prefix)) or "none"))

    def listing():
        return sorted(set(vars(m)) | set(prefixed_names(prefix)))

    m.__getattr__ = lookup
    m.__dir__ = listing
    for n in prefixed_names(prefix):
        fn = getattr(source, prefix + n, None)
        if fn is not None:
            setattr(m, n, fn)
    sys.modules[modname] = m
    return m
