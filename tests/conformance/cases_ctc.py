"""Conformance cases for CTCLoss and its aliases (MXNet 1.9.1): padding-terminated labels with
the blank first or last, per-sample data and label lengths, integer labels."""
from cases import case, V, sym_op

# All label lengths 0 (every label_lengths entry 0) is left out: MXNet 1.9.1 then returns
# uninitialised memory; Loom gives -log p(all blanks).


def _ctc(op="CTCLoss", lengths=(), **kw):
    def build(mx):
        args = [V(mx), mx.sym.var("label")] + [mx.sym.var(n) for n in lengths]
        f = getattr(mx.sym.contrib, op[len("_contrib_"):]) if op.startswith("_contrib_") \
            else sym_op(mx, op)
        return f(*args, name="ctc", **kw)
    return build


# blank 'first': labels in [1, A), 0 pads (and ends the sequence where it appears).
case("CTCLoss_first", _ctc(), {"data": (6, 3, 5), "label": (3, 4)}, ["CTCLoss"],
     init={"label": ("int", 0, 5)}, no_grad=["label"])
# blank 'last': labels in [0, A-1), -1 pads; here every label is used.
case("CTCLoss_last", _ctc(blank_label="last"), {"data": (5, 2, 4), "label": (2, 2)},
     ["CTCLoss"], init={"label": ("int", 0, 3)}, no_grad=["label"])
case("CTCLoss_lengths",
     _ctc(lengths=("data_lengths", "label_lengths"), use_data_lengths=True,
          use_label_lengths=True),
     {"data": (6, 3, 5), "label": (3, 3), "data_lengths": (3,), "label_lengths": (3,)},
     ["CTCLoss"],
     init={"label": ("int", 1, 5), "data_lengths": ("int", 4, 7),
           "label_lengths": ("int", 1, 4)},
     no_grad=["label", "data_lengths", "label_lengths"])
case("CTCLoss_alias_ctc_loss_int32_label", _ctc("ctc_loss"), {"data": (4, 2, 6), "label": (2, 3)},
     ["CTCLoss"], init={"label": ("int", 1, 6)}, dtypes={"label": "int32"}, no_grad=["label"])
case("CTCLoss_alias_contrib_data_lengths",
     _ctc("_contrib_CTCLoss", lengths=("data_lengths",), use_data_lengths=True),
     {"data": (5, 2, 4), "label": (2, 2), "data_lengths": (2,)}, ["CTCLoss"],
     init={"label": ("int", 1, 4), "data_lengths": ("int", 3, 6)},
     no_grad=["label", "data_lengths"])
