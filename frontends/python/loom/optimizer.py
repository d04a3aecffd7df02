"""mx.optimizer: MXNet 1.9-style optimizers, usable two ways.

Imperatively, as MXNet 1.9.1's `mx.optimizer` objects: `create_state(index, weight)`,
`update(index, weight, grad, state)` (and `update_multi_precision`) change the weight and the
states in place, with MXNet's per-index update counts, learning-rate schedules, lr/wd
multipliers (`set_lr_mult`, `set_wd_mult`, `__lr_mult__` / `__wd_mult__` attributes of `sym`,
wd_mult 0 for names not ending in _weight/_gamma) and float32 master copies for float16
weights (`multi_precision`). `Updater` / `get_updater` wrap an optimizer the way a KVStore or
Module uses it; `get_states` / `set_states` pickle the states in MXNet's layout.

As descriptions of an in-graph update: `loom.train.make_step` reads `Optimizer._spec()` and
builds MXNet's update ops into the training-step graph (sgd, nag, adam, adamw, rmsprop, lamb),
with the schedule and Adam's bias correction computed from the graph's real-step counter.

The imperative updates call Loom's update ops (sgd_update, sgd_mom_update, adam_update,
rmsprop_update, rmspropalex_update, lamb_update_phase1/2) for float32 arrays, so they compute
what the in-graph form computes; other dtypes, and the optimizers Loom has no op for, compute
the same formulas (those of MXNet's kernels, in the weight's dtype) with NumPy on the host and
write the results into the arrays.

The optimizers themselves are in optimizer_sgd.py (the SGD family) and optimizer_adaptive.py
(Adam, RMSProp, LAMB, ...); every name is importable from here."""
import pickle
import struct
import warnings

import numpy as np

from . import ndarray as nd

__all__ = [
    "AdaDelta", "AdaGrad", "Adam", "AdamW", "Adamax", "DCASGD", "FTML", "Ftrl", "LARS", "LBSGD",
    "NAG", "Nadam", "Optimizer", "RMSProp", "SGD", "SGLD", "Signum", "LAMB", "Test", "Updater",
    "ccSGD", "create", "get_updater", "register", "contrib"]

_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)


# ----------------------------------------------------------------------------- array helpers

def _is_nd(x):
    return isinstance(x, nd.NDArray)


def _host(x):
    """NumPy copy of an NDArray (None stays None)."""
    return None if x is None else x.asnumpy()


def _store(dst, value):
    """Writes a NumPy value into the NDArray dst, cast to dst's dtype."""
    dst[:] = np.asarray(value).astype(np.dtype(dst.dtype), copy=False)


def _zeros(shape, ctx, dtype=np.float32):
    dtype = np.dtype(dtype)
    if dtype == _F32:
        return nd.zeros(shape, ctx, dtype="float32")
    return nd.array(np.zeros(shape, dtype), ctx=ctx, dtype=dtype)


def _astype(x, dtype):
    """x as a new NDArray of dtype (through the host: Loom's Cast covers float32 only)."""
    return nd.array(x.asnumpy().astype(dtype), ctx=x.context, dtype=np.dtype(dtype))


def _all_f32(*arrays):
    return all(a is None or np.dtype(a.dtype) == _F32 for a in arrays)


def _clip(v, c):
    """mshadow clip to [-c, c]."""
    return np.clip(v, -c, c)


def _sign(v):
    return np.sign(v).astype(v.dtype, copy=False)


def _stype(x):
    return getattr(x, "stype", "default")


def _flat_lists(index, weight, grad, state):
    if isinstance(index, (list, tuple)):
        return list(index), list(weight), list(grad), list(state), True
    return [index], [weight], [grad], [state], False


def _caller_level():
    """warnings stacklevel of the first frame outside the optimizer constructors."""
    import sys
    f, level = sys._getframe(1), 1
    while f is not None and isinstance(f.f_locals.get("self"), Optimizer) \
            and f.f_code.co_name == "__init__":
        f, level = f.f_back, level + 1
    return level


# ----------------------------------------------------------------------------- base class

