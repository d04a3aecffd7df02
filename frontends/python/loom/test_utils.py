"""mx.test_utils: helpers for testing operators and networks (MXNet 1.x compatible names).

Comparisons (assert_almost_equal, ...), random inputs, executor-based checks
(check_symbolic_forward / check_symbolic_backward / check_numeric_gradient /
check_consistency / check_speed, in symbol_checks.py), statistical checks of random
generators (chi_square_check, verify_generator, ..., in random_checks.py), datasets
(get_mnist, get_mnist_iterator) and environment helpers, all importable from here. Everything
runs on Loom's own executors and NDArrays."""
import bz2  # noqa: F401 - MXNet's test files reach these through `from test_utils import *`
import contextlib
import errno  # noqa: F401
import gzip
import json  # noqa: F401
import logging  # noqa: F401
import math  # noqa: F401
import numbers
import os
import platform
import struct
import sys
import time  # noqa: F401 - for `from test_utils import *`
import traceback  # noqa: F401
import zipfile  # noqa: F401
from collections import OrderedDict  # noqa: F401

import numpy as np
import numpy.random as rnd  # noqa: F401
import numpy.testing as npt

from . import ndarray as _nd
from . import symbol as _sym
from .base import LoomError
from .context import Context, cpu, current_context  # noqa: F401
from .random_checks import (gen_buckets_probs_with_ppf, mean_check, var_check,  # noqa: F401
                            _chi2_sf, chi_square_check, verify_generator)
from .util import use_np, use_np_shape, use_np_array, np_shape, np_array  # noqa: F401

try:
    import scipy.stats as ss  # noqa: F401
except ImportError:
    ss = None

NDArray = _nd.NDArray
Symbol = _sym.Symbol
array = _nd.array
#: the package itself, as MXNet's test files expect `mx` from `from mxnet.test_utils import *`
mx = sys.modules[__name__.rsplit(".", 1)[0]]

# ---------------------------------------------------------------------------------------
# defaults

_default_ctx = [None]


def default_context():
    """The context tests run on: the one set by set_default_context, else the current one."""
    return _default_ctx[0] if _default_ctx[0] is not None else current_context()


def set_default_context(ctx):
    _default_ctx[0] = ctx


def default_dtype():
    return np.float32


def _dt(t):
    return np.dtype(t)


def default_rtols():
    tols = {_dt(np.float16): 1e-2, _dt(np.float32): 1e-4, _dt(np.float64): 1e-5}
    for t in (np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64):
        tols[_dt(t)] = 0
    return tols


def default_atols():
    tols = {_dt(np.float16): 1e-1, _dt(np.float32): 1e-3, _dt(np.float64): 1e-20}
    for t in (np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64):
        tols[_dt(t)] = 0
    return tols


def default_numeric_eps():
    """Finite-difference step per dtype (powers of two, exact as input deltas)."""
    return {_dt(np.float16): 2.0 ** -6, _dt(np.float32): 2.0 ** -9,
            _dt(np.float64): 2.0 ** -14}


def effective_dtype(dat):
    return np.dtype(dat.dtype)


def get_tolerance(dat, tol, default_tol):
    """tol if it is a number, else its entry (or the default) for dat's dtype."""
    if isinstance(tol, numbers.Number):
        return tol
    dtype = effective_dtype(dat)
    tol = tol or {}
    return tol.get(dtype, default_tol.get(dtype, 0))


def get_tols(x, y, rtol, atol):
    """(rtol, atol) for comparing x and y: the looser default of the two dtypes unless
    given."""
    x = np.array(x) if isinstance(x, numbers.Number) else x
    y = np.array(y) if isinstance(y, numbers.Number) else y
    return (max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols())),
            max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols())))


def get_atol(atol=None, dtype=np.dtype(np.float64)):
    return default_atols()[np.dtype(dtype)] if atol is None else atol


def get_rtol(rtol=None, dtype=np.dtype(np.float64)):
    return default_rtols()[np.dtype(dtype)] if rtol is None else rtol


def get_etol(etol=None):
    return 0 if etol is None else etol


# ---------------------------------------------------------------------------------------
# random inputs

