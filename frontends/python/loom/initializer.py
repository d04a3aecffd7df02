"""Weight initializers (``mx.init``), following MXNet 1.x semantics.

An initializer is called as ``init(desc, arr)`` where ``desc`` is an :class:`InitDesc` (a
str carrying the variable's attributes) or a plain parameter name, and ``arr`` an NDArray
(anything with ``.shape``, ``.dtype`` and ``arr[:] = numpy_array``). Dispatch:

* a variable's ``__init__`` attribute (e.g. ``'["zero", {}]'``,
  ``'["Constant", {"value": 0.25}]'`` or a registered short name such as ``"zeros"``) wins;
* otherwise the name decides: ``*weight`` -> ``_init_weight`` (the initializer's own rule),
  ``*bias`` / ``*beta`` / ``*moving_mean`` / ``*running_mean`` -> 0,
  ``*gamma`` / ``*moving_var`` / ``*running_var`` -> 1.

Random numbers come from NumPy's global generator (``numpy.random.seed`` makes them
reproducible).
"""
import json
import logging
import re

import numpy as np

__all__ = ["InitDesc", "Initializer", "register", "alias", "create", "Load", "Mixed", "Zero",
           "One", "Constant", "Uniform", "Normal", "Orthogonal", "Xavier", "MSRAPrelu",
           "Bilinear", "LSTMBias"]

_REGISTRY = {}


def register(klass):
    """Registers an Initializer subclass under its lower-cased class name."""
    if not (isinstance(klass, type) and issubclass(klass, Initializer)):
        raise TypeError("can only register subclasses of Initializer, got %r" % (klass,))
    _REGISTRY[klass.__name__.lower()] = klass
    return klass


def alias(*aliases):
    """Registers extra (case-insensitive) names for an Initializer subclass."""
    def reg(klass):
        for name in aliases:
            _REGISTRY[name.lower()] = klass
        return klass
    return reg


def create(init, /, **kwargs):
    """Makes an initializer from an instance, a registered name, or MXNet's JSON form
    ``'["name", {kwargs}]'`` (kwargs may include one named ``init``, as FusedRNN's do)."""
    if isinstance(init, Initializer):
        return init
    if isinstance(init, type) and issubclass(init, Initializer):
        return init(**kwargs)
    if not isinstance(init, str):
        raise TypeError("cannot create an initializer from %r" % (init,))
    text = init.strip()
    if text.startswith("["):
        try:
            name, kw = json.loads(text)
        except ValueError as err:
            raise ValueError("bad initializer JSON %r: %s" % (init, err)) from err
        kw = dict(kw)
        kw.update(kwargs)
        return create(name, **kw)
    klass = _REGISTRY.get(text.lower())
    if klass is None:
        raise ValueError("unknown initializer '%s' (registered: %s)" %
                         (init, ", ".join(sorted(_REGISTRY))))
    return klass(**kwargs)


class InitDesc(str):
    """A parameter name with the variable's attributes (``attrs``, e.g. ``__init__``) and
    the global initializer in effect."""

    def __new__(cls, name, attrs=None, global_init=None):
        ret = super(InitDesc, cls).__new__(cls, name)
        ret.attrs = attrs or {}
        ret.global_init = global_init
        return ret


def _write(arr, value):
    """arr[:] = value, cast to the array's dtype."""
    if np.isscalar(value):
        arr[:] = value
    else:
        dtype = getattr(arr, "dtype", np.float32)
        arr[:] = np.asarray(value).astype(dtype, copy=False).reshape(tuple(arr.shape))