class Optimizer:
    """The base class of all optimizers (MXNet 1.9.1's constructor and semantics).

    rescale_grad: gradients are multiplied by it first. param_idx2name: index -> parameter
    name (names decide the default wd_mult and lr/wd multipliers given by name). wd: weight
    decay. clip_gradient: clip the rescaled gradient to [-c, c] (None: off). learning_rate:
    None takes the lr_scheduler's base_lr (0.01 without a scheduler); given with a scheduler,
    it replaces the scheduler's base_lr. sym: a Symbol whose `__lr_mult__` / `__wd_mult__`
    attributes set multipliers. begin_num_update: the update count to start from.
    multi_precision: float16 weights are updated through a float32 master copy.
    param_dict: index -> object with lr_mult / wd_mult attributes (gluon Parameters)."""

    opt_registry = {}
    #: The update make_step builds into a graph for this class (None: imperative only).
    _graph_name = None

    def __init__(self, rescale_grad=1., param_idx2name=None, wd=0., clip_gradient=None,
                 learning_rate=None, lr_scheduler=None, sym=None, begin_num_update=0,
                 multi_precision=False, param_dict=None):
        self.rescale_grad = rescale_grad
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is None and learning_rate is None:
            learning_rate = 0.01
        self.lr = learning_rate
        if lr_scheduler is not None and learning_rate is not None:
            if lr_scheduler.base_lr != learning_rate:
                # MXNet prints this notice and lets the optimizer's rate win.
                warnings.warn("learning rate from ``lr_scheduler`` has been overwritten by "
                              "``learning_rate`` in optimizer.", stacklevel=_caller_level())
                lr_scheduler.base_lr = learning_rate
        self.wd = wd
        self.lr_mult = {}
        self.wd_mult = {}
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self._all_index_update_counts = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.clip_gradient = clip_gradient
        self.multi_precision = multi_precision
        self.aggregate_num = 0
        if param_idx2name is None:
            param_idx2name = {}
        if not isinstance(param_idx2name, dict):
            raise TypeError("param_idx2name should be a dict of param indexes to names.")
        self.idx2name = param_idx2name.copy()
        self.sym_info = (sym.attr_dict(), sym.list_arguments()) if sym is not None else ()
        self.param_dict = param_dict if param_dict else {}
        self.allow_np_array = False
        self.set_lr_mult({})
        self.set_wd_mult({})

    # --- registry
    @staticmethod
    def register(klass):
        """Registers an Optimizer subclass under its lower-cased class name (a decorator)."""
        if not isinstance(klass, type):
            raise TypeError("register expects an Optimizer class, got %r" % (klass,))
        name = klass.__name__.lower()
        if name in Optimizer.opt_registry:
            old = Optimizer.opt_registry[name]
            warnings.warn("WARNING: New optimizer %s.%s is overriding existing optimizer %s.%s"
                          % (klass.__module__, klass.__name__, old.__module__, old.__name__))
        Optimizer.opt_registry[name] = klass
        return klass

    @staticmethod
    def create_optimizer(name, **kwargs):
        """An instance of the optimizer registered as `name` (case-insensitive)."""
        if isinstance(name, Optimizer):
            if kwargs:
                raise TypeError("optimizer parameters given with an Optimizer instance")
            return name
        if not isinstance(name, str):
            raise TypeError("optimizer name must be a string, got %r" % (name,))
        key = name.lower()
        if key not in Optimizer.opt_registry:
            raise ValueError("Cannot find optimizer %s (registered: %s)"
                             % (name, ", ".join(sorted(Optimizer.opt_registry))))
        return Optimizer.opt_registry[key](**kwargs)

    # --- learning rate and multipliers
    @property
    def learning_rate(self):
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def set_learning_rate(self, lr):
        if self.lr_scheduler is not None:
            raise UserWarning("LRScheduler of the optimizer has already been defined. Note "
                              "that set_learning_rate can mutate the value of the learning "
                              "rate of the optimizer only when the LRScheduler of the "
                              "optimizer is undefined.")
        self.lr = lr

    def set_lr_scale(self, args_lrscale):
        """Removed in MXNet (use set_lr_mult)."""
        raise DeprecationWarning("set_lr_scale is deprecated: use set_lr_mult")

    def set_lr_mult(self, args_lr_mult):
        """Learning-rate multipliers by parameter name (or index): the `__lr_mult__`
        attributes of `sym`, then args_lr_mult."""
        self.lr_mult = {}
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__lr_mult__" in attr[name]:
                    self.lr_mult[name] = float(attr[name]["__lr_mult__"])
        self.lr_mult.update(args_lr_mult)

    def _default_wd_mult_zero(self, name):
        return not (name.endswith("_weight") or name.endswith("_gamma"))

    def set_wd_mult(self, args_wd_mult):
        """Weight-decay multipliers: 0 for the names of param_idx2name that do not end in
        _weight or _gamma, then the `__wd_mult__` attributes of `sym`, then args_wd_mult."""
        self.wd_mult = {}
        for n in self.idx2name.values():
            if self._default_wd_mult_zero(n):
                self.wd_mult[n] = 0.0
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__wd_mult__" in attr[name]:
                    self.wd_mult[name] = float(attr[name]["__wd_mult__"])
        self.wd_mult.update(args_wd_mult)

    def _set_current_context(self, device_id):
        if device_id not in self._all_index_update_counts:
            self._all_index_update_counts[device_id] = {}
        self._index_update_count = self._all_index_update_counts[device_id]

    def _update_count(self, index):
        """Counts one more update of each index; num_update is the largest count."""
        if not isinstance(index, (list, tuple)):
            index = [index]
        for idx in index:
            if idx not in self._index_update_count:
                self._index_update_count[idx] = self.begin_num_update
            self._index_update_count[idx] += 1
            self.num_update = max(self._index_update_count[idx], self.num_update)

    def _base_lr_now(self):
        if self.lr_scheduler is not None:
            log = getattr(self.lr_scheduler, "log_changes", None)
            if log is not None:  # MXNet's schedulers log their rate changes when called
                log(self.num_update)
            return self.lr_scheduler(self.num_update)
        return self.lr

    def _mult(self, index, table, attr):
        if index in self.param_dict:
            return getattr(self.param_dict[index], attr)
        if index in table:
            return table[index]
        if index in self.idx2name:
            return table.get(self.idx2name[index], 1.0)
        return 1.0

    def _get_lrs(self, indices):
        lr = self._base_lr_now()
        return [lr * self._mult(i, self.lr_mult, "lr_mult") for i in indices]

    def _get_lr(self, index):
        return self._get_lrs([index])[0]

    def _get_wds(self, indices):
        return [self.wd * self._mult(i, self.wd_mult, "wd_mult") for i in indices]

    def _get_wd(self, index):
        return self._get_wds([index])[0]

    # --- states and updates
    def create_state(self, index, weight):
        """The optimizer state of one weight (None when the optimizer keeps none)."""
        return None

    def create_state_multi_precision(self, index, weight):
        """create_state, with a float32 master copy first for float16 weights when
        multi_precision is on: (master, state)."""
        if self.multi_precision and np.dtype(weight.dtype) == _F16:
            master = _astype(weight, np.float32)
            return (master, self.create_state(index, master))
        if np.dtype(weight.dtype) == _F16 and not self.multi_precision:
            warnings.warn("Accumulating with float16 in optimizer can lead to poor accuracy or "
                          "slow convergence. Consider using multi_precision=True option of "
                          "the optimizer")
        return self.create_state(index, weight)

    def update(self, index, weight, grad, state):
        raise NotImplementedError()

    def update_multi_precision(self, index, weight, grad, state):
        """update; for float16 weights with multi_precision, the update runs on the float32
        master copy (state[0]) with a float32 gradient and the weight gets its cast."""
        if self.multi_precision and np.dtype(weight.dtype) == _F16:
            master, inner = state[0], state[1]
            self.update(index, master, _astype(grad, np.float32), inner)
            _store(weight, master.asnumpy())
        else:
            self.update(index, weight, grad, state)

    # --- in-graph description (loom.train.make_step)
    def _extra(self):
        return {}

    def _spec(self):
        """The dict the C++ builder reads (graph/step_builder.h OptimizerSpec)."""
        if self._graph_name is None:
            supported = sorted(k for k, c in Optimizer.opt_registry.items()
                               if c._graph_name is not None)
            raise ValueError("%s: make_step builds in-graph updates for %s only; use it "
                             "imperatively (update / get_updater)"
                             % (type(self).__name__, ", ".join(supported)))
        if self.begin_num_update:
            raise ValueError("begin_num_update: resume from a training-state checkpoint instead")
        lr = self.lr
        if lr is None:
            lr = self.lr_scheduler.base_lr
        d = {"name": self._graph_name, "learning_rate": float(lr), "wd": float(self.wd),
             "rescale_grad": float(self.rescale_grad),
             "clip_gradient": -1.0 if not self.clip_gradient else float(self.clip_gradient),
             "lr_mult": {k: float(v) for k, v in self.lr_mult.items() if isinstance(k, str)},
             "wd_mult": {k: float(v) for k, v in self.wd_mult.items() if isinstance(k, str)}}
        if self.lr_scheduler is not None:
            d["lr_scheduler"] = self.lr_scheduler._spec()
        d.update(self._extra())
        return d

    # --- pickling (MXNet's: param_dict is left out)
    def __getstate__(self):
        ret = self.__dict__.copy()
        ret.pop("param_dict", None)
        return ret

    def __setstate__(self, state):
        self.__dict__ = state
        self.param_dict = {}

    def __repr__(self):
        return "%s(learning_rate=%s)" % (type(self).__name__, self.lr)


