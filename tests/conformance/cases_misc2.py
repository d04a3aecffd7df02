"""nansum/nanprod, modulo, AMP casts and finiteness checks, sign/FTML/FTRL updates, and the
index/assign/contrib ops of the same batch (ids start with m2_)."""
from cases import case, V, sym_op

# --------------------------------------------------------------------------- nansum / nanprod
for op in ("nansum", "nanprod"):
    for i, (shape, kw) in enumerate([((2, 3, 4), dict()),
                                     ((2, 3, 4), dict(axis=(0, 2), keepdims=True)),
                                     ((3, 4), dict(axis=1, exclude=True))]):
        case("m2_%s%d" % (op, i), lambda mx, op=op, kw=kw: getattr(mx.sym, op)(V(mx), name="r", **kw),
             {"data": shape}, [op],
             init={"data": ("uniform", 0.5, 1.5)} if op == "nanprod" else None)

# --------------------------------------------------------------------------- modulo
case("m2_mod0", lambda mx: sym_op(mx, "_mod")(V(mx, "a"), V(mx, "b"), name="m"),
     {"a": (3, 4), "b": (3, 4)}, ["_mod"], init={"a": ("normal", 3.0), "b": ("absmin", 0.5)})
for i, (sa, sb) in enumerate([((3, 4), (3, 4)), ((2, 1, 4), (3, 1)), ((1, 3), (4, 2, 3))]):
    case("m2_bmod%d" % i, lambda mx: mx.sym.broadcast_mod(V(mx, "a"), V(mx, "b"), name="m"),
         {"a": sa, "b": sb}, ["broadcast_mod"],
         init={"a": ("normal", 3.0), "b": ("absmin", 0.5)})
case("m2_bmod_i32", lambda mx: mx.sym.broadcast_mod(V(mx, "a"), V(mx, "b"), name="m"),
     {"a": (3, 4), "b": (1, 4)}, ["broadcast_mod"],
     init={"a": ("int", -9, 10), "b": ("int", 1, 4)}, dtypes={"a": "int32", "b": "int32"},
     no_grad=["a", "b"], grads=False)
for i, s in enumerate([2.5, -1.5]):
    case("m2_mod_scalar%d" % i, lambda mx, s=s: sym_op(mx, "_mod_scalar")(V(mx), scalar=s, name="m"),
         {"data": (3, 4)}, ["_mod_scalar"], init={"data": ("normal", 3.0)})
    case("m2_rmod_scalar%d" % i,
         lambda mx, s=s: sym_op(mx, "_rmod_scalar")(V(mx), scalar=s * 3, name="m"),
         {"data": (3, 4)}, ["_rmod_scalar"], init={"data": ("absmin", 0.5)})

# --------------------------------------------------------------------------- AMP
# MXNet 1.9.1's CPU build (MKLDNN) refuses float16/float64 inputs to these ops, so the cases
# start from float32; the float16 output is checked by MXNet's test_cast_float32_to_float16.
case("m2_amp_cast0", lambda mx: mx.sym.amp_cast(V(mx), dtype="float16", name="c"),
     {"data": (3, 4)}, ["amp_cast"], tol=(1e-3, 1e-3))
case("m2_amp_cast1", lambda mx: mx.sym.amp_cast(V(mx), dtype="float32", name="c"),
     {"data": (3, 4)}, ["amp_cast"], add_ref="write2",
     note="MXNet 1.9.1's _backward_amp_cast overwrites instead of accumulating when the cast "
          "is an identity (in place)")
for i, narrow in enumerate([False, True]):
    case("m2_amp_multicast%d" % i, lambda mx, narrow=narrow: mx.sym.amp_multicast(
        V(mx, "a"), V(mx, "b"), num_outputs=2, cast_narrow=narrow, name="c"),
        {"a": (3, 4), "b": (2, 3)}, ["amp_multicast"], add_ref="write2",
        note="MXNet 1.9.1's _backward_amp_multicast overwrites instead of accumulating when "
             "the casts are identities (in place)")
case("m2_all_finite", lambda mx: mx.sym.all_finite(V(mx), name="f"), {"data": (3, 4)},
     ["all_finite"], no_grad=["data"], grads=False)
case("m2_multi_all_finite", lambda mx: mx.sym.multi_all_finite(
    V(mx, "a"), V(mx, "b"), num_arrays=2, name="f"), {"a": (3, 4), "b": (5,)},
    ["multi_all_finite"], no_grad=["a", "b"], grads=False)

# --------------------------------------------------------------------------- update ops
# MXNet 1.9.1 cannot compose its update ops symbolically ("Not enough argument to call
# operator"), so they are compared imperatively, step by step, in cases.UPDATES' format
# (op, kwargs, state names); cases.py adds these to UPDATES.
UPDATES_MISC2 = [
    ("signsgd_update", dict(lr=0.1, wd=0.01), []),
    ("signsgd_update", dict(lr=0.05, wd=0.0, rescale_grad=0.5, clip_gradient=0.3), []),
    ("signum_update", dict(lr=0.1, momentum=0.9), ["mom"]),
    ("signum_update", dict(lr=0.05, momentum=0.8, wd=0.02, wd_lh=0.01, rescale_grad=0.5,
                           clip_gradient=0.4), ["mom"]),
    ("ftml_update", dict(lr=0.1, t=1), ["d", "var", "z"]),
    ("ftml_update", dict(lr=0.05, t=3, beta1=0.5, wd=0.01, clip_grad=0.5, rescale_grad=0.5),
     ["d", "var", "z"]),
    ("ftrl_update", dict(lr=0.1), ["z", "n"]),
    ("ftrl_update", dict(lr=0.05, lamda1=0.05, beta=0.5, wd=0.01, rescale_grad=0.5,
                         clip_gradient=0.4), ["z", "n"]),
]
