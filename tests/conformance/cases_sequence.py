"""Conformance cases for SequenceMask, SequenceLast and SequenceReverse (MXNet 1.9.1)."""
from cases import case, V


def _seq(op, use_len, **kw):
    def build(mx):
        args = dict(use_sequence_length=use_len, **kw)
        if use_len:
            args["sequence_length"] = mx.sym.var("len")
        return getattr(mx.sym, op)(V(mx), name="seq", **args)
    return build


# (data shape, axis, batch size); lengths are integers in [1, T].
_shapes = [((5, 3, 2), 0, 3, 5), ((3, 4), 0, 4, 3), ((3, 5, 2, 2), 1, 3, 5)]
for op in ("SequenceMask", "SequenceLast", "SequenceReverse"):
    for i, (s, axis, b, t) in enumerate(_shapes):
        if op == "SequenceReverse" and axis != 0:
            continue
        kw = dict(axis=axis)
        if op == "SequenceMask":
            kw["value"] = -1.5
        case("%s_len%d" % (op, i), _seq(op, True, **kw), {"data": s, "len": (b,)}, [op],
             init={"len": ("int", 1, t + 1)}, no_grad=["len"])
        case("%s_full%d" % (op, i), _seq(op, False, **kw), {"data": s}, [op])
# int32 lengths
case("SequenceMask_int32len", _seq("SequenceMask", True, axis=1), {"data": (2, 4, 3), "len": (2,)},
     ["SequenceMask"], init={"len": ("int", 1, 5)}, dtypes={"len": "int32"}, no_grad=["len"])
