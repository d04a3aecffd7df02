"""The executors a Module trains and evaluates with (MXNet's DataParallelExecutorGroup).

Loom runs one executor per bound shape on the first context: Loom contexts are all host
memory, and one executor over the whole batch computes what MXNet's per-device executors and
gradient sum compute. Parameters, gradients and aux states live in arrays owned by the group
(or shared with `shared_group`) and every executor binds them by reference, so a reshape or a
bucket switch keeps training the same weights. Several GPUs (and CPU contexts with
per_device=True) run one executor per context instead: per_device_group.py."""
import numpy as np

from .. import ndarray as nd
from ..base import BindError, ParamError, ShapeError


class ExtraParamsError(ParamError, ValueError):
    """set_params/init_params got names the symbol lacks (and allow_extra=False)."""


def zeros(shape, ctx=None, dtype=np.float32):
    """nd.zeros, also for dtypes NDArray cannot fill (float16)."""
    try:
        return nd.zeros(tuple(shape), ctx=ctx, dtype=dtype)
    except Exception:  # noqa: BLE001
        return nd.array(np.zeros(tuple(shape), dtype=dtype), ctx=ctx, dtype=dtype)


def split_slices(batch_size, work_load_list):
    """Per-context slices of a batch in proportion to work_load_list (MXNet's rule: rounded
    shares, the remainder to the last context)."""
    total = float(sum(work_load_list))
    counts = [int(round(w * batch_size / total)) for w in work_load_list]
    if sum(counts) < batch_size:
        counts[-1] += batch_size - sum(counts)
    slices, end = [], 0
    for c in counts:
        begin = min(end, batch_size)
        end = min(begin + c, batch_size)
        if begin >= end:
            raise ValueError("Too many slices: batch %d over %d contexts leaves some empty"
                             % (batch_size, len(work_load_list)))
        slices.append(slice(begin, end))
    return slices


def _desc_name_shape(d):
    return d[0], tuple(d[1])


def _batch_axis(desc):
    layout = getattr(desc, "layout", None)
    if not layout or not isinstance(layout, str):
        return 0
    i = layout.find("N")
    return i if i >= 0 else 0


def _dtype_of(desc):
    dt = getattr(desc, "dtype", None)
    return np.float32 if dt is None else dt