register = Optimizer.register


# ----------------------------------------------------------------------------- optimizers
# The optimizers live in optimizer_sgd.py and optimizer_adaptive.py; they build on the base
# class and helpers above, so they are imported here, after them.

from .optimizer_sgd import (SGD, ccSGD, NAG, LARS, LBSGD, DCASGD, SGLD,  # noqa: E402,F401
                            Signum)
from .optimizer_adaptive import (FTML, Adam, AdamW, AdaGrad, RMSProp, AdaDelta,  # noqa: E402,F401
                                 Ftrl, Adamax, Nadam, LAMB, Test, GroupAdaGrad)


def _contrib_namespace():
    import sys
    import types
    mod = types.ModuleType(__name__ + ".contrib", "mx.optimizer.contrib (MXNet's name).")
    mod.GroupAdaGrad = GroupAdaGrad
    mod.register = register
    mod.__all__ = ["GroupAdaGrad"]
    sys.modules[mod.__name__] = mod
    return mod


contrib = _contrib_namespace()

create = Optimizer.create_optimizer


# ----------------------------------------------------------------------------- Updater

class Updater:
    """What a KVStore or Module calls: updater(index, grad, weight) creates the index's
    state on first use and runs optimizer.update_multi_precision (lists of indices are
    updated in groups of optimizer.aggregate_num weights of one dtype)."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.states = {}
        self.states_synced = {}
        self.aggregate_updates = optimizer.aggregate_num > 0

    def __call__(self, index, grad, weight):
        if not isinstance(index, (list, tuple)):
            indices, grads, weights = [index], [grad], [weight]
        else:
            indices, grads, weights = list(index), list(grad), list(weight)
        if weights:
            ctx = weights[0].context
            self.optimizer._set_current_context(getattr(ctx, "device_id", 0))
        for i, idx in enumerate(indices):
            if isinstance(idx, bytes):
                indices[i] = idx = idx.decode()
            if idx not in self.states:
                self.states[idx] = self.optimizer.create_state_multi_precision(idx, weights[i])
                self.states_synced[idx] = True
            elif not self.states_synced[idx]:
                self.states[idx] = self.sync_state_context(self.states[idx], weights[i].context)
                self.states_synced[idx] = True
        if self.aggregate_updates:
            by_type = {}
            for i, w, g in zip(indices, weights, grads):
                by_type.setdefault(np.dtype(w.dtype), []).append((i, w, g))
            n = self.optimizer.aggregate_num
            for group in by_type.values():
                idxs, ws, gs = zip(*group)
                for lo in range(0, len(idxs), n):
                    self.optimizer.update_multi_precision(
                        list(idxs[lo:lo + n]), list(ws[lo:lo + n]), list(gs[lo:lo + n]),
                        [self.states[k] for k in idxs[lo:lo + n]])
        else:
            for i, w, g in zip(indices, weights, grads):
                self.optimizer.update_multi_precision(i, w, g, self.states[i])

    def sync_state_context(self, state, context):
        """The state with its arrays on `context`."""
        if _is_nd(state):
            return state.as_in_context(context)
        if isinstance(state, (tuple, list)):
            synced = [self.sync_state_context(s, context) for s in state]
            return tuple(synced) if isinstance(state, tuple) else synced
        return state

    def set_states(self, states):
        """Restores states pickled by get_states (Loom's or MXNet's)."""
        loaded = _loads(states)
        if isinstance(loaded, tuple) and len(loaded) == 2:
            self.states, self.optimizer = loaded
        else:
            self.states = loaded
        self.states_synced = dict.fromkeys(self.states.keys(), False)

    def get_states(self, dump_optimizer=False):
        """The states (and, with dump_optimizer, the optimizer) pickled as MXNet pickles
        them: NDArrays as mxnet.ndarray.ndarray.NDArray objects holding their raw bytes,
        Loom's optimizer and scheduler classes under their mxnet module names."""
        return _dumps((self.states, self.optimizer) if dump_optimizer else self.states)