class Initializer(object):
    """Base class. Subclasses override ``_init_weight`` (and optionally the others)."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        self._verbose = False
        self._print_func = None

    def set_verbosity(self, verbose=False, print_func=None):
        """Logs a statistic of every initialised array (``print_func(arr)`` -> str,
        default: the L2 norm divided by sqrt(size))."""
        self._verbose = verbose
        if print_func is None:
            def print_func(x):
                a = x.asnumpy() if hasattr(x, "asnumpy") else np.asarray(x)
                return str(float(np.linalg.norm(a) / np.sqrt(max(a.size, 1))))
        self._print_func = print_func
        return self

    def _verbose_print(self, desc, init, arr):
        if self._verbose and self._print_func:
            logging.info("Initialized %s as %s: %s", desc, init, self._print_func(arr))

    def dumps(self):
        """MXNet's JSON form, e.g. '["xavier", {"rnd_type": "uniform", ...}]'."""
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __repr__(self):
        return "%s(%s)" % (self.__class__.__name__,
                           ", ".join("%s=%r" % kv for kv in sorted(self._kwargs.items())))

    def __call__(self, desc, arr):
        if not isinstance(desc, InitDesc):
            desc = InitDesc(str(desc))
        if desc.global_init is None:
            desc.global_init = self
        init = desc.attrs.get("__init__", "") if desc.attrs else ""
        if init:
            create(init)._init_weight(desc, arr)
            self._verbose_print(desc, init, arr)
            return
        name = str(desc)
        if name.endswith("weight"):
            self._init_weight(desc, arr)
            self._verbose_print(desc, "weight", arr)
        elif name.endswith("bias"):
            self._init_bias(desc, arr)
            self._verbose_print(desc, "bias", arr)
        elif name.endswith("gamma"):
            self._init_gamma(desc, arr)
            self._verbose_print(desc, "gamma", arr)
        elif name.endswith("beta"):
            self._init_beta(desc, arr)
            self._verbose_print(desc, "beta", arr)
        elif name.endswith(("moving_mean", "running_mean", "moving_inv_var", "moving_avg",
                            "min")):
            self._init_zero(desc, arr)
            self._verbose_print(desc, "zero", arr)
        elif name.endswith(("moving_var", "running_var", "max")):
            self._init_one(desc, arr)
            self._verbose_print(desc, "one", arr)
        else:
            self._init_default(desc, arr)

    # ---- rules; subclasses override _init_weight ----
    def _init_zero(self, _, arr):
        _write(arr, 0.0)

    def _init_one(self, _, arr):
        _write(arr, 1.0)

    def _init_bias(self, _, arr):
        _write(arr, 0.0)

    def _init_gamma(self, _, arr):
        _write(arr, 1.0)

    def _init_beta(self, _, arr):
        _write(arr, 0.0)

    def _init_weight(self, name, arr):
        raise NotImplementedError("%s must override _init_weight" % self.__class__.__name__)

    def _init_default(self, name, _):
        raise ValueError(
            "Unknown initialization pattern for %s. Default initialization is limited to "
            '"weight", "bias", "gamma" (1.0), "beta" (0.0) and the BatchNorm moving '
            "statistics. Use mx.sym.Variable(init=mx.init.*) to set an initializer." % name)


class Load(object):
    """Initialises from saved arrays: ``param`` is a dict name -> array (``arg:``/``aux:``
    prefixes are stripped) or a file name read with ``mx.nd.load``. Names not found go to
    ``default_init``."""

    def __init__(self, param, default_init=None, verbose=False):
        if isinstance(param, str):
            import importlib
            pkg = importlib.import_module(__package__)
            nd = getattr(pkg, "nd", None) or importlib.import_module(__package__ + ".ndarray")
            param = nd.load(param)
        if not isinstance(param, dict):
            raise TypeError("Load expects a dict of arrays or a file name")
        self.param = {}
        for name, arr in param.items():
            if name.startswith("arg:") or name.startswith("aux:"):
                name = name[4:]
            self.param[name] = arr
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, name, arr):
        name = str(name)
        if name in self.param:
            src = self.param[name]
            src_np = src.asnumpy() if hasattr(src, "asnumpy") else np.asarray(src)
            if tuple(arr.shape) != tuple(src_np.shape):
                raise ValueError("Parameter %s cannot be initialized from loading. Shape "
                                 "mismatch, target %s vs loaded %s" %
                                 (name, tuple(arr.shape), tuple(src_np.shape)))
            _write(arr, src_np)
            if self.verbose:
                logging.info("Initialized %s by loading", name)
        else:
            if self.default_init is None:
                raise ValueError("Cannot Initialize %s. Not found in loaded param and no "
                                 "default Initializer is provided." % name)
            self.default_init(name, arr)
            if self.verbose:
                logging.info("Initialized %s by default", name)


class Mixed(object):
    """Chooses the initializer by the first regular expression (re.match) that matches the
    name: ``Mixed(['bias', '.*'], [mx.init.Zero(), mx.init.Uniform(0.1)])``."""

    def __init__(self, patterns, initializers):
        if len(patterns) != len(initializers):
            raise ValueError("Mixed needs as many patterns as initializers")
        self.map = list(zip([re.compile(p) for p in patterns], initializers))

    def __call__(self, name, arr):
        for prog, init in self.map:
            if prog.match(str(name)):
                init(name, arr)
                return
        raise ValueError('Parameter name %s did not match any pattern. Consider adding a ".*" '
                         "pattern at the end with a default Initializer." % name)


@register
@alias("zeros")
class Zero(Initializer):
    """Fills with 0."""

    def __init__(self):
        super(Zero, self).__init__()

    def _init_weight(self, _, arr):
        _write(arr, 0.0)


@register
@alias("ones")
class One(Initializer):
    """Fills with 1."""

    def __init__(self):
        super(One, self).__init__()

    def _init_weight(self, _, arr):
        _write(arr, 1.0)


@register
class Constant(Initializer):
    """Fills with ``value`` (a scalar, or an array-like broadcast to the shape)."""

    def __init__(self, value):
        # an array value (NDArray or NumPy) is kept as nested lists in the JSON form
        shown = value
        if not np.isscalar(value):
            shown = (value.asnumpy() if hasattr(value, "asnumpy") else np.asarray(value)).tolist()
        super(Constant, self).__init__(value=shown)
        self.value = value

    def _init_weight(self, _, arr):
        if np.isscalar(self.value):
            _write(arr, float(self.value))
        else:
            _write(arr, np.broadcast_to(np.asarray(self.value), tuple(arr.shape)))


