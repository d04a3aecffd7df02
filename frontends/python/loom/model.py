"""mx.model: checkpoints with MXNet's naming (prefix-symbol.json and prefix-%04d.params
holding arg:<name> / aux:<name> arrays) and the legacy FeedForward estimator (trained through
mx.mod.Module)."""
import logging

from . import ndarray as nd
from . import symbol as sym
from .callback import BatchEndParam  # noqa: F401  (mx.model.BatchEndParam, as in MXNet)
from .context import cpu


def save_checkpoint(prefix, epoch, symbol, arg_params, aux_params, remove_amp_cast=True):
    """Writes prefix-symbol.json (when symbol is given) and prefix-%04d.params."""
    if symbol is not None:
        symbol.save("%s-symbol.json" % prefix)
    save_dict = {"arg:%s" % k: v.as_in_context(cpu()) for k, v in arg_params.items()}
    save_dict.update({"aux:%s" % k: v.as_in_context(cpu()) for k, v in (aux_params or {}).items()})
    param_name = "%s-%04d.params" % (prefix, epoch)
    nd.save(param_name, save_dict)
    logging.info('Saved checkpoint to "%s"', param_name)


def load_params(prefix, epoch):
    """(arg_params, aux_params) from prefix-%04d.params."""
    save_dict = nd.load("%s-%04d.params" % (prefix, epoch))
    arg_params, aux_params = {}, {}
    if not save_dict:
        logging.warning("Params file '%s' is empty", "%s-%04d.params" % (prefix, epoch))
        return arg_params, aux_params
    if isinstance(save_dict, list):
        raise ValueError("%s-%04d.params holds an unnamed list, not a checkpoint" % (prefix, epoch))
    for k, v in save_dict.items():
        tp, name = k.split(":", 1) if ":" in k else ("", k)
        if tp == "arg":
            arg_params[name] = v
        elif tp == "aux":
            aux_params[name] = v
    return arg_params, aux_params


def load_checkpoint(prefix, epoch):
    """(symbol, arg_params, aux_params) from prefix-symbol.json and prefix-%04d.params."""
    symbol = sym.load("%s-symbol.json" % prefix)
    arg_params, aux_params = load_params(prefix, epoch)
    return symbol, arg_params, aux_params


# --------------------------------------------------------------------------------------------
# FeedForward: MXNet's legacy estimator, trained through a Module (module/module.py), so its
# updates run as Loom update graphs.

def _as_callbacks(cbs):
    if cbs is None:
        return []
    return cbs if isinstance(cbs, list) else [cbs]


