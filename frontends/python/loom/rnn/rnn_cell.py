"""Symbolic RNN cells (MXNet 1.x's legacy ``mx.rnn`` cell API), built from Loom's symbol ops.

Parameter, state and node names follow MXNet 1.9.1 so that checkpoints written by MXNet
programs load here and vice versa: ``<prefix>i2h_weight``, ``<prefix>h2h_bias``, the states
``<prefix>begin_state_<k>``, and per-step nodes ``<prefix>t<step>_<part>``. Gates are stacked
along the hidden axis in MXNet's order (LSTM: i, f, c, o; GRU: r, z, n).
"""
import functools

import numpy as np

from .. import symbol
from .. import ndarray
from .. import initializer as init
from ..base import LoomError

__all__ = ["RNNParams", "BaseRNNCell", "RNNCell", "LSTMCell", "GRUCell", "FusedRNNCell",
           "SequentialRNNCell", "DropoutCell", "ModifierCell", "ZoneoutCell",
           "ResidualCell", "BidirectionalCell", "BaseConvRNNCell", "ConvRNNCell",
           "ConvLSTMCell", "ConvGRUCell"]


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _cells_state_info(cells):
    out = []
    for c in cells:
        out.extend(c.state_info)
    return out


def _cells_begin_state(cells, **kwargs):
    out = []
    for c in cells:
        out.extend(c.begin_state(**kwargs))
    return out


def _cells_unpack_weights(cells, args):
    for c in cells:
        args = c.unpack_weights(args)
    return args


def _cells_pack_weights(cells, args):
    for c in cells:
        args = c.pack_weights(args)
    return args


def _normalize_sequence(length, inputs, layout, merge, in_layout=None):
    """Turns ``inputs`` (one Symbol holding the whole sequence, or a list of per-step
    Symbols) into the requested form: a list of ``length`` steps when ``merge`` is False,
    one Symbol with time on ``layout``'s T axis when ``merge`` is True, unchanged when
    ``merge`` is None. Returns (inputs, time_axis)."""
    if inputs is None:
        raise ValueError("unroll needs inputs: a Symbol or a list of %s Symbols" % length)
    axis = layout.find("T")
    in_axis = in_layout.find("T") if in_layout is not None else axis
    if isinstance(inputs, symbol.Symbol):
        if merge is False:
            if len(inputs.list_outputs()) != 1:
                raise ValueError("unroll does not accept a grouped Symbol as inputs; "
                                 "pass a list of per-step Symbols")
            inputs = list(symbol.split(inputs, axis=in_axis, num_outputs=length,
                                       squeeze_axis=1))
    else:
        if length is not None and len(inputs) != length:
            raise ValueError("unroll got %d inputs for length %d" % (len(inputs), length))
        if merge is True:
            steps = [symbol.expand_dims(x, axis=axis) for x in inputs]
            inputs = symbol.Concat(*steps, dim=axis)
            in_axis = axis
    if isinstance(inputs, symbol.Symbol) and axis != in_axis:
        inputs = symbol.swapaxes(inputs, dim1=axis, dim2=in_axis)
    return inputs, axis


class RNNParams(object):
    """Holds the parameter Variables of cells sharing one prefix; ``get`` creates a
    Variable ``prefix + name`` once and returns the same one afterwards."""

    def __init__(self, prefix=""):
        self._prefix = prefix
        self._params = {}

    def get(self, name, **kwargs):
        full = self._prefix + name
        if full not in self._params:
            self._params[full] = symbol.Variable(full, **kwargs)
        return self._params[full]


