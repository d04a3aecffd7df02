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
write the results into the arrays."""
import math
import os
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


# ----------------------------------------------------------------------------- SGD family

def _np_sgd(w, g, mom, lr, wd, rescale, clip, momentum):
    """sgd_update / sgd_mom_update (and their mp_ forms on a float32 master copy)."""
    gr = rescale * g
    if clip:
        gr = _clip(gr, clip)
    if mom is None:
        return (1. - lr * wd) * w - lr * gr, None
    mom = momentum * mom - lr * wd * w - lr * gr
    return w + mom, mom


def _sgd_step(opt, weight, grad, mom, lr, wd, momentum):
    """One sgd_update / sgd_mom_update of weight (in place) and mom."""
    kw = {"rescale_grad": opt.rescale_grad}
    if opt.clip_gradient:
        kw["clip_gradient"] = opt.clip_gradient
    if _all_f32(weight, grad, mom):
        if mom is not None:
            nd.sgd_mom_update(weight, grad, mom, out=weight, lr=lr, wd=wd, momentum=momentum,
                              **kw)
        else:
            nd.sgd_update(weight, grad, out=weight, lr=lr, wd=wd, **kw)
        return
    w, m = _np_sgd(_host(weight), _host(grad), _host(mom), lr, wd, opt.rescale_grad,
                   opt.clip_gradient, momentum)
    if mom is not None:
        _store(mom, m)
    _store(weight, w)


class _MasterFirstMomentum(Optimizer):
    """SGD-like optimizers whose multi-precision state is (momentum, float32 master)."""

    def create_state_multi_precision(self, index, weight):
        if self.multi_precision and np.dtype(weight.dtype) == _F16:
            master = _astype(weight, np.float32)
            return (self.create_state(index, master), master)
        if np.dtype(weight.dtype) == _F16 and not self.multi_precision:
            warnings.warn("Accumulating with float16 in optimizer can lead to poor accuracy or "
                          "slow convergence. Consider using multi_precision=True option of "
                          "the %s optimizer" % type(self).__name__)
        return self.create_state(index, weight)

    def create_state(self, index, weight):
        if self.momentum != 0.0:
            return _zeros(weight.shape, weight.context, weight.dtype)
        return None

    def _use_mp(self, weight):
        w0 = weight[0] if isinstance(weight, (list, tuple)) else weight
        return bool(self.multi_precision) and np.dtype(w0.dtype) == _F16

    def update(self, index, weight, grad, state):
        self._update_impl(index, weight, grad, state, multi_precision=False)

    def update_multi_precision(self, index, weight, grad, state):
        self._update_impl(index, weight, grad, state,
                          multi_precision=self._use_mp(weight))

    def _momentum_now(self):
        return self.momentum

    def _one(self, weight, grad, state, lr, wd, multi_precision):
        momentum = self._momentum_now()
        if multi_precision:
            mom, master = state
            self._step(master, _astype(grad, np.float32), mom, lr, wd, momentum)
            _store(weight, master.asnumpy())
        else:
            self._step(weight, grad, state, lr, wd, momentum)

    def _step(self, weight, grad, mom, lr, wd, momentum):
        _sgd_step(self, weight, grad, mom if momentum > 0 else None, lr, wd, momentum)


@register
class SGD(_MasterFirstMomentum):
    """SGD with momentum and weight decay (sgd_update; sgd_mom_update when momentum > 0):
    state = momentum*state - lr*(clip(rescale_grad*grad) + wd*weight); weight += state.
    lazy_update only matters for row_sparse arrays, which Loom does not have. Accepts lists
    of indices/weights/grads/states (MXNet's aggregated update)."""
    _graph_name = "sgd"

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update
        self.aggregate_num = int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "4"))

    def _update_impl(self, indices, weights, grads, states, multi_precision=False):
        indices, weights, grads, states, _ = _flat_lists(indices, weights, grads, states)
        self._update_count(indices)
        lrs = self._get_lrs(indices)
        wds = self._get_wds(indices)
        for w, g, s, lr, wd in zip(weights, grads, states, lrs, wds):
            self._one(w, g, s, lr, wd, multi_precision)

    def _extra(self):
        return {"momentum": float(self.momentum)}


