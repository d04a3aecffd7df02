"""SequentialModule: modules chained output-to-input (MXNet 1.x mx.mod.SequentialModule).
Each module's outputs feed the next module's data; backward runs the chain in reverse,
passing each module's input gradients as the previous module's output gradients."""
import copy
import logging

from ..initializer import Uniform
from .base_module import BaseModule, ModuleError


class SequentialModule(BaseModule):
    META_TAKE_LABELS = "take_labels"
    META_AUTO_WIRING = "auto_wiring"

    def __init__(self, logger=logging):
        super().__init__(logger=logger)
        self._modules = []
        self._metas = []
        self._label_shapes = None
        self._data_shapes = None
        self._meta_keys = {self.META_TAKE_LABELS, self.META_AUTO_WIRING}

    def add(self, module, **kwargs):
        """Appends module. take_labels=True: it gets the labels (and updates the metric);
        auto_wiring=True: the previous outputs are renamed to its data names."""
        for key in kwargs:
            if key not in self._meta_keys:
                raise ModuleError('Unknown meta "%s", a typo? (%s)'
                                  % (key, ", ".join(sorted(self._meta_keys))))
        self._modules.append(module)
        self._metas.append(kwargs)
        self.binded = self.params_initialized = self.optimizer_initialized = False
        return self

    def _takes_labels(self, i):
        return bool(self._metas[i].get(self.META_TAKE_LABELS, False))

    @property
    def data_names(self):
        return self._modules[0].data_names if self._modules else []

    @property
    def output_names(self):
        return self._modules[-1].output_names if self._modules else []

    @property
    def data_shapes(self):
        self._require(params=False, what="data_shapes")
        return self._modules[0].data_shapes

    @property
    def label_shapes(self):
        self._require(params=False, what="label_shapes")
        return self._label_shapes

    @property
    def output_shapes(self):
        self._require(params=False, what="output_shapes")
        return self._modules[-1].output_shapes

    def get_params(self):
        self._require(what="get_params")
        args, auxs = {}, {}
        for m in self._modules:
            a, x = m.get_params()
            args.update(a)
            auxs.update(x)
        return args, auxs

    def init_params(self, initializer=Uniform(0.01), arg_params=None, aux_params=None,
                    allow_missing=False, force_init=False, allow_extra=False):
        if self.params_initialized and not force_init:
            return
        self._require(params=False, what="init_params")
        for m in self._modules:
            m.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                          allow_missing=allow_missing, force_init=force_init,
                          allow_extra=allow_extra)
        seen_args, seen_auxs = {}, {}
        for i, m in enumerate(self._modules):
            a, x = m.get_params()
            for seen, names in ((seen_args, a), (seen_auxs, x)):
                for n in names:
                    if n in seen:
                        raise ModuleError("Duplicated parameter names: '%s' in layer %d is "
                                          "already used in layer %d" % (n, i, seen[n]))
                    seen[n] = i
        self.params_initialized = True

    def bind(self, data_shapes, label_shapes=None, for_training=True, inputs_need_grad=False,
             force_rebind=False, shared_module=None, grad_req="write"):
        if self.binded and not force_rebind:
            self.logger.warning("Already bound, ignoring bind()")
            return
        if inputs_need_grad and not for_training:
            raise ModuleError("bind: inputs_need_grad=True needs for_training=True")
        if shared_module is not None:
            raise ModuleError("Shared module is not supported by SequentialModule")
        if not self._modules:
            raise ModuleError("Attempting to bind an empty SequentialModule")
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self._label_shapes = label_shapes
        shapes = data_shapes
        any_labels = False
        for i, m in enumerate(self._modules):
            labels = label_shapes if self._takes_labels(i) else None
            any_labels = any_labels or self._takes_labels(i)
            if self._metas[i].get(self.META_AUTO_WIRING, False):
                names = m.data_names
                if len(names) != len(shapes):
                    raise ModuleError("auto_wiring: layer %d takes %d inputs, the previous "
                                      "layer gives %d" % (i, len(names), len(shapes)))
                shapes = [(n, s[1]) for n, s in zip(names, shapes)]
            m.bind(data_shapes=shapes, label_shapes=labels, for_training=for_training,
                   inputs_need_grad=bool(inputs_need_grad or (for_training and i > 0)),
                   force_rebind=force_rebind, shared_module=None, grad_req=grad_req)
            shapes = m.output_shapes
        if not any_labels:
            self._label_shapes = None
        self.binded = True

    def init_optimizer(self, kvstore="local", optimizer="sgd",
                       optimizer_params=(("learning_rate", 0.01),), force_init=False):
        self._require(what="init_optimizer")
        if self.optimizer_initialized and not force_init:
            self.logger.warning("optimizer already initialized, ignoring.")
            return
        for m in self._modules:
            m.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                             optimizer_params=optimizer_params, force_init=force_init)
        self.optimizer_initialized = True

    def forward(self, data_batch, is_train=None):
        self._require(what="forward")
        batch = copy.copy(data_batch)
        for i, m in enumerate(self._modules):
            m.forward(batch, is_train=is_train)
            if i + 1 == len(self._modules):
                break
            batch.data = m.get_outputs()
            if hasattr(batch, "provide_data"):
                names = [x[0] for x in m.output_shapes]
                batch.provide_data = [(n, x.shape) for n, x in zip(names, batch.data)]

    def backward(self, out_grads=None):
        self._require(what="backward")
        for i in range(len(self._modules) - 1, -1, -1):
            self._modules[i].backward(out_grads=out_grads)
            if i == 0:
                break
            out_grads = self._modules[i].get_input_grads()

    def update(self):
        self._require(optimizer=True, what="update")
        for m in self._modules:
            m.update()

    def get_outputs(self, merge_multi_context=True):
        self._require(what="get_outputs")
        return self._modules[-1].get_outputs(merge_multi_context=merge_multi_context)

    def get_input_grads(self, merge_multi_context=True):
        self._require(what="get_input_grads")
        if not self.inputs_need_grad:
            raise ModuleError("get_input_grads: bind with inputs_need_grad=True")
        return self._modules[0].get_input_grads(merge_multi_context=merge_multi_context)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        self._require(what="update_metric")
        for i, m in enumerate(self._modules):
            if self._takes_labels(i):
                m.update_metric(eval_metric, labels, pre_sliced)

    def install_monitor(self, mon):
        self._require(params=False, what="install_monitor")
        for m in self._modules:
            m.install_monitor(mon)