class BaseRNNCell(object):
    """Abstract cell: one step is ``output, new_states = cell(input, states)``."""

    def __init__(self, prefix="", params=None):
        if params is None:
            params = RNNParams(prefix)
            self._own_params = True
        else:
            self._own_params = False
        self._prefix = prefix
        self._params = params
        self._modified = False
        self.reset()

    def reset(self):
        """Restarts the step and begin-state counters (before a new unroll)."""
        self._init_counter = -1
        self._counter = -1
        for c in getattr(self, "_cells", []):
            c.reset()

    def __call__(self, inputs, states):
        raise NotImplementedError()

    @property
    def params(self):
        self._own_params = False
        return self._params

    @property
    def state_info(self):
        raise NotImplementedError()

    @property
    def state_shape(self):
        return [ele["shape"] for ele in self.state_info]

    @property
    def _gate_names(self):
        return ()

    def begin_state(self, func=symbol.zeros, **kwargs):
        """The initial states, one Symbol per entry of ``state_info``, made by ``func``
        (``symbol.zeros`` by default) named ``<prefix>begin_state_<k>``."""
        if self._modified:
            raise LoomError("after applying a modifier cell (e.g. ZoneoutCell) the base cell "
                            "cannot be called directly; call the modifier cell instead")
        states = []
        for info in self.state_info:
            self._init_counter += 1
            if info is not None:
                kwargs.update(info)  # MXNet accumulates these into kwargs, too
            states.append(func(name="%sbegin_state_%d" % (self._prefix, self._init_counter),
                               **kwargs))
        return states

    def unpack_weights(self, args):
        """Splits the fused i2h/h2h weights and biases in ``args`` into one entry per
        gate (``<prefix>i2h<gate>_weight``); returns a new dict."""
        args = dict(args)
        if not self._gate_names:
            return args
        h = self._num_hidden
        for group in ("i2h", "h2h"):
            weight = args.pop("%s%s_weight" % (self._prefix, group))
            bias = args.pop("%s%s_bias" % (self._prefix, group))
            for j, gate in enumerate(self._gate_names):
                args["%s%s%s_weight" % (self._prefix, group, gate)] = \
                    weight[j * h:(j + 1) * h].copy()
                args["%s%s%s_bias" % (self._prefix, group, gate)] = \
                    bias[j * h:(j + 1) * h].copy()
        return args

    def pack_weights(self, args):
        """The inverse of ``unpack_weights``."""
        args = dict(args)
        if not self._gate_names:
            return args
        for group in ("i2h", "h2h"):
            ws, bs = [], []
            for gate in self._gate_names:
                ws.append(args.pop("%s%s%s_weight" % (self._prefix, group, gate)))
                bs.append(args.pop("%s%s%s_bias" % (self._prefix, group, gate)))
            args["%s%s_weight" % (self._prefix, group)] = ndarray.concatenate(ws)
            args["%s%s_bias" % (self._prefix, group)] = ndarray.concatenate(bs)
        return args

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        """Applies the cell ``length`` times. ``inputs``: one Symbol laid out as
        ``layout`` or a list of per-step Symbols. Returns (outputs, last_states); outputs
        is one Symbol if ``merge_outputs`` (or, when None, whatever form came in)."""
        self.reset()
        inputs, _ = _normalize_sequence(length, inputs, layout, False)
        if begin_state is None:
            begin_state = self.begin_state()
        states = begin_state
        outputs = []
        for i in range(length):
            output, states = self(inputs[i], states)
            outputs.append(output)
        outputs, _ = _normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _get_activation(self, inputs, activation, **kwargs):
        if isinstance(activation, str):
            return symbol.Activation(inputs, act_type=activation, **kwargs)
        return activation(inputs, **kwargs)


class RNNCell(BaseRNNCell):
    """Elman cell: h' = act(W_i x + b_i + W_h h + b_h)."""

    def __init__(self, num_hidden, activation="tanh", prefix="rnn_", params=None):
        super(RNNCell, self).__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._activation = activation
        self._iW = self.params.get("i2h_weight")
        self._iB = self.params.get("i2h_bias")
        self._hW = self.params.get("h2h_weight")
        self._hB = self.params.get("h2h_bias")

    @property
    def state_info(self):
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"}]

    @property
    def _gate_names(self):
        return ("",)

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                    num_hidden=self._num_hidden, name=name + "i2h")
        h2h = symbol.FullyConnected(data=states[0], weight=self._hW, bias=self._hB,
                                    num_hidden=self._num_hidden, name=name + "h2h")
        out = self._get_activation(i2h + h2h, self._activation, name=name + "out")
        return out, [out]


class LSTMCell(BaseRNNCell):
    """LSTM cell; gates i, f, c, o stacked in that order; ``forget_bias`` is the initial
    value of the forget gate's part of i2h_bias (through init.LSTMBias)."""

    def __init__(self, num_hidden, prefix="lstm_", params=None, forget_bias=1.0):
        super(LSTMCell, self).__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._iW = self.params.get("i2h_weight")
        self._hW = self.params.get("h2h_weight")
        self._iB = self.params.get("i2h_bias", init=init.LSTMBias(forget_bias=forget_bias))
        self._hB = self.params.get("h2h_bias")

    @property
    def state_info(self):
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"},
                {"shape": (0, self._num_hidden), "__layout__": "NC"}]

    @property
    def _gate_names(self):
        return ("_i", "_f", "_c", "_o")

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        h = self._num_hidden
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                    num_hidden=4 * h, name=name + "i2h")
        h2h = symbol.FullyConnected(data=states[0], weight=self._hW, bias=self._hB,
                                    num_hidden=4 * h, name=name + "h2h")
        gates = symbol.SliceChannel(i2h + h2h, num_outputs=4, name=name + "slice")
        in_gate = symbol.Activation(gates[0], act_type="sigmoid", name=name + "i")
        forget_gate = symbol.Activation(gates[1], act_type="sigmoid", name=name + "f")
        in_transform = symbol.Activation(gates[2], act_type="tanh", name=name + "c")
        out_gate = symbol.Activation(gates[3], act_type="sigmoid", name=name + "o")
        next_c = symbol._internal._plus(forget_gate * states[1], in_gate * in_transform,
                                        name=name + "state")
        next_h = symbol._internal._mul(out_gate, symbol.Activation(next_c, act_type="tanh"),
                                       name=name + "out")
        return next_h, [next_h, next_c]