@register
class ccSGD(SGD):  # noqa: N801 (MXNet's name)
    """Deprecated alias of SGD (kept by MXNet for backward compatibility)."""
    _graph_name = "sgd"


@register
class NAG(_MasterFirstMomentum):
    """Nesterov accelerated gradient (nag_mom_update; sgd_update when momentum is 0).
    As MXNet's kernel run with out=weight, the momentum's weight-decay term reads the weight
    just written (the in-graph update of make_step reads the weight before the step, so with
    wd > 0 and momentum > 0 the two differ by lr*wd*(w_new - w_old) in the momentum)."""
    _graph_name = "nag"

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum

    def update_multi_precision(self, index, weight, grad, state):
        mp = self._use_mp(weight) and isinstance(state, (tuple, list))
        self._update_impl(index, weight, grad, state, multi_precision=mp)

    def _update_impl(self, index, weight, grad, state, multi_precision=False):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        self._one(weight, grad, state, lr, wd, multi_precision)

    def _step(self, weight, grad, mom, lr, wd, momentum):
        if mom is None or not momentum > 0:
            _sgd_step(self, weight, grad, None, lr, wd, 0.0)
            return
        w, g, m = _host(weight), _host(grad), _host(mom)
        gr = self.rescale_grad * g
        if self.clip_gradient:
            gr = _clip(gr, self.clip_gradient)
        m = momentum * m
        w = w - m + (momentum + 1) * (m - lr * (gr + wd * w))
        m = m - lr * (gr + wd * w)
        _store(mom, m)
        _store(weight, w)

    def _extra(self):
        return {"momentum": float(self.momentum)}


@register
class LARS(_MasterFirstMomentum):
    """SGD with layer-wise adaptive rates: for parameters not named *gamma, *beta or *bias,
    lr *= eta*||w|| / (||g||*rescale_grad + wd*||w|| + eps) when both norms are > 0; the
    momentum is scaled by cur_lr/last_lr when momentum_correction (a schedule changed lr).
    The default wd_mult is 0 for names not ending in _weight."""

    def __init__(self, momentum=0.0, lazy_update=True, eta=0.001, eps=0,
                 momentum_correction=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.momentum_correction = momentum_correction
        self.lazy_update = lazy_update
        self.aggregate_num = int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "4"))
        self.eta = eta
        self.eps = eps
        self.skip = 0
        self.last_lr = None
        self.cur_lr = None

    def _default_wd_mult_zero(self, name):
        return not name.endswith("_weight")

    def _get_lrs(self, indices):
        if self.cur_lr is not None:
            self.last_lr = self.cur_lr
        lr = self._base_lr_now()
        if self.cur_lr is None:
            self.last_lr = lr
        self.cur_lr = lr
        return [lr * self._mult(i, self.lr_mult, "lr_mult") for i in indices]

    def _momentum_now(self):
        if self.momentum > 0 and self.momentum_correction and self.last_lr != 0:
            return self.momentum * (self.cur_lr / self.last_lr)
        return self.momentum

    def _lars_lr(self, index, weight, grad, lr, wd):
        name = self.idx2name.get(index, str(index))
        if name.endswith("gamma") or name.endswith("beta") or name.endswith("bias"):
            return lr
        w_norm = float(np.sqrt(np.sum(np.square(_host(weight).astype(np.float32)))))
        g_norm = float(np.sqrt(np.sum(np.square(_host(grad).astype(np.float32)))))
        g_norm *= self.rescale_grad
        if w_norm > 0.0 and g_norm > 0.0:
            return lr * self.eta * w_norm / (g_norm + wd * w_norm + self.eps)
        return lr

    def _update_impl(self, indices, weights, grads, states, multi_precision=False):
        indices, weights, grads, states, _ = _flat_lists(indices, weights, grads, states)
        self._update_count(indices)
        lrs = self._get_lrs(indices)
        wds = self._get_wds(indices)
        for i, w, g, s, lr, wd in zip(indices, weights, grads, states, lrs, wds):
            self._one(w, g, s, self._lars_lr(i, w, g, lr, wd), wd, multi_precision)


