"""One executor per context, each on its slice of the batch (MXNet's DataParallelExecutorGroup
over several devices): what a Module with several GPUs runs, and several CPU contexts with
per_device=True (or LOOM_MODULE_PER_DEVICE=1).

Every device keeps its own parameter, gradient and aux arrays (device 0's are the group's
`_params`/`_grads`/`_auxs`, which get_params reads); the batch is split by split_slices over
work_load_list; outputs, input gradients and states are merged along the batch axis as MXNet's
merge_multi_context does. The module sums the devices' gradients with `reduce_grads` (an
in-process communicator group, runtime/dist/local_group.h: "threads" for host arrays, "nccl"
for GPUs; the gradients are views of one flat buffer per dtype and device, so that is one
collective per dtype) before every device runs its own update graph on the same sum, so
parameters stay identical on every device."""
import numpy as np

from .. import ndarray as nd
from .. import _loom
from ..base import BindError, ShapeError
from .base_module import ModuleError
from .executor_group import (DataParallelExecutorGroup, _copy_into, _desc_name_shape,
                             _load, split_slices, zeros)


def device_slices(batch_size, contexts, workload):
    """split_slices with a Module error naming the contexts when a device would get nothing."""
    workload = list(workload or [1] * len(contexts))
    if batch_size < len(contexts):
        raise ModuleError("Module: a batch of %d cannot be split over the %d contexts [%s] "
                          "(work_load_list %s): every context needs at least one sample; use a "
                          "batch of at least %d or fewer contexts"
                          % (batch_size, len(contexts), ", ".join(str(c) for c in contexts),
                             workload, len(contexts)))
    try:
        return split_slices(batch_size, workload)
    except ValueError as e:
        raise ModuleError("Module: work_load_list %s over a batch of %d leaves a context of [%s] "
                          "without samples (%s)" % (workload, batch_size,
                                                    ", ".join(str(c) for c in contexts), e))


def _numpy(x):
    return x.asnumpy() if isinstance(x, nd.NDArray) else np.asarray(x)


def _take(x, axis, sl):
    idx = [slice(None)] * x.ndim
    idx[axis] = sl
    return x[tuple(idx)]