class FeedForward(object):
    """mx.model.FeedForward(symbol, ctx=None, num_epoch=None, epoch_size=None,
    optimizer='sgd', initializer=Uniform(0.01), numpy_batch_size=128, arg_params=None,
    aux_params=None, allow_extra_params=False, begin_epoch=0, **optimizer_params).
    Deprecated in MXNet in favour of mx.mod.Module, kept for old scripts."""

    def __init__(self, symbol, ctx=None, num_epoch=None, epoch_size=None, optimizer="sgd",
                 initializer=None, numpy_batch_size=128, arg_params=None, aux_params=None,
                 allow_extra_params=False, begin_epoch=0, **kwargs):
        import warnings
        from .context import Context
        from .initializer import Uniform
        warnings.warn("mxnet.model.FeedForward has been deprecated. Please use mxnet.mod.Module "
                      "instead.", DeprecationWarning, stacklevel=2)
        if isinstance(symbol, sym.Symbol):
            self.symbol, self.sym_gen = symbol, None
        elif callable(symbol):
            self.symbol, self.sym_gen = None, symbol
        else:
            raise TypeError("FeedForward: symbol must be a Symbol or a sym_gen callable")
        self.arg_params = arg_params
        self.aux_params = aux_params
        self.allow_extra_params = allow_extra_params
        if self.symbol is not None and allow_extra_params:
            names = set(self.symbol.list_arguments())
            auxn = set(self.symbol.list_auxiliary_states())
            if self.arg_params:
                self.arg_params = {k: v for k, v in self.arg_params.items() if k in names}
            if self.aux_params:
                self.aux_params = {k: v for k, v in self.aux_params.items() if k in auxn}
        if ctx is None:
            ctx = [cpu()]
        elif isinstance(ctx, Context):
            ctx = [ctx]
        self.ctx = ctx
        self.num_epoch = num_epoch
        self.epoch_size = epoch_size
        self.kwargs = kwargs.copy()
        self.optimizer = optimizer
        self.initializer = Uniform(0.01) if initializer is None else initializer
        self.numpy_batch_size = numpy_batch_size
        self.begin_epoch = begin_epoch
        self._pred_exec = None
        self._module = None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_pred_exec"] = None
        state["_module"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)

    # -- data ------------------------------------------------------------------------------
    def _init_iter(self, X, y, is_train):
        import numpy as np
        from . import io
        if isinstance(X, (np.ndarray, nd.NDArray)):
            if y is None:
                if is_train:
                    raise ValueError("y must be specified when X is numpy.ndarray")
                y = np.zeros(X.shape[0])
            if not isinstance(y, (np.ndarray, nd.NDArray)):
                raise TypeError("y must be ndarray when X is numpy.ndarray")
            if X.shape[0] != y.shape[0]:
                raise ValueError("The numbers of data points and labels not equal")
            if y.ndim == 2 and y.shape[1] == 1:
                y = y.reshape(-1)
            if y.ndim != 1:
                raise ValueError("Label must be 1D or 2D (with 2nd dimension being 1)")
            bs = min(X.shape[0], self.numpy_batch_size)
            if is_train:
                return io.NDArrayIter(X, y, bs, shuffle=True, last_batch_handle="roll_over")
            return io.NDArrayIter(X, y, bs, shuffle=False)
        if not (isinstance(X, io.DataIter) or hasattr(X, "provide_data")):
            raise TypeError("X must be DataIter, NDArray or numpy.ndarray")
        return X

    def _init_eval_iter(self, eval_data):
        import numpy as np
        from . import io
        if eval_data is None:
            return None
        if isinstance(eval_data, (tuple, list)) and len(eval_data) == 2:
            if eval_data[0] is None:
                raise ValueError("Eval data is NONE")
            if eval_data[1] is None and isinstance(eval_data[0], io.DataIter):
                return eval_data[0]
            x = np.array(eval_data[0]) if isinstance(eval_data[0], list) else eval_data[0]
            y = np.array(eval_data[1]) if isinstance(eval_data[1], list) else eval_data[1]
            return self._init_iter(x, y, is_train=True)
        if not (isinstance(eval_data, io.DataIter) or hasattr(eval_data, "provide_data")):
            raise TypeError("Eval data must be DataIter, or NDArray/numpy.ndarray/list pair "
                            "(i.e. tuple/list of length 2)")
        return eval_data

    def _init_params(self, input_descs):
        """Zero arrays for every parameter, filled from arg_params/aux_params or the
        initializer (in argument order, as MXNet's FeedForward)."""
        shapes = {d[0]: tuple(d[1]) for d in input_descs}
        arg_shapes, _, aux_shapes = self.symbol.infer_shape(**shapes)
        if arg_shapes is None:
            raise ValueError("FeedForward: inputs %s do not determine every shape" % shapes)
        arg_names = self.symbol.list_arguments()
        param_names = [n for n in arg_names if n not in shapes]
        aux_names = self.symbol.list_auxiliary_states()
        args = {n: nd.zeros(s) for n, s in zip(arg_names, arg_shapes) if n in param_names}
        auxs = {n: nd.zeros(s) for n, s in zip(aux_names, aux_shapes)}
        for given, made in ((self.arg_params, args), (self.aux_params, auxs)):
            for k, v in made.items():
                if given and k in given:
                    v[:] = given[k].asnumpy() if isinstance(given[k], nd.NDArray) else given[k]
                else:
                    self.initializer(k, v)
        self.arg_params, self.aux_params = args, auxs
        return arg_names, param_names, aux_names

    # -- training --------------------------------------------------------------------------
    def fit(self, X, y=None, eval_data=None, eval_metric="acc", epoch_end_callback=None,
            batch_end_callback=None, kvstore="local", logger=None, work_load_list=None,
            monitor=None, eval_end_callback=None, eval_batch_end_callback=None):
        """Trains num_epoch - begin_epoch epochs (epoch_size batches each when given)."""
        import time
        from . import metric as _metric
        from . import optimizer as _opt
        from .callback import BatchEndParam, LogValidationMetricsCallback
        from .module import Module
        if eval_end_callback is None:
            eval_end_callback = LogValidationMetricsCallback()
        logger = logging if logger is None else logger
        data = self._init_iter(X, y, is_train=True)
        eval_data = self._init_eval_iter(eval_data)
        if self.sym_gen is not None:
            self.symbol = self.sym_gen(data.default_bucket_key)
        self.kwargs["sym"] = self.symbol
        descs = list(data.provide_data) + list(data.provide_label or [])
        _, param_names, _ = self._init_params(descs)
        if not isinstance(eval_metric, _metric.EvalMetric):
            eval_metric = _metric.create(eval_metric)
        idx2name = {i * len(self.ctx) + k: n for i, n in enumerate(param_names)
                    for k in range(len(self.ctx))}
        self.kwargs["param_idx2name"] = idx2name
        if isinstance(self.optimizer, str):
            params = dict(self.kwargs)
            try:
                optimizer = _opt.create(self.optimizer, rescale_grad=1.0 / data.batch_size,
                                        **params)
            except TypeError:
                params.pop("sym", None)
                optimizer = _opt.create(self.optimizer, rescale_grad=1.0 / data.batch_size,
                                        **params)
            optimizer._loom_mults_from_symbol = True
        else:
            optimizer = self.optimizer
            if not getattr(optimizer, "idx2name", None):
                optimizer.idx2name = idx2name.copy()
        data_names = [d[0] for d in data.provide_data]
        label_names = [d[0] for d in data.provide_label or []]
        mod = Module(self.symbol, data_names=data_names, label_names=label_names,
                     context=self.ctx, logger=logger)
        mod.bind(data.provide_data, data.provide_label, for_training=True)
        if monitor is not None:
            mod.install_monitor(monitor)
        mod.init_params(arg_params=self.arg_params, aux_params=self.aux_params)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod.init_optimizer(kvstore=kvstore, optimizer=optimizer)
        self._module = mod

        logger.info("Start training with %s", str(self.ctx))
        data.reset()
        for epoch in range(self.begin_epoch, self.num_epoch):
            tic = time.time()
            eval_metric.reset()
            nbatch = 0
            while True:
                do_reset = True
                for batch in data:
                    if monitor is not None:
                        monitor.tic()
                    mod.forward_backward(batch)
                    mod.update()
                    if monitor is not None:
                        monitor.toc_print()
                    mod.update_metric(eval_metric, batch.label)
                    nbatch += 1
                    if batch_end_callback is not None:
                        p = BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                                          locals=locals())
                        for cb in _as_callbacks(batch_end_callback):
                            cb(p)
                    if self.epoch_size is not None and nbatch >= self.epoch_size:
                        do_reset = False
                        break
                if do_reset:
                    logger.info("Epoch[%d] Resetting Data Iterator", epoch)
                    data.reset()
                if self.epoch_size is None or nbatch >= self.epoch_size:
                    break
            logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)
            if epoch_end_callback or epoch + 1 == self.num_epoch:
                args, auxs = mod.get_params()
                for k, v in args.items():
                    v.copyto(self.arg_params[k])
                for k, v in auxs.items():
                    v.copyto(self.aux_params[k])
            for cb in _as_callbacks(epoch_end_callback):
                cb(epoch, self.symbol, self.arg_params, self.aux_params)
            if eval_data is not None:
                eval_metric.reset()
                eval_data.reset()
                total = 0
                for i, batch in enumerate(eval_data):
                    mod.forward(batch, is_train=False)
                    mod.update_metric(eval_metric, batch.label)
                    if eval_batch_end_callback is not None:
                        p = BatchEndParam(epoch=epoch, nbatch=i, eval_metric=eval_metric,
                                          locals=locals())
                        for cb in _as_callbacks(eval_batch_end_callback):
                            cb(p)
                    total += 1
                if eval_end_callback is not None:
                    p = BatchEndParam(epoch=epoch, nbatch=total, eval_metric=eval_metric,
                                      locals=locals())
                    for cb in _as_callbacks(eval_end_callback):
                        cb(p)
                eval_data.reset()
        self._pred_exec = None

    # -- inference -------------------------------------------------------------------------
    def _init_predictor(self, input_descs):
        shapes = {k: tuple(v.shape) for k, v in self.arg_params.items()}
        shapes.update({d[0]: tuple(d[1]) for d in input_descs})
        if self._pred_exec is not None:
            have = {k: tuple(v.shape) for k, v in self._pred_exec.arg_dict.items()}
            if all(have.get(k) == s for k, s in shapes.items()):
                return
        exe = self.symbol.simple_bind(self.ctx[0], grad_req="null", **shapes)
        exe.copy_params_from(self.arg_params, self.aux_params, allow_extra_params=True)
        self._pred_exec = exe

    def _predict_batches(self, X, num_batch, reset):
        X = self._init_iter(X, None, is_train=False)
        if reset:
            X.reset()
        self._init_predictor(X.provide_data)
        names = [d[0] for d in X.provide_data]
        for i, batch in enumerate(X):
            if num_batch is not None and i == num_batch:
                break
            for n, v in zip(names, batch.data):
                dst = self._pred_exec.arg_dict[n]
                if isinstance(v, nd.NDArray):
                    v.copyto(dst)
                else:
                    dst[:] = v
            self._pred_exec.forward(is_train=False)
            yield i, batch, X

    def predict(self, X, num_batch=None, return_data=False, reset=True):
        """Outputs (NumPy, padding removed) over X; with return_data also (data, label)."""
        import numpy as np
        outs = data_l = label_l = None
        for _, batch, it in self._predict_batches(X, num_batch, reset):
            real = it.batch_size - (batch.pad or 0)
            if outs is None:
                outs = [[] for _ in self._pred_exec.outputs]
                data_l = [[] for _ in batch.data]
                label_l = [[] for _ in (batch.label or [])]
            for lst, o in zip(outs, self._pred_exec.outputs):
                lst.append(o[0:real].asnumpy())
            if return_data:
                for lst, x in zip(data_l, batch.data):
                    lst.append(np.asarray(x[0:real].asnumpy() if isinstance(x, nd.NDArray)
                                          else x[0:real]))
                for lst, x in zip(label_l, batch.label or []):
                    lst.append(np.asarray(x[0:real].asnumpy() if isinstance(x, nd.NDArray)
                                          else x[0:real]))
        if outs is None:
            raise ValueError("predict: the data iterator is empty")
        outputs = [np.concatenate(x) for x in outs]
        if len(outputs) == 1:
            outputs = outputs[0]
        if not return_data:
            return outputs
        data = [np.concatenate(x) for x in data_l]
        label = [np.concatenate(x) for x in label_l]
        return (outputs, data[0] if len(data) == 1 else data,
                label[0] if len(label) == 1 else label)

    def score(self, X, eval_metric="acc", num_batch=None, batch_end_callback=None, reset=True):
        """The metric's value over X."""
        from . import metric as _metric
        from .callback import BatchEndParam
        if not isinstance(eval_metric, _metric.EvalMetric):
            eval_metric = _metric.create(eval_metric)
        for i, batch, _ in self._predict_batches(X, num_batch, reset):
            eval_metric.update(batch.label, self._pred_exec.outputs)
            if batch_end_callback is not None:
                p = BatchEndParam(epoch=0, nbatch=i, eval_metric=eval_metric, locals=locals())
                for cb in _as_callbacks(batch_end_callback):
                    cb(p)
        return eval_metric.get()[1]

    # -- persistence -----------------------------------------------------------------------
    def save(self, prefix, epoch=None, remove_amp_cast=True):
        """prefix-symbol.json and prefix-%04d.params (epoch defaults to num_epoch)."""
        if epoch is None:
            epoch = self.num_epoch
        if epoch is None:
            raise ValueError("FeedForward.save: give epoch (num_epoch is not set)")
        save_checkpoint(prefix, epoch, self.symbol, self.arg_params, self.aux_params)

    @staticmethod
    def load(prefix, epoch, ctx=None, **kwargs):
        symbol, arg_params, aux_params = load_checkpoint(prefix, epoch)
        return FeedForward(symbol, ctx=ctx, arg_params=arg_params, aux_params=aux_params,
                           begin_epoch=epoch, **kwargs)

    @staticmethod
    def create(symbol, X, y=None, ctx=None, num_epoch=None, epoch_size=None, optimizer="sgd",
               initializer=None, eval_data=None, eval_metric="acc", epoch_end_callback=None,
               batch_end_callback=None, kvstore="local", logger=None, work_load_list=None,
               eval_end_callback=None, eval_batch_end_callback=None, **kwargs):
        """A FeedForward trained on X (and y)."""
        model = FeedForward(symbol, ctx=ctx, num_epoch=num_epoch, epoch_size=epoch_size,
                            optimizer=optimizer, initializer=initializer, **kwargs)
        model.fit(X, y, eval_data=eval_data, eval_metric=eval_metric,
                  epoch_end_callback=epoch_end_callback, batch_end_callback=batch_end_callback,
                  kvstore=kvstore, logger=logger, work_load_list=work_load_list,
                  eval_end_callback=eval_end_callback,
                  eval_batch_end_callback=eval_batch_end_callback)
        return model
