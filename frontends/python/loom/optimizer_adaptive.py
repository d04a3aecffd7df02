"""The adaptive optimizers of ``mx.optimizer`` (MXNet 1.9.1's names and update rules): FTML,
Adam, AdamW, AdaGrad, RMSProp, AdaDelta, Ftrl, Adamax, Nadam, LAMB, Test and the contrib
GroupAdaGrad, registered with ``Optimizer.register``. loom.optimizer exports them; the base
class, the helpers they share, Updater and the MXNet-compatible state pickles are there."""
import math
import os

import numpy as np

from . import ndarray as nd
from .optimizer import (Optimizer, register, _F16, _all_f32, _astype, _clip, _flat_lists, _host,
                        _store, _zeros)

__all__ = ["FTML", "Adam", "AdamW", "AdaGrad", "RMSProp", "AdaDelta", "Ftrl", "Adamax", "Nadam",
           "LAMB", "Test", "GroupAdaGrad"]


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


# The classes are loom.optimizer's in name (as MXNet's are mxnet.optimizer.optimizer's):
# pickles refer to them there, and code that asks whether an optimizer is one of Loom's own
# compares __module__ with loom.optimizer's.
for _cls in (FTML, Adam, AdamW, AdaGrad, RMSProp, AdaDelta, Ftrl, Adamax, Nadam, LAMB, Test,
             GroupAdaGrad):
    _cls.__module__ = Optimizer.__module__
del _cls
