"""BaseModule: the training/evaluation loops shared by Module and BucketingModule
(MXNet 1.x mx.module.BaseModule: fit, score, predict, iter_predict, save/load_params)."""
import logging
import time
import warnings

import numpy as np

from .. import metric as _metric
from .. import ndarray as nd
from ..base import LoomError
from ..callback import BatchEndParam
from ..context import cpu
from ..initializer import Uniform


class ModuleError(LoomError, AssertionError):
    """Misuse of a module (forward before bind, update before init_optimizer, ...). Also an
    AssertionError, which is what MXNet's modules raise for these."""


class ModuleNameError(LoomError, ValueError):
    """A name given to a module that its symbol lacks, or input descriptions that do not
    match data_names (a ValueError, as in MXNet)."""


def _as_list(obj):
    return obj if isinstance(obj, list) else [obj]


def _check_shape(name, shape):
    import numbers
    if not isinstance(shape, (tuple, list)) or \
            not all(isinstance(d, numbers.Integral) for d in shape):
        raise TypeError("the shape of input '%s' must be a tuple of ints, got %r"
                        % (name, shape))
    return tuple(int(d) for d in shape)


def _desc(x):
    from ..io import DataDesc
    if isinstance(x, DataDesc):
        _check_shape(x.name, x.shape)
        return x
    if hasattr(x, "name") and hasattr(x, "shape") and not isinstance(x, (tuple, list)):
        return DataDesc(x.name, _check_shape(x.name, x.shape), getattr(x, "dtype", np.float32),
                        getattr(x, "layout", "NCHW"))
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise TypeError("input descriptions are (name, shape) pairs or DataDesc, got %r" % (x,))
    return DataDesc(x[0], _check_shape(x[0], x[1]))


def _check_names(expected, descs, kind, throw):
    actual = [d[0] for d in descs]
    if sorted(expected) != sorted(actual):
        msg = ("%s_shapes name %s but the module's %s_names are %s"
               % (kind, actual, kind, list(expected)))
        if throw:
            raise ModuleNameError(msg)
        warnings.warn(msg)


def _parse_data_desc(data_names, label_names, data_shapes, label_shapes):
    data_shapes = [_desc(x) for x in data_shapes]
    _check_names(data_names, data_shapes, "data", True)
    if label_shapes is not None:
        label_shapes = [_desc(x) for x in label_shapes]
        _check_names(label_names, label_shapes, "label", False)
    else:
        _check_names(label_names, [], "label", False)
    return data_shapes, label_shapes


def _check_input_names(symbol, names, typename, throw):
    args = symbol.list_arguments()
    for name in names:
        if name in args:
            continue
        candidates = [a for a in args if not a.endswith(("_weight", "_bias", "_gamma", "_beta"))]
        msg = ("Module(..., %s_names=%s): '%s' is not an argument of the symbol. Inputs it "
               "has: %s" % (typename, list(names), name, ", ".join(candidates)))
        if throw:
            raise ModuleNameError(msg)
        warnings.warn(msg)


