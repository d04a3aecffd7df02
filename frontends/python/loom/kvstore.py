"""mx.kv / mx.kvstore: MXNet 1.x's key-value stores.

'local' and 'device' live in one process: push(key, values) sums the values given for a key
(one per device in MXNet) and, with an updater or optimizer set, calls
updater(key, summed, stored); without one the sum replaces the stored value. pull(key, out)
copies the stored value into every output. Keys are all ints or all strs within one store.
Loom arrays are dense: row_sparse_pull and sparse outputs are refused.

'dist_sync', 'dist_device_sync' (and 'dist_sync_device', 'dist'), 'nccl' and 'horovod' span
the processes of a job started by mpirun (loom.dist; one process is a job of one worker).
They are synchronous allreduce stores, not parameter servers: a push sums the pushed values
over every worker (an allreduce) and each worker applies the same update to its own copy, so
every worker holds the value a dist_sync server would hold; init stores rank 0's value on
every worker; rank and num_workers are the job's. A Module trained with one of them sums its
gradients over the workers before each update, with MXNet's rescale_grad =
1/(batch * num_workers) for the dist_*sync* types. Asynchronous stores (dist_async,
dist_device_async) and the BytePS / P3 servers are refused."""
import pickle

from . import ndarray as nd
from .base import LoomError

__all__ = ["KVStore", "create"]

#: Types backed by loom.dist's allreduce (synchronous).
_ALLREDUCE_TYPES = ("dist_sync", "dist_device_sync", "dist_sync_device", "dist", "nccl",
                    "horovod")
#: Types Loom refuses: asynchronous parameter servers and other servers' protocols.
_REFUSED_TYPES = ("dist_async", "dist_device_async", "dist_async_device", "byteps", "p3")


class KVStoreError(LoomError):
    """Misuse of a KVStore (unknown key, mixed key types, sparse requests)."""


def _is_array(x):
    return isinstance(x, nd.NDArray)