class GRUCell(BaseRNNCell):
    """GRU cell (Cho et al. 2014); gates r, z, n stacked in that order."""

    def __init__(self, num_hidden, prefix="gru_", params=None):
        super(GRUCell, self).__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._iW = self.params.get("i2h_weight")
        self._iB = self.params.get("i2h_bias")
        self._hW = self.params.get("h2h_weight")
        self._hB = self.params.get("h2h_bias")

    @property
    def state_info(self):
        return [{"shape": (0, self._num_hidden), "__layout__": "NC"}]

    @property
    def _gate_names(self):
        return ("_r", "_z", "_o")

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        # MXNet names GRU nodes "<prefix>t<k>__i2h" etc. (double underscore), except "out"
        h = self._num_hidden
        prev_h = states[0]
        i2h = symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB,
                                    num_hidden=3 * h, name=name + "_i2h")
        h2h = symbol.FullyConnected(data=prev_h, weight=self._hW, bias=self._hB,
                                    num_hidden=3 * h, name=name + "_h2h")
        i_r, i_z, i_n = symbol.SliceChannel(i2h, num_outputs=3, name=name + "_i2h_slice")
        h_r, h_z, h_n = symbol.SliceChannel(h2h, num_outputs=3, name=name + "_h2h_slice")
        reset_gate = symbol.Activation(i_r + h_r, act_type="sigmoid", name=name + "_r_act")
        update_gate = symbol.Activation(i_z + h_z, act_type="sigmoid", name=name + "_z_act")
        cand = symbol.Activation(i_n + reset_gate * h_n, act_type="tanh", name=name + "_h_act")
        next_h = symbol._internal._plus((1. - update_gate) * cand, update_gate * prev_h,
                                        name=name + "out")
        return next_h, [next_h]


@init.register
class FusedRNN(init.Initializer):
    """Initialises a FusedRNNCell's flat parameter vector piece by piece (MXNet's
    ``init.FusedRNN``): each weight and bias with ``init`` (or the global initializer),
    LSTM forget-gate biases with ``forget_bias``."""

    def __init__(self, init=None, num_hidden=None, num_layers=1, mode="lstm",
                 bidirectional=False, forget_bias=1.0):
        if isinstance(init, str):
            init = _init_module.create(init)
        super(FusedRNN, self).__init__(init=init.dumps() if init is not None else None,
                                       num_hidden=num_hidden, num_layers=num_layers,
                                       mode=mode, bidirectional=bidirectional,
                                       forget_bias=forget_bias)
        self._init = init
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._forget_bias = forget_bias

    def _init_weight(self, desc, arr):
        cell = FusedRNNCell(self._num_hidden, self._num_layers, self._mode, self._bidirectional,
                            forget_bias=self._forget_bias, prefix="")
        args = cell.unpack_weights({"parameters": arr})
        global_init = getattr(desc, "global_init", None)
        for name in args:
            piece = init.InitDesc(name, global_init=global_init)
            if self._mode == "lstm" and name.endswith("_f_bias"):
                args[name][:] = self._forget_bias
            elif self._init is not None:
                self._init(piece, args[name])
            elif global_init is not None:
                global_init(piece, args[name])
            else:
                raise ValueError("FusedRNN initializer of %s: no initializer for %s (give "
                                 "init= or initialise through a global initializer)"
                                 % (desc, name))
        arr[:] = cell.pack_weights(args)["parameters"]


_init_module = init