def random_arrays(*shapes):
    """Standard-normal float32 arrays, one per shape (a single array for one shape)."""
    out = []
    for s in shapes:
        if len(s) == 0:
            out.append(np.array(np.random.randn(), dtype=default_dtype()))
        else:
            out.append(np.random.randn(*s).astype(default_dtype()))
    return out[0] if len(out) == 1 else out


def random_uniform_arrays(*shapes, **kwargs):
    low = kwargs.pop("low", 0.0)
    high = kwargs.pop("high", 1.0)
    dtype = kwargs.pop("dtype", default_dtype())
    if kwargs:
        raise TypeError("Got unexpected argument/s : " + str(kwargs.keys()))
    return [np.random.uniform(low, high, size=s).astype(dtype) for s in shapes]


def random_sample(population, k):
    """k distinct elements of `population` in random order."""
    if not 0 <= k <= len(population):
        raise ValueError("random_sample: k=%d out of range for %d elements" % (k, len(population)))
    idx = np.random.permutation(len(population))[:k]
    return [population[i] for i in idx]


def rand_shape_2d(dim0=10, dim1=10, allow_zero_size=False):
    low = 0 if allow_zero_size else 1
    return np.random.randint(low, dim0 + 1), np.random.randint(low, dim1 + 1)


def rand_shape_3d(dim0=10, dim1=10, dim2=10, allow_zero_size=False):
    low = 0 if allow_zero_size else 1
    return (np.random.randint(low, dim0 + 1), np.random.randint(low, dim1 + 1),
            np.random.randint(low, dim2 + 1))


def rand_shape_nd(num_dim, dim=10, allow_zero_size=False):
    low = 0 if allow_zero_size else 1
    return tuple(np.random.randint(low, dim + 1, size=num_dim))


def rand_coord_2d(x_low, x_high, y_low, y_high):
    return np.random.randint(x_low, x_high), np.random.randint(y_low, y_high)


def rand_ndarray(shape, stype="default", density=None, dtype=None, modifier_func=None,
                 shuffle_csr_indices=False, distribution=None, ctx=None):
    """A dense NDArray of uniform [0, 1) values. Sparse storage types are not supported by
    Loom and raise LoomError."""
    if stype != "default":
        raise LoomError("rand_ndarray: storage type '%s' is not supported by Loom (dense "
                        "arrays only)" % stype)
    dtype = default_dtype() if dtype is None else dtype
    return _nd.array(np.random.uniform(size=shape).astype(dtype), ctx=ctx, dtype=dtype)


def rand_sparse_ndarray(*args, **kwargs):
    raise LoomError("sparse NDArrays (csr/row_sparse) are not supported by Loom")


def create_sparse_array(*args, **kwargs):
    raise LoomError("sparse NDArrays (csr/row_sparse) are not supported by Loom")


def np_reduce(dat, axis, keepdims, numpy_reduce_func):
    """Reduces `dat` over `axis` (int, list or None) one axis at a time."""
    axes = [axis] if isinstance(axis, int) else (list(range(dat.ndim)) if axis is None
                                                 else list(axis))
    axes = [a % dat.ndim if dat.ndim else a for a in axes]
    ret = dat
    for a in sorted(axes, reverse=True):
        ret = numpy_reduce_func(ret, axis=a)
    if keepdims:
        shape = [1 if i in axes else s for i, s in enumerate(dat.shape)]
        ret = np.asarray(ret).reshape(shape)
    return ret


# ---------------------------------------------------------------------------------------
# comparisons

def _as_np(x):
    if isinstance(x, NDArray):
        return x.asnumpy()
    return x


def same(a, b):
    """True when the arrays have the same shape and elements."""
    return np.array_equal(_as_np(a), _as_np(b))


def reldiff(a, b):
    """sum|a - b| / sum(|a| + |b|) (0 when both are zero)."""
    a, b = _as_np(a), _as_np(b)
    diff = np.sum(np.abs(a - b))
    norm = np.sum(np.abs(a)) + np.sum(np.abs(b))
    if diff == 0:
        return 0
    return diff / norm


def checkShapes(a, b):
    if a.shape != b.shape:
        raise AssertionError(npt.build_err_msg(
            [a, b], err_msg="a.shape = %s and b.shape = %s are not equal" % (a.shape, b.shape)))


