"""Executor: a symbol bound to arrays (mx.executor.Executor)."""
import numpy as np

from .base import BindError


class Executor:
    """Returned by Symbol.simple_bind / Symbol.bind. Arrays are fixed at bind time and used by
    reference: write inputs with `exe.arg_dict['data'][:] = x` or `forward(data=x)`."""

    def __init__(self, handle, symbol, ctx):
        self.handle = handle
        self._symbol = symbol
        self._ctx = ctx
        self.arg_arrays = handle.arg_arrays
        self.grad_arrays = handle.grad_arrays
        self.aux_arrays = handle.aux_arrays
        self.outputs = handle.outputs
        self._arg_names = handle.arg_names
        self._aux_names = handle.aux_names
        self._output_names = handle.output_names
        self.arg_dict = dict(zip(self._arg_names, self.arg_arrays))
        self.grad_dict = dict(zip(self._arg_names, self.grad_arrays))
        self.aux_dict = dict(zip(self._aux_names, self.aux_arrays))
        self.output_dict = dict(zip(self._output_names, self.outputs))

    @property
    def symbol(self):
        return self._symbol

    @property
    def cuda_graph_status(self):
        """One line: whether this executor's calls are recorded and replayed as CUDA Graphs
        (GPU step graphs), and why not (LOOM_CUDA_GRAPH=0, a custom op, ...)."""
        return self.handle.cuda_graph_status

    @property
    def inference_chunk(self):
        """Samples per chunk of this executor's inference calls (runtime/infer_chunk.cc), 0
        when they run whole batches (see inference_chunk_note). Decided at the first
        forward(is_train=False); LOOM_INFER_CHUNK=0 turns chunks off, =N asks for N."""
        return self.handle.inference_chunk

    @property
    def inference_chunk_note(self):
        """Why inference calls run whole batches ('' when they run in chunks)."""
        return self.handle.inference_chunk_note

    @property
    def grad_req(self):
        return dict(zip(self._arg_names, self.handle.grad_reqs))

    def forward(self, is_train=False, **kwargs):
        """Copies keyword arrays (NDArray or NumPy) into the bound arguments, runs the forward
        pass and returns `outputs`."""
        for k in kwargs:
            if k not in self.arg_dict and k not in self.aux_dict:
                raise BindError("forward: unknown argument '%s' (arguments: %s)" %
                                (k, ", ".join(self._arg_names)))
        self.handle.forward(bool(is_train), kwargs)
        return self.outputs

    def backward(self, out_grads=None, is_train=True):
        """Runs the backward pass. out_grads: None (loss heads only), one NDArray, a list
        aligned with the outputs (None for loss heads) or a dict by output name."""
        from .ndarray import NDArray
        if out_grads is None:
            grads = []
        elif isinstance(out_grads, (NDArray, np.ndarray)):
            grads = [out_grads]
        elif isinstance(out_grads, dict):
            grads = [out_grads.get(n) for n in self._output_names]
        else:
            grads = list(out_grads)
        # A head gradient of another dtype is converted to its output's dtype (MXNet copies
        # it into the output-gradient buffer with a cast).
        outs = self.outputs
        for i, g in enumerate(grads):
            if isinstance(g, NDArray) and i < len(outs) and g.dtype != outs[i].dtype:
                grads[i] = g.astype(outs[i].dtype)
        self.handle.backward(grads)
        for user, own in getattr(self, "_grad_mirrors", ()):
            user[:] = own.astype(user.dtype)

    def copy_params_from(self, arg_params, aux_params=None, allow_extra_params=False):
        self.handle.copy_params_from(arg_params or {}, aux_params or {}, bool(allow_extra_params))

    def get_optimized_symbol(self):
        """The symbol this executor runs: its symbol after common-subexpression elimination
        (nodes applying one op with the same attributes to the same inputs are one node;
        outputs that become one entry are kept apart by `_copy` nodes). Bind applies it
        unless MXNET_ELIMINATE_COMMON_EXPR=0, as MXNet does."""
        return self.handle.optimized_symbol

    def set_monitor_callback(self, callback, monitor_all=False):
        """After every forward, calls callback(name, NDArray) for each op output, named
        '<node>_<output>' (e.g. fc1_output), in graph order; with monitor_all also for each
        op input first ('<node>_<input>', e.g. fc1_weight). The values come from a second
        executor over symbol.get_internals() that shares this one's arguments (aux states
        are copied, so they are not updated twice); random ops such as Dropout draw again
        there. During backward, as each node's backward runs, it is called for the gradient
        of every input of that node, named '<node>_backward_output' (with the input's
        position appended when the node has several: fc1_backward_output1); a gradient
        the node does not compute (grad_req 'null', labels) is reported as zeros.
        callback=None removes it."""
        self.__dict__.pop("forward", None)
        self._monitor = None
        self.handle.set_backward_monitor(callback)
        if callback is None:
            return
        self._monitor = _Monitored(self, callback, bool(monitor_all))

        def forward(is_train=False, **kwargs):
            outs = type(self).forward(self, is_train, **kwargs)
            if self._monitor is not None:
                self._monitor.run(is_train)
            return outs
        self.forward = forward

    def reshape(self, partial_shaping=False, allow_up_sizing=False, **kwargs):
        """A new executor of the same symbol for new input shapes (kwargs: name -> shape),
        sharing memory with this one: arguments, gradients, aux states and outputs whose
        shape is unchanged are the same arrays, smaller ones are views of the start of the
        old ones, larger ones (allow_up_sizing=True) are new. Changing the shape of an
        argument not named in kwargs needs partial_shaping=True. A monitor callback moves
        to the new executor too. Like MXNet's, the two executors share state and must not
        run concurrently."""
        from .base import MXNetError
        from . import ndarray as nd
        from . import _loom
        from .symbol import _grad_reqs, _shape_overridden
        shapes = {k: tuple(v) for k, v in kwargs.items()}
        arg_shapes, out_shapes, aux_shapes = self._symbol.infer_shape(**shapes)
        if arg_shapes is None:
            raise MXNetError("Executor.reshape: the shapes given (%s) do not decide every "
                             "argument's shape" % shapes)

        def resized(name, arr, shape):
            if arr is None or tuple(arr.shape) == tuple(shape):
                return arr
            if name not in shapes and not partial_shaping:
                raise MXNetError("Shape of unspecified array arg:%s changed. This can cause the "
                                 "new executor to not share parameters with the old one. Set "
                                 "partial_shaping=True if this is intended." % name)
            size = int(np.prod(shape))
            if size > arr.size:
                if not allow_up_sizing:
                    raise MXNetError("New shape of arg:%s larger than original. Set "
                                     "allow_up_sizing=True to allocate new arrays." % name)
                return nd.zeros(shape, ctx=arr.context, dtype=arr.dtype)
            return arr._reshape_view((arr.size,))._slice(0, size)._reshape_view(tuple(shape))

        def output_view(arr, shape):
            # Outputs are the executor's own memory: a smaller one is a view of the old one,
            # a larger one a new array (MXNet's shared pool), whatever allow_up_sizing says.
            if tuple(arr.shape) == tuple(shape):
                return arr
            size = int(np.prod(shape))
            if size > arr.size:
                return None
            return arr._reshape_view((arr.size,))._slice(0, size)._reshape_view(tuple(shape))

        args, grads, aux = {}, {}, {}
        for name, a, g, shp in zip(self._arg_names, self.arg_arrays, self.grad_arrays,
                                   arg_shapes):
            args[name] = resized(name, a, shp)
            if g is not None:
                grads[name] = resized(name, g, shp)
        for name, a, shp in zip(self._aux_names, self.aux_arrays, aux_shapes):
            aux[name] = resized(name, a, shp)
        reqs = {n: (r if n in grads else "null")
                for n, r in zip(self._arg_names, self.handle.grad_reqs)}
        outs = [output_view(o, s) for o, s in zip(self.outputs, out_shapes)]
        default, reqs = _grad_reqs(self._symbol, reqs)
        h = _loom._Executor.bind(_shape_overridden(self._symbol, shapes), self._ctx, args, grads,
                                 default, reqs, aux, outputs=outs)
        exe = Executor(h, self._symbol, self._ctx)
        exe.carry_monitor_from(self)
        return exe

    def carry_monitor_from(self, other):
        """Installs `other`'s monitor callback (set_monitor_callback) on this executor, as
        MXNet's reshape does; nothing when it has none."""
        mon = getattr(other, "_monitor", None)
        if mon is not None:
            self.set_monitor_callback(mon.callback, mon.monitor_all)

    def debug_str(self):
        lines = ["Symbol outputs: %s" % ", ".join(self._output_names),
                 "Planned memory: %d bytes" % self.handle.planned_bytes,
                 "Total %d MB allocated" % (self.handle.planned_bytes >> 20)]
        for n, a, g in zip(self._arg_names, self.arg_arrays, self.grad_arrays):
            lines.append("arg %s %s grad=%s" % (n, a.shape, "none" if g is None else "yes"))
        return "\n".join(lines)

    def __repr__(self):
        return "<Executor outputs=%s>" % self._output_names


