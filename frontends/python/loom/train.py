"""Training steps as graphs (graph/step_builder.h).

    step = loom.train.make_step(loss, optimizer=loom.optimizer.SGD(learning_rate=0.1,
                                momentum=0.9, wd=1e-4), accumulate=4,
                                ema=loom.train.EMA(decay=0.999, schedule='tf',
                                                   init='zero_debias', include_aux=True))
    exe = step.simple_bind(loom.cpu(), grad_req='null', data=(b, n), softmax_label=(b,))
    exe.forward(is_train=True, data=x, softmax_label=y)   # one micro-step

Each forward is one micro-step: forward, backward, accumulation and, on the last micro-step
of `accumulate`, the optimizer update, the real-step count (LR schedule, Adam's bias
correction) and the EMA. Weights stay in `exe.arg_dict`; every piece of training state is an
aux state named after its parameter: `<p>_acc`, `<p>_mom` / `<p>_mean` / `<p>_var` / `<p>_n`,
`<p>_ema` (+ `<p>_ema_norm` for zero_debias), `step_micro`, `step_real`. Bind with
grad_req='null' (the step computes its own gradients)."""
import contextlib

from . import _loom
from .executor import Executor
from .optimizer import Optimizer, create as _create_optimizer

__all__ = ["EMA", "make_step", "bind", "save_checkpoint", "load_checkpoint", "state_kinds",
           "ema_params", "bind_ema", "refresh_ema", "ema_weights", "fit"]


class EMA:
    """Model EMA options (ops/update/ema.cc): decay; schedule 'constant', 'tf' (TF Model
    Garden min(decay,(1+t)/(10+t))), 'yolov5' (decay*(1-exp(-t/tau))), 'timm' (warmup
    1-(1+t/gamma)^-power clamped to [min_decay, decay]); init 'copy' (first real step copies
    the weights) or 'zero_debias' (optax: evaluate ema/(1-prod d)); include_aux averages aux
    states too (BatchNorm statistics; integer states are copied)."""

    def __init__(self, decay=0.999, schedule="constant", init="copy", include_aux=False,
                 tau=2000.0, gamma=1.0, power=0.75, min_decay=0.0, update_after_step=0,
                 start_step=0):
        if schedule not in ("constant", "tf", "yolov5", "timm"):
            raise ValueError("EMA schedule must be constant, tf, yolov5 or timm, got %r" % schedule)
        if init not in ("copy", "zero_debias"):
            raise ValueError("EMA init must be copy or zero_debias, got %r" % init)
        self.decay, self.schedule, self.init, self.include_aux = decay, schedule, init, include_aux
        self.tau, self.gamma, self.power, self.min_decay = tau, gamma, power, min_decay
        self.update_after_step, self.start_step = int(update_after_step), int(start_step)

    def _spec(self):
        return {"decay": float(self.decay), "schedule": self.schedule, "init": self.init,
                "include_aux": bool(self.include_aux), "tau": float(self.tau),
                "gamma": float(self.gamma), "power": float(self.power),
                "min_decay": float(self.min_decay), "update_after_step": self.update_after_step,
                "start_step": self.start_step}

    def __repr__(self):
        return "EMA(decay=%g, schedule=%r, init=%r, include_aux=%r)" % (
            self.decay, self.schedule, self.init, self.include_aux)