def almost_equal(a, b, rtol=None, atol=None, equal_nan=False, use_broadcast=True):
    """np.allclose with MXNet's defaults (float64 tolerances when not given)."""
    a, b = _as_np(a), _as_np(b)
    if not use_broadcast:
        checkShapes(a, b)
    return np.allclose(a, b, rtol=get_rtol(rtol), atol=get_atol(atol), equal_nan=equal_nan)


def _worst(a, b, rtol, atol):
    """(index, violation) of the element furthest outside atol + rtol*|b|."""
    with np.errstate(invalid="ignore"):
        diff = np.where(np.equal(a, b), 0, np.abs(a - b))
        ratio = diff / (atol + rtol * np.abs(b) + 1e-20)
    if ratio.size == 0:
        return (), 0.0
    flat = np.nan_to_num(ratio, nan=np.inf).ravel()
    i = int(np.argmax(flat))
    return tuple(int(j) for j in np.unravel_index(i, ratio.shape)), float(flat[i])


def locationError(a, b, index, names, maxError=False):
    return "Location of %serror: %s, %s=%.8f, %s=%.8f" % (
        "maximum " if maxError else "", str(index), names[0], a[index], names[1], b[index])


def _fail_message(a, b, rtol, atol, names, equal_nan, mismatches):
    index, rel = _worst(a, b, rtol, atol)
    if index == ():
        return "Error %f exceeds tolerance rtol=%e, atol=%e.\n" % (rel, rtol, atol)
    # count elements outside tolerance (up to mismatches[1] when positive)
    with np.errstate(invalid="ignore"):
        bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    nbad = int(np.count_nonzero(bad))
    limit = mismatches[1]
    shown = nbad if limit <= 0 else min(nbad, limit)
    degree = "at least " if 0 < limit < nbad else ""
    print("\n*** Maximum errors for vector of size %d:  rtol=%s, atol=%s\n" %
          (a.size, rtol, atol))
    order = np.argsort(-np.nan_to_num(
        np.where(bad, np.abs(a - b) / (atol + rtol * np.abs(b) + 1e-20), 0), nan=np.inf),
        axis=None)
    for k, flat in enumerate(order[:min(shown, mismatches[0])]):
        idx = tuple(int(j) for j in np.unravel_index(flat, a.shape))
        _, r = _worst(np.asarray(a[idx]), np.asarray(b[idx]), rtol, atol)
        print("%3d: Error %f  %s" % (k + 1, r, locationError(a, b, idx, names)))
    return ("Error %f exceeds tolerance rtol=%e, atol=%e (mismatch %s%f%%).\n%s" %
            (rel, rtol, atol, degree, 100.0 * shown / a.size,
             locationError(a, b, index, names, maxError=True)))


def assert_almost_equal(a, b, rtol=None, atol=None, names=("a", "b"), equal_nan=False,
                        use_broadcast=True, mismatches=(10, 10)):
    """Raises AssertionError unless |a - b| <= atol + rtol*|b| elementwise. Tolerances
    default per dtype (float32: rtol 1e-4, atol 1e-3). The message names the worst element
    and the share of mismatches."""
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = np.asarray(_as_np(a)), np.asarray(_as_np(b))
    if not use_broadcast:
        checkShapes(a, b)
    if a.dtype == np.bool_ and b.dtype == np.bool_:
        npt.assert_equal(a, b)
        return
    if a.shape != b.shape:
        try:
            a, b = np.broadcast_arrays(a, b)
        except ValueError:
            raise AssertionError("shapes %s and %s do not broadcast (%s vs %s)" %
                                 (a.shape, b.shape, names[0], names[1]))
    if np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan):
        return
    msg = _fail_message(a, b, rtol, atol, names, equal_nan, mismatches)
    with np.printoptions(threshold=4, suppress=True):
        raise AssertionError(npt.build_err_msg([a, b], err_msg=msg))


def assert_allclose(a, b, rtol=1e-07, atol=0, equal_nan=True):
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_almost_equal_with_err(a, b, rtol=None, atol=None, etol=None, names=("a", "b"),
                                 equal_nan=False, mismatches=(10, 10)):
    """Like assert_almost_equal, but passes while the fraction of mismatching elements is at
    most etol."""
    etol = get_etol(etol)
    if etol <= 0:
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=names, equal_nan=equal_nan)
        return
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = np.asarray(_as_np(a)), np.asarray(_as_np(b))
    close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    err = 1.0 - np.count_nonzero(close) / close.size
    if err > etol:
        msg = _fail_message(a, b, rtol, atol, names, equal_nan, mismatches)
        with np.printoptions(threshold=4, suppress=True):
            raise AssertionError(npt.build_err_msg([a, b], err_msg=msg))