# Ops whose inputs MXNet's monitor names input0, input1, ... (they declare no input names
# to the graph layer there).
_POSITIONAL_INPUT_NAMES = {"Activation", "SoftmaxActivation"}


class _Monitored:
    """Executor.set_monitor_callback's state: the internals executor and the name of each of
    its outputs per graph entry."""

    def __init__(self, exe, callback, monitor_all):
        import json
        from . import _loom
        self.exe, self.callback, self.monitor_all = exe, callback, monitor_all
        graph = json.loads(exe._symbol.tojson())
        nodes, rows = graph["nodes"], graph["node_row_ptr"]
        internals = exe._symbol.get_internals()
        names = internals.list_outputs()
        later_vars = {n["name"] for n in nodes if n["op"] == "null"}
        entry, p, self.order = {}, 0, []
        for i, n in enumerate(nodes):
            if n["op"] == "null":
                later_vars.discard(n["name"])
                entry[(i, 0)] = p
                p += 1
                continue
            outs = []
            for k in range(rows[i + 1] - rows[i]):
                if p < len(names) and names[p].startswith(n["name"] + "_") and \
                        names[p] not in later_vars:
                    entry[(i, k)] = p
                    outs.append((names[p], p))
                    p += 1
            ins = []
            if monitor_all:
                try:
                    in_names = _loom._op_inputs(n["op"], n.get("attrs", {}))
                except Exception:  # noqa: BLE001 - ops whose inputs cannot be named
                    in_names = []
                if n["op"] in _POSITIONAL_INPUT_NAMES:
                    in_names = []
                for j, (src, k, _) in enumerate(n["inputs"]):
                    label = in_names[j] if j < len(in_names) else "input%d" % j
                    if (src, k) in entry:
                        # MXNet reports a variable input under its own name first, then
                        # every input as '<node>_<input name>'.
                        at = entry[(src, k)]
                        if nodes[src]["op"] == "null":
                            ins.append((names[at], at))
                        ins.append((n["name"] + "_" + label, at))
            self.order.append((ins, outs))
        self.aux = {k: v.copy() for k, v in exe.aux_dict.items()}
        self.inner = internals.bind(exe._ctx, args=exe.arg_dict, aux_states=self.aux,
                                    grad_req="null")

    def run(self, is_train):
        for k, v in self.exe.aux_dict.items():
            self.aux[k][:] = v
        self.inner.handle.forward(bool(is_train), {})
        outs = self.inner.outputs
        for ins, results in self.order:
            for name, p in ins + results:
                self.callback(name, outs[p])