def get_updater(optimizer):
    """An Updater of `optimizer`."""
    return Updater(optimizer)


# ----------------------------------------------------------------------------- pickling

_MX_NDARRAY = ("mxnet.ndarray.ndarray", "NDArray")
_MODULE_TO_MX = {"loom.optimizer": "mxnet.optimizer.optimizer",
                 "loom.lr_scheduler": "mxnet.lr_scheduler"}
_MODULE_FROM_MX = {"mxnet.optimizer.optimizer": "loom.optimizer",
                   "mxnet.optimizer": "loom.optimizer",
                   "mxnet.optimizer.contrib": "loom.optimizer",
                   "mxnet.lr_scheduler": "loom.lr_scheduler"}


def _raw_bytes(arr):
    """One array in MXNet's NDArray::Save layout (MXNDArraySaveRawBytes): the body of a
    one-array, unnamed .params buffer (after magic, reserved and count; before the names)."""
    buf = nd.save_tobuffer([arr])
    return bytes(buf[24:-8])


def _from_raw_bytes(raw):
    head = struct.pack("<QQQ", 0x112, 0, 1)
    return nd.load_frombuffer(head + bytes(raw) + struct.pack("<Q", 0))[0]


class _MXNDArrayRef:
    """Stands for the class mxnet.ndarray.ndarray.NDArray in pickles."""


