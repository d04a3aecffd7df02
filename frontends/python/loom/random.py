"""mx.random / mx.rnd, mx.nd.random and mx.sym.random: random number generation.

Imperative samplers draw from a NumPy Generator per device, reseeded by mx.random.seed (the
same seed gives the same numbers in Loom; they are not MXNet's stream). The C++ generator
(used by Dropout and initialisation inside the engine) is seeded by the same call.

Symbolic samplers (mx.sym.random.uniform(shape=...), ...) are Custom operators
('_loom_random') run by the executor: they draw from the same generators each forward and
have zero gradient with respect to their parameters."""
import json
import math
import sys
import threading
import types

import numpy as np

from . import _loom
from . import ndarray as _nd
from . import operator as _operator
from . import symbol as _sym
from .base import LoomError, _Null

NDArray = _nd.NDArray
Symbol = _sym.Symbol

# ---------------------------------------------------------------------------------------
# generators and seeding

_lock = threading.Lock()
_generators = {}
_global_seed = [None]


def _ctx_key(ctx):
    if ctx is None:
        from .context import current_context
        ctx = current_context()
    return (ctx.device_type, ctx.device_id)


def _generator(ctx=None):
    key = _ctx_key(ctx)
    with _lock:
        g = _generators.get(key)
        if g is None:
            seed = _global_seed[0]
            g = np.random.default_rng(None if seed is None else [seed, hash(key) & 0xffff])
            _generators[key] = g
        return g


def seed(seed_state, ctx="all"):
    """Seeds the random number generators. seed_state: an integer. ctx: 'all' (every
    device, and the engine's C++ generator) or one Context, whose stream alone is reseeded.

    Two runs that seed identically and then draw identically get identical numbers."""
    if not isinstance(seed_state, (int, np.integer)) or isinstance(seed_state, bool):
        raise ValueError("seed_state must be int")
    s = int(seed_state) % (1 << 32)  # any int, as MXNet; negative ones wrap
    if ctx == "all":
        _loom.seed(s)
        with _lock:
            _global_seed[0] = s
            _generators.clear()
        return
    key = _ctx_key(ctx)
    with _lock:
        _generators[key] = np.random.default_rng([s, hash(key) & 0xffff])


# ---------------------------------------------------------------------------------------
# drawing with NumPy

def _draw(dist, rng, p, size):
    """Samples of `dist` with parameters p (dict of floats or arrays broadcastable to size)."""
    if dist == "uniform":
        return rng.uniform(p["low"], p["high"], size)
    if dist == "normal":
        return rng.normal(p["loc"], p["scale"], size)
    if dist == "gamma":
        return rng.gamma(p["alpha"], p["beta"], size)
    if dist == "exponential":
        return rng.exponential(1.0 / np.asarray(p["lam"], dtype=np.float64), size)
    if dist == "poisson":
        return rng.poisson(p["lam"], size)
    if dist == "negative_binomial":
        return rng.negative_binomial(p["k"], p["p"], size)
    if dist == "generalized_negative_binomial":
        mu = np.broadcast_to(np.asarray(p["mu"], dtype=np.float64), size)
        alpha = np.broadcast_to(np.asarray(p["alpha"], dtype=np.float64), size)
        lam = np.array(mu, copy=True)
        mixed = alpha > 0
        if mixed.any():
            lam[mixed] = rng.gamma(1.0 / alpha[mixed], alpha[mixed] * mu[mixed])
        return rng.poisson(lam)
    if dist == "randint":
        return rng.integers(p["low"], p["high"], size)
    raise LoomError("unknown distribution '%s'" % dist)


# name -> (parameter names, defaults, default dtype)
_DISTS = {
    "uniform": (("low", "high"), (0.0, 1.0), "float32"),
    "normal": (("loc", "scale"), (0.0, 1.0), "float32"),
    "gamma": (("alpha", "beta"), (1.0, 1.0), "float32"),
    "exponential": (("lam",), (1.0,), "float32"),
    "poisson": (("lam",), (1.0,), "float32"),
    "negative_binomial": (("k", "p"), (1.0, 1.0), "float32"),
    "generalized_negative_binomial": (("mu", "alpha"), (1.0, 1.0), "float32"),
    "randint": (("low", "high"), (0, 1), "int32"),
}


def _shape_tuple(shape):
    if shape is _Null or shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _check_params(dist, p):
    def bad(cond, msg):
        if np.any(cond):
            raise LoomError("random %s: %s" % (dist, msg))
    if dist == "uniform":
        bad(np.asarray(p["high"]) < np.asarray(p["low"]), "high must be >= low")
    elif dist == "normal":
        bad(np.asarray(p["scale"]) < 0, "scale must be non-negative")
    elif dist == "gamma":
        bad((np.asarray(p["alpha"]) <= 0) | (np.asarray(p["beta"]) <= 0),
            "alpha and beta must be positive")
    elif dist in ("exponential",):
        bad(np.asarray(p["lam"]) <= 0, "lam (1/scale) must be positive")
    elif dist == "poisson":
        bad(np.asarray(p["lam"]) < 0, "lam must be non-negative")
    elif dist == "negative_binomial":
        bad(np.asarray(p["k"]) <= 0, "k must be positive")
        bad((np.asarray(p["p"]) <= 0) | (np.asarray(p["p"]) > 1), "p must be in (0, 1]")
    elif dist == "generalized_negative_binomial":
        bad(np.asarray(p["mu"]) < 0, "mu must be non-negative")
        bad(np.asarray(p["alpha"]) < 0, "alpha must be non-negative")
    elif dist == "randint":
        bad(np.asarray(p["high"]) <= np.asarray(p["low"]), "high must be > low")