def make_step(loss, optimizer="sgd", accumulate=1, ema=None, grad_mean=True, data_names=None,
              label_names=None, fixed_param_names=None, bucket=True, dist=None,
              **optimizer_params):
    """The training-step Symbol of `loss` (see the module doc). optimizer: a
    loom.optimizer.Optimizer or a name with optimizer_params. Parameters are the arguments
    other than data_names + label_names (default: 'data' and names ending in 'label') and
    fixed_param_names. grad_mean: accumulate the mean of the micro-batch gradients (else the
    sum); rescale_grad applies on top (e.g. 1/b for a summing loss head). bucket: fuse the
    accumulation, update and EMA of all parameters into one pass each, their states laid out
    in flat buffers (False: one node per parameter).

    dist: a loom.dist.DataParallel makes a data-parallel step for the job loom.dist.init()
    joins: the accumulated gradients are reduced over the ranks on the last micro-step
    (averaged when grad_mean: with a batch-mean loss, N ranks of b samples step as one
    process on N*b), and the first call broadcasts rank 0's weights and states. With
    DataParallel(shard_ema=True) each rank keeps only its 1/N range of the EMA, with
    shard_optimizer=True only its 1/N range of the optimizer state (reduce-scatter, update of
    the own range, all-gather of the weights; see loom.dist.DataParallel); the EMA helpers and
    save_checkpoint below then gather them and are collectives."""
    if not isinstance(optimizer, Optimizer):
        optimizer = _create_optimizer(optimizer, **optimizer_params)
    elif optimizer_params:
        raise TypeError("optimizer parameters given with an Optimizer instance")
    if ema is True:
        ema = EMA()
    inputs = []
    if data_names is not None or label_names is not None:
        inputs = list(data_names or ()) + list(label_names or ())
    return _loom._make_step(loss, optimizer._spec(), int(accumulate), bool(grad_mean),
                            None if ema is None else ema._spec(), inputs,
                            list(fixed_param_names or ()), bool(bucket), "",
                            None if dist is None else dist._spec())


def bind(step, ctx=None, **shapes):
    """step.simple_bind with grad_req='null' (the step graph computes its own gradients)."""
    return step.simple_bind(ctx, grad_req="null", **shapes)


def state_kinds(step):
    """Name -> 'arg', 'aux', 'opt', 'acc', 'ema', 'step' or 'input' for a step Symbol."""
    return _loom._classify_step_inputs(step)


def _handle(exe):
    return exe.handle if isinstance(exe, Executor) else exe


def save_checkpoint(path, exe):
    """Writes the whole training state (arg:, aux:, opt:, acc:, ema:, step: prefixed names)
    as one MXNet .params file, atomically (temp file, fsync, rename). A sharded EMA or
    optimizer state (DataParallel(shard_ema=True), shard_optimizer=True) is gathered and
    written whole, under the unsharded names, by rank 0: call it on every rank."""
    _loom._save_training_state(str(path), _handle(exe))


def load_checkpoint(path, exe, strict=True):
    """Restores a state saved by save_checkpoint into a bound step executor; resuming
    continues bit for bit. Sharded EMA or optimizer states take this rank's range of the whole
    values, so a file of any world size, sharded or not, resumes (every rank loads it).
    Raises FormatError for truncated/corrupt files, names the graph lacks, wrong shapes and
    (strict) missing state."""
    _loom._load_training_state(str(path), _handle(exe), bool(strict))


def ema_params(exe):
    """(arg_params, aux_params): the EMA evaluation values by the name of what they shadow
    (the shadow arrays themselves for init='copy', ema/norm copies for 'zero_debias'; a
    sharded EMA is gathered into copies, on every rank)."""
    return _loom._ema_params(_handle(exe))


def bind_ema(net, exe, ctx=None, **shapes):
    """An executor of `net` (the plain loss or inference symbol) on the EMA weights of the
    step executor `exe` (live arrays for what has no shadow). zero_debias values are a
    snapshot: call refresh_ema(exe, eval_exe) after more training."""
    h = _loom._bind_ema(net, _handle(exe), {k: tuple(v) for k, v in shapes.items()}, ctx)
    return Executor(h, net, ctx)


def refresh_ema(exe, eval_exe):
    _loom._refresh_ema(_handle(exe), _handle(eval_exe))


@contextlib.contextmanager
def ema_weights(exe):
    """Context manager: the step executor's weights (and averaged aux states) hold the EMA
    evaluation values inside the block and are restored bit for bit after it."""
    swap = _loom._EmaSwap(_handle(exe))
    try:
        yield exe
    finally:
        swap.restore()


from .fit import fit  # noqa: E402  (fit uses bind_ema / refresh_ema above)