class FusedRNNCell(BaseRNNCell):
    """MXNet's cuDNN-style fused RNN: all layers' weights in one flat ``<prefix>parameters``
    vector, unrolled as one ``RNN`` operator. ``unfuse()`` gives the equivalent stack of
    cells and ``unpack_weights``/``pack_weights`` convert between the flat vector and the
    per-cell, per-gate names."""

    def __init__(self, num_hidden, num_layers=1, mode="lstm", bidirectional=False,
                 dropout=0., get_next_state=False, forget_bias=1.0, prefix=None, params=None):
        if prefix is None:
            prefix = "%s_" % mode
        super(FusedRNNCell, self).__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._dropout = dropout
        self._get_next_state = get_next_state
        self._forget_bias = forget_bias
        self._directions = ["l", "r"] if bidirectional else ["l"]
        self._parameter = self.params.get(
            "parameters", init=FusedRNN(None, num_hidden, num_layers, mode, bidirectional,
                                        forget_bias))

    @property
    def state_info(self):
        b = len(self._directions)
        n = 2 if self._mode == "lstm" else 1
        return [{"shape": (b * self._num_layers, 0, self._num_hidden), "__layout__": "LNC"}
                for _ in range(n)]

    @property
    def _gate_names(self):
        return {"rnn_relu": ("",), "rnn_tanh": ("",), "lstm": ("_i", "_f", "_c", "_o"),
                "gru": ("_r", "_z", "_o")}[self._mode]

    @property
    def _num_gates(self):
        return len(self._gate_names)

    def _layout(self, num_input):
        """(name, shape) of every piece of the flat vector, in its order: all weights
        (layer by layer, direction by direction, i2h then h2h, gate by gate), then all
        biases in the same order."""
        h, b = self._num_hidden, len(self._directions)
        weights, biases = [], []
        for layer in range(self._num_layers):
            li = num_input if layer == 0 else b * h
            for d in self._directions:
                for group, cols in (("i2h", li), ("h2h", h)):
                    for gate in self._gate_names:
                        weights.append(("%s%s%d_%s%s_weight" % (self._prefix, d, layer, group,
                                                                gate), (h, cols)))
            for d in self._directions:
                for group in ("i2h", "h2h"):
                    for gate in self._gate_names:
                        biases.append(("%s%s%d_%s%s_bias" % (self._prefix, d, layer, group,
                                                             gate), (h,)))
        return weights + biases

    def _num_input(self, size):
        h, b, m, L = self._num_hidden, len(self._directions), self._num_gates, self._num_layers
        return size // b // h // m - (L - 1) * (h + b * h + 2) - h - 2

    def unpack_weights(self, args):
        args = dict(args)
        arr = args.pop(self._parameter.name)
        flat = arr.reshape((-1,))
        pos = 0
        for name, shape in self._layout(self._num_input(arr.size)):
            n = int(np.prod(shape))
            args[name] = flat[pos:pos + n].reshape(shape).copy()
            pos += n
        return args

    def pack_weights(self, args):
        args = dict(args)
        b, h, m = len(self._directions), self._num_hidden, self._num_gates
        first = args["%sl0_i2h%s_weight" % (self._prefix, self._gate_names[0])]
        num_input = first.shape[1]
        pieces = [args.pop(name).reshape((-1,)) for name, _ in self._layout(num_input)]
        args[self._parameter.name] = ndarray.concatenate(pieces)
        return args

    def __call__(self, inputs, states):
        raise NotImplementedError("FusedRNNCell cannot be stepped. Please use unroll")

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        """One ``RNN`` node named ``<prefix>rnn`` over the whole sequence (time-major inside:
        NTC data is swapped to TNC and the outputs back). The states are outputs of the
        node when ``get_next_state``, otherwise ``[]``."""
        self.reset()
        inputs, axis = _normalize_sequence(length, inputs, layout, True)
        if axis == 1:
            inputs = symbol.swapaxes(inputs, dim1=0, dim2=1)
        elif axis != 0:
            raise ValueError("FusedRNNCell.unroll: unsupported layout %r (use NTC or TNC)"
                             % layout)
        if begin_state is None:
            begin_state = self.begin_state()
        states = {"state": begin_state[0]}
        if self._mode == "lstm":
            states["state_cell"] = begin_state[1]
        rnn = symbol.RNN(data=inputs, parameters=self._parameter,
                         state_size=self._num_hidden, num_layers=self._num_layers,
                         bidirectional=self._bidirectional, p=self._dropout,
                         state_outputs=self._get_next_state, mode=self._mode,
                         name=self._prefix + "rnn", **states)
        if not self._get_next_state:
            outputs, states = rnn, []
        else:
            n = 2 if self._mode == "lstm" else 1
            states = [rnn[1 + k] for k in range(n)]
            for st in states:
                st._set_attrs(__layout__="LNC")
            outputs = rnn[0]
        if axis == 1:
            outputs = symbol.swapaxes(outputs, dim1=0, dim2=1)
        outputs, _ = _normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def unfuse(self):
        """The equivalent SequentialRNNCell of per-layer cells (bidirectional layers as
        BidirectionalCell, dropout between layers as DropoutCell)."""
        h = self._num_hidden
        make = {"rnn_relu": lambda p: RNNCell(h, activation="relu", prefix=p),
                "rnn_tanh": lambda p: RNNCell(h, activation="tanh", prefix=p),
                "lstm": lambda p: LSTMCell(h, prefix=p),
                "gru": lambda p: GRUCell(h, prefix=p)}[self._mode]
        stack = SequentialRNNCell()
        for i in range(self._num_layers):
            if self._bidirectional:
                stack.add(BidirectionalCell(make("%sl%d_" % (self._prefix, i)),
                                            make("%sr%d_" % (self._prefix, i)),
                                            output_prefix="%sbi_l%d_" % (self._prefix, i)))
            else:
                stack.add(make("%sl%d_" % (self._prefix, i)))
            if self._dropout > 0 and i != self._num_layers - 1:
                stack.add(DropoutCell(self._dropout,
                                      prefix="%s_dropout%d_" % (self._prefix, i)))
        return stack