def _sample_nd(dist, values, shape, dtype, ctx, out):
    """Imperative sampling. values: parameters (float or NDArray each, all of one kind)."""
    names, _, default_dtype = _DISTS[dist]
    arrays = [v for v in values if isinstance(v, NDArray)]
    shape = _shape_tuple(shape)
    if arrays:
        if len(arrays) != len(values):
            raise ValueError("random %s: parameters must be all numbers or all NDArrays" % dist)
        pshape = arrays[0].shape
        for a in arrays[1:]:
            if a.shape != pshape:
                raise ValueError("random %s: parameter arrays must have the same shape, got "
                                 "%s and %s" % (dist, pshape, a.shape))
        if ctx is None:
            ctx = arrays[0].context
        if dtype is _Null or dtype is None:
            dtype = arrays[0].dtype if dist != "randint" else default_dtype
        extra = (1,) * len(shape)
        p = {n: v.asnumpy().astype(np.float64).reshape(pshape + extra)
             for n, v in zip(names, values)}
        size = pshape + shape
    else:
        p = {n: float(v) for n, v in zip(names, values)}
        if dist == "randint":
            p = {n: int(v) for n, v in zip(names, values)}
        if out is not None and not shape:
            shape = out.shape
        size = shape if shape else (1,)
    if dtype is _Null or dtype is None:
        dtype = out.dtype if out is not None else default_dtype
    _check_params(dist, p)
    res = _draw(dist, _generator(ctx), p, size).astype(np.dtype(dtype))
    if out is not None:
        if tuple(out.shape) != tuple(res.shape):
            raise ValueError("random %s: out has shape %s, samples have shape %s" %
                             (dist, out.shape, res.shape))
        out[:] = res
        return out
    return _nd.array(res, ctx=ctx, dtype=dtype)


def _scalar_or_nd(v, name):
    if not isinstance(v, (int, float, np.integer, np.floating, NDArray)):
        raise TypeError("%s must be a number or an NDArray, got %s" % (name, type(v).__name__))
    return v


# ---------------------------------------------------------------------------------------
# mx.nd.random functions

