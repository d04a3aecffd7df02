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

# --------------------------------------------------------------------------- N-d indexing
# Non-negative indices: MXNet 1.9.1's symbolic gather_nd crashes on negative ones (its
# imperative path wraps them, as Loom does: MXNet's test_gather_nd_check_bound).
case("m2_gather_nd0", lambda mx: mx.sym.gather_nd(V(mx), V(mx, "idx"), name="g"),
     {"data": (3, 4), "idx": (2, 5)}, ["gather_nd"], init={"idx": ("int", 0, 3)},
     no_grad=["idx"])
case("m2_gather_nd1", lambda mx: mx.sym.gather_nd(V(mx), V(mx, "idx"), name="g"),
     {"data": (3, 4, 2), "idx": (1, 2, 2)}, ["gather_nd"], init={"idx": ("int", 0, 3)},
     dtypes={"idx": "int32"}, no_grad=["idx"])
# Distinct indices: with duplicates the kept value is unspecified (MXNet's too).
# (indices [[0, 1, 2]] from index_array, so they are distinct).
case("m2_scatter_nd0", lambda mx: mx.sym.scatter_nd(
    V(mx), mx.sym.transpose(mx.sym.contrib.index_array(V(mx, "pos"))), shape=(4, 2), name="s"),
    {"data": (3, 2), "pos": (3,)}, ["scatter_nd", "_contrib_index_array", "transpose"],
    no_grad=["pos"])
case("m2_ravel", lambda mx: mx.sym.ravel_multi_index(V(mx), shape=(4, 5), name="r"),
     {"data": (2, 6)}, ["_ravel_multi_index"], init={"data": ("int", 0, 4)}, no_grad=["data"],
     grads=False)
case("m2_unravel", lambda mx: mx.sym.unravel_index(V(mx), shape=(-1, 3, 4), name="r"),
     {"data": (7,)}, ["_unravel_index"], init={"data": ("int", 0, 40)}, no_grad=["data"],
     grads=False)

# --------------------------------------------------------------------------- assignment
# MXNet 1.9.1 registers no gradient for these (Loom's is checked by the C++ sweep).
case("m2_slice_assign", lambda mx: sym_op(mx, "_slice_assign")(
    V(mx, "lhs"), V(mx, "rhs"), begin=(0, 1), end=(2, 4), step=(1, 2), name="a"),
    {"lhs": (3, 5), "rhs": (2, 2)}, ["_slice_assign"], no_grad=["lhs", "rhs"], grads=False)
case("m2_slice_assign_scalar", lambda mx: sym_op(mx, "_slice_assign_scalar")(
    V(mx), scalar=2.5, begin=(None, -2), end=(None, None), name="a"),
    {"data": (3, 5)}, ["_slice_assign_scalar"], no_grad=["data"], grads=False)
case("m2_choose_element", lambda mx: mx.sym.choose_element_0index(V(mx), V(mx, "idx"), name="c"),
     {"data": (4, 5), "idx": (4,)}, ["pick"], init={"idx": ("int", 0, 5)}, no_grad=["idx"])

# --------------------------------------------------------------------------- misc
# Not compared: _square_sum. MXNet 1.9.1 implements it only for row_sparse arrays, which its
# executor will not take for a graph bound with dense arrays ("Operator not implemented");
# the C++ sweep checks Loom's (dense) kernel and gradient against a reference.
_SPLIT_NOTE = "MXNet 1.9.1's _split_v2 backward overwrites instead of accumulating under req=add"
case("m2_split_v2_idx", lambda mx: sym_op(mx, "_split_v2")(
    V(mx), indices=(0, 1, 3), axis=1, name="s"), {"data": (2, 5, 3)}, ["_split_v2"],
    add_ref="write2", note=_SPLIT_NOTE)
case("m2_split_v2_sections", lambda mx: sym_op(mx, "_split_v2")(
    V(mx), indices=(), axis=-1, sections=2, name="s"), {"data": (3, 4)}, ["_split_v2"],
    add_ref="write2", note=_SPLIT_NOTE)
case("m2_split_v2_squeeze", lambda mx: sym_op(mx, "_split_v2")(
    V(mx), indices=(0, 1, 2), axis=0, squeeze_axis=True, name="s"), {"data": (3, 2)},
    ["_split_v2"], add_ref="write2", note=_SPLIT_NOTE)