@register
class LBSGD(Optimizer):
    """Large-batch SGD: gradients are accumulated over batch_scale calls and applied (as
    SGD with momentum) every batch_scale-th call, with the rate scaled by a warmup multiplier
    ('linear', 'power2', 'sqrt' over warmup_epochs*updates_per_epoch updates up to
    batch_scale) or by the layer's LARS ratio ('lars')."""

    def __init__(self, momentum=0.0, multi_precision=False, warmup_strategy="linear",
                 warmup_epochs=5, batch_scale=1, updates_per_epoch=32, begin_epoch=0,
                 num_epochs=60, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.multi_precision = multi_precision
        self.warmup_strategy = warmup_strategy
        self.warmup_epochs = warmup_epochs
        self.batch_scale = batch_scale
        self.updates_per_epoch = updates_per_epoch
        self.init_updates = begin_epoch * updates_per_epoch
        self.num_epochs = num_epochs
        self.lbmult = 1
        self.cumgrads = {}
        self.adaptive = False
        self.admult = 1

    def create_state(self, index, weight):
        if self.multi_precision and np.dtype(weight.dtype) == _F16:
            master = _astype(weight, np.float32)
            mom = _zeros(weight.shape, weight.context, np.float32) if self.momentum != 0.0 \
                else None
            return (mom, master)
        if self.momentum != 0.0:
            return _zeros(weight.shape, weight.context, weight.dtype)
        return None

    def _get_lbmult(self, nup):
        nwup = self.warmup_epochs * self.updates_per_epoch
        maxmult = float(self.batch_scale)
        if nup >= nwup:
            return maxmult
        if nwup <= 1:
            return 1.0
        if self.warmup_strategy == "linear":
            return 1.0 + (maxmult - 1) * nup / nwup
        if self.warmup_strategy == "power2":
            return 1.0 + (maxmult - 1) * (nup * nup) / (nwup * nwup)
        if self.warmup_strategy == "sqrt":
            return 1.0 + (maxmult - 1) * math.sqrt(float(nup) / nwup)
        return 1.0

    @staticmethod
    def _l2norm(v):
        """Sum of squares (MXNet's LBSGD calls it a norm)."""
        a = _host(v) if _is_nd(v) else np.asarray(v)
        return float(np.sum(a * a))

    def _get_lars(self, weight, g, wd):
        w2 = self._l2norm(weight)
        g2 = self._l2norm(g)
        lars = math.sqrt(w2 / (g2 + wd * w2 + 1e-18))
        return min(max(lars, 0.01), 100.0)

    def _cumulate_gradient(self, grad, index):
        """Accumulates (on the host, in the gradient's dtype) the gradients of a large batch."""
        g = _host(grad)
        cg = self.cumgrads.get(index, {})
        if cg and cg["num_cums"] > 0:
            cum, num = cg["cum_grad"] + g, cg["num_cums"] + 1
        else:
            cum, num = g, self.init_updates + 1
        self.cumgrads[index] = {"cum_grad": cum, "num_cums": num}
        return self.cumgrads[index]

    def update(self, index, weight, grad, state):
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        self._update_count(index)
        cg = self._cumulate_gradient(grad, index)
        if cg["num_cums"] % self.batch_scale != 0:
            return  # MXNet runs sgd_update with lr 0 here: the weight stays as it is
        g = np.asarray(cg["cum_grad"] / self.batch_scale, dtype=np.dtype(grad.dtype))
        g = nd.array(g, ctx=grad.context, dtype=g.dtype)
        if self.warmup_strategy == "lars":
            lr = lr * self._get_lars(weight, g, wd)
        else:
            lr = lr * self._get_lbmult(cg["num_cums"])
        if isinstance(state, (list, tuple)):
            mom, master = state
            _sgd_step(self, master, _astype(g, np.float32), mom, lr, wd, self.momentum)
            _store(weight, master.asnumpy())
        else:
            _sgd_step(self, weight, g, state if self.momentum > 0 else None, lr, wd,
                      self.momentum)
        self.cumgrads[index]["cum_grad"] = 0


@register
class DCASGD(Optimizer):
    """Delay-compensated asynchronous SGD: the step adds lamda*g*g*(w - w_prev) to the
    gradient (states: momentum or None, previous weight). With momentum > 0, MXNet 1.9.1
    raises ValueError (it tests the momentum NDArray's truth value); Loom applies the
    documented update mom = momentum*mom + step."""

    def __init__(self, momentum=0.0, lamda=0.04, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.weight_previous = {}
        self.lamda = lamda

    def create_state(self, index, weight):
        mom = None if self.momentum == 0.0 else _zeros(weight.shape, weight.context,
                                                       weight.dtype)
        return (mom, weight.copy())

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        g = self.rescale_grad * _host(grad)
        if self.clip_gradient is not None:
            g = _clip(g, self.clip_gradient)
        mom, prev = state
        w, wp = _host(weight), _host(prev)
        step = -lr * (g + wd * w + self.lamda * g * g * (w - wp))
        if mom is not None:
            step = self.momentum * _host(mom) + step
            _store(mom, step)
        _store(prev, w)
        _store(weight, w + step)


@register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics: w += -lr/2*(g + wd*w) + N(0, sqrt(lr))."""

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        g = self.rescale_grad * _host(grad)
        if self.clip_gradient is not None:
            g = _clip(g, self.clip_gradient)
        w = _host(weight)
        w = w + (-lr / 2 * (g + wd * w)).astype(w.dtype, copy=False)
        _store(weight, w + _normal(math.sqrt(lr), weight))


def _normal(scale, like):
    """Gaussian noise shaped like `like`, from loom.random when it can draw it."""
    from . import random as _random
    draw = getattr(_random, "normal", None)
    if draw is not None:
        try:
            return draw(0, scale, shape=like.shape, dtype=like.dtype,
                        ctx=like.context).asnumpy()
        except Exception:  # noqa: BLE001  (dtype the generator lacks: draw float32)
            return draw(0, scale, shape=like.shape, ctx=like.context).asnumpy().astype(
                like.dtype)
    return np.random.normal(0, scale, size=like.shape).astype(like.dtype)


@register
class Signum(Optimizer):
    """signum_update: mom = momentum*mom - (1-momentum)*(wd*w + clip(rescale_grad*g));
    w = (1 - lr*wd_lh)*w + lr*sign(mom). Without momentum, signsgd_update:
    w = (1 - lr*wd)*w - lr*sign(g)."""

    def __init__(self, learning_rate=0.01, momentum=0.9, wd_lh=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.wd_lh = wd_lh

    def create_state(self, index, weight):
        if self.momentum != 0.0:
            return _zeros(weight.shape, weight.context, weight.dtype)
        return None

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        w, g = _host(weight), _host(grad)
        if state is not None:
            mu = self.momentum if self.momentum > 0 else 0.0
            gr = self.rescale_grad * g
            if self.clip_gradient:
                gr = _clip(gr, self.clip_gradient)
            m = mu * _host(state) - (1 - mu) * wd * w - (1 - mu) * gr
            _store(state, m)
            _store(weight, (1. - lr * self.wd_lh) * w + lr * _sign(m))
        else:
            _store(weight, (1. - lr * wd) * w - lr * _sign(g))


# ----------------------------------------------------------------------------- adaptive

@register
class FTML(Optimizer):
    """Follow the moving leader (ftml_update), states d, v, z."""

    def __init__(self, beta1=0.6, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, index, weight):
        return tuple(_zeros(weight.shape, weight.context, weight.dtype) for _ in range(3))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        t = self._index_update_count[index]
        w, g = _host(weight), _host(grad)
        d, v, z = (_host(s) for s in state)
        gi = self.rescale_grad * g + wd * w
        if self.clip_gradient:
            gi = _clip(gi, self.clip_gradient)
        b1, b2 = self.beta1, self.beta2
        v = b2 * v + (1 - b2) * np.square(gi)
        d_t = (1 - b1 ** t) / lr * (np.sqrt(v / (1 - b2 ** t)) + self.epsilon)
        z = b1 * z + (1 - b1) * gi - (d_t - b1 * d) * w
        for dst, val in zip(state, (d_t, v, z)):
            _store(dst, val)
        _store(weight, -z / d_t)


@register
class Adam(Optimizer):
    """adam_update with lr*sqrt(1-beta2^t)/(1-beta1^t), t the index's update count
    (states mean, var); wd*w is added to the rescaled gradient before clipping."""
    _graph_name = "adam"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        return (_zeros(weight.shape, weight.context, weight.dtype),
                _zeros(weight.shape, weight.context, weight.dtype))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        t = self._index_update_count[index]
        lr *= math.sqrt(1. - self.beta2 ** t) / (1. - self.beta1 ** t)
        mean, var = state
        if _all_f32(weight, grad, mean, var):
            kw = {}
            if self.clip_gradient:
                kw["clip_gradient"] = self.clip_gradient
            nd.adam_update(weight, grad, mean, var, out=weight, lr=lr, wd=wd, beta1=self.beta1,
                           beta2=self.beta2, epsilon=self.epsilon,
                           rescale_grad=self.rescale_grad, **kw)
            return
        w, g, m, v = _host(weight), _host(grad), _host(mean), _host(var)
        gr = g * self.rescale_grad + w * wd
        if self.clip_gradient:
            gr = _clip(gr, self.clip_gradient)
        m = self.beta1 * m + (1. - self.beta1) * gr
        v = self.beta2 * v + (1. - self.beta2) * gr * gr
        _store(mean, m)
        _store(var, v)
        _store(weight, w - lr * m / (np.sqrt(v) + self.epsilon))

    def _extra(self):
        return {"beta1": float(self.beta1), "beta2": float(self.beta2),
                "epsilon": float(self.epsilon)}


@register
class AdamW(Adam):
    """Adam with decoupled weight decay, as MXNet 1.x's AdamW optimizers call adamw_update
    (lr=1, eta = the bias-corrected scheduled rate): m, v from clip(rescale_grad*g);
    w -= eta*(m/(sqrt(v)+eps) + wd*w). Not part of 1.9.1's mx.optimizer (GluonNLP and
    1.x contrib code define it); make_step builds it in the graph."""
    _graph_name = "adamw"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 correct_bias=True, **kwargs):
        super().__init__(learning_rate=learning_rate, beta1=beta1, beta2=beta2,
                         epsilon=epsilon, **kwargs)
        self.correct_bias = correct_bias

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        t = self._index_update_count[index]
        if self.correct_bias:
            lr *= math.sqrt(1. - self.beta2 ** t) / (1. - self.beta1 ** t)
        mean, var = state
        if _all_f32(weight, grad, mean, var):
            kw = {}
            if self.clip_gradient:
                kw["clip_gradient"] = self.clip_gradient
            nd.adamw_update(weight, grad, mean, var, out=weight, lr=1.0, eta=lr, wd=wd,
                            beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon,
                            rescale_grad=self.rescale_grad, **kw)
            return
        if not np.isfinite(self.rescale_grad) or self.rescale_grad == 0:
            return  # adamw_update skips the step
        w, g, m, v = _host(weight), _host(grad), _host(mean), _host(var)
        gr = g * self.rescale_grad
        if self.clip_gradient:
            gr = _clip(gr, self.clip_gradient)
        m = self.beta1 * m + (1. - self.beta1) * gr
        v = self.beta2 * v + (1. - self.beta2) * gr * gr
        _store(mean, m)
        _store(var, v)
        _store(weight, w - lr * (m / (np.sqrt(v) + self.epsilon) + wd * w))

    def _extra(self):
        d = super()._extra()
        d["bias_correction"] = bool(self.correct_bias)
        return d


@register
class AdaGrad(Optimizer):
    """history += g^2; w -= lr*(g/sqrt(history + eps) + wd*w), g = clip(rescale_grad*grad)
    (the history is float32, as MXNet creates it)."""

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        return _zeros(weight.shape, weight.context, np.float32)

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        g = self.rescale_grad * _host(grad)
        if self.clip_gradient is not None:
            g = _clip(g, self.clip_gradient)
        h = _host(state) + np.square(g)
        _store(state, h)
        w = _host(weight)
        div = g / np.sqrt(h + self.float_stable_eps)
        _store(weight, w + (div + w * wd) * -lr)


@register
class RMSProp(Optimizer):
    """rmsprop_update (state n) or, centered, rmspropalex_update (n, g, delta); float32
    states as MXNet creates them."""
    _graph_name = "rmsprop"

    def __init__(self, learning_rate=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8,
                 centered=False, clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1, self.gamma2, self.epsilon = gamma1, gamma2, epsilon
        self.centered, self.clip_weights = centered, clip_weights

    def create_state(self, index, weight):
        k = 3 if self.centered else 1
        return tuple(_zeros(weight.shape, weight.context, np.float32) for _ in range(k))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        kw = {"gamma1": self.gamma1, "epsilon": self.epsilon, "rescale_grad": self.rescale_grad}
        if self.centered:
            kw["gamma2"] = self.gamma2
        if self.clip_gradient:
            kw["clip_gradient"] = self.clip_gradient
        if self.clip_weights:
            kw["clip_weights"] = self.clip_weights
        if _all_f32(weight, grad, *state):
            if self.centered:
                n, g, delta = state
                nd.rmspropalex_update(weight, grad, n, g, delta, out=weight, lr=lr, wd=wd, **kw)
            else:
                nd.rmsprop_update(weight, grad, state[0], out=weight, lr=lr, wd=wd, **kw)
            return
        w = _host(weight)
        gr = self.rescale_grad * _host(grad) + wd * w
        if self.clip_gradient:
            gr = _clip(gr, self.clip_gradient)
        g1 = self.gamma1
        n = (1. - g1) * (gr * gr) + g1 * _host(state[0])
        _store(state[0], n)
        if self.centered:
            gm = (1. - g1) * gr + g1 * _host(state[1])
            delta = self.gamma2 * _host(state[2]) - lr * gr / np.sqrt(n - gm * gm + self.epsilon)
            _store(state[1], gm)
            _store(state[2], delta)
            new = w + delta
        else:
            new = w - lr * (gr / np.sqrt(n + self.epsilon))
        if self.clip_weights:
            new = _clip(new, self.clip_weights)
        _store(weight, new)

    def _extra(self):
        return {"gamma1": float(self.gamma1), "gamma2": float(self.gamma2),
                "epsilon": float(self.epsilon), "centered": bool(self.centered),
                "clip_weights": -1.0 if not self.clip_weights else float(self.clip_weights)}


@register
class AdaDelta(Optimizer):
    """acc_g = rho*acc_g + (1-rho)*g^2; d = sqrt(acc_d+eps)/sqrt(acc_g+eps)*g;
    acc_d = rho*acc_d + (1-rho)*d^2; w -= d + wd*w (float32 states)."""

    def __init__(self, rho=0.90, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.rho, self.epsilon = rho, epsilon

    def create_state(self, index, weight):
        return (_zeros(weight.shape, weight.context, np.float32),
                _zeros(weight.shape, weight.context, np.float32))

    def update(self, index, weight, grad, state):
        wd = self._get_wd(index)
        self._update_count(index)
        g = _host(grad) * self.rescale_grad
        if self.clip_gradient is not None:
            g = _clip(g, self.clip_gradient)
        acc_g, acc_d = state
        ag = self.rho * _host(acc_g) + (1. - self.rho) * g * g
        cur = np.sqrt(_host(acc_d) + self.epsilon) / np.sqrt(ag + self.epsilon) * g
        ad = self.rho * _host(acc_d) + (1. - self.rho) * cur * cur
        _store(acc_g, ag)
        _store(acc_d, ad)
        w = _host(weight)
        _store(weight, w - (cur + wd * w))


@register
class Ftrl(Optimizer):
    """FTRL-proximal (ftrl_update): z += g - (sqrt(n+g^2)-sqrt(n))*w/lr; n += g^2;
    w = (sign(z)*lamda1 - z)/((beta+sqrt(n))/lr + wd) where |z| > lamda1, else 0
    (states z, n; float32 as MXNet creates them)."""

    def __init__(self, lamda1=0.01, learning_rate=0.1, beta=1, **kwargs):
        super().__init__(**kwargs)
        self.lamda1 = lamda1
        self.beta = beta
        self.lr = learning_rate

    def create_state(self, index, weight):
        return (_zeros(weight.shape, weight.context, np.float32),
                _zeros(weight.shape, weight.context, np.float32))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        wd = self._get_wd(index)
        lr = self._get_lr(index)
        g = _host(grad) * self.rescale_grad
        if self.clip_gradient:
            g = _clip(g, self.clip_gradient)
        z_nd, n_nd = state
        w, z, n = _host(weight), _host(z_nd), _host(n_nd)
        z = z + g - (np.sqrt(n + np.square(g)) - np.sqrt(n)) * w / lr
        n = n + np.square(g)
        new = (np.sign(z) * self.lamda1 - z) / ((self.beta + np.sqrt(n)) / lr + wd) * \
            (np.abs(z) > self.lamda1)
        _store(z_nd, z)
        _store(n_nd, n)
        _store(weight, new)


@register
class Adamax(Optimizer):
    """Adam with the infinity norm: m = b1*m + (1-b1)*g; u = max(b2*u, |g|);
    w -= lr/(1-b1^t)*m/u, g = clip(rescale_grad*grad + wd*w)."""

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2 = beta1, beta2

    def create_state(self, index, weight):
        return (_zeros(weight.shape, weight.context, weight.dtype),
                _zeros(weight.shape, weight.context, weight.dtype))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        t = self._index_update_count[index]
        lr /= (1. - self.beta1 ** t)
        w = _host(weight)
        g = _host(grad) * self.rescale_grad + wd * w
        if self.clip_gradient is not None:
            g = _clip(g, self.clip_gradient)
        m_nd, u_nd = state
        m = self.beta1 * _host(m_nd) + (1. - self.beta1) * g
        u = np.maximum(self.beta2 * _host(u_nd), np.abs(g))
        _store(m_nd, m)
        _store(u_nd, u)
        _store(weight, w - lr * m / u)


@register
class Nadam(Optimizer):
    """Adam with Nesterov momentum and the warming momentum schedule
    mu_t = beta1*(1 - 0.5*0.96^(t*schedule_decay)) (m_schedule is shared by all indices,
    as in MXNet)."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 schedule_decay=0.004, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.schedule_decay = schedule_decay
        self.m_schedule = 1.

    def create_state(self, index, weight):
        return (_zeros(weight.shape, weight.context, weight.dtype),
                _zeros(weight.shape, weight.context, weight.dtype))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        wd = self._get_wd(index)
        t = self._index_update_count[index]
        w = _host(weight)
        g = _host(grad) * self.rescale_grad + wd * w
        if self.clip_gradient is not None:
            g = _clip(g, self.clip_gradient)
        mu_t = self.beta1 * (1. - 0.5 * pow(0.96, t * self.schedule_decay))
        mu_next = self.beta1 * (1. - 0.5 * pow(0.96, (t + 1) * self.schedule_decay))
        self.m_schedule = self.m_schedule * mu_t
        m_schedule_next = self.m_schedule * mu_next
        m_nd, v_nd = state
        m = self.beta1 * _host(m_nd) + (1. - self.beta1) * g
        v = self.beta2 * _host(v_nd) + (1. - self.beta2) * g * g
        _store(m_nd, m)
        _store(v_nd, v)
        g_prime = g / (1. - self.m_schedule)
        m_prime = m / (1. - m_schedule_next)
        v_prime = v / (1. - pow(self.beta2, t))
        m_bar = (1. - mu_t) * g_prime + mu_next * m_prime
        _store(weight, w - lr * m_bar / (np.sqrt(v_prime) + self.epsilon))


@register
class LAMB(Optimizer):
    """lamb_update_phase1 (t = the index's update count), r1 = ||w|| (bounded by
    lower_bound/upper_bound), r2 = ||g||, lamb_update_phase2: w -= lr*(r1/r2)*g (lr alone
    when r1 or r2 is 0). Accepts lists (MXNet's multi-tensor form). With multi_precision,
    the float32 master copy is updated each step (MXNet 1.9.1's mp_lamb_update_phase2 leaves
    it as created, so there every step restarts from the initial weights)."""
    _graph_name = "lamb"

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 lower_bound=None, upper_bound=None, bias_correction=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        self.bias_correction = bias_correction
        self.aggregate_num = max(1, min(45, int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE",
                                                          "45"))))

    def create_state(self, index, weight):
        return (_zeros(weight.shape, weight.context, weight.dtype),
                _zeros(weight.shape, weight.context, weight.dtype))

    def update(self, index, weight, grad, state):
        self._update_impl(index, weight, grad, state, multi_precision=False)

    def update_multi_precision(self, index, weight, grad, state):
        w0 = weight[0] if isinstance(weight, (list, tuple)) else weight
        mp = bool(self.multi_precision) and np.dtype(w0.dtype) == _F16
        self._update_impl(index, weight, grad, state, multi_precision=mp)

    def _update_impl(self, index, weight, grad, state, multi_precision=False):
        indices, weights, grads, states, _ = _flat_lists(index, weight, grad, state)
        for i, w, g, s in zip(indices, weights, grads, states):
            self._update_count(i)
            lr = self._get_lr(i)
            wd = self._get_wd(i)
            t = self._index_update_count[i]
            if multi_precision:
                master, (mean, var) = s
                self._step(master, _astype(g, np.float32), mean, var, lr, wd, t)
                _store(w, master.asnumpy())
            else:
                mean, var = s
                self._step(w, g, mean, var, lr, wd, t)

    def _step(self, weight, grad, mean, var, lr, wd, t):
        kw = {}
        if self.lower_bound:
            kw["lower_bound"] = self.lower_bound
        if self.upper_bound:
            kw["upper_bound"] = self.upper_bound
        if _all_f32(weight, grad, mean, var):
            p1 = {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon,
                  "bias_correction": self.bias_correction, "rescale_grad": self.rescale_grad,
                  "t": t, "wd": wd}
            if self.clip_gradient:
                p1["clip_gradient"] = self.clip_gradient
            g = nd.lamb_update_phase1(weight, grad, mean, var, **p1)
            nd.lamb_update_phase2(weight, g, nd.norm(weight), nd.norm(g), lr=lr, out=weight,
                                  **kw)
            return
        w, gr = _host(weight), _host(grad) * self.rescale_grad
        if self.clip_gradient:
            gr = _clip(gr, self.clip_gradient)
        m = self.beta1 * _host(mean) + (1. - self.beta1) * gr
        v = self.beta2 * _host(var) + (1. - self.beta2) * gr * gr
        _store(mean, m)
        _store(var, v)
        if self.bias_correction:
            m = m / (1. - self.beta1 ** t)
            v = v / (1. - self.beta2 ** t)
        g = m / (np.sqrt(v) + self.epsilon) + wd * w
        r1 = float(np.sqrt(np.sum(np.square(w.astype(np.float64)))))
        r2 = float(np.sqrt(np.sum(np.square(g.astype(np.float64)))))
        if self.lower_bound:
            r1 = max(r1, self.lower_bound)
        if self.upper_bound:
            r1 = min(r1, self.upper_bound)
        if r1 != 0.0 and r2 != 0.0:
            lr = lr * r1 / r2
        _store(weight, w - lr * g)

    def _extra(self):
        return {"beta1": float(self.beta1), "beta2": float(self.beta2),
                "epsilon": float(self.epsilon), "bias_correction": bool(self.bias_correction),
                "lower_bound": -1.0 if not self.lower_bound else float(self.lower_bound),
                "upper_bound": -1.0 if not self.upper_bound else float(self.upper_bound)}