class _PickledNDArray:
    """An NDArray read from a pickle (converted to a Loom NDArray after loading)."""

    def __init__(self, *args):
        self.raw = None

    def __setstate__(self, state):
        self.raw = state["handle"] if isinstance(state, dict) else state


class _Pickler(pickle._Pickler):  # the Python pickler: its save_global can be extended
    def save(self, obj, save_persistent_id=True):
        if _is_nd(obj):
            self.save_reduce(_MXNDArrayRef, (None,), {"handle": bytearray(_raw_bytes(obj))},
                             obj=obj)
            return
        super().save(obj, save_persistent_id)

    def save_global(self, obj, name=None):
        if obj is _MXNDArrayRef:
            module, qual = _MX_NDARRAY
        else:
            module = getattr(obj, "__module__", None)
            qual = name or getattr(obj, "__qualname__", None)
            if module not in _MODULE_TO_MX:
                return super().save_global(obj, name)
            module = _MODULE_TO_MX[module]
        self.write(pickle.GLOBAL + ("%s\n%s\n" % (module, qual)).encode("utf-8"))
        self.memoize(obj)


def _dumps(obj):
    import io
    f = io.BytesIO()
    _Pickler(f, protocol=2).dump(obj)
    return f.getvalue()


class _Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) == _MX_NDARRAY:
            return _PickledNDArray
        if module in _MODULE_FROM_MX:
            import importlib
            mod = importlib.import_module(_MODULE_FROM_MX[module])
            if hasattr(mod, name):
                return getattr(mod, name)
        return super().find_class(module, name)


def _restore(obj):
    if isinstance(obj, _PickledNDArray):
        return _from_raw_bytes(obj.raw)
    if isinstance(obj, tuple):
        return tuple(_restore(o) for o in obj)
    if isinstance(obj, list):
        return [_restore(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _restore(v) for k, v in obj.items()}
    if isinstance(obj, Optimizer):
        obj.__dict__ = _restore(obj.__dict__)
    return obj


def _loads(data):
    import io
    return _restore(_Unpickler(io.BytesIO(data)).load())