case("m2_histogram_cnt", lambda mx: sym_op(mx, "_histogram")(
    V(mx), bin_cnt=5, range=(-2.0, 2.0), name="h"), {"data": (4, 6)}, ["_histogram"],
    no_grad=["data"], grads=False)
# Edges 0, 1, 2, 3 (index_array of a (4,) array, as float32).
case("m2_histogram_bins", lambda mx: sym_op(mx, "_histogram")(
    V(mx), mx.sym.Cast(mx.sym.reshape(mx.sym.contrib.index_array(V(mx, "pos")), shape=(4,)),
                       dtype="float32"), name="h"),
    {"data": (4, 6), "pos": (4,)}, ["_histogram"], init={"data": ("uniform", -0.5, 3.5)},
    no_grad=["data", "pos"], grads=False)

# --------------------------------------------------------------------------- contrib / image
case("m2_div_sqrt_dim", lambda mx: mx.sym.contrib.div_sqrt_dim(V(mx), name="d"),
     {"data": (2, 3, 8)}, ["_contrib_div_sqrt_dim"])
case("m2_quadratic", lambda mx: mx.sym.contrib.quadratic(V(mx), a=0.5, b=-1.5, c=2.0, name="q"),
     {"data": (3, 4)}, ["_contrib_quadratic"])
for i, kw in enumerate([dict(), dict(axes=(-1, 0))]):
    case("m2_index_array%d" % i, lambda mx, kw=kw: mx.sym.contrib.index_array(V(mx), name="i", **kw),
         {"data": (2, 3, 4)}, ["_contrib_index_array"], no_grad=["data"], grads=False)
for i, (rtol, atol) in enumerate([(1e-5, 1e-8), (10.0, 10.0)]):
    case("m2_allclose%d" % i, lambda mx, rtol=rtol, atol=atol: mx.sym.contrib.allclose(
        V(mx, "a"), V(mx, "b"), rtol=rtol, atol=atol, name="c"), {"a": (3, 4), "b": (3, 4)},
        ["_contrib_allclose"], no_grad=["a", "b"], grads=False, outputs=[],
        note="MXNet's output is 0-d, Loom's (1,) (legacy shapes have no 0-d arrays); the "
             "value is checked by MXNet's test_allclose_function and the C++ sweep")
case("m2_image_to_tensor", lambda mx: mx.sym.image.to_tensor(V(mx), name="t"),
     {"data": (2, 4, 5, 3)}, ["_image_to_tensor"], init={"data": ("uniform", 0, 255)},
     no_grad=["data"], grads=False)
for i, (shape, kw) in enumerate([((3, 4, 5), dict(mean=(0.0, 1.0, 2.0), std=(3.0, 2.0, 1.0))),
                                 ((2, 1, 3, 3), dict(mean=0.5, std=2.0))]):
    case("m2_image_normalize%d" % i, lambda mx, kw=kw: mx.sym.image.normalize(V(mx), name="n", **kw),
         {"data": shape}, ["_image_normalize"])

# --------------------------------------------------------------------------- erfinv, khatri_rao
case("m2_erfinv", lambda mx: mx.sym.erfinv(V(mx), name="e"), {"data": (3, 4)}, ["erfinv"],
     init={"data": ("uniform", -0.9, 0.9)})
# MXNet 1.9.1 registers no gradient for khatri_rao: forward only (the sweep checks Loom's).
for i, shapes in enumerate([((3, 2), (4, 2)), ((3, 2), (1, 2), (2, 2))]):
    case("m2_khatri_rao%d" % i, lambda mx, n=len(shapes): mx.sym.khatri_rao(
        *[V(mx, "m%d" % k) for k in range(n)], name="k"),
        {"m%d" % k: s for k, s in enumerate(shapes)}, ["khatri_rao"],
        no_grad=["m%d" % k for k in range(len(shapes))], grads=False)

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
    ("mp_sgd_update", dict(lr=0.1, wd=0.01, clip_gradient=0.5), ["weight32"]),
    ("mp_sgd_mom_update", dict(lr=0.05, momentum=0.9, wd=0.01, rescale_grad=0.5),
     ["mom", "weight32"]),
]
