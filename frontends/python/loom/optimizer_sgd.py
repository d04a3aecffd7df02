"""The SGD family of ``mx.optimizer`` (MXNet 1.9.1's names and update rules): SGD, ccSGD,
NAG, LARS, LBSGD, DCASGD, SGLD and Signum, registered with ``Optimizer.register``.
loom.optimizer exports them; the base class, the helpers they share, Updater and the
MXNet-compatible state pickles are there."""
import math
import os
import warnings

import numpy as np

from . import ndarray as nd
from .optimizer import (Optimizer, register, _F16, _all_f32, _astype, _clip, _flat_lists, _host,
                        _is_nd, _sign, _store, _zeros)

__all__ = ["SGD", "ccSGD", "NAG", "LARS", "LBSGD", "DCASGD", "SGLD", "Signum"]


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


# The classes are loom.optimizer's in name (as MXNet's are mxnet.optimizer.optimizer's):
# pickles refer to them there, and code that asks whether an optimizer is one of Loom's own
# compares __module__ with loom.optimizer's.
for _cls in (SGD, ccSGD, NAG, LARS, LBSGD, DCASGD, SGLD, Signum):
    _cls.__module__ = Optimizer.__module__
del _cls
