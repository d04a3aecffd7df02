"""Conformance cases for the range creation ops: _arange, _linspace, _eye, _full,
_contrib_arange_like (MXNet 1.9.1). The no-input ops are multiplied with a variable so the
graph has an argument and a gradient to compare."""
from cases import case, V, sym_op  # noqa: F401


def _times(mx, s, shape_name="data"):
    return mx.sym.broadcast_mul(V(mx, shape_name), s, name="mul")


for i, kw in enumerate([dict(start=10), dict(start=1.3, stop=8.5, step=1.3, repeat=2),
                        dict(start=5, stop=-5, step=-1.5)]):
    case("range_arange%d" % i,
         lambda mx, kw=kw: _times(mx, sym_op(mx, "_arange")(name="ar", **kw)),
         {"data": (2, 1)}, ["_arange"])
case("range_arange_infer",
     lambda mx: mx.sym.elemwise_add(sym_op(mx, "_arange")(start=2, infer_range=True, step=0.5,
                                                           name="ar"), V(mx), name="add"),
     {"data": (6,)}, ["_arange"])
for i, kw in enumerate([dict(start=0, stop=1, num=5), dict(start=-2, stop=3, num=4,
                                                           endpoint=False)]):
    case("range_linspace%d" % i,
         lambda mx, kw=kw: _times(mx, sym_op(mx, "_linspace")(name="ls", **kw)),
         {"data": (2, 1)}, ["_linspace"])
for i, kw in enumerate([dict(N=3), dict(N=3, M=5, k=2), dict(N=4, M=3, k=-1)]):
    case("range_eye%d" % i,
         lambda mx, kw=kw: _times(mx, sym_op(mx, "_eye")(name="eye", **kw)),
         {"data": (1, 1)}, ["_eye"])
case("range_full",
     lambda mx: _times(mx, sym_op(mx, "_full")(shape=(2, 3), value=2.5, name="full")),
     {"data": (2, 1)}, ["_full"])
case("range_arange_like",
     lambda mx: _times(mx, mx.sym.contrib.arange_like(V(mx, "x"), start=1, step=0.5,
                                                      repeat=2, axis=-1, name="al")),
     {"data": (3, 1), "x": (3, 4)}, ["_contrib_arange_like"])
case("range_arange_like_noaxis",
     lambda mx: mx.sym.elemwise_mul(V(mx), mx.sym.contrib.arange_like(V(mx, "x"), name="al"),
                                    name="mul"),
     {"data": (2, 3), "x": (2, 3)}, ["_contrib_arange_like"])