class DataParallelExecutorGroup(object):
    """symbol bound for data_shapes/label_shapes (lists of (name, shape) or DataDesc).
    param_names: the trained arguments; grad_req: str, list or dict as in Module.bind."""

    def __init__(self, symbol, contexts, workload, data_shapes, label_shapes, param_names,
                 for_training, inputs_need_grad, shared_group=None, logger=None,
                 fixed_param_names=None, grad_req="write", state_names=None, group2ctxs=None):
        self.symbol = symbol
        self.contexts = list(contexts)
        self.workload = workload
        self.param_names = list(param_names)
        self.arg_names = symbol.list_arguments()
        self.aux_names = symbol.list_auxiliary_states()
        self.output_names = symbol.list_outputs()
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.logger = logger
        self.fixed_param_names = list(fixed_param_names or [])
        self.state_names = list(state_names or [])
        self._total_exec_bytes = 0
        data_names = [_desc_name_shape(d)[0] for d in data_shapes]
        self.grad_req = self._grad_reqs(grad_req, data_names)
        self._adopt_shared(shared_group)
        self.group2ctx = self._group2ctx(group2ctxs)
        self._arg_ctx = {}
        self._exec_cache = {}
        self.execs = []
        self.bind_exec(data_shapes, label_shapes)

    # -- binding -------------------------------------------------------------------------
    def _new_shared(self):
        """The arrays a group owns (attribute -> empty container): name -> array for parameters,
        gradients and aux states, and per-context data arrays."""
        return {"_params": {}, "_grads": {}, "_auxs": {},
                "shared_data_arrays": [{} for _ in self.contexts]}

    def _adopt_shared(self, shared_group):
        """Sets every attribute of _new_shared: shared_group's own containers (by reference, so
        a reshape or a bucket switch trains the same arrays) or new empty ones."""
        for attr, fresh in self._new_shared().items():
            setattr(self, attr, fresh if shared_group is None else getattr(shared_group, attr))

    def _group2ctx(self, group2ctxs):
        """ctx_group name -> the context of its arrays (the first context's entry)."""
        if not group2ctxs:
            return {}
        g = group2ctxs[0] if isinstance(group2ctxs, (list, tuple)) else group2ctxs
        out = {}
        for k, v in (g or {}).items():
            out[k] = v[0] if isinstance(v, (list, tuple)) else v
        return out

    def _ctx_of(self, name, attrs):
        grp = attrs.get(name, {}).get("__ctx_group__")
        return self.group2ctx.get(grp, self.contexts[0]) if grp else self.contexts[0]
    def _grad_reqs(self, grad_req, data_names):
        names = self.arg_names
        if not self.for_training:
            return {k: "null" for k in names}

        def default(req):
            out = {}
            for k in names:
                if k in self.param_names:
                    out[k] = "null" if k in self.fixed_param_names else req
                elif k in data_names:
                    out[k] = req if self.inputs_need_grad else "null"
                else:
                    out[k] = "null"
            return out
        if isinstance(grad_req, str):
            return default(grad_req)
        if isinstance(grad_req, (list, tuple)):
            if len(grad_req) != len(names):
                raise BindError("grad_req list has %d entries for the %d arguments %s"
                                % (len(grad_req), len(names), names))
            return dict(zip(names, grad_req))
        if isinstance(grad_req, dict):
            out = default("write")
            out.update(grad_req)
            return out
        raise TypeError("grad_req must be a str, list or dict, got %r" % (grad_req,))

    def _set_io(self, data_shapes, label_shapes):
        """Records the data/label descriptors, their names, batch axes and the batch size."""
        self.data_shapes = list(data_shapes)
        self.label_shapes = list(label_shapes) if label_shapes else None
        self.data_names = [d[0] for d in self.data_shapes]
        self.label_names = [d[0] for d in self.label_shapes] if self.label_shapes else []
        self.data_layouts = [_batch_axis(d) for d in self.data_shapes]
        self.label_layouts = [_batch_axis(d) for d in self.label_shapes or []]
        first = self.data_shapes[0]
        self.batch_size = tuple(first[1])[self.data_layouts[0]] if len(first[1]) else 1

    def bind_exec(self, data_shapes, label_shapes, shared_group=None, reshape=False):
        self._set_io(data_shapes, label_shapes)
        key = tuple((d[0], tuple(d[1])) for d in self.data_shapes + (self.label_shapes or []))
        exe = self._exec_cache.get(key)
        if exe is None:
            exe = self._bind_one(self.data_shapes + (self.label_shapes or []))
            self._exec_cache[key] = exe
        if reshape and self.execs and getattr(exe, "_monitor", None) is None:
            # A callback set on the executor itself follows a reshape (MXNet's
            # Executor.reshape); a Module's monitor is installed by _bind_one.
            exe.carry_monitor_from(self.execs[0])
        self.execs = [exe]
        self.data_arrays = [[exe.arg_dict[n]] for n in self.data_names]
        self.label_arrays = [[exe.arg_dict[n]] for n in self.label_names
                             if n in exe.arg_dict] or None
        self.state_arrays = [[exe.arg_dict[n]] for n in self.state_names]
        self.param_arrays = [[exe.arg_dict[n]] for n in self.param_names if n in exe.arg_dict]
        self.grad_arrays = [[exe.grad_dict.get(n)] for n in self.param_names
                            if n in exe.arg_dict] if self.for_training else None
        self.aux_arrays = [[exe.aux_dict[n]] for n in self.aux_names]
        self.input_grad_arrays = [[exe.grad_dict.get(n)] for n in self.data_names] \
            if self.inputs_need_grad else None

    def reshape(self, data_shapes, label_shapes):
        if tuple(data_shapes) == tuple(self.data_shapes) and \
                tuple(label_shapes or ()) == tuple(self.label_shapes or ()):
            return
        self.bind_exec(data_shapes, label_shapes, reshape=True)

    def _infer(self, input_descs):
        """(input shapes by name, argument shapes, argument types, aux shapes, aux types) of the
        symbol bound for `input_descs`; types the inputs leave open are float32."""
        shapes = {}
        dtypes = {}
        for d in input_descs:
            n, s = _desc_name_shape(d)
            if n not in self.arg_names:
                raise BindError("input '%s' is not an argument of the symbol (arguments: %s)"
                                % (n, ", ".join(self.arg_names)))
            shapes[n] = s
            dtypes[n] = np.dtype(_dtype_of(d)).name
        try:
            arg_shapes, _, aux_shapes = self.symbol.infer_shape(**shapes)
        except Exception as e:  # noqa: BLE001  (re-raised naming the shapes)
            raise ShapeError("Module: cannot infer shapes from inputs %s: %s" % (shapes, e))
        if arg_shapes is None:
            raise ShapeError("Module: inputs %s do not determine every argument's shape"
                             % shapes)
        # Types the inputs do not decide are float32, MXNet's default at bind.
        arg_types, _, aux_types = self.symbol.infer_type_partial(**dtypes)
        arg_types = [t if t is not None else np.float32 for t in arg_types]
        aux_types = [t if t is not None else np.float32 for t in aux_types]
        return shapes, arg_shapes, arg_types, aux_shapes, aux_types

    def _bind_one(self, input_descs):
        shapes, arg_shapes, arg_types, aux_shapes, aux_types = self._infer(input_descs)
        shared = self.shared_data_arrays[0]
        attrs = self.symbol.attr_dict() if self.group2ctx else {}
        args, grads = {}, {}
        for n, s, t in zip(self.arg_names, arg_shapes, arg_types):
            s = tuple(s)
            # Loom binds every array on one context; a ctx_group's context is where
            # get_input_grads hands that input's gradient (as MXNet places it there)
            self._arg_ctx[n] = self._ctx_of(n, attrs)
            ctx = self.contexts[0]
            if n in self._params or n in self.param_names:
                arr = self._params.get(n)
                if arr is not None and tuple(arr.shape) != s:
                    raise ShapeError(
                        "Module: inputs %s need parameter '%s' of shape %s, but the module's "
                        "is %s (a parameter cannot change shape with the inputs; an input "
                        "left out of data_names/label_names is a parameter)"
                        % (shapes, n, s, tuple(arr.shape)))
                if arr is None:
                    arr = zeros(s, ctx=ctx, dtype=t)
                    self._params[n] = arr
                args[n] = arr
                if self.grad_req.get(n, "null") != "null":
                    g = self._grads.get(n)
                    if g is None:
                        g = zeros(s, ctx=ctx, dtype=t)
                        self._grads[n] = g
                    grads[n] = g
            else:
                arr = shared.get(n)
                if arr is None or tuple(arr.shape) != s or arr.dtype != np.dtype(t):
                    arr = zeros(s, ctx=ctx, dtype=t)
                    shared[n] = arr
                args[n] = arr
                if self.grad_req.get(n, "null") != "null":
                    grads[n] = zeros(s, ctx=ctx, dtype=t)
        auxs = {}
        ctx = self.contexts[0]
        for n, s, t in zip(self.aux_names, aux_shapes, aux_types):
            a = self._auxs.get(n)
            if a is None:
                a = zeros(tuple(s), ctx=ctx, dtype=t)
                self._auxs[n] = a
            auxs[n] = a
        reqs = {n: (self.grad_req.get(n, "null") if n in grads else "null")
                for n in self.arg_names}
        exe = self.symbol.bind(ctx, args, args_grad=grads, grad_req=reqs, aux_states=auxs)
        if self._monitor is not None:
            self._monitor.install(exe)
        return exe

    _monitor = None

    def install_monitor(self, mon):
        self._monitor = mon
        for exe in self.execs:
            mon.install(exe)

    # -- parameters ------------------------------------------------------------------------
    def set_params(self, arg_params, aux_params, allow_extra=False):
        for n, arr in self._params.items():
            if n in arg_params:
                _copy_into(arr, arg_params[n], n)
        for n, arr in self._auxs.items():
            if aux_params and n in aux_params:
                _copy_into(arr, aux_params[n], n)
        if not allow_extra:
            extra = [n for n in (arg_params or {}) if n not in self.arg_names]
            extra += [n for n in (aux_params or {}) if n not in self.aux_names]
            if extra:
                raise ExtraParamsError("parameters %s are not in the symbol (pass allow_extra=True "
                                 "to ignore them)" % sorted(extra))

    def get_params(self, arg_params, aux_params):
        for n in self.param_names:
            if n in self._params and n in arg_params:
                self._params[n].copyto(arg_params[n])
        for n in self.aux_names:
            if n in aux_params:
                self._auxs[n].copyto(aux_params[n])

    # -- running ---------------------------------------------------------------------------
    def forward(self, data_batch, is_train=None):
        if is_train is None:
            is_train = self.for_training
        exe = self.execs[0]
        data = list(data_batch.data or [])
        if len(data) != len(self.data_names):
            raise BindError("forward: the batch holds %d data arrays for the data names %s"
                            % (len(data), self.data_names))
        for n, v in zip(self.data_names, data):
            _load(exe.arg_dict[n], v, n)
        labels = getattr(data_batch, "label", None)
        if labels and self.label_names:
            for n, v in zip(self.label_names, labels):
                if n in exe.arg_dict:
                    _load(exe.arg_dict[n], v, n)
        exe.forward(is_train=bool(is_train))

    def backward(self, out_grads=None):
        if not self.for_training:
            raise BindError("backward: the module is bound with for_training=False")
        self.execs[0].backward(out_grads=out_grads)

    def _per_context(self, arrays, axes):
        """[[array's slice for each context]] (MXNet's unmerged layout)."""
        if len(self.contexts) == 1:
            return [[a] for a in arrays]
        slices = split_slices(self.batch_size, self.workload or [1] * len(self.contexts))
        out = []
        for a, ax in zip(arrays, axes):
            if a is None:
                out.append([None] * len(slices))
                continue
            x = a.asnumpy()
            parts = []
            for sl, ctx in zip(slices, self.contexts):
                idx = [slice(None)] * x.ndim
                idx[ax] = sl
                parts.append(nd.array(x[tuple(idx)], ctx=ctx, dtype=x.dtype))
            out.append(parts)
        return out

    def _output_axes(self, without_n=0):
        """Batch axis of each output: its __layout__'s N, 0 without a layout, `without_n` for a
        layout without N."""
        axes = []
        for i in range(len(self.output_names)):
            try:
                layout = self.symbol[i].attr("__layout__")
            except Exception:  # noqa: BLE001
                layout = None
            axes.append(0 if not layout else layout.find("N") if "N" in layout else without_n)
        return axes

    def get_outputs(self, merge_multi_context=True, begin=0, end=None):
        outs = list(self.execs[0].outputs[begin:end])
        if merge_multi_context:
            # With several contexts MXNet concatenates the per-context outputs into new
            # arrays, which the next forward does not overwrite; so does Loom.
            return outs if len(self.contexts) == 1 else [o.copy() for o in outs]
        return self._per_context(outs, self._output_axes()[begin:end])

    def get_output_shapes(self):
        return [(n, tuple(o.shape)) for n, o in zip(self.output_names, self.execs[0].outputs)]

    def get_input_grads(self, merge_multi_context=True):
        grads = [g[0] for g in self.input_grad_arrays]
        if self.group2ctx:
            grads = [g if g is None or self._arg_ctx.get(n, g.context) == g.context
                     else g.as_in_context(self._arg_ctx[n])
                     for n, g in zip(self.data_names, grads)]
        return grads if merge_multi_context else self._per_context(grads, self.data_layouts)

    def get_states(self, merge_multi_context=True):
        states = [s[0] for s in self.state_arrays]
        return states if merge_multi_context else self._per_context(states, [0] * len(states))

    def set_states(self, states=None, value=None):
        if states is not None:
            if value is not None:
                raise ValueError("set_states: give states or value, not both")
            for dst, src in zip(self.state_arrays, states):
                if isinstance(src, (list, tuple)):
                    # MXNet's unmerged layout: one slice per context along the batch axis.
                    src = src[0] if len(src) == 1 else nd.concat(
                        *[p.as_in_context(dst[0].context) for p in src], dim=0)
                _load(dst[0], src, "state")
        else:
            for dst in self.state_arrays:
                dst[0][:] = value

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        from collections import OrderedDict
        if pre_sliced:
            labels = labels[0]
        labels_ = OrderedDict(zip(self.label_names, labels or []))
        preds = OrderedDict(zip(self.output_names, self.execs[0].outputs))
        eval_metric.update_dict(labels_, preds)


def _copy_into(dst, src, name):
    if tuple(src.shape) != tuple(dst.shape):
        raise ShapeError("parameter '%s': shape %s given, the module has %s"
                         % (name, tuple(src.shape), tuple(dst.shape)))
    if src is dst:
        return
    if isinstance(src, nd.NDArray):
        src.copyto(dst)
    else:
        dst[:] = np.asarray(src)


def _load(dst, src, name):
    if tuple(src.shape) != tuple(dst.shape):
        raise ShapeError("input '%s': batch array has shape %s, the module is bound for %s"
                         % (name, tuple(src.shape), tuple(dst.shape)))
    if isinstance(src, nd.NDArray):
        if src.dtype != dst.dtype:
            src = src.astype(dst.dtype)
        src.copyto(dst)
    else:
        dst[:] = np.asarray(src, dtype=dst.dtype)