class SequentialRNNCell(BaseRNNCell):
    """Stacks cells: each step's output feeds the next cell."""

    def __init__(self, params=None):
        super(SequentialRNNCell, self).__init__(prefix="", params=params)
        self._override_cell_params = params is not None
        self._cells = []

    def add(self, cell):
        self._cells.append(cell)
        if self._override_cell_params:
            if not cell._own_params:
                raise ValueError("Either specify params for SequentialRNNCell or child "
                                 "cells, not both.")
            cell.params._params.update(self.params._params)
        self.params._params.update(cell.params._params)

    @property
    def state_info(self):
        return _cells_state_info(self._cells)

    def begin_state(self, **kwargs):
        if self._modified:
            raise LoomError("after applying a modifier cell the base cell cannot be called "
                            "directly; call the modifier cell instead")
        return _cells_begin_state(self._cells, **kwargs)

    def unpack_weights(self, args):
        return _cells_unpack_weights(self._cells, args)

    def pack_weights(self, args):
        return _cells_pack_weights(self._cells, args)

    def __call__(self, inputs, states):
        self._counter += 1
        next_states = []
        p = 0
        for cell in self._cells:
            if isinstance(cell, BidirectionalCell):
                raise NotImplementedError("a SequentialRNNCell holding a BidirectionalCell "
                                          "cannot be stepped; use unroll")
            n = len(cell.state_info)
            inputs, st = cell(inputs, states[p:p + n])
            p += n
            next_states.extend(st)
        return inputs, next_states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        if begin_state is None:
            begin_state = self.begin_state()
        p = 0
        next_states = []
        last = len(self._cells) - 1
        for i, cell in enumerate(self._cells):
            n = len(cell.state_info)
            states = begin_state[p:p + n]
            p += n
            inputs, states = cell.unroll(length, inputs=inputs, begin_state=states,
                                         layout=layout,
                                         merge_outputs=None if i < last else merge_outputs)
            next_states.extend(states)
        return inputs, next_states


class DropoutCell(BaseRNNCell):
    """Applies Dropout(p=dropout) to the input of each step; no states."""

    def __init__(self, dropout, prefix="dropout_", params=None):
        super(DropoutCell, self).__init__(prefix, params)
        if not isinstance(dropout, (int, float)):
            raise TypeError("dropout probability must be a number")
        self.dropout = dropout

    @property
    def state_info(self):
        return []

    def __call__(self, inputs, states):
        if self.dropout > 0:
            inputs = symbol.Dropout(data=inputs, p=self.dropout)
        return inputs, states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        inputs, _ = _normalize_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, symbol.Symbol):
            return self(inputs, [])
        return super(DropoutCell, self).unroll(length, inputs, begin_state=begin_state,
                                               layout=layout, merge_outputs=merge_outputs)


class ModifierCell(BaseRNNCell):
    """Wraps a base cell and changes its behaviour; the base cell is then only usable
    through the modifier."""

    def __init__(self, base_cell):
        super(ModifierCell, self).__init__()
        base_cell._modified = True
        self.base_cell = base_cell

    @property
    def params(self):
        self._own_params = False
        return self.base_cell.params

    @property
    def state_info(self):
        return self.base_cell.state_info

    def begin_state(self, init_sym=symbol.zeros, **kwargs):
        if self._modified:
            raise LoomError("after applying a modifier cell the base cell cannot be called "
                            "directly; call the modifier cell instead")
        self.base_cell._modified = False
        begin = self.base_cell.begin_state(func=init_sym, **kwargs)
        self.base_cell._modified = True
        return begin

    def unpack_weights(self, args):
        return self.base_cell.unpack_weights(args)

    def pack_weights(self, args):
        return self.base_cell.pack_weights(args)

    def __call__(self, inputs, states):
        raise NotImplementedError