@register
class Test(Optimizer):
    """MXNet's test optimizer: w += rescale_grad*g; the state is a copy of the weight."""

    def create_state(self, index, weight):
        return _zeros(weight.shape, weight.context, np.float32)

    def update(self, index, weight, grad, state):
        w = _host(weight) + _host(grad) * self.rescale_grad
        _store(weight, w)
        _store(state, w)


@register
class GroupAdaGrad(Optimizer):
    """AdaGrad with one history value per row of a 2-D weight (MXNet's
    mx.optimizer.contrib.GroupAdaGrad): history += mean(g^2 over the row);
    w -= lr*g/sqrt(history + eps), g = clip(rescale_grad*grad). No weight decay."""

    def __init__(self, eps=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        if len(weight.shape) != 2:
            raise ValueError("GroupAdaGrad: weights must be 2-D, got shape %s"
                             % (tuple(weight.shape),))
        return _zeros((weight.shape[0], 1), weight.context, np.float32)

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr = self._get_lr(index)
        if self._get_wd(index) != 0:
            raise ValueError("Weight decay is not supported for GroupAdaGrad")
        g = _host(grad) * self.rescale_grad
        if self.clip_gradient is not None:
            g = _clip(g, self.clip_gradient)
        h = _host(state) + np.mean(np.square(g), axis=1, keepdims=True)
        _store(state, h)
        _store(weight, _host(weight) - lr * g / np.sqrt(h + self.float_stable_eps))


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