class BaseModule(object):
    """A computation that can be bound, initialised, trained and evaluated."""

    def __init__(self, logger=logging):
        self.logger = logger
        self.binded = False
        self.for_training = False
        self.inputs_need_grad = False
        self.params_initialized = False
        self.optimizer_initialized = False
        self._symbol = None
        self._total_exec_bytes = 0

    def _require(self, binded=True, params=True, optimizer=False, what="this call"):
        if binded and not self.binded:
            raise ModuleError("%s: the module is not bound; call bind() first" % what)
        if params and not self.params_initialized:
            raise ModuleError("%s: parameters are not initialized; call init_params() first"
                              % what)
        if optimizer and not self.optimizer_initialized:
            raise ModuleError("%s: no optimizer; call init_optimizer() first" % what)

    # -- high-level loops ------------------------------------------------------------------
    def forward_backward(self, data_batch):
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data, eval_metric, num_batch=None, batch_end_callback=None,
              score_end_callback=None, reset=True, epoch=0, sparse_row_id_fn=None):
        """Evaluates eval_metric over eval_data; returns its (name, value) list."""
        self._require(what="score")
        if reset:
            eval_data.reset()
        if not isinstance(eval_metric, _metric.EvalMetric):
            eval_metric = _metric.create(eval_metric)
        eval_metric.reset()
        done = 0
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(batch, is_train=False)
            if isinstance(batch, list):
                self.update_metric(eval_metric, [b.label for b in batch], pre_sliced=True)
            else:
                self.update_metric(eval_metric, batch.label)
            if batch_end_callback is not None:
                p = BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                                  locals=locals())
                for cb in _as_list(batch_end_callback):
                    cb(p)
            done += 1
        if score_end_callback:
            p = BatchEndParam(epoch=epoch, nbatch=done, eval_metric=eval_metric, locals=locals())
            for cb in _as_list(score_end_callback):
                cb(p)
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data, num_batch=None, reset=True, sparse_row_id_fn=None):
        """Yields (outputs without padding, batch index, batch)."""
        self._require(what="iter_predict")
        if reset:
            eval_data.reset()
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(batch, is_train=False)
            pad = batch.pad or 0
            yield [o[0:o.shape[0] - pad] for o in self.get_outputs()], nbatch, batch

    def predict(self, eval_data, num_batch=None, merge_batches=True, reset=True,
                always_output_list=False, sparse_row_id_fn=None):
        """Outputs over eval_data (a DataIter, or one NDArray/NumPy batch)."""
        from ..io import DataBatch, DataIter
        self._require(what="predict")
        if isinstance(eval_data, (nd.NDArray, np.ndarray)):
            if isinstance(eval_data, np.ndarray):
                eval_data = nd.array(eval_data)
            self.forward(DataBatch([eval_data]))
            return self.get_outputs()[0]
        if not isinstance(eval_data, DataIter) and not hasattr(eval_data, "provide_data"):
            raise ValueError("eval_data must be of type NDArray or DataIter")
        if reset:
            eval_data.reset()
        outs = []
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(batch, is_train=False)
            pad = batch.pad or 0
            outs.append([o[0:o.shape[0] - pad].copy() for o in self.get_outputs()])
        if not outs:
            return outs
        if not merge_batches:
            return outs
        n = len(outs[0])
        if any(len(o) != n for o in outs):
            raise ModuleError("Cannot merge batches, as num of outputs is not the same in "
                              "mini-batches. Maybe bucketing is used?")
        merged = [nd.concatenate([o[i] for o in outs]) for i in range(n)]
        if n == 1 and not always_output_list:
            return merged[0]
        return merged

    def fit(self, train_data, eval_data=None, eval_metric="acc", epoch_end_callback=None,
            batch_end_callback=None, kvstore="local", optimizer="sgd",
            optimizer_params=(("learning_rate", 0.01),), eval_end_callback=None,
            eval_batch_end_callback=None, initializer=Uniform(0.01), arg_params=None,
            aux_params=None, allow_missing=False, force_rebind=False, force_init=False,
            begin_epoch=0, num_epoch=None, validation_metric=None, monitor=None,
            sparse_row_id_fn=None):
        """Trains for epochs begin_epoch..num_epoch-1 with MXNet's loop and log lines."""
        if num_epoch is None:
            raise ModuleError("fit: please specify number of epochs (num_epoch)")
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                            optimizer_params=optimizer_params)
        if validation_metric is None:
            validation_metric = eval_metric
        if not isinstance(eval_metric, _metric.EvalMetric):
            eval_metric = _metric.create(eval_metric)

        for epoch in range(begin_epoch, num_epoch):
            tic = time.time()
            eval_metric.reset()
            nbatch = 0
            it = iter(train_data)
            last = False
            nxt = next(it)
            name_vals = []
            while not last:
                batch = nxt
                if monitor is not None:
                    monitor.tic()
                self.forward_backward(batch)
                self.update()
                if isinstance(batch, list):
                    self.update_metric(eval_metric, [b.label for b in batch], pre_sliced=True)
                else:
                    self.update_metric(eval_metric, batch.label)
                try:
                    nxt = next(it)
                    self.prepare(nxt, sparse_row_id_fn=sparse_row_id_fn)
                except StopIteration:
                    last = True
                if monitor is not None:
                    monitor.toc_print()
                if last:
                    name_vals = eval_metric.get_global_name_value()
                if batch_end_callback is not None:
                    p = BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                                      locals=locals())
                    for cb in _as_list(batch_end_callback):
                        cb(p)
                nbatch += 1
            for name, val in name_vals:
                self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, val)
            self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)
            arg_params_, aux_params_ = self.get_params()
            self.set_params(arg_params_, aux_params_)
            if epoch_end_callback is not None:
                for cb in _as_list(epoch_end_callback):
                    cb(epoch, self.symbol, arg_params_, aux_params_)
            if eval_data is not None:
                res = self.score(eval_data, validation_metric,
                                 score_end_callback=eval_end_callback,
                                 batch_end_callback=eval_batch_end_callback, epoch=epoch)
                for name, val in res:
                    self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, val)
            train_data.reset()

    # -- symbol / shapes -------------------------------------------------------------------
    @property
    def symbol(self):
        return self._symbol

    @property
    def data_names(self):
        raise NotImplementedError()

    @property
    def output_names(self):
        raise NotImplementedError()

    @property
    def data_shapes(self):
        raise NotImplementedError()

    @property
    def label_shapes(self):
        raise NotImplementedError()

    @property
    def output_shapes(self):
        raise NotImplementedError()

    # -- parameters ------------------------------------------------------------------------
    def get_params(self):
        raise NotImplementedError()

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        raise NotImplementedError()

    def set_params(self, arg_params, aux_params, allow_missing=False, force_init=True,
                   allow_extra=False):
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init,
                         allow_extra=allow_extra)

    def save_params(self, fname):
        """Writes arg:<name> / aux:<name> arrays (MXNet's .params layout)."""
        arg_params, aux_params = self.get_params()
        d = {"arg:%s" % k: v.as_in_context(cpu()) for k, v in arg_params.items()}
        d.update({"aux:%s" % k: v.as_in_context(cpu()) for k, v in aux_params.items()})
        nd.save(fname, d)

    def load_params(self, fname):
        d = nd.load(fname)
        if not isinstance(d, dict):
            raise ValueError("Invalid param file %s (an unnamed list)" % fname)
        arg_params, aux_params = {}, {}
        for k, v in d.items():
            kind, _, name = k.partition(":")
            if kind == "arg":
                arg_params[name] = v
            elif kind == "aux":
                aux_params[name] = v
            else:
                raise ValueError("Invalid param file " + fname)
        self.set_params(arg_params, aux_params)

    def get_states(self, merge_multi_context=True):
        self._require(what="get_states")
        return []

    def set_states(self, states=None, value=None):
        self._require(what="set_states")
        if states or value:
            raise ModuleError("this module has no states")

    def install_monitor(self, mon):
        raise NotImplementedError()

    def prepare(self, data_batch, sparse_row_id_fn=None):
        if sparse_row_id_fn is not None:
            warnings.warn(UserWarning("sparse_row_id_fn is not invoked for BaseModule."))

    # -- computations ----------------------------------------------------------------------
    def forward(self, data_batch, is_train=None):
        raise NotImplementedError()

    def backward(self, out_grads=None):
        raise NotImplementedError()

    def get_outputs(self, merge_multi_context=True):
        raise NotImplementedError()

    def get_input_grads(self, merge_multi_context=True):
        raise NotImplementedError()

    def update(self):
        raise NotImplementedError()

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        raise NotImplementedError()

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        raise NotImplementedError()

    def init_optimizer(self, kvstore="local", optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.01),), force_init=False):
        raise NotImplementedError()