def assert_almost_equal_ignore_nan(a, b, rtol=None, atol=None, names=("a", "b")):
    a = np.array(_as_np(a), copy=True)
    b = np.array(_as_np(b), copy=True)
    nan = np.isnan(a) | np.isnan(b)
    a[nan] = 0
    b[nan] = 0
    assert_almost_equal(a, b, rtol, atol, names)


def assert_exception(f, exception_type, *args, **kwargs):
    """Asserts that f(*args, **kwargs) raises exception_type."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError("%s did not raise %s" % (getattr(f, "__name__", f),
                                                   exception_type.__name__))


def retry(n):
    """Decorator: reruns a stochastic test up to n times while it fails an assertion."""
    if n <= 0:
        raise ValueError("retry: n must be positive")

    def decorate(f):
        def wrapper(*args, **kwargs):
            for i in range(n):
                try:
                    return f(*args, **kwargs)
                except AssertionError:
                    if i == n - 1:
                        raise
        wrapper.__name__ = f.__name__
        wrapper.__doc__ = f.__doc__
        return wrapper
    return decorate


def same_array(array1, array2):
    """True when the two NDArrays share memory (a write to one shows in the other)."""
    if array1.shape != array2.shape:
        return False
    if hasattr(array1, "_same_memory"):
        return bool(array1._same_memory(array2))
    return False


def compare_ndarray_tuple(t1, t2, rtol=None, atol=None):
    if t1 is None or t2 is None:
        return
    if isinstance(t1, tuple):
        for s1, s2 in zip(t1, t2):
            compare_ndarray_tuple(s1, s2, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def _random_weight_and_grad(shape, dtype, w_stype, g_stype):
    """(w1, g1, w2, g2): uniform random weight and gradient, twice (equal copies)."""
    from . import random as _random
    if "default" not in (w_stype, "default") or g_stype != "default":
        raise LoomError("compare_optimizer: sparse storage (w_stype=%r, g_stype=%r) is not "
                        "supported by Loom" % (w_stype, g_stype))
    w2 = _random.uniform(shape=shape, ctx=default_context(), dtype=dtype)
    g2 = _random.uniform(shape=shape, ctx=default_context(), dtype=dtype)
    return w2.copyto(default_context()), g2.copyto(default_context()), w2, g2


def compare_optimizer(opt1, opt2, shape, dtype, w_stype="default", g_stype="default",
                      rtol=1e-4, atol=1e-5, compare_states=True, ntensors=1):
    """One update_multi_precision step of opt1 and of opt2 from the same random weight and
    gradient (states compared after creation and after the step, then the weights). A list
    of shapes steps opt2 over all tensors at once (its multi-tensor form) and opt1 tensor by
    tensor."""
    if not isinstance(shape, list):
        if ntensors != 1:
            raise ValueError("compare_optimizer: ntensors > 1 needs a list of shapes")
        w1, g1, w2, g2 = _random_weight_and_grad(shape, dtype, w_stype, g_stype)
        s1 = opt1.create_state_multi_precision(0, w1)
        s2 = opt2.create_state_multi_precision(0, w2)
        if compare_states:
            compare_ndarray_tuple(s1, s2)
        opt1.update_multi_precision(0, w1, g1, s1)
        opt2.update_multi_precision(0, w2, g2, s2)
        if compare_states:
            compare_ndarray_tuple(s1, s2, rtol=rtol, atol=atol)
        assert_almost_equal(w1, w2, rtol=rtol, atol=atol)
        return
    pairs = [_random_weight_and_grad(s, dtype, w_stype, g_stype) for s in shape[:ntensors]]
    w2 = [p[2] for p in pairs]
    g2 = [p[3] for p in pairs]
    s2 = [opt2.create_state_multi_precision(i, w2[i]) for i in range(ntensors)]
    opt2.update_multi_precision(list(range(ntensors)), w2, g2, s2)
    for i, (w1, g1, _, _) in enumerate(pairs):
        s1 = opt1.create_state_multi_precision(i, w1)
        opt1.update_multi_precision(i, w1, g1, s1)
        if compare_states:
            compare_ndarray_tuple(s1, s2[i], rtol, atol)
        compare_ndarray_tuple(w1, w2[i], rtol, atol)


def collapse_sum_like(a, shape):
    """Sums `a` over the axes broadcasting added to reach a.shape from `shape`."""
    shape = tuple(shape)
    if len(a.shape) < len(shape):
        raise ValueError("collapse_sum_like: %s has fewer axes than %s" % (a.shape, shape))
    if a.size == 0 or int(np.prod(shape)) == 0:
        return np.zeros(shape, dtype=a.dtype)
    lead = len(a.shape) - len(shape)
    axes = list(range(lead))
    for i, s in enumerate(shape):
        if s != a.shape[lead + i]:
            if s != 1:
                raise ValueError("collapse_sum_like: %s does not broadcast to %s" %
                                 (shape, a.shape))
            axes.append(lead + i)
    return np.sum(a, axis=tuple(axes)).reshape(shape)


# ---------------------------------------------------------------------------------------
# executors: the checks that bind symbols live in symbol_checks.py (they build on the
# tolerances and comparisons above; imported here so every name stays in mx.test_utils)

from .symbol_checks import (simple_forward, numeric_grad, check_numeric_gradient,  # noqa: E402,F401
                            check_symbolic_forward, check_symbolic_backward, check_speed,
                            check_consistency, _parse_location, _parse_aux_states)


# ---------------------------------------------------------------------------------------
# data

def list_gpus():
    from .context import num_gpus
    return list(range(num_gpus()))


def _data_dir():
    return os.environ.get("MXNET_HOME", os.path.join(os.path.expanduser("~"), ".mxnet"))


def download(url, fname=None, dirname=None, overwrite=False, retries=5):
    """Downloads url to fname (default: its last path component, in dirname); returns the
    path. Raises after `retries` failed attempts."""
    import urllib.request
    if fname is None:
        fname = url.split("/")[-1]
    if dirname is not None:
        fname = os.path.join(dirname, fname)
    d = os.path.dirname(os.path.abspath(fname))
    os.makedirs(d, exist_ok=True)
    if not overwrite and os.path.exists(fname):
        return fname
    if retries <= 0:
        raise ValueError("Number of retries should be at least 0")
    err = None
    for _ in range(retries):
        try:
            tmp = fname + ".part"
            with urllib.request.urlopen(url, timeout=30) as r, open(tmp, "wb") as f:
                while True:
                    chunk = r.read(1 << 20)
                    if not chunk:
                        break
                    f.write(chunk)
            os.replace(tmp, fname)
            return fname
        except Exception as e:  # noqa: BLE001 - any network failure is retried
            err = e
    raise IOError("download of %s failed after %d attempts: %s" % (url, retries, err))


_MNIST_URL = os.environ.get("MXNET_GLUON_REPO",
                            "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/") + \
    "gluon/dataset/mnist/"
_MNIST_FILES = {"train_data": "train-images-idx3-ubyte.gz",
                "train_label": "train-labels-idx1-ubyte.gz",
                "test_data": "t10k-images-idx3-ubyte.gz",
                "test_label": "t10k-labels-idx1-ubyte.gz"}


def _read_idx(path, images):
    with gzip.open(path, "rb") as f:
        if images:
            _, n, rows, cols = struct.unpack(">IIII", f.read(16))
            return np.frombuffer(f.read(), dtype=np.uint8).reshape(n, 1, rows, cols)
        _, n = struct.unpack(">II", f.read(8))
        return np.frombuffer(f.read(), dtype=np.uint8).astype(np.int8)


def get_mnist(path=None):
    """MNIST as NumPy arrays: {'train_data': (60000, 1, 28, 28) float32 in [0, 1],
    'train_label' (int8), 'test_data', 'test_label'}, downloaded once into `path` (default
    $MXNET_HOME/datasets/mnist). Raises IOError when the files cannot be fetched."""
    path = path or os.path.join(_data_dir(), "datasets", "mnist")
    out = {}
    for key, fname in _MNIST_FILES.items():
        local = os.path.join(path, fname)
        if not os.path.exists(local):
            try:
                download(_MNIST_URL + fname, fname=local, retries=2)
            except IOError as e:
                raise IOError("get_mnist: %s is not in %s and could not be downloaded (%s); "
                              "put the four MNIST .gz files there to work offline" %
                              (fname, path, e))
        arr = _read_idx(local, key.endswith("data"))
        out[key] = arr.astype(np.float32) / 255 if key.endswith("data") else arr
    return out


def get_mnist_iterator(batch_size, input_shape, num_parts=1, part_index=0):
    """(train, val) NDArrayIters over MNIST reshaped to (batch,) + input_shape; the training
    set is split into num_parts and part part_index is used."""
    from . import io
    mnist = get_mnist()
    flat = len(input_shape) == 1

    def shape(x):
        return x.reshape((x.shape[0], -1)) if flat else x.reshape((x.shape[0],) +
                                                                  tuple(input_shape))
    n = mnist["train_data"].shape[0]
    lo, hi = n * part_index // num_parts, n * (part_index + 1) // num_parts
    train = io.NDArrayIter(shape(mnist["train_data"][lo:hi]), mnist["train_label"][lo:hi],
                           batch_size, shuffle=True)
    val = io.NDArrayIter(shape(mnist["test_data"]), mnist["test_label"], batch_size)
    return train, val


def _dummy_iter_base():
    try:
        from .io import DataIter
        return DataIter
    except ImportError:
        return object


class DummyIter(_dummy_iter_base()):
    """Yields the first batch of real_iter forever (for speed tests without I/O)."""

    def __init__(self, real_iter):
        super().__init__()
        self.real_iter = real_iter
        self.provide_data = real_iter.provide_data
        self.provide_label = real_iter.provide_label
        self.batch_size = real_iter.batch_size
        self.the_batch = next(iter(real_iter))

    def __iter__(self):
        return self

    def next(self):
        return self.the_batch

    def __next__(self):
        return self.the_batch


# ---------------------------------------------------------------------------------------
# environment

def set_env_var(key, val, default_val=""):
    """Sets environment variable key to val; returns its previous value (default_val when
    unset)."""
    prev = os.environ.get(key, default_val)
    os.environ[key] = val
    return prev


def getenv(name):
    return os.environ.get(name)


def setenv(name, value):
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


@contextlib.contextmanager
def environment(*args):
    """with environment('NAME', 'value'): or with environment({'A': '1', 'B': None}): sets
    (None: unsets) the variables for the block and restores them afterwards."""
    if len(args) == 1 and isinstance(args[0], dict):
        env = args[0]
    elif len(args) == 2:
        env = {args[0]: args[1]}
    else:
        raise ValueError("Expecting one dict arg or two args: env var name and value")
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        setenv(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setenv(k, v)


@contextlib.contextmanager
def discard_stderr():
    """Silences file descriptor 2 (C++ and Python stderr) inside the block."""
    fd = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)


def is_cd_run():
    return os.environ.get("CD_JOB", "0") == "1"


def is_aarch64_run():
    return platform.machine() == "aarch64"


def has_tvm_ops():
    return False


def is_op_runnable():
    return True


def same_symbol_structure(sym1, sym2):
    """True when the two symbols have the same ops connected the same way (names may
    differ)."""
    import json
    n1 = json.loads(sym1.tojson())["nodes"]
    n2 = json.loads(sym2.tojson())["nodes"]
    if len(n1) != len(n2):
        return False
    for a, b in zip(n1, n2):
        if a["op"] != b["op"] or [i[:2] for i in a["inputs"]] != [i[:2] for i in b["inputs"]]:
            return False
    return True


def assign_each(the_input, function):
    """function applied to every element of the array (NumPy vectorize)."""
    return np.vectorize(function)(the_input) if function is not None else np.array(the_input)


def assign_each2(input1, input2, function):
    return np.vectorize(function)(input1, input2) if function is not None else \
        np.array(input1)


def create_2d_tensor(rows, columns, dtype=np.int64):
    a = np.arange(0, rows, dtype=dtype).reshape(rows, 1)
    return _nd.array(np.broadcast_to(a, (rows, columns)), dtype=dtype)


def create_vector(size, dtype=np.int64):
    return _nd.arange(0, size, dtype=dtype)


def get_identity_mat(size):
    return _nd.array(np.eye(size))


def get_identity_mat_batch(size):
    return _nd.array(np.stack([np.eye(size)] * size))