@register
class Uniform(Initializer):
    """Weights ~ U(-scale, scale)."""

    def __init__(self, scale=0.07):
        super(Uniform, self).__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _, arr):
        _write(arr, np.random.uniform(-self.scale, self.scale, tuple(arr.shape)))


@register
class Normal(Initializer):
    """Weights ~ N(0, sigma^2)."""

    def __init__(self, sigma=0.01):
        super(Normal, self).__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _, arr):
        _write(arr, np.random.normal(0.0, self.sigma, tuple(arr.shape)))


@register
class Orthogonal(Initializer):
    """Orthogonal weights (Saxe et al.), scaled by ``scale``; ``rand_type`` 'uniform' or
    'normal' for the random matrix that is decomposed."""

    def __init__(self, scale=1.414, rand_type="uniform"):
        super(Orthogonal, self).__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, _, arr):
        nout = arr.shape[0]
        nin = int(np.prod(arr.shape[1:]))
        if self.rand_type == "uniform":
            tmp = np.random.uniform(-1.0, 1.0, (nout, nin))
        elif self.rand_type == "normal":
            tmp = np.random.normal(0.0, 1.0, (nout, nin))
        else:
            raise ValueError("Unknown random type %s" % self.rand_type)
        u, _, v = np.linalg.svd(tmp, full_matrices=False)
        q = u if u.shape == tmp.shape else v
        _write(arr, self.scale * q.reshape(tuple(arr.shape)))


@register
class Xavier(Initializer):
    """Xavier/Glorot initialisation.

    fan_in = shape[1] * prod(shape[2:]), fan_out = shape[0] * prod(shape[2:]);
    factor = (fan_in + fan_out) / 2 ('avg'), fan_in ('in') or fan_out ('out');
    scale = sqrt(magnitude / factor); weights ~ U(-scale, scale) ('uniform') or
    N(0, scale^2) ('gaussian').
    """

    def __init__(self, rnd_type="uniform", factor_type="avg", magnitude=3):
        super(Xavier, self).__init__(rnd_type=rnd_type, factor_type=factor_type,
                                     magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _init_weight(self, name, arr):
        shape = tuple(arr.shape)
        if len(shape) < 2:
            raise ValueError("Xavier initializer cannot be applied to vector %s. It requires "
                             "at least 2D." % name)
        hw_scale = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
        fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
        if self.factor_type == "avg":
            factor = (fan_in + fan_out) / 2.0
        elif self.factor_type == "in":
            factor = fan_in
        elif self.factor_type == "out":
            factor = fan_out
        else:
            raise ValueError("Incorrect factor type %s" % self.factor_type)
        scale = np.sqrt(self.magnitude / factor)
        if self.rnd_type == "uniform":
            _write(arr, np.random.uniform(-scale, scale, shape))
        elif self.rnd_type == "gaussian":
            _write(arr, np.random.normal(0.0, scale, shape))
        else:
            raise ValueError("Unknown random type %s" % self.rnd_type)


@register
class MSRAPrelu(Xavier):
    """He/MSRA initialisation for PReLU nets: Gaussian Xavier with
    magnitude 2 / (1 + slope^2)."""

    def __init__(self, factor_type="avg", slope=0.25):
        magnitude = 2.0 / (1 + slope ** 2)
        super(MSRAPrelu, self).__init__("gaussian", factor_type, magnitude)
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class Bilinear(Initializer):
    """Bilinear upsampling kernel (for Deconvolution weights)."""

    def __init__(self):
        super(Bilinear, self).__init__()

    def _init_weight(self, _, arr):
        shape = tuple(arr.shape)
        weight = np.zeros(int(np.prod(shape)), dtype="float32")
        f = np.ceil(shape[3] / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        for i in range(weight.size):
            x = i % shape[3]
            y = (i // shape[3]) % shape[2]
            weight[i] = (1 - abs(x / f - c)) * (1 - abs(y / f - c))
        _write(arr, weight.reshape(shape))


@register
class LSTMBias(Initializer):
    """LSTM bias: 0 except the forget gate (second quarter) = ``forget_bias``."""

    def __init__(self, forget_bias=1.0):
        super(LSTMBias, self).__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name, arr):
        b = np.zeros(tuple(arr.shape), dtype="float32")
        num_hidden = int(arr.shape[0] / 4)
        b[num_hidden:2 * num_hidden] = self.forget_bias
        _write(arr, b)


def __getattr__(name):
    # mx.init.FusedRNN lives with the fused RNN cell (it needs the cell's parameter layout).
    if name == "FusedRNN":
        from .rnn.rnn_cell import FusedRNN
        return FusedRNN
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