class PerDeviceExecutorGroup(DataParallelExecutorGroup):
    """DataParallelExecutorGroup with one executor per context (same arguments)."""

    def __init__(self, symbol, contexts, workload, data_shapes, label_shapes, param_names,
                 for_training, inputs_need_grad, shared_group=None, logger=None,
                 fixed_param_names=None, grad_req="write", state_names=None, group2ctxs=None):
        super().__init__(symbol, contexts, workload, data_shapes, label_shapes, param_names,
                         for_training, inputs_need_grad, shared_group, logger,
                         fixed_param_names, grad_req, state_names, group2ctxs)
        # device 0's arrays are the group's (get_params, the module's parameter names)
        self._params, self._grads, self._auxs = (self._dev_params[0], self._dev_grads[0],
                                                 self._dev_auxs[0])

    # -- binding -------------------------------------------------------------------------
    def _new_shared(self):
        """Also per device: parameter, gradient and aux arrays by name; the flat gradient
        buffers (_grad_buckets); the communicator group."""
        out = super()._new_shared()
        out.update({k: [{} for _ in self.contexts]
                    for k in ("_dev_params", "_dev_grads", "_dev_auxs")})
        out.update({"_grad_buckets": [], "_comm": [None]})
        return out

    def bind_exec(self, data_shapes, label_shapes, shared_group=None, reshape=False):
        self._set_io(data_shapes, label_shapes)
        self.slices = device_slices(self.batch_size, self.contexts, self.workload)
        descs = self.data_shapes + (self.label_shapes or [])
        layouts = self.data_layouts + self.label_layouts
        key = tuple((d[0], tuple(d[1])) for d in descs)
        execs = self._exec_cache.get(key)
        if execs is None:
            self._make_flat_grads(descs)
            execs = [self._bind_device(k, descs, layouts) for k in range(len(self.contexts))]
            self._exec_cache[key] = execs
        if reshape and self.execs:
            for new, old in zip(execs, self.execs):
                if getattr(new, "_monitor", None) is None:
                    new.carry_monitor_from(old)
        self.execs = execs
        per = lambda names: [[e.arg_dict[n] for e in execs] for n in names]  # noqa: E731
        self.data_arrays = per(self.data_names)
        self.label_arrays = per([n for n in self.label_names if n in execs[0].arg_dict]) or None
        self.state_arrays = per(self.state_names)
        self.param_arrays = per([n for n in self.param_names if n in execs[0].arg_dict])
        self.grad_arrays = [[e.grad_dict.get(n) for e in execs] for n in self.param_names
                            if n in execs[0].arg_dict] if self.for_training else None
        self.aux_arrays = [[e.aux_dict[n] for e in execs] for n in self.aux_names]
        self.input_grad_arrays = [[e.grad_dict.get(n) for e in execs] for n in self.data_names] \
            if self.inputs_need_grad else None

    def _make_flat_grads(self, descs):
        """The gradients of the parameters the module trains that have none yet, made on every
        device as views of one flat buffer per dtype (each view 64-byte aligned, the gaps zero),
        so that reduce_grads sums a dtype's gradients in one collective. Parameter shapes do
        not depend on the batch, so the whole batch's descriptors serve every device."""
        need = {n for n in self.arg_names if n in self.param_names and
                n not in self._dev_grads[0] and self.grad_req.get(n, "null") != "null"}
        if not self.for_training or not need:
            return
        _, arg_shapes, arg_types, _, _ = self._infer(descs)
        by_dtype = {}
        for n, s, t in zip(self.arg_names, arg_shapes, arg_types):
            if n in need:
                by_dtype.setdefault(np.dtype(t), []).append((n, tuple(s)))
        for dt, items in by_dtype.items():
            align = max(1, 64 // dt.itemsize)
            spans, total = [], 0
            for _, s in items:
                size = int(np.prod(s, dtype=np.int64))
                spans.append((total, total + size))
                total += -(-size // align) * align
            flats = []
            for k, ctx in enumerate(self.contexts):
                flat = zeros((max(total, 1),), ctx=ctx, dtype=dt)
                for (n, s), (b, e) in zip(items, spans):
                    self._dev_grads[k][n] = flat._slice(b, e)._reshape_view(s)
                flats.append(flat)
            self._grad_buckets.append(([n for n, _ in items], flats))

    def _bind_device(self, k, descs, layouts):
        """Device k's executor over its slice of the batch, on its own parameter arrays."""
        sl = self.slices[k]
        sliced = []
        for d, ax in zip(descs, layouts):
            name, shape = _desc_name_shape(d)
            shape = list(shape)
            if shape:
                shape[ax] = sl.stop - sl.start
            sliced.append((name, tuple(shape)) if isinstance(d, tuple) else
                          type(d)(name, tuple(shape), d.dtype, d.layout))
        self._params, self._grads, self._auxs = (self._dev_params[k], self._dev_grads[k],
                                                 self._dev_auxs[k])
        saved = self.contexts
        self.contexts = [saved[k]] + saved[:k] + saved[k + 1:]  # _bind_one binds on contexts[0]
        shared = self.shared_data_arrays
        self.shared_data_arrays = [shared[k]]
        try:
            return self._bind_one(sliced)
        finally:
            self.contexts = saved
            self.shared_data_arrays = shared
            self._params, self._grads, self._auxs = (self._dev_params[0], self._dev_grads[0],
                                                     self._dev_auxs[0])

    # -- parameters and gradients --------------------------------------------------------
    def set_params(self, arg_params, aux_params, allow_extra=False):
        for k in range(1, len(self.contexts)):
            for n, arr in self._dev_params[k].items():
                if n in arg_params:
                    _copy_into(arr, arg_params[n], n)
            for n, arr in self._dev_auxs[k].items():
                if aux_params and n in aux_params:
                    _copy_into(arr, aux_params[n], n)
        super().set_params(arg_params, aux_params, allow_extra=allow_extra)

    def get_params(self, arg_params, aux_params):
        """Parameters from device 0 (every device holds the same values); aux states (BatchNorm's
        moving statistics, which each device computes on its own slice) averaged over the
        devices, as MXNet's get_params does."""
        for n in self.param_names:
            if n in self._params and n in arg_params:
                self._params[n].copyto(arg_params[n])
        for n in self.aux_names:
            if n in aux_params:
                vals = [_numpy(self._dev_auxs[k][n]) for k in range(len(self.contexts))]
                total = vals[0].copy()
                for v in vals[1:]:
                    total += v
                _copy_into(aux_params[n], total / np.asarray(len(vals), total.dtype), n)

    def device_arrays(self, names):
        """Per device: (weights, grads) by name for `names` (the trained parameters)."""
        out = []
        for k in range(len(self.contexts)):
            w = {n: self._dev_params[k][n] for n in names if n in self._dev_params[k]}
            out.append((w, {n: self._dev_grads[k].get(n) for n in w}))
        return out

    def comm_group(self):
        """The in-process communicator group over the contexts (made on first use, shared with
        the groups made from this one)."""
        if self._comm[0] is None:
            gpu = self.contexts[0].device_type == "gpu"
            self._comm[0] = _loom.dist_local_group("nccl" if gpu else "threads",
                                                   [c.device_id for c in self.contexts])
        return self._comm[0]

    def reduce_grads(self, names):
        """Sums the gradients of `names` over the devices, in place on every device (MXNet's
        kvstore push/pull of 'local'/'device': every device then holds the sum): one collective
        per flat buffer whose gradients are all asked for (one per dtype when `names` are the
        trained parameters), one per array for the others. The sum is ordered after backward
        and before the update on the device streams, without a host wait (nccl)."""
        wanted = [n for n in names if self._dev_grads[0].get(n) is not None]
        left = set(wanted)
        per_dev = [[] for _ in self.contexts]
        for members, flats in self._grad_buckets:
            if left.issuperset(members):
                left.difference_update(members)
                for arrays, flat in zip(per_dev, flats):
                    arrays.append(flat)
        for n in wanted:
            if n in left:
                for arrays, grads in zip(per_dev, self._dev_grads):
                    arrays.append(grads[n])
        if per_dev[0]:
            self.comm_group().allreduce(per_dev)

    def copy_params_from_first(self, names):
        """Device 0's values of `names` into every other device (after a host-side update)."""
        for k in range(1, len(self.contexts)):
            for n in names:
                if n in self._dev_params[k]:
                    self._dev_params[0][n].copyto(self._dev_params[k][n])

    # -- running ---------------------------------------------------------------------------
    def _scatter(self, dst_lists, values, axes, what):
        for dsts, v, ax in zip(dst_lists, values, axes):
            x = _numpy(v)
            if x.ndim == 0 or x.shape[ax] != self.batch_size:
                raise ShapeError("input '%s': batch array has shape %s, the module is bound for "
                                 "a batch of %d along axis %d" % (what, x.shape, self.batch_size,
                                                                   ax))
            for dst, sl in zip(dsts, self.slices):
                _load(dst, _take(x, ax, sl), what)

    def forward(self, data_batch, is_train=None):
        if is_train is None:
            is_train = self.for_training
        data = list(data_batch.data or [])
        if len(data) != len(self.data_names):
            raise BindError("forward: the batch holds %d data arrays for the data names %s"
                            % (len(data), self.data_names))
        for n, dsts, v, ax in zip(self.data_names, self.data_arrays, data, self.data_layouts):
            self._scatter([dsts], [v], [ax], n)
        labels = getattr(data_batch, "label", None)
        if labels and self.label_names:
            present = [n for n in self.label_names if n in self.execs[0].arg_dict]
            for n, v, ax in zip(self.label_names, labels, self.label_layouts):
                if n in present:
                    self._scatter([[e.arg_dict[n] for e in self.execs]], [v], [ax], n)
        for exe in self.execs:
            exe.forward(is_train=bool(is_train))

    def backward(self, out_grads=None):
        if not self.for_training:
            raise BindError("backward: the module is bound with for_training=False")
        if out_grads is None:
            for exe in self.execs:
                exe.backward()
            return
        axes = self._output_axes()
        per_dev = [[] for _ in self.execs]
        for g, ax in zip(out_grads, axes):
            x = None if g is None else _numpy(g)
            for k, sl in enumerate(self.slices):
                per_dev[k].append(None if x is None else nd.array(
                    _take(x, max(ax, 0), sl), ctx=self.contexts[k], dtype=x.dtype))
        for exe, grads in zip(self.execs, per_dev):
            exe.backward(out_grads=grads)

    def _output_axes(self, without_n=-1):
        """As the base's, with -1 for a layout without N (MXNet's merge then takes device 0's
        value)."""
        return super()._output_axes(without_n)

    def _merge(self, per_dev_lists, axes):
        out = []
        for arrays, ax in zip(per_dev_lists, axes):
            if arrays[0] is None:
                out.append(None)
            elif ax < 0:
                out.append(arrays[0])
            else:
                ctx = self.contexts[0]
                out.append(nd.concat(*[a.as_in_context(ctx) for a in arrays], dim=ax))
        return out

    def get_outputs(self, merge_multi_context=True, begin=0, end=None):
        n_out = len(self.execs[0].outputs)
        idx = list(range(n_out))[begin:end]
        per = [[e.outputs[i] for e in self.execs] for i in idx]
        if not merge_multi_context:
            return per
        axes = self._output_axes()
        return self._merge(per, [axes[i] for i in idx])

    def get_output_shapes(self):
        out = []
        for name, arrays, ax in zip(self.output_names,
                                    zip(*[e.outputs for e in self.execs]), self._output_axes()):
            shape = list(arrays[0].shape)
            if ax >= 0 and shape:
                shape[ax] = sum(a.shape[ax] for a in arrays)
            out.append((name, tuple(shape)))
        return out

    def get_input_grads(self, merge_multi_context=True):
        if not merge_multi_context:
            return self.input_grad_arrays
        return self._merge(self.input_grad_arrays, self.data_layouts)

    def get_states(self, merge_multi_context=True):
        if not merge_multi_context:
            return self.state_arrays
        return self._merge(self.state_arrays, [0] * len(self.state_arrays))

    def set_states(self, states=None, value=None):
        if states is not None:
            if value is not None:
                raise ValueError("set_states: give states or value, not both")
            for dsts, src in zip(self.state_arrays, states):
                if isinstance(src, (list, tuple)):  # MXNet's unmerged layout, one per device
                    for d, s in zip(dsts, src):
                        _load(d, s, "state")
                else:
                    self._scatter([dsts], [src], [0], "state")
        else:
            for dsts in self.state_arrays:
                for d in dsts:
                    d[:] = value

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Updates the metric once per device with its slice of the labels and its outputs
        (MXNet's order)."""
        from collections import OrderedDict
        present = self.label_names
        for k, exe in enumerate(self.execs):
            if pre_sliced:
                labs = labels[k]
            else:
                labs = []
                for v, ax in zip(labels or [], self.label_layouts or [0] * len(labels or [])):
                    x = _numpy(v)
                    labs.append(nd.array(_take(x, ax, self.slices[k]), dtype=x.dtype))
            eval_metric.update_dict(OrderedDict(zip(present, labs)),
                                    OrderedDict(zip(self.output_names, exe.outputs)))
