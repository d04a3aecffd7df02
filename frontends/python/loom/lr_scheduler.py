"""mx.lr_scheduler: learning-rate schedules (MXNet 1.9 names and semantics).

Each scheduler is callable like MXNet's (`sched(num_update)`, in closed form: MXNet's
FactorScheduler, MultiFactorScheduler, PolyScheduler and CosineScheduler reach the same value
by decaying `base_lr` as num_update grows; Loom leaves `base_lr` as set, so the value depends
on num_update alone, also when it goes back) and, passed to
an optimizer of `loom.optimizer`, becomes part of a training-step graph (`loom.train.
make_step`): the `_loom_lr` node evaluates it from the graph's real-step counter, so the
schedule advances once per real (optimizer) step, never per micro-batch."""
import logging
import math

__all__ = ["LRScheduler", "FactorScheduler", "MultiFactorScheduler", "PolyScheduler",
           "CosineScheduler"]


class LRScheduler:
    """Base: warmup from warmup_begin_lr over warmup_steps updates ('linear' or 'constant')."""
    kind = "constant"

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        self.base_lr = base_lr
        self.warmup_steps = int(warmup_steps)
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_final_lr = base_lr
        self.warmup_mode = warmup_mode
        if warmup_begin_lr > base_lr:
            raise ValueError("Base lr has to be higher than warmup_begin_lr")
        if warmup_mode not in ("linear", "constant"):
            raise ValueError("Supports only linear and constant modes of warmup")
        if warmup_steps < 0:
            raise ValueError("warmup_steps must be >= 0")

    def get_warmup_lr(self, num_update):
        if self.warmup_mode == "linear":
            inc = (self.warmup_final_lr - self.warmup_begin_lr) * float(num_update) / \
                float(self.warmup_steps)
            return self.warmup_begin_lr + inc
        return self.warmup_begin_lr

    def _spec(self):
        """The dict the C++ builder reads (graph/step_builder.h LrSchedulerSpec)."""
        d = {"type": self.kind, "warmup_steps": self.warmup_steps,
             "warmup_begin_lr": float(self.warmup_begin_lr),
             "warmup_final_lr": float(self.warmup_final_lr), "warmup_mode": self.warmup_mode}
        d.update(self._own_spec())
        return d

    def _own_spec(self):
        return {}

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        return self._after_warmup(num_update)

    def _after_warmup(self, num_update):
        return self.base_lr

    def log_changes(self, num_update):
        """Logs (logging.info) what MXNet's stateful scheduler prints when called with
        num_update, for callers that evaluate the schedule in a graph (Module's update
        graph) or in closed form. The rate itself is not touched: a private replay of
        MXNet's bookkeeping decides when MXNet would have printed."""
        if num_update >= self.warmup_steps:
            for msg in self._replay(num_update):
                logging.info(msg)

    def _replay(self, num_update):
        return []