def uniform(low=0, high=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Samples from U[low, high). low/high: numbers, or NDArrays of one shape P (then the
    result has shape P + shape, one set of samples per pair)."""
    return _sample_nd("uniform", [_scalar_or_nd(low, "low"), _scalar_or_nd(high, "high")],
                      shape, dtype, ctx, out)


def normal(loc=0, scale=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Samples from N(loc, scale^2)."""
    return _sample_nd("normal", [_scalar_or_nd(loc, "loc"), _scalar_or_nd(scale, "scale")],
                      shape, dtype, ctx, out)


def randn(*shape, **kwargs):
    """Normal samples with the shape given positionally: randn(2, 3, loc=0, scale=1)."""
    loc = kwargs.pop("loc", 0)
    scale = kwargs.pop("scale", 1)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return normal(loc, scale, shape if shape else _Null, kwargs.pop("dtype", _Null),
                  kwargs.pop("ctx", None), kwargs.pop("out", None))


def poisson(lam=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Samples from Poisson(lam), returned as floating point."""
    return _sample_nd("poisson", [_scalar_or_nd(lam, "lam")], shape, dtype, ctx, out)


def exponential(scale=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Samples from the exponential distribution with mean `scale` (rate 1/scale)."""
    scale = _scalar_or_nd(scale, "scale")
    lam = 1.0 / scale if isinstance(scale, NDArray) else 1.0 / float(scale)
    return _sample_nd("exponential", [lam], shape, dtype, ctx, out)


def gamma(alpha=1, beta=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Samples from Gamma(shape alpha, scale beta): mean alpha*beta."""
    return _sample_nd("gamma", [_scalar_or_nd(alpha, "alpha"), _scalar_or_nd(beta, "beta")],
                      shape, dtype, ctx, out)


def negative_binomial(k=1, p=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Number of failures before the k-th success in Bernoulli(p) trials."""
    return _sample_nd("negative_binomial", [_scalar_or_nd(k, "k"), _scalar_or_nd(p, "p")],
                      shape, dtype, ctx, out)


def generalized_negative_binomial(mu=1, alpha=1, shape=_Null, dtype=_Null, ctx=None, out=None,
                                  **kwargs):
    """Gamma-Poisson mixture with mean mu and dispersion alpha (variance mu + alpha*mu^2)."""
    return _sample_nd("generalized_negative_binomial",
                      [_scalar_or_nd(mu, "mu"), _scalar_or_nd(alpha, "alpha")],
                      shape, dtype, ctx, out)


def randint(low, high, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Integers uniform on [low, high). dtype: 'int32' (default) or 'int64'."""
    if dtype is not _Null and dtype is not None and np.dtype(dtype).kind not in "iu":
        raise LoomError("randint: dtype must be an integer type, got %s" % np.dtype(dtype))
    return _sample_nd("randint", [int(low), int(high)], shape, dtype, ctx, out)


def _log_softmax_safe(p):
    with np.errstate(divide="ignore"):
        return np.log(p)


def multinomial(data, shape=_Null, get_prob=False, out=None, dtype="int32", **kwargs):
    """Samples category indices from the distributions in the last axis of `data` (rows of
    probabilities summing to 1). Result shape: data.shape[:-1] + shape. With get_prob, also
    returns the log-probabilities of the drawn indices."""
    if not isinstance(data, NDArray):
        raise TypeError("multinomial: data must be an NDArray")
    probs = data.asnumpy().astype(np.float64)
    if probs.ndim < 1 or probs.shape[-1] < 1:
        raise LoomError("multinomial: data needs at least one category")
    if np.any(probs < 0):
        raise LoomError("multinomial: probabilities must be non-negative")
    shape = _shape_tuple(shape)
    rng = _generator(data.context)
    k = probs.shape[-1]
    rows = probs.reshape(-1, k)
    n = int(np.prod(shape)) if shape else 1
    cum = np.cumsum(rows, axis=1)
    total = cum[:, -1:]
    u = rng.random((rows.shape[0], n)) * total
    idx = np.empty((rows.shape[0], n), dtype=np.int64)
    for r in range(rows.shape[0]):
        idx[r] = np.minimum(np.searchsorted(cum[r], u[r], side="right"), k - 1)
    out_shape = probs.shape[:-1] + shape
    samples = idx.reshape(out_shape)
    res = _nd.array(samples.astype(np.dtype(dtype)), ctx=data.context, dtype=dtype)
    if out is not None:
        out[:] = res
        res = out
    if not get_prob:
        return res
    logp = _log_softmax_safe(np.take_along_axis(rows, idx, axis=1) / total).reshape(out_shape)
    return [res, _nd.array(logp.astype(np.dtype(data.dtype)), ctx=data.context,
                           dtype=data.dtype)]


def shuffle(data, out=None, **kwargs):
    """A copy of `data` with its first axis randomly permuted."""
    a = data.asnumpy()
    perm = _generator(data.context).permutation(a.shape[0]) if a.ndim else None
    res = a[perm] if perm is not None else a.copy()
    if out is not None:
        out[:] = res
        return out
    return _nd.array(res, ctx=data.context, dtype=data.dtype)


def _like(dist_fn, names):
    def fn(data=None, *args, **kwargs):
        if not isinstance(data, NDArray):
            raise TypeError("%s_like: data must be an NDArray" % dist_fn.__name__)
        params = dict(zip(names, args))
        params.update({k: kwargs[k] for k in names if k in kwargs})
        return dist_fn(shape=data.shape, dtype=kwargs.get("dtype", data.dtype),
                       ctx=data.context, out=kwargs.get("out"), **params)
    fn.__name__ = dist_fn.__name__ + "_like"
    fn.__doc__ = "Samples like %s with the shape, dtype and context of `data`." % \
        dist_fn.__name__
    return fn


uniform_like = _like(uniform, ("low", "high"))
normal_like = _like(normal, ("loc", "scale"))
gamma_like = _like(gamma, ("alpha", "beta"))


def _exponential_rate(lam=1, shape=_Null, dtype=_Null, ctx=None, out=None, **kwargs):
    """Exponential samples with rate lam (the parameter MXNet's exponential_like takes)."""
    return _sample_nd("exponential", [_scalar_or_nd(lam, "lam")], shape, dtype, ctx, out)


_exponential_rate.__name__ = "exponential"
exponential_like = _like(_exponential_rate, ("lam",))
poisson_like = _like(poisson, ("lam",))
negative_binomial_like = _like(negative_binomial, ("k", "p"))
generalized_negative_binomial_like = _like(generalized_negative_binomial, ("mu", "alpha"))


# MXNet's operator-style names: random_<dist>(<params>, shape, dtype, ctx) draws with scalar
# parameters; sample_<dist>(<param arrays>, shape, dtype) one set per parameter element.
def _op_style(dist, nd_fn, names, array_form):
    def fn(*args, **kwargs):
        params = dict(zip(names, args))
        for n in names:
            if n in kwargs:
                params[n] = kwargs.pop(n)
        kwargs.pop("name", None)
        if array_form:
            missing = [n for n in names if n not in params]
            if missing:
                raise TypeError("sample_%s: missing parameter array(s) %s" %
                                (dist, ", ".join(missing)))
        values = [params.get(n, d) for n, d in zip(names, _DISTS[dist][1])]
        return _sample_nd(dist, values, kwargs.get("shape", _Null), kwargs.get("dtype", _Null),
                          kwargs.get("ctx"), kwargs.get("out"))
    fn.__name__ = ("sample_" if array_form else "random_") + dist
    fn.__doc__ = ("Draws %s samples, %s." %
                  (dist, "one set per element of the parameter arrays" if array_form
                   else "with scalar parameters"))
    return fn


# ---------------------------------------------------------------------------------------
# symbolic samplers: a Custom op drawing in forward

_SYM_OP = "_loom_random"


class _RandomOp(_operator.CustomOp):
    def __init__(self, dist, mode, scalars, shape, dtype, names):
        super().__init__()
        self.dist, self.mode, self.scalars = dist, mode, scalars
        self.shape, self.dtype, self.names = shape, dtype, names

    def forward(self, is_train, req, in_data, out_data, aux):
        out = out_data[0]
        if self.mode == "array":
            extra = (1,) * len(self.shape)
            p = {n: a.asnumpy().astype(np.float64).reshape(a.shape + extra)
                 for n, a in zip(self.names, in_data)}
        else:
            p = dict(zip(self.names, self.scalars))
        if self.dist == "multinomial":
            res = multinomial(in_data[0], shape=self.shape or _Null, dtype=self.dtype)
            self.assign(out, req[0], res)
            return
        if self.dist == "shuffle":
            self.assign(out, req[0], shuffle(in_data[0]))
            return
        _check_params(self.dist, p)
        res = _draw(self.dist, _generator(out.context), p, tuple(out.shape))
        self.assign(out, req[0], _nd.array(res.astype(np.dtype(self.dtype)), ctx=out.context,
                                           dtype=self.dtype))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        for r, g in zip(req, in_grad):
            if r in ("write", "inplace"):
                g[:] = 0


@_operator.register(_SYM_OP)
class _RandomProp(_operator.CustomOpProp):
    def __init__(self, dist="uniform", mode="scalar", scalars="[]", shape="[]",
                 dtype="float32", nin="1"):
        super().__init__(need_top_grad=False)
        self.dist, self.mode = dist, mode
        self.scalars = json.loads(scalars)
        self.shape = tuple(json.loads(shape))
        self.dtype = dtype
        self.nin = int(nin)
        self.names = list(_DISTS[dist][0]) if dist in _DISTS else ["data"]

    def list_arguments(self):
        if self.mode == "array":
            return self.names[:self.nin]
        return ["data"]

    def infer_shape(self, in_shape):
        if self.mode == "array":
            if self.dist == "multinomial":
                out = tuple(in_shape[0][:-1]) + self.shape
            elif self.dist == "shuffle":
                out = tuple(in_shape[0])
            else:
                out = tuple(in_shape[0]) + self.shape
        else:
            out = tuple(in_shape[0])
        return in_shape, [out], []

    def infer_type(self, in_type):
        return in_type, [np.dtype(self.dtype).type], []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return []

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _RandomOp(self.dist, self.mode, self.scalars, self.shape, self.dtype,
                         self.names)


def _sym_sample(dist, values, shape, dtype, kwargs, like=None, hint=None):
    names, _, default_dtype = _DISTS.get(dist, ((), (), "float32"))
    name = kwargs.pop("name", None)
    attr = kwargs.pop("attr", None)
    syms = [v for v in values if isinstance(v, Symbol)]
    shape_t = _shape_tuple(shape)
    dtype = default_dtype if dtype is _Null or dtype is None else np.dtype(dtype).name
    if syms:
        if len(syms) != len(values):
            raise ValueError("random %s: parameters must be all numbers or all Symbols" % dist)
        inputs, mode, scalars = syms, "array", []
    else:
        if like is not None:
            base = like
        else:
            base = _sym.zeros(shape_t if shape_t else (1,))
        inputs, mode = [base], "scalar"
        scalars = [float(v) for v in values]
    return _sym.Custom(*inputs, op_type=_SYM_OP, dist=dist, mode=mode,
                       scalars=json.dumps(scalars), shape=json.dumps(list(shape_t)),
                       dtype=dtype, nin=str(len(inputs)),
                       name=name if name is not None else _auto_name(hint or dist),
                       attr=attr)


def _auto_name(hint):
    from . import name as _name
    return _name.current().get(None, "random_" + hint)


def _sym_uniform(low=0, high=1, shape=_Null, dtype=_Null, **kwargs):
    return _sym_sample("uniform", [low, high], shape, dtype, kwargs)


def _sym_normal(loc=0, scale=1, shape=_Null, dtype=_Null, **kwargs):
    return _sym_sample("normal", [loc, scale], shape, dtype, kwargs)


def _sym_randn(*shape, **kwargs):
    """Symbolic normal samples with the shape given positionally; data=<symbol> instead
    takes the shape of that symbol (as MXNet's randn does when given data)."""
    loc = kwargs.pop("loc", 0)
    scale = kwargs.pop("scale", 1)
    dtype = kwargs.pop("dtype", _Null)
    like = kwargs.pop("data", None)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if isinstance(like, Symbol):
        return _sym_sample("normal", [loc, scale], _Null, dtype, kwargs, like=like,
                           hint="normal")
    return _sym_sample("normal", [loc, scale], shape, dtype, kwargs)


def _sym_poisson(lam=1, shape=_Null, dtype=_Null, **kwargs):
    return _sym_sample("poisson", [lam], shape, dtype, kwargs)


def _sym_exponential(scale=1, shape=_Null, dtype=_Null, **kwargs):
    lam = 1.0 / scale if isinstance(scale, Symbol) else 1.0 / float(scale)
    return _sym_sample("exponential", [lam], shape, dtype, kwargs)


def _sym_gamma(alpha=1, beta=1, shape=_Null, dtype=_Null, **kwargs):
    return _sym_sample("gamma", [alpha, beta], shape, dtype, kwargs)


def _sym_negative_binomial(k=1, p=1, shape=_Null, dtype=_Null, **kwargs):
    return _sym_sample("negative_binomial", [k, p], shape, dtype, kwargs)


def _sym_generalized_negative_binomial(mu=1, alpha=1, shape=_Null, dtype=_Null, **kwargs):
    return _sym_sample("generalized_negative_binomial", [mu, alpha], shape, dtype, kwargs)


def _sym_randint(low, high, shape=_Null, dtype=_Null, **kwargs):
    return _sym_sample("randint", [int(low), int(high)], shape, dtype, kwargs)


def _sym_multinomial(data, shape=_Null, get_prob=False, dtype="int32", **kwargs):
    if get_prob:
        raise LoomError("mx.sym.random.multinomial(get_prob=True) is not supported by Loom "
                        "(use the imperative mx.nd.random.multinomial)")
    name = kwargs.pop("name", None)
    return _sym.Custom(data, op_type=_SYM_OP, dist="multinomial", mode="array",
                       scalars="[]", shape=json.dumps(list(_shape_tuple(shape))),
                       dtype=np.dtype(dtype).name, nin="1",
                       name=name if name is not None else _auto_name("multinomial"))


def _sym_shuffle(data, **kwargs):
    name = kwargs.pop("name", None)
    return _sym.Custom(data, op_type=_SYM_OP, dist="shuffle", mode="array", scalars="[]",
                       shape="[]", dtype="float32", nin="1",
                       name=name if name is not None else _auto_name("shuffle"))


def _sym_like(dist, names, transform=None):
    def fn(data=None, *args, **kwargs):
        if not isinstance(data, Symbol):
            raise TypeError("%s_like: data must be a Symbol" % dist)
        defaults = dict(zip(_DISTS[dist][0], _DISTS[dist][1]))
        params = dict(zip(names, args))
        params.update({k: kwargs.pop(k) for k in names if k in kwargs})
        values = [params.get(n, defaults.get(n, 1.0)) for n in names]
        if transform:
            values = transform(values)
        dtype = kwargs.pop("dtype", _Null)
        return _sym_sample(dist, values, _Null, dtype, kwargs, like=data, hint=dist + "_like")
    fn.__name__ = dist + "_like"
    return fn


def _sym_op_style(dist, names, array_form):
    def fn(*args, **kwargs):
        params = dict(zip(names, args))
        for n in names:
            if n in kwargs:
                params[n] = kwargs.pop(n)
        values = [params.get(n, d) for n, d in zip(names, _DISTS[dist][1])]
        shape = kwargs.pop("shape", _Null)
        dtype = kwargs.pop("dtype", _Null)
        return _sym_sample(dist, values, shape, dtype, kwargs)
    fn.__name__ = ("sample_" if array_form else "random_") + dist
    return fn


# ---------------------------------------------------------------------------------------
# densities: random_pdf_<dist>(sample, <params>, is_log) with gradients for every input

def _lgamma(x):
    return np.vectorize(math.lgamma, otypes=[np.float64])(x)


def _digamma(x):
    """psi(x) for x > 0: recurrence up to x >= 6, then the asymptotic series."""
    x = np.array(x, dtype=np.float64, copy=True)
    acc = np.zeros_like(x)
    small = x < 6
    while small.any():
        acc[small] -= 1.0 / x[small]
        x[small] += 1.0
        small = x < 6
    inv2 = 1.0 / (x * x)
    series = inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (
        1.0 / 240 - inv2 * (1.0 / 132)))))
    return acc + np.log(x) - 0.5 / x - series


# name -> (parameter names, discrete sample)
_PDFS = {
    "uniform": (("low", "high"), False),
    "normal": (("mu", "sigma"), False),
    "gamma": (("alpha", "beta"), False),
    "exponential": (("lam",), False),
    "poisson": (("lam",), True),
    "negative_binomial": (("k", "p"), True),
    "generalized_negative_binomial": (("mu", "alpha"), True),
    "dirichlet": (("alpha",), False),
}


def _nb_logpdf(x, k, p):
    """log P(x) of the negative binomial and its derivatives in k and p."""
    logp = (_lgamma(x + k) - _lgamma(x + 1) - _lgamma(k) + k * np.log(p) +
            x * np.log1p(-p))
    dk = _digamma(x + k) - _digamma(k) + np.log(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        dp = k / p - np.where(x > 0, x / (1 - p), 0.0)
    return logp, dk, dp


def _logpdf(dist, x, params):
    """(log density, d/dx, [d/dparam]) elementwise (dirichlet: summed over the last axis
    for the density, per component for the derivatives)."""
    if dist == "uniform":
        lo, hi = params
        inside = (x >= lo) & (x <= hi)
        width = hi - lo
        logp = np.where(inside, -np.log(width), -np.inf)
        return logp, np.zeros_like(x), [np.where(inside, 1.0 / width, 0.0),
                                        np.where(inside, -1.0 / width, 0.0)]
    if dist == "normal":
        mu, sigma = params
        z = (x - mu) / sigma
        logp = -0.5 * z * z - np.log(sigma) - 0.5 * math.log(2 * math.pi)
        return logp, -z / sigma, [z / sigma, (z * z - 1.0) / sigma]
    if dist == "gamma":  # beta is the rate here, as in MXNet's pdf op
        a, b = params
        logp = a * np.log(b) + (a - 1) * np.log(x) - b * x - _lgamma(a)
        return logp, (a - 1) / x - b, [np.log(b) + np.log(x) - _digamma(a), a / b - x]
    if dist == "exponential":
        (lam,) = params
        return np.log(lam) - lam * x, -lam + np.zeros_like(x), [1.0 / lam - x]
    if dist == "poisson":
        (lam,) = params
        logp = x * np.log(lam) - lam - _lgamma(x + 1)
        return logp, np.zeros_like(x), [x / lam - 1.0]
    if dist == "negative_binomial":
        k, p = params
        logp, dk, dp = _nb_logpdf(x, k, p)
        return logp, np.zeros_like(x), [dk, dp]
    if dist == "generalized_negative_binomial":
        mu, alpha = params
        mu, alpha = np.broadcast_to(mu, x.shape), np.broadcast_to(alpha, x.shape)
        pois = alpha <= 0
        a = np.where(pois, 1.0, alpha)
        k, p = 1.0 / a, 1.0 / (1.0 + a * mu)
        logp, dk, dp = _nb_logpdf(x, k, p)
        d_mu = (x - mu) / (mu * (1 + a * mu))
        d_alpha = dk * (-1.0 / (a * a)) + dp * (-mu / (1 + a * mu) ** 2)
        plog = x * np.log(mu) - mu - _lgamma(x + 1)
        return (np.where(pois, plog, logp), np.zeros_like(x),
                [np.where(pois, x / mu - 1.0, d_mu), np.where(pois, 0.0, d_alpha)])
    if dist == "dirichlet":
        (alpha,) = params
        total = alpha.sum(axis=-1, keepdims=True)
        logp = (_lgamma(total[..., 0]) - _lgamma(alpha).sum(axis=-1) +
                ((alpha - 1) * np.log(x)).sum(axis=-1))
        return logp, (alpha - 1) / x, [_digamma(total) - _digamma(alpha) + np.log(x)]
    raise LoomError("unknown density '%s'" % dist)


def _pdf_eval(dist, sample, params, is_log):
    """Density of `sample` (NumPy) under parameters (NumPy arrays with the leading shape of
    the sample; dirichlet's carry the category axis last). Returns (density, d/dsample,
    [d/dparam] broadcast to the sample's shape)."""
    x = np.asarray(sample, dtype=np.float64)
    ps = [np.asarray(p, dtype=np.float64) for p in params]
    if dist == "dirichlet":
        lead = ps[0].shape[:-1]
        extra = x.ndim - len(lead) - 1
        ps = [p.reshape(lead + (1,) * extra + p.shape[-1:]) for p in ps]
    else:
        lead = ps[0].shape
        extra = x.ndim - len(lead)
        ps = [p.reshape(lead + (1,) * extra) for p in ps]
    logp, dx, dps = _logpdf(dist, x, ps)
    if is_log:
        return logp, dx, dps
    dens = np.exp(logp)
    if dist == "dirichlet":
        scale = dens[..., None]
        return dens, scale * dx, [scale * d for d in dps]
    return dens, dens * dx, [dens * d for d in dps]


class _PdfOp(_operator.CustomOp):
    def __init__(self, dist, is_log):
        super().__init__()
        self.dist, self.is_log = dist, is_log

    def forward(self, is_train, req, in_data, out_data, aux):
        dens, _, _ = _pdf_eval(self.dist, in_data[0].asnumpy(),
                               [a.asnumpy() for a in in_data[1:]], self.is_log)
        out = out_data[0]
        self.assign(out, req[0], _nd.array(dens.astype(np.dtype(out.dtype)), ctx=out.context,
                                           dtype=out.dtype))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        params = [a.asnumpy() for a in in_data[1:]]
        _, dx, dps = _pdf_eval(self.dist, in_data[0].asnumpy(), params, self.is_log)
        og = out_grad[0].asnumpy().astype(np.float64)
        if self.dist == "dirichlet":
            og = og[..., None]
        grads = [og * dx]
        for p, d in zip(params, dps):
            g = og * d
            if self.dist == "dirichlet":
                lead = p.ndim - 1
                g = g.sum(axis=tuple(range(lead, g.ndim - 1))) if g.ndim - 1 > lead else g
            else:
                g = g.sum(axis=tuple(range(p.ndim, g.ndim))) if g.ndim > p.ndim else g
            grads.append(g.reshape(p.shape))
        if _PDFS[self.dist][1]:
            grads[0] = np.zeros_like(grads[0])
        for r, dst, g in zip(req, in_grad, grads):
            self.assign(dst, r, _nd.array(g.astype(np.dtype(dst.dtype)), ctx=dst.context,
                                          dtype=dst.dtype))


@_operator.register("_loom_random_pdf")
class _PdfProp(_operator.CustomOpProp):
    def __init__(self, dist="normal", is_log="False"):
        super().__init__(need_top_grad=True)
        if dist not in _PDFS:
            raise LoomError("unknown density '%s'" % dist)
        self.dist = dist
        self.is_log = str(is_log).lower() in ("true", "1")

    def list_arguments(self):
        return ["sample"] + list(_PDFS[self.dist][0])

    def infer_shape(self, in_shape):
        sample = tuple(in_shape[0])
        out = sample[:-1] if self.dist == "dirichlet" else sample
        return in_shape, [out], []

    def infer_type(self, in_type):
        return in_type, [in_type[0]], []

    def create_operator(self, ctx, in_shapes, in_dtypes):
        return _PdfOp(self.dist, self.is_log)


def _pdf_functions(dist):
    names = ("sample",) + _PDFS[dist][0]

    def collect(args, kwargs, kind):
        vals = dict(zip(names, args))
        for n in names:
            if n in kwargs:
                vals[n] = kwargs.pop(n)
        missing = [n for n in names if n not in vals]
        if missing:
            raise TypeError("random_pdf_%s: missing %s input(s) %s" %
                            (dist, kind, ", ".join(missing)))
        return [vals[n] for n in names]

    def sym_fn(*args, **kwargs):
        inputs = collect(args, kwargs, "symbol")
        is_log = bool(kwargs.pop("is_log", False))
        name = kwargs.pop("name", None)
        return _sym.Custom(*inputs, op_type="_loom_random_pdf", dist=dist, is_log=is_log,
                           name=name if name is not None else _auto_name("pdf_" + dist))

    def nd_fn(*args, **kwargs):
        inputs = collect(args, kwargs, "NDArray")
        is_log = bool(kwargs.pop("is_log", False))
        out = kwargs.pop("out", None)
        dens, _, _ = _pdf_eval(dist, inputs[0].asnumpy(), [a.asnumpy() for a in inputs[1:]],
                               is_log)
        res = _nd.array(dens.astype(np.dtype(inputs[0].dtype)), ctx=inputs[0].context,
                        dtype=inputs[0].dtype)
        if out is not None:
            out[:] = res
            return out
        return res

    doc = ("Density (is_log: log-density) of `sample` under %s(%s), one parameter set per "
           "leading index of the sample; differentiable in every input." %
           (dist, ", ".join(_PDFS[dist][0])))
    for fn, prefix in ((sym_fn, "random_pdf_"), (nd_fn, "random_pdf_")):
        fn.__name__ = prefix + dist
        fn.__doc__ = doc
    return sym_fn, nd_fn


for _dist in _PDFS:
    _s, _n = _pdf_functions(_dist)
    for _prefix in ("random_pdf_", "_random_pdf_"):
        if not hasattr(_sym, _prefix + _dist):
            setattr(_sym, _prefix + _dist, _s)
        if not hasattr(_nd, _prefix + _dist):
            setattr(_nd, _prefix + _dist, _n)


# ---------------------------------------------------------------------------------------
# namespaces

_PUBLIC = ["uniform", "normal", "randn", "poisson", "exponential", "gamma",
           "negative_binomial", "generalized_negative_binomial", "multinomial", "shuffle",
           "randint", "uniform_like", "normal_like", "gamma_like", "exponential_like",
           "poisson_like", "negative_binomial_like", "generalized_negative_binomial_like"]


def _make_namespace(modname, funcs, doc):
    m = types.ModuleType(modname, doc)
    for k, v in funcs.items():
        setattr(m, k, v)
    m.__all__ = sorted(funcs)
    sys.modules[modname] = m
    return m


_nd_funcs = {n: globals()[n] for n in _PUBLIC}
_sym_funcs = {
    "uniform": _sym_uniform, "normal": _sym_normal, "randn": _sym_randn,
    "poisson": _sym_poisson, "exponential": _sym_exponential, "gamma": _sym_gamma,
    "negative_binomial": _sym_negative_binomial,
    "generalized_negative_binomial": _sym_generalized_negative_binomial,
    "multinomial": _sym_multinomial, "shuffle": _sym_shuffle, "randint": _sym_randint,
    "uniform_like": _sym_like("uniform", ("low", "high")),
    "normal_like": _sym_like("normal", ("loc", "scale")),
    "gamma_like": _sym_like("gamma", ("alpha", "beta")),
    "exponential_like": _sym_like("exponential", ("lam",)),
    "poisson_like": _sym_like("poisson", ("lam",)),
    "negative_binomial_like": _sym_like("negative_binomial", ("k", "p")),
    "generalized_negative_binomial_like": _sym_like("generalized_negative_binomial",
                                                    ("mu", "alpha")),
}

nd_random = _make_namespace(_nd.__name__ + ".random", _nd_funcs,
                            "mx.nd.random: imperative samplers.")
sym_random = _make_namespace(_sym.__name__ + ".random", _sym_funcs,
                             "mx.sym.random: symbolic samplers (Custom op '_loom_random').")
_nd.random = nd_random
_sym.random = sym_random


_SAMPLE_PARAM_NAMES = {"normal": ("mu", "sigma")}


def _install_op_names(module, factory, extra):
    """MXNet's operator names (random_uniform, _random_uniform, sample_normal, ...) where the
    module does not define them already."""
    for dist, (names, _, _) in _DISTS.items():
        for prefix, array_form in (("random_", False), ("_random_", False),
                                   ("sample_", True), ("_sample_", True)):
            if not hasattr(module, prefix + dist):
                # sample_normal names its arrays mu/sigma where random_normal has loc/scale.
                given = _SAMPLE_PARAM_NAMES.get(dist, names) if array_form else names
                setattr(module, prefix + dist, factory(dist, given, array_form))
    for k, v in extra.items():
        if not hasattr(module, k):
            setattr(module, k, v)


def _nd_op_style(dist, names, array_form):
    return _op_style(dist, None, names, array_form)


_install_op_names(_nd, _nd_op_style, {
    "sample_multinomial": multinomial, "_sample_multinomial": multinomial,
    "shuffle": shuffle, "_shuffle": shuffle,
    "uniform": _nd_op_style("uniform", ("low", "high"), False),
    "normal": _nd_op_style("normal", ("loc", "scale"), False),
    "random_randn": randn,
})
_install_op_names(_sym, _sym_op_style, {
    "sample_multinomial": _sym_multinomial, "_sample_multinomial": _sym_multinomial,
    "shuffle": _sym_shuffle, "_shuffle": _sym_shuffle,
    "uniform": _sym_op_style("uniform", ("low", "high"), False),
    "normal": _sym_op_style("normal", ("loc", "scale"), False),
})



def _sample_unique_zipfian(range_max, shape=_Null, **kwargs):
    """Per row of shape (batch, num_sampled): distinct classes drawn from the log-uniform
    distribution over [0, range_max) by rejecting repeats; returns (classes int64, number of
    draws each row took int64)."""
    batch, n = _shape_tuple(shape)
    range_max = int(range_max)
    if n > range_max:
        raise LoomError("_sample_unique_zipfian: %d distinct classes requested from %d" %
                        (n, range_max))
    rng = _generator(kwargs.get("ctx"))
    log_range = math.log(range_max + 1.0)
    classes = np.empty((batch, n), dtype=np.int64)
    trials = np.empty((batch,), dtype=np.int64)
    for b in range(batch):
        seen, row, count = set(), [], 0
        while len(row) < n:
            draws = np.floor(np.exp(rng.random(2 * (n - len(row)) + 16) * log_range)) - 1
            for d in np.clip(draws, 0, range_max - 1).astype(np.int64).tolist():
                count += 1
                if d not in seen:
                    seen.add(d)
                    row.append(d)
                    if len(row) == n:
                        break
        classes[b] = row
        trials[b] = count
    return [_nd.array(classes, dtype="int64"), _nd.array(trials, dtype="int64")]


# mx.nd._internal / mx.sym._internal (where those namespaces exist): MXNet's internal names
for _mod, _factory in ((_nd, _nd_op_style), (_sym, _sym_op_style)):
    _internal = getattr(_mod, "_internal", None)
    if _internal is None:
        continue
    for _dist, (_names, _, _) in _DISTS.items():
        for _prefix, _array_form in (("_random_", False), ("_sample_", True)):
            if not hasattr(_internal, _prefix + _dist):
                setattr(_internal, _prefix + _dist, _factory(_dist, _names, _array_form))
    _likes = _nd_funcs if _mod is _nd else _sym_funcs
    for _dist in _DISTS:
        if _dist + "_like" in _likes and not hasattr(_internal, "_random_%s_like" % _dist):
            setattr(_internal, "_random_%s_like" % _dist, _likes[_dist + "_like"])
    if _mod is _nd and not hasattr(_internal, "_sample_unique_zipfian"):
        _internal._sample_unique_zipfian = _sample_unique_zipfian

__all__ = ["seed"] + _PUBLIC