class ZoneoutCell(ModifierCell):
    """Zoneout (Krueger et al. 2016): each unit keeps its previous output/state with
    probability ``zoneout_outputs``/``zoneout_states`` (during training)."""

    def __init__(self, base_cell, zoneout_outputs=0., zoneout_states=0.):
        if isinstance(base_cell, FusedRNNCell):
            raise TypeError("FusedRNNCell doesn't support zoneout; unfuse() it first")
        if isinstance(base_cell, BidirectionalCell):
            raise TypeError("BidirectionalCell doesn't support zoneout since it doesn't "
                            "support step; apply ZoneoutCell to its cells instead")
        super(ZoneoutCell, self).__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self.prev_output = None

    def reset(self):
        super(ZoneoutCell, self).reset()
        self.prev_output = None

    def __call__(self, inputs, states):
        po, ps = self.zoneout_outputs, self.zoneout_states
        next_output, next_states = self.base_cell(inputs, states)

        def mask(p, like):
            return symbol.Dropout(symbol.ones_like(like), p=p)

        prev = self.prev_output if self.prev_output is not None else symbol.zeros((0, 0))
        output = (symbol.where(mask(po, next_output), next_output, prev)
                  if po != 0. else next_output)
        if ps != 0.:
            states = [symbol.where(mask(ps, new), new, old)
                      for new, old in zip(next_states, states)]
        else:
            states = next_states
        self.prev_output = output
        return output, states


class ResidualCell(ModifierCell):
    """Adds each step's input to the base cell's output (Wu et al. 2016)."""

    def __init__(self, base_cell):
        super(ResidualCell, self).__init__(base_cell)

    def __call__(self, inputs, states):
        output, states = self.base_cell(inputs, states)
        output = symbol.elemwise_add(output, inputs, name="%s_plus_residual" % output.name)
        return output, states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        self.base_cell._modified = False
        outputs, states = self.base_cell.unroll(length, inputs=inputs, begin_state=begin_state,
                                                layout=layout, merge_outputs=merge_outputs)
        self.base_cell._modified = True
        if merge_outputs is None:
            merge_outputs = isinstance(outputs, symbol.Symbol)
        inputs, _ = _normalize_sequence(length, inputs, layout, merge_outputs)
        if merge_outputs:
            outputs = symbol.elemwise_add(outputs, inputs,
                                          name="%s_plus_residual" % outputs.name)
        else:
            outputs = [symbol.elemwise_add(o, x, name="%s_plus_residual" % o.name)
                       for o, x in zip(outputs, inputs)]
        return outputs, states


def _reverse_time(x, axis, length):
    """x reversed along ``axis``: the ``reverse`` op, as MXNet's graph has it; builds of
    Loom without that op fall back to split, reorder, concat (same values)."""
    if hasattr(symbol, "reverse"):
        return symbol.reverse(x, axis=axis)
    parts = list(symbol.SliceChannel(x, axis=axis, num_outputs=length))
    return symbol.Concat(*reversed(parts), dim=axis)


class BidirectionalCell(BaseRNNCell):
    """Runs ``l_cell`` forward and ``r_cell`` backward over the sequence and concatenates
    their outputs; can only be unrolled, not stepped."""

    def __init__(self, l_cell, r_cell, params=None, output_prefix="bi_"):
        super(BidirectionalCell, self).__init__("", params=params)
        self._output_prefix = output_prefix
        self._override_cell_params = params is not None
        if self._override_cell_params:
            if not (l_cell._own_params and r_cell._own_params):
                raise ValueError("Either specify params for BidirectionalCell or child "
                                 "cells, not both.")
            l_cell.params._params.update(self.params._params)
            r_cell.params._params.update(self.params._params)
        self.params._params.update(l_cell.params._params)
        self.params._params.update(r_cell.params._params)
        self._cells = [l_cell, r_cell]

    def unpack_weights(self, args):
        return _cells_unpack_weights(self._cells, args)

    def pack_weights(self, args):
        return _cells_pack_weights(self._cells, args)

    def __call__(self, inputs, states):
        raise NotImplementedError("Bidirectional cannot be stepped. Please use unroll")

    @property
    def state_info(self):
        return _cells_state_info(self._cells)

    def begin_state(self, **kwargs):
        if self._modified:
            raise LoomError("after applying a modifier cell the base cell cannot be called "
                            "directly; call the modifier cell instead")
        return _cells_begin_state(self._cells, **kwargs)

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None):
        self.reset()
        inputs, axis = _normalize_sequence(length, inputs, layout, False)
        if begin_state is None:
            begin_state = self.begin_state()
        l_cell, r_cell = self._cells
        nl = len(l_cell.state_info)
        l_out, l_states = l_cell.unroll(length, inputs=inputs, begin_state=begin_state[:nl],
                                        layout=layout, merge_outputs=merge_outputs)
        r_out, r_states = r_cell.unroll(length, inputs=list(reversed(inputs)),
                                        begin_state=begin_state[nl:], layout=layout,
                                        merge_outputs=merge_outputs)
        if merge_outputs is None:
            merge_outputs = (isinstance(l_out, symbol.Symbol) and
                             isinstance(r_out, symbol.Symbol))
            if not merge_outputs:
                if isinstance(l_out, symbol.Symbol):
                    l_out = list(symbol.SliceChannel(l_out, axis=axis, num_outputs=length,
                                                     squeeze_axis=1))
                if isinstance(r_out, symbol.Symbol):
                    r_out = list(symbol.SliceChannel(r_out, axis=axis, num_outputs=length,
                                                     squeeze_axis=1))
        if merge_outputs:
            l_out = [l_out]
            r_out = [_reverse_time(r_out, axis, length)]
        else:
            r_out = list(reversed(r_out))
        outputs = [symbol.Concat(lo, ro, dim=1 + int(merge_outputs),
                                 name=("%sout" % self._output_prefix if merge_outputs
                                       else "%st%d" % (self._output_prefix, i)))
                   for i, (lo, ro) in enumerate(zip(l_out, r_out))]
        if merge_outputs:
            outputs = outputs[0]
        return outputs, [l_states, r_states]