class FactorScheduler(LRScheduler):
    """lr = base_lr * factor^floor((num_update-1)/step), not below stop_factor_lr."""
    kind = "factor"

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise ValueError("Schedule step must be greater or equal than 1 round")
        if factor > 1.0:
            raise ValueError("Factor must be no more than 1 to make lr reduce")
        self.step, self.factor, self.stop_factor_lr = int(step), factor, stop_factor_lr
        # MXNet's bookkeeping: base_lr is the rate after `count` updates. Loom never advances
        # it (the rate is a function of num_update); a scheduler unpickled from MXNet may.
        self.count = 0

    def _own_spec(self):
        base = self.base_lr
        count = getattr(self, "count", 0)
        if count and self.factor > 0 and base > self.stop_factor_lr:
            base = base / self.factor ** (count // self.step)  # the rate before any decay
        d = {"step": self.step, "factor": float(self.factor),
             "stop_factor_lr": float(self.stop_factor_lr)}
        if base != self.base_lr:
            d["base_lr"] = float(base)
        return d

    def _replay(self, num_update):
        st = self.__dict__.setdefault("_log_state", [getattr(self, "count", 0), self.base_lr])
        out = []
        while num_update > st[0] + self.step:
            st[0] += self.step
            st[1] *= self.factor
            if st[1] < self.stop_factor_lr:
                st[1] = self.stop_factor_lr
                out.append("Update[%d]: now learning rate arrived at %0.5e, will not change in "
                           "the future" % (num_update, st[1]))
            else:
                out.append("Update[%d]: Change learning rate to %0.5e" % (num_update, st[1]))
        return out

    def _after_warmup(self, num_update):
        lr = self.base_lr
        for _ in range(max(0, (num_update - getattr(self, "count", 0) - 1) // self.step)):
            lr *= self.factor
            if lr < self.stop_factor_lr:
                return self.stop_factor_lr
        return lr


class MultiFactorScheduler(LRScheduler):
    """lr = base_lr * factor^(number of entries s of `step` with num_update > s)."""
    kind = "multifactor"

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        step = list(step)
        for i, s in enumerate(step):
            if i and s <= step[i - 1]:
                raise ValueError("Schedule step must be an increasing integer list")
            if s < 1:
                raise ValueError("Schedule step must be greater or equal than 1 round")
        if not step:
            raise ValueError("Schedule step must be a non-empty list")
        if factor > 1.0:
            raise ValueError("Factor must be no more than 1 to make lr reduce")
        self.step, self.factor = [int(s) for s in step], factor
        # MXNet's bookkeeping: base_lr is the rate after the first cur_step_ind steps (Loom
        # never advances them; a scheduler unpickled from MXNet may have).
        self.cur_step_ind, self.count = 0, 0

    def _own_spec(self):
        ind = getattr(self, "cur_step_ind", 0)
        d = {"steps": self.step, "factor": float(self.factor)}
        if ind and self.factor > 0:
            d["base_lr"] = float(self.base_lr / self.factor ** ind)
        return d

    def _replay(self, num_update):
        st = self.__dict__.setdefault("_log_state", [getattr(self, "cur_step_ind", 0), self.base_lr])
        out = []
        while st[0] < len(self.step) and num_update > self.step[st[0]]:
            st[0] += 1
            st[1] *= self.factor
            out.append("Update[%d]: Change learning rate to %0.5e" % (num_update, st[1]))
        return out

    def _after_warmup(self, num_update):
        lr = self.base_lr
        for s in self.step[getattr(self, "cur_step_ind", 0):]:
            if num_update > s:
                lr *= self.factor
        return lr


class PolyScheduler(LRScheduler):
    kind = "poly"

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if max_update < 1:
            raise ValueError("maximum number of updates must be strictly positive")
        self.base_lr_orig = base_lr
        self.max_update, self.power, self.final_lr = int(max_update), pwr, final_lr
        self.max_steps = self.max_update - self.warmup_steps

    def _own_spec(self):
        return {"max_update": self.max_update, "pwr": float(self.power),
                "final_lr": float(self.final_lr), "base_lr": float(self.base_lr_orig)}

    def _after_warmup(self, num_update):
        u = min(num_update, self.max_update)
        return self.final_lr + (self.base_lr_orig - self.final_lr) * \
            pow(1 - float(u - self.warmup_steps) / float(self.max_steps), self.power)


class CosineScheduler(LRScheduler):
    """Cosine from base_lr to final_lr over max_update updates, after a warmup."""
    kind = "cosine"

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if max_update < 1:
            raise ValueError("maximum number of updates must be strictly positive")
        if max_update <= warmup_steps:
            raise ValueError("max_update must be greater than warmup_steps")
        self.base_lr_orig = base_lr
        self.max_update, self.final_lr = int(max_update), final_lr
        self.max_steps = self.max_update - self.warmup_steps

    def _own_spec(self):
        return {"max_update": self.max_update, "final_lr": float(self.final_lr),
                "base_lr": float(self.base_lr_orig)}

    def _after_warmup(self, num_update):
        u = min(num_update, self.max_update)
        return self.final_lr + (self.base_lr_orig - self.final_lr) * \
            (1 + math.cos(math.pi * (u - self.warmup_steps) / self.max_steps)) / 2
