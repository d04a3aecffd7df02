"""mx.mon: Monitor, statistics of intermediate outputs, weights and gradients during training."""
import logging
import math
import re

from . import ndarray as _nd

NDArray = _nd.NDArray


def _default_stat(x):
    """norm(x) / sqrt(size): the root mean square of x."""
    return _nd.norm(x) / math.sqrt(x.size)


class Monitor:
    """Collects stat_func(array) every `interval` batches for the arrays whose names match
    `pattern` (a regular expression matched at the start of the name): op outputs
    ('<node>_output'), op inputs too with monitor_all, and after the batch the executor's
    arguments and aux states.

    Use: mon.install(exe); per batch: mon.tic(); forward/backward; mon.toc_print()."""

    def __init__(self, interval, stat_func=None, pattern=".*", sort=False, monitor_all=False):
        self.stat_func = stat_func if stat_func is not None else _default_stat
        self.interval = interval
        self.activated = False
        self.queue = []
        self.step = 0
        self.exes = []
        self.re_prog = re.compile(pattern)
        self.sort = sort
        self.monitor_all = monitor_all

        def stat_helper(name, array):
            if self.activated and self.re_prog.match(name):
                self.queue.append((self.step, name, self.stat_func(array)))
        self.stat_helper = stat_helper

    def install(self, exe):
        """Installs the callback on an executor (several executors may share a monitor)."""
        exe.set_monitor_callback(self.stat_helper, self.monitor_all)
        self.exes.append(exe)

    def tic(self):
        """Starts collecting when this batch is one of every `interval`; call before
        forward."""
        if self.step % self.interval == 0:
            self.queue = []
            self.activated = True
        self.step += 1

    def toc(self):
        """Stops collecting and returns [(step, name, stat string)]; adds the arguments and
        aux states of every installed executor. Empty when this batch was not collected."""
        if not self.activated:
            return []
        for exe in self.exes:
            sym = exe.symbol
            for name, arr in zip(sym.list_arguments(), exe.arg_arrays):
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(arr)))
            for name, arr in zip(sym.list_auxiliary_states(), exe.aux_arrays):
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(arr)))
        self.activated = False
        if self.sort:
            self.queue.sort(key=lambda item: item[1])
        res = []
        for step, name, values in self.queue:
            if isinstance(values, NDArray):
                values = [values]
            if not isinstance(values, list):
                raise TypeError("Monitor: stat_func must return an NDArray or a list of them")
            text = ""
            for v in values:
                if not isinstance(v, NDArray):
                    raise TypeError("Monitor: stat_func must return NDArrays")
                text += (str(v.asscalar()) if v.shape == (1,) else str(v.asnumpy())) + "\t"
            res.append((step, name, text))
        self.queue = []
        return res

    def toc_print(self):
        """toc(), logged at INFO level one line per entry."""
        for step, name, text in self.toc():
            logging.info("Batch: {:7d} {:30s} {:s}".format(step, name, text))