def _pairs(key, value, what):
    """[(key, [arrays])] for a key or list of keys and the values/outs given for them."""
    if isinstance(key, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(key):
            raise KVStoreError("%s: %d keys need a list of %d values"
                               % (what, len(key), len(key)))
        out = []
        for k, v in zip(key, value):
            out.append((k, list(v) if isinstance(v, (list, tuple)) else [v]))
        return out
    if isinstance(value, (list, tuple)):
        return [(key, list(value))]
    return [(key, [value])]


class KVStore(object):
    """A local store (see the module doc). Create with mx.kv.create('local')."""

    def __init__(self, kvtype="local"):
        self._type = kvtype
        self._store = {}
        self._key_type = None
        self._updater = None
        self._optimizer = None
        self._graph_updaters = {}
        self._staging = {}

    # -- keys ------------------------------------------------------------------------------
    def _check_key(self, key):
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise KVStoreError("KVStore keys must be int or str, got %r" % (key,))
        kt = str if isinstance(key, str) else int
        if self._key_type is None:
            self._key_type = kt
        elif self._key_type is not kt:
            raise KVStoreError("KVStore: key %r is a %s but this store's keys are %ss (one "
                               "store takes either int or str keys)"
                               % (key, kt.__name__, self._key_type.__name__))

    def _stored(self, key, what):
        self._check_key(key)
        if key not in self._store:
            raise KVStoreError("%s: key %r has not been initialized (call init first)"
                               % (what, key))
        return self._store[key]

    # -- data ------------------------------------------------------------------------------
    def init(self, key, value):
        """Stores a copy of value (the first of a list) under key."""
        for k, vals in _pairs(key, value, "init"):
            self._check_key(k)
            if k in self._store:
                raise KVStoreError("init: duplicate init of key %r" % (k,))
            v = vals[0]
            _check_dense(v, "init", k)
            self._store[k] = v.copy()

    def push(self, key, value, priority=0):
        """Sums the values given for each key and updates the stored value with them."""
        for k, vals in _pairs(key, value, "push"):
            stored = self._stored(k, "push")
            for v in vals:
                _check_dense(v, "push", k)
                if tuple(v.shape) != tuple(stored.shape):
                    raise KVStoreError("push: key %r holds shape %s, value has shape %s"
                                       % (k, tuple(stored.shape), tuple(v.shape)))
            merged = vals[0].copy()
            for v in vals[1:]:
                merged += v
            if self._module_updater:
                raise KVStoreError("push: this store hosts a Module's optimizer, which updates "
                                   "the module's own weights; push to a store of your own")
            if self._updater is not None:
                self._updater(k, merged, stored)
            elif self._optimizer is not None:
                self._graph_update(k, merged, stored)
            else:
                merged.copyto(stored)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copies each key's value into its out array(s)."""
        if out is None:
            raise KVStoreError("pull: out is required")
        for k, outs in _pairs(key, out, "pull"):
            stored = self._stored(k, "pull")
            for o in outs:
                if getattr(o, "stype", "default") != "default":
                    if ignore_sparse:
                        continue
                    raise KVStoreError("pull: key %r: sparse outputs are not supported" % (k,))
                if tuple(o.shape) != tuple(stored.shape):
                    raise KVStoreError("pull: key %r holds shape %s, out has shape %s"
                                       % (k, tuple(stored.shape), tuple(o.shape)))
                stored.copyto(o)

    def pushpull(self, key, value, out=None, priority=0):
        """push then pull (into value itself when out is None)."""
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def broadcast(self, key, value, out, priority=0):
        """init with value, then pull into out."""
        self.init(key, value)
        self.pull(key, out, priority)

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        if out is None or row_ids is None:
            raise KVStoreError("row_sparse_pull: out and row_ids are required")
        for k, _ in _pairs(key, out, "row_sparse_pull"):
            self._stored(k, "row_sparse_pull")
        raise KVStoreError("row_sparse_pull: Loom has no row_sparse arrays (key %r); use pull "
                           "for dense values" % (key,))

    # -- optimizer -------------------------------------------------------------------------
    def is_capable(self, capability):
        if capability.lower() == "optimizer":
            return True
        raise ValueError("Unknown capability: %s" % capability)

    def set_gradient_compression(self, compression_params):
        if "device" in self._type or "dist" in self._type:
            raise KVStoreError("gradient compression is not supported by Loom's kvstore")
        raise KVStoreError("Gradient compression is not supported for this type of kvstore")

    def set_optimizer(self, optimizer):
        """Pushes now update the stored values with optimizer (as MXNet's local store does
        with opt.get_updater(optimizer))."""
        from .module._update import _is_graph_optimizer
        self._updater = None
        self._graph_updaters = {}
        self._module_updater = False
        if _is_graph_optimizer(optimizer):
            self._optimizer = optimizer
            return
        if not hasattr(optimizer, "update"):
            raise KVStoreError("set_optimizer: %r has no update method" % (optimizer,))
        self._optimizer = optimizer
        self._updater = _OptimizerUpdater(optimizer)

    def _graph_update(self, key, grad, weight):
        self._graph_update_prepare(key, weight)
        updater, buf = self._graph_updaters[key]
        grad.copyto(buf)
        updater()

    def _set_module_updater(self, optimizer, updater):
        """A Module's update graph (module/_update.py), hosted for inspection
        (kv._updater.states) as MXNet's update_on_kvstore does; the module runs it itself."""
        self._optimizer = optimizer
        self._updater = updater
        self._module_updater = True

    _module_updater = False

    def _set_updater(self, updater):
        """updater(key, value_pushed, value_stored), called on every push."""
        self._updater = updater
        self._optimizer = None
        self._module_updater = False

    def save_optimizer_states(self, fname, dump_optimizer=False):
        if self._updater is None and self._optimizer is None:
            raise KVStoreError("save_optimizer_states: no optimizer is set")
        if self._updater is not None:
            if not hasattr(self._updater, "get_states"):
                raise KVStoreError("save_optimizer_states: the updater has no states to save")
            blob = self._updater.get_states(dump_optimizer)
        else:
            blob = pickle.dumps({k: g[0].get_states() for k, g in self._graph_updaters.items()})
        with open(fname, "wb") as f:
            f.write(blob)

    def load_optimizer_states(self, fname):
        if self._updater is None and self._optimizer is None:
            raise KVStoreError("load_optimizer_states: no optimizer is set")
        with open(fname, "rb") as f:
            blob = f.read()
        if self._updater is not None:
            self._updater.set_states(blob)
            return
        for k, states in pickle.loads(blob).items():
            stored = self._stored(k, "load_optimizer_states")
            self._graph_update_prepare(k, stored)
            self._graph_updaters[k][0].set_states(states)

    def _graph_update_prepare(self, key, weight):
        if key in self._graph_updaters:
            return
        from .module._update import _GraphUpdater, param_mults
        name = "kv_%s" % key
        idx2name = getattr(self._optimizer, "idx2name", None) or {}
        mult_name = idx2name.get(key, key if isinstance(key, str) else name)
        lr, wd = param_mults(self._optimizer, [mult_name], idx2name, None, False)
        buf = nd.zeros(tuple(weight.shape), dtype=weight.dtype)
        self._graph_updaters[key] = (_GraphUpdater(self._optimizer, {name: weight},
                                                   {name: buf}, {name: lr[mult_name]},
                                                   {name: wd[mult_name]}, weight.context), buf)

    # -- process group ---------------------------------------------------------------------
    @property
    def type(self):
        return self._type

    @property
    def rank(self):
        return 0

    @property
    def num_workers(self):
        return 1

    def barrier(self):
        """Nothing to wait for in a single process."""

    _barrier = barrier

    # -- Module's hooks (module/module.py) -------------------------------------------------
    def _sync_module_params(self, arrays):
        """Makes every worker start from rank 0's parameters (MXNet's kvstore.init + pull at
        init_optimizer). One process: nothing to do."""

    def _reduce_module_grads(self, grads):
        """Sums a Module's gradients over the workers before its update. One process:
        nothing to do."""

    def _send_command_to_servers(self, head, body):
        raise KVStoreError("a local kvstore has no servers")


class DistKVStore(KVStore):
    """A synchronous store over loom.dist (see the module doc): allreduce semantics."""

    def __init__(self, kvtype):
        from . import dist
        super().__init__(kvtype)
        self._dist = dist
        dist.init()

    @property
    def rank(self):
        return self._dist.rank()

    @property
    def num_workers(self):
        return self._dist.size()

    def barrier(self):
        """Returns once every worker has reached it."""
        self._dist.barrier()

    _barrier = barrier

    def init(self, key, value):
        """Stores rank 0's value under key on every worker."""
        super().init(key, value)
        for k, _ in _pairs(key, value, "init"):
            _flat_collective([self._store[k]], lambda buf: self._dist.broadcast(buf, root=0))

    def push(self, key, value, priority=0):
        """Sums the values over this worker's list and over all workers (one allreduce per
        key), then updates the stored value as the local store does."""
        summed = []
        for k, vals in _pairs(key, value, "push"):
            stored = self._stored(k, "push")
            for v in vals:
                _check_dense(v, "push", k)
            merged = vals[0].copy()
            for v in vals[1:]:
                merged += v
            if tuple(merged.shape) != tuple(stored.shape):
                raise KVStoreError("push: key %r holds shape %s, value has shape %s"
                                   % (k, tuple(stored.shape), tuple(merged.shape)))
            summed.append((k, merged))
        _flat_collective([m for _, m in summed], self._dist.allreduce)
        for k, merged in summed:
            super().push(k, merged, priority)

    def set_gradient_compression(self, compression_params):
        raise KVStoreError("gradient compression is not supported by Loom's kvstore")

    def _sync_module_params(self, arrays):
        _flat_collective(list(arrays.values()), lambda buf: self._dist.broadcast(buf, root=0))

    def _reduce_module_grads(self, grads):
        _flat_collective([g for g in grads.values() if g is not None], self._dist.allreduce)


def _flat_collective(arrays, collective):
    """Runs `collective` (NumPy array -> NumPy array) once per dtype over the arrays packed
    into one flat buffer, in the given order (the same on every worker), and writes the
    result back into the arrays."""
    import numpy as np
    by_dtype = {}
    for a in arrays:
        by_dtype.setdefault(np.dtype(a.dtype).name, []).append(a)
    for name in sorted(by_dtype):
        group = by_dtype[name]
        flat = np.concatenate([a.asnumpy().ravel() for a in group])
        flat = collective(flat)
        offset = 0
        for a in group:
            n = int(np.prod(a.shape))
            a[:] = flat[offset:offset + n].reshape(a.shape)
            offset += n


def _OptimizerUpdater(optimizer):
    """MXNet's opt.get_updater(optimizer) (loom.optimizer's Updater when present)."""
    from . import optimizer as optmod
    make = getattr(optmod, "get_updater", None)
    if make is not None:
        return make(optimizer)
    from .module._update import _MiniUpdater
    return _MiniUpdater(optimizer)


def _check_dense(v, what, key):
    if not _is_array(v):
        raise KVStoreError("%s: key %r: values must be NDArrays, got %s"
                           % (what, key, type(v).__name__))
    if getattr(v, "stype", "default") != "default":
        raise KVStoreError("%s: key %r: Loom's kvstore holds dense arrays only (got %s)"
                           % (what, key, v.stype))


def create(name="local"):
    """A KVStore: 'local' (and local_* variants) or 'device' in one process; 'dist_sync',
    'dist_device_sync', 'nccl' or 'horovod' over loom.dist. Asynchronous and other server
    types raise LoomError."""
    if not isinstance(name, str):
        raise TypeError("name must be a string")
    if name.startswith("local") or name == "device" or name.startswith("device"):
        return KVStore(name)
    if name in _ALLREDUCE_TYPES:
        return DistKVStore(name)
    if name in _REFUSED_TYPES or "async" in name:
        raise LoomError("kvstore '%s': Loom's multi-process stores are synchronous allreduce "
                        "over loom.dist (MPI/NCCL); asynchronous parameter servers and "
                        "BytePS/P3 are not available; use 'dist_sync' or 'dist_device_sync'"
                        % name)
    raise LoomError("Unknown kvstore type '%s' (Loom has 'local', 'device', 'dist_sync', "
                    "'dist_device_sync', 'nccl' and 'horovod')" % name)
