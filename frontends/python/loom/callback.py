"""mx.callback: callbacks for Module.fit / FeedForward.fit.

Batch-end callbacks receive a BatchEndParam (epoch, nbatch, eval_metric, locals); epoch-end
callbacks are called as cb(epoch, symbol, arg_params, aux_params). The log lines they write
through the `logging` module have MXNet 1.x's format, so log parsers keep working."""
import logging
import math
import time
from collections import namedtuple

__all__ = ["BatchEndParam", "module_checkpoint", "do_checkpoint", "log_train_metric",
           "Speedometer", "ProgressBar", "LogValidationMetricsCallback"]

BatchEndParam = namedtuple("BatchEndParams", ["epoch", "nbatch", "eval_metric", "locals"])


def _every(period):
    return int(max(1, period))


def module_checkpoint(mod, prefix, period=1, save_optimizer_states=False):
    """Epoch-end callback: mod.save_checkpoint(prefix, epoch + 1) every `period` epochs."""
    period = _every(period)

    def _cb(iter_no, sym=None, arg=None, aux=None):
        if (iter_no + 1) % period == 0:
            mod.save_checkpoint(prefix, iter_no + 1, save_optimizer_states)
    return _cb


def do_checkpoint(prefix, period=1):
    """Epoch-end callback: mx.model.save_checkpoint(prefix, epoch + 1, ...) every `period`
    epochs."""
    period = _every(period)

    def _cb(iter_no, sym, arg, aux):
        if (iter_no + 1) % period == 0:
            from .model import save_checkpoint
            save_checkpoint(prefix, iter_no + 1, sym, arg, aux)
    return _cb


def log_train_metric(period, auto_reset=False):
    """Batch-end callback logging the training metric every `period` batches."""
    def _cb(param):
        if param.nbatch % period != 0 or param.eval_metric is None:
            return
        for name, value in param.eval_metric.get_name_value():
            logging.info("Iter[%d] Batch[%d] Train-%s=%f", param.epoch, param.nbatch, name, value)
        if auto_reset:
            param.eval_metric.reset_local()
    return _cb


class Speedometer(object):
    """Batch-end callback logging samples/sec (and the metric) every `frequent` batches.
    auto_reset: reset the metric's local part after each log line (the line then names the
    batch range)."""

    def __init__(self, batch_size, frequent=50, auto_reset=True):
        self.batch_size = batch_size
        self.frequent = frequent
        self.auto_reset = auto_reset
        self.init = False
        self.tic = 0
        self.last_count = 0

    def __call__(self, param):
        count = param.nbatch
        if count < self.last_count:  # a new epoch started
            self.init = False
        self.last_count = count
        if not self.init:
            self.init = True
            self.tic = time.time()
            return
        if count % self.frequent != 0:
            return
        elapsed = time.time() - self.tic
        speed = self.frequent * self.batch_size / elapsed if elapsed > 0 else float("inf")
        metric = param.eval_metric
        if metric is None:
            logging.info("Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec", param.epoch, count, speed)
        else:
            pairs = metric.get_name_value()
            flat = [x for pair in pairs for x in pair]
            tail = "\t%s=%f" * len(pairs)
            if self.auto_reset:
                metric.reset_local()
                logging.info("Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec" + tail,
                             param.epoch, count - self.frequent, count, speed, *flat)
            else:
                logging.info("Epoch[%d] Batch [0-%d]\tSpeed: %.2f samples/sec" + tail,
                             param.epoch, count, speed, *flat)
        self.tic = time.time()


class ProgressBar(object):
    """Batch-end callback drawing a text progress bar of `length` characters."""

    def __init__(self, total, length=80):
        self.bar_len = length
        self.total = total

    def __call__(self, param):
        frac = param.nbatch / float(self.total)
        filled = int(round(self.bar_len * frac))
        bar = "=" * filled + "-" * (self.bar_len - filled)
        logging.info("[%s] %s%s\r", bar, math.ceil(100.0 * frac), "%")


class LogValidationMetricsCallback(object):
    """Eval-end callback logging each validation metric."""

    def __call__(self, param):
        if not param.eval_metric:
            return
        for name, value in param.eval_metric.get_name_value():
            logging.info("Epoch[%d] Validation-%s=%f", param.epoch, name, value)
