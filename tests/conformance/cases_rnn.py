"""Conformance cases for the fused RNN operator (MXNet 1.9.1): every mode, stacked and
bidirectional layers, final states as outputs; only the data shape is given, the flat
parameter vector and the states are inferred from it."""
from cases import case, V

_INIT = {"parameters": ("uniform", -0.6, 0.6), "state": ("normal", 0.5),
         "state_cell": ("normal", 0.5)}


def _rnn(**kw):
    def build(mx):
        args = dict(data=V(mx), parameters=mx.sym.var("parameters"), state=mx.sym.var("state"))
        if kw["mode"] == "lstm":
            args["state_cell"] = mx.sym.var("state_cell")
        return mx.sym.RNN(name="rnn", **dict(args, **kw))
    return build


# (id, data shape (T, N, C), parameters)
_rnn_cases = [
    ("lstm", (4, 3, 5), dict(mode="lstm", state_size=4, num_layers=1)),
    ("lstm_states", (3, 2, 4), dict(mode="lstm", state_size=3, num_layers=1,
                                    state_outputs=True)),
    ("lstm_bi2", (3, 2, 4), dict(mode="lstm", state_size=3, num_layers=2, bidirectional=True,
                                 state_outputs=True)),
    ("gru2", (4, 3, 3), dict(mode="gru", state_size=4, num_layers=2, state_outputs=True)),
    ("gru_bi", (3, 2, 5), dict(mode="gru", state_size=3, num_layers=1, bidirectional=True)),
    ("gru_bi2", (3, 2, 3), dict(mode="gru", state_size=2, num_layers=2, bidirectional=True,
                                state_outputs=True)),
    ("tanh2", (4, 2, 3), dict(mode="rnn_tanh", state_size=4, num_layers=2)),
    ("tanh_bi2", (3, 3, 4), dict(mode="rnn_tanh", state_size=3, num_layers=2,
                                 bidirectional=True, state_outputs=True)),
    ("relu2", (4, 2, 3), dict(mode="rnn_relu", state_size=4, num_layers=2,
                              state_outputs=True)),
    ("relu_bi", (3, 2, 4), dict(mode="rnn_relu", state_size=3, num_layers=1,
                                bidirectional=True)),
]
for cid, shape, kw in _rnn_cases:
    case("RNN_" + cid, _rnn(**kw), {"data": shape}, ["RNN"], init=dict(_INIT), tol=(1e-4, 1e-5))

# Dropout between layers is random in training; inference applies none.
case("RNN_lstm_dropout_infer", _rnn(mode="lstm", state_size=3, num_layers=3, p=0.5),
     {"data": (3, 2, 4)}, ["RNN"], init=dict(_INIT), train=False,
     note="p > 0: dropout masks are random in training, so inference only")

# float64 (MXNet's own test_RNN_float64 only checks that it runs). MXNet's float64 kernel
# (the non-oneDNN one) refuses req=add for data, so add is checked in float32 only.
case("RNN_gru_bi_float64", _rnn(mode="gru", state_size=3, num_layers=2, bidirectional=True,
                                state_outputs=True),
     {"data": (3, 2, 4)}, ["RNN"], init=dict(_INIT),
     dtypes={"data": "float64", "parameters": "float64", "state": "float64"}, add=False,
     note="MXNet 1.9.1's float64 RNN refuses req=add for data")
case("RNN_lstm_float64", _rnn(mode="lstm", state_size=2, num_layers=1, state_outputs=True),
     {"data": (2, 3, 3)}, ["RNN"], init=dict(_INIT),
     dtypes={"data": "float64", "parameters": "float64", "state": "float64",
             "state_cell": "float64"}, add=False,
     note="MXNet 1.9.1's float64 RNN refuses req=add for data")