def _pget(params, name, init_):
    return params.get(name) if init_ is None else params.get(name, init=init_)


class BaseConvRNNCell(BaseRNNCell):
    """Convolutional recurrent cells (Shi et al., NIPS 2015): i2h and h2h are Convolutions
    over feature maps of ``input_shape`` (one step, e.g. (N, C, H, W)); the h2h convolution
    keeps the state's spatial size (odd kernels, 'same' padding)."""

    def __init__(self, input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel,
                 i2h_stride, i2h_pad, i2h_dilate, i2h_weight_initializer,
                 h2h_weight_initializer, i2h_bias_initializer, h2h_bias_initializer,
                 activation, prefix="", params=None, conv_layout="NCHW"):
        super(BaseConvRNNCell, self).__init__(prefix=prefix, params=params)
        if h2h_kernel[0] % 2 != 1 or h2h_kernel[1] % 2 != 1:
            raise AssertionError("Only support odd number, get h2h_kernel= %s"
                                 % str(h2h_kernel))
        self._h2h_kernel = h2h_kernel
        self._h2h_dilate = h2h_dilate
        self._h2h_pad = (h2h_dilate[0] * (h2h_kernel[0] - 1) // 2,
                         h2h_dilate[1] * (h2h_kernel[1] - 1) // 2)
        self._i2h_kernel = i2h_kernel
        self._i2h_stride = i2h_stride
        self._i2h_pad = i2h_pad
        self._i2h_dilate = i2h_dilate
        self._num_hidden = num_hidden
        self._input_shape = input_shape
        self._conv_layout = conv_layout
        self._activation = activation
        # the state's shape is the i2h convolution's output shape, batch left open
        probe = symbol.Convolution(data=symbol.Variable("data"), num_filter=num_hidden,
                                   kernel=i2h_kernel, stride=i2h_stride, pad=i2h_pad,
                                   dilate=i2h_dilate, layout=conv_layout)
        out_shape = probe.infer_shape(data=input_shape)[1][0]
        self._state_shape = (0,) + tuple(out_shape[1:])
        self._iW = _pget(self.params, "i2h_weight", i2h_weight_initializer)
        self._hW = _pget(self.params, "h2h_weight", h2h_weight_initializer)
        self._iB = _pget(self.params, "i2h_bias", i2h_bias_initializer)
        self._hB = _pget(self.params, "h2h_bias", h2h_bias_initializer)

    @property
    def _num_gates(self):
        return len(self._gate_names)

    @property
    def state_info(self):
        return [{"shape": self._state_shape, "__layout__": self._conv_layout}
                for _ in range(self._num_states)]

    _num_states = 2

    def _conv_forward(self, inputs, states, name):
        nf = self._num_hidden * self._num_gates
        i2h = symbol.Convolution(name="%si2h" % name, data=inputs, num_filter=nf,
                                 kernel=self._i2h_kernel, stride=self._i2h_stride,
                                 pad=self._i2h_pad, dilate=self._i2h_dilate,
                                 weight=self._iW, bias=self._iB, layout=self._conv_layout)
        h2h = symbol.Convolution(name="%sh2h" % name, data=states[0], num_filter=nf,
                                 kernel=self._h2h_kernel, dilate=self._h2h_dilate,
                                 pad=self._h2h_pad, stride=(1, 1), weight=self._hW,
                                 bias=self._hB, layout=self._conv_layout)
        return i2h, h2h

    def __call__(self, inputs, states):
        raise NotImplementedError("BaseConvRNNCell is abstract class for convolutional RNN")


_LEAKY = functools.partial(symbol.LeakyReLU, act_type="leaky", slope=0.2)


class ConvRNNCell(BaseConvRNNCell):
    """Convolutional Elman cell."""
    _num_states = 1

    def __init__(self, input_shape, num_hidden, h2h_kernel=(3, 3), h2h_dilate=(1, 1),
                 i2h_kernel=(3, 3), i2h_stride=(1, 1), i2h_pad=(1, 1), i2h_dilate=(1, 1),
                 i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros",
                 activation=_LEAKY, prefix="ConvRNN_", params=None, conv_layout="NCHW"):
        super(ConvRNNCell, self).__init__(
            input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride,
            i2h_pad, i2h_dilate, i2h_weight_initializer, h2h_weight_initializer,
            i2h_bias_initializer, h2h_bias_initializer, activation, prefix=prefix,
            params=params, conv_layout=conv_layout)

    @property
    def _gate_names(self):
        return ("",)

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        i2h, h2h = self._conv_forward(inputs, states, name)
        out = self._get_activation(i2h + h2h, self._activation, name="%sout" % name)
        return out, [out]


class ConvLSTMCell(BaseConvRNNCell):
    """Convolutional LSTM; gates i, f, c, o along the channel axis; ``activation`` is used
    for the candidate and for the cell output (MXNet's default: leaky ReLU, slope 0.2)."""

    def __init__(self, input_shape, num_hidden, h2h_kernel=(3, 3), h2h_dilate=(1, 1),
                 i2h_kernel=(3, 3), i2h_stride=(1, 1), i2h_pad=(1, 1), i2h_dilate=(1, 1),
                 i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros",
                 activation=_LEAKY, prefix="ConvLSTM_", params=None, conv_layout="NCHW"):
        super(ConvLSTMCell, self).__init__(
            input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride,
            i2h_pad, i2h_dilate, i2h_weight_initializer, h2h_weight_initializer,
            i2h_bias_initializer, h2h_bias_initializer, activation, prefix=prefix,
            params=params, conv_layout=conv_layout)

    @property
    def _gate_names(self):
        return ("_i", "_f", "_c", "_o")

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        i2h, h2h = self._conv_forward(inputs, states, name)
        g = symbol.SliceChannel(i2h + h2h, num_outputs=4,
                                axis=self._conv_layout.find("C"), name="%sslice" % name)
        in_gate = symbol.Activation(g[0], act_type="sigmoid", name="%si" % name)
        forget_gate = symbol.Activation(g[1], act_type="sigmoid", name="%sf" % name)
        cand = self._get_activation(g[2], self._activation, name="%sc" % name)
        out_gate = symbol.Activation(g[3], act_type="sigmoid", name="%so" % name)
        next_c = symbol._internal._plus(forget_gate * states[1], in_gate * cand,
                                        name="%sstate" % name)
        next_h = symbol._internal._mul(out_gate, self._get_activation(next_c, self._activation),
                                       name="%sout" % name)
        return next_h, [next_h, next_c]


class ConvGRUCell(BaseConvRNNCell):
    """Convolutional GRU; gates r, z, n (node names as MXNet's GRUCell)."""
    _num_states = 1

    def __init__(self, input_shape, num_hidden, h2h_kernel=(3, 3), h2h_dilate=(1, 1),
                 i2h_kernel=(3, 3), i2h_stride=(1, 1), i2h_pad=(1, 1), i2h_dilate=(1, 1),
                 i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros",
                 activation=_LEAKY, prefix="ConvGRU_", params=None, conv_layout="NCHW"):
        super(ConvGRUCell, self).__init__(
            input_shape, num_hidden, h2h_kernel, h2h_dilate, i2h_kernel, i2h_stride,
            i2h_pad, i2h_dilate, i2h_weight_initializer, h2h_weight_initializer,
            i2h_bias_initializer, h2h_bias_initializer, activation, prefix=prefix,
            params=params, conv_layout=conv_layout)

    @property
    def _gate_names(self):
        return ("_r", "_z", "_o")

    def __call__(self, inputs, states):
        self._counter += 1
        name = "%st%d_" % (self._prefix, self._counter)
        i2h, h2h = self._conv_forward(inputs, states, name)
        i_r, i_z, i_n = symbol.SliceChannel(i2h, num_outputs=3, name="%s_i2h_slice" % name)
        h_r, h_z, h_n = symbol.SliceChannel(h2h, num_outputs=3, name="%s_h2h_slice" % name)
        reset_gate = symbol.Activation(i_r + h_r, act_type="sigmoid", name="%s_r_act" % name)
        update_gate = symbol.Activation(i_z + h_z, act_type="sigmoid", name="%s_z_act" % name)
        cand = self._get_activation(i_n + reset_gate * h_n, self._activation,
                                    name="%s_h_act" % name)
        next_h = symbol._internal._plus((1. - update_gate) * cand, update_gate * states[0],
                                        name="%sout" % name)
        return next_h, [next_h]
