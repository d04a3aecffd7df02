"""The linear-algebra operators (mx.sym.linalg.*, _linalg_*; ids start with la_). Inputs of
the factorizations are built in the graph so they are well posed (potrf of syrk(X) is
positive definite); most cases run in float64, as MXNet's own tests do, and a few in float32."""
from cases import case, V, MXNET_ADD_BUGS

F64 = "float64"

# MXNet 1.9.1's backward of these ops asks for a temporary workspace under req=add that
# their registrations never request: the add pass corrupts MXNet's heap (the oracle aborts
# at exit). Loom's req=add is checked by the C++ op sweep and tests/python/test_linalg.py.
NO_ADD_NOTE = ("MXNet 1.9.1 corrupts its heap in this op's req=add backward (workspace "
               "never requested); Loom's add is checked by the op sweep")

# MXNet 1.9.1's req=add gradients of these ops are not init + 2 * write (observed on the
# oracle; gemm's LaOpGemmBackward computes into the gradient array and then adds its
# unused workspace; gelqf/syevd/inverse give likewise inconsistent sums): Loom must give
# init + 2 * MXNet's write gradient.
for _op in ("_linalg_gemm", "_linalg_gemm2", "_linalg_gelqf", "_linalg_syevd", "_linalg_inverse"):
    MXNET_ADD_BUGS[_op] = "is not init + 2 * write (adds a workspace, not the new gradient)"


def la(mx, name):
    return getattr(mx.sym.linalg, name)


def f64(*names):
    return {n: F64 for n in names}


# --------------------------------------------------------------------------- gemm / gemm2
_gemm = [
    (dict(alpha=2.0, beta=0.5), (2, 3), (3, 4), (2, 4)),
    (dict(transpose_a=True, transpose_b=True, beta=-1.0), (2, 3, 2), (2, 4, 3), (2, 2, 4)),
    (dict(axis=0, alpha=1.5), (3, 2, 4), (4, 2, 2), (3, 2, 2)),
    (dict(transpose_b=True, axis=-3), (2, 3, 4), (5, 3, 4), (2, 3, 5)),
]
for i, (kw, sa, sb, sc) in enumerate(_gemm):
    case("la_gemm%d" % i, lambda mx, kw=kw: la(mx, "gemm")(V(mx, "a"), V(mx, "b"), V(mx, "c"),
                                                           name="g", **kw),
         {"a": sa, "b": sb, "c": sc}, ["_linalg_gemm"])
    kw2 = {k: v for k, v in kw.items() if k != "beta"}
    case("la_gemm2_%d" % i, lambda mx, kw=kw2: la(mx, "gemm2")(V(mx, "a"), V(mx, "b"), name="g", **kw),
         {"a": sa, "b": sb}, ["_linalg_gemm2"])
case("la_gemm_f64", lambda mx: la(mx, "gemm")(V(mx, "a"), V(mx, "b"), V(mx, "c"), alpha=4.,
                                              beta=7., transpose_a=True, name="g"),
     {"a": (3, 2, 3), "b": (3, 2, 4), "c": (3, 3, 4)}, ["_linalg_gemm"], dtypes=f64("a", "b", "c"))

# --------------------------------------------------------------------------- Cholesky family
for i, (lower, dt) in enumerate([(True, F64), (False, F64), (True, "float32")]):
    case("la_potrf%d" % i,
         lambda mx, lower=lower: la(mx, "potrf")(la(mx, "syrk")(V(mx), name="s"), lower=lower,
                                                 name="p"),
         {"data": (2, 3, 6)}, ["_linalg_potrf", "_linalg_syrk"], dtypes={"data": dt},
         tol=None if dt == F64 else (1e-3, 1e-4),
         note="" if dt == F64 else "float32 factorization: MXNet's LAPACK in float32, Loom in double")
for i, (lower, dt) in enumerate([(True, F64), (False, F64), (False, "float32")]):
    case("la_potri%d" % i, lambda mx, lower=lower: la(mx, "potri")(V(mx), lower=lower, name="p"),
         {"data": (2, 3, 3)}, ["_linalg_potri"], init={"data": ("uniform", 1.0, 2.0)},
         dtypes={"data": dt})
_tri = [
    dict(alpha=2.0),
    dict(transpose=True, rightside=True, lower=False),
    dict(rightside=True, alpha=-0.5),
    dict(transpose=True, lower=False, alpha=1.5),
]
for i, kw in enumerate(_tri):
    sb = (2, 4, 3) if kw.get("rightside") else (2, 3, 4)
    for op in ("trmm", "trsm"):
        case("la_%s%d" % (op, i),
             lambda mx, op=op, kw=kw: la(mx, op)(V(mx, "a"), V(mx, "b"), name="t", **kw),
             {"a": (2, 3, 3), "b": sb}, ["_linalg_" + op], init={"a": ("uniform", 1.0, 2.0)},
             dtypes=f64("a", "b") if i % 2 else None, add=False, note=NO_ADD_NOTE)
for i, (shape, dt) in enumerate([((3, 3), None), ((2, 2, 4, 4), F64)]):
    case("la_sumlogdiag%d" % i, lambda mx: la(mx, "sumlogdiag")(V(mx), name="s"), {"data": shape},
         ["_linalg_sumlogdiag"], init={"data": ("uniform", 0.5, 2.0)},
         dtypes={"data": dt} if dt else None)
for i, (shape, kw) in enumerate([((2, 3), dict(alpha=2.0)),
                                 ((2, 3, 4), dict(transpose=True, alpha=-0.5))]):
    case("la_syrk%d" % i, lambda mx, kw=kw: la(mx, "syrk")(V(mx), name="s", **kw),
         {"data": shape}, ["_linalg_syrk"])

# --------------------------------------------------------------------------- gelqf / syevd
for i, shape in enumerate([(3, 5), (2, 3, 3), (2, 1, 4)]):
    case("la_gelqf%d" % i, lambda mx: la(mx, "gelqf")(V(mx), name="q"), {"data": shape},
         ["_linalg_gelqf"], dtypes={"data": F64})
for i, shape in enumerate([(4, 4), (2, 3, 3), (2, 1, 1)]):
    case("la_syevd%d" % i, lambda mx: la(mx, "syevd")(V(mx), name="e"), {"data": shape},
         ["_linalg_syevd"], dtypes={"data": F64})

# --------------------------------------------------------------------------- inverse / det
for i, (shape, dt) in enumerate([((3, 3), F64), ((2, 4, 4), F64)]):
    for op in ("inverse", "det", "slogdet"):
        case("la_%s%d" % (op, i), lambda mx, op=op: la(mx, op)(V(mx), name="d"), {"data": shape},
             ["_linalg_" + op], dtypes={"data": dt},
             **(dict(add=False, note=NO_ADD_NOTE) if op != "inverse" else {}))
case("la_det_f32", lambda mx: la(mx, "det")(V(mx), name="d"), {"data": (2, 3, 3)},
     ["_linalg_det"], tol=(1e-3, 1e-4), add=False,
     note="float32 LU: MXNet's LAPACK in float32, Loom in double; " + NO_ADD_NOTE)

# --------------------------------------------------------------------------- diag / trian
for i, (shape, k) in enumerate([((3, 3), 0), ((2, 4, 4), 1), ((2, 4, 4), -2)]):
    case("la_extractdiag%d" % i, lambda mx, k=k: la(mx, "extractdiag")(V(mx), offset=k, name="x"),
         {"data": shape}, ["_linalg_extractdiag"])
for i, (shape, k) in enumerate([((3,), 0), ((2, 3), 1), ((2, 2, 2), -2)]):
    case("la_makediag%d" % i, lambda mx, k=k: la(mx, "makediag")(V(mx), offset=k, name="x"),
         {"data": shape}, ["_linalg_makediag"])
for i, (shape, k, lower) in enumerate([((3, 3), 0, True), ((2, 3, 3), 0, False),
                                       ((2, 4, 4), 1, True), ((4, 4), -2, True)]):
    case("la_extracttrian%d" % i,
         lambda mx, k=k, lower=lower: la(mx, "extracttrian")(V(mx), offset=k, lower=lower, name="x"),
         {"data": shape}, ["_linalg_extracttrian"])
for i, (shape, k, lower) in enumerate([((6,), 0, True), ((2, 6), 0, False),
                                       ((2, 3), 1, True), ((3,), -2, False)]):
    case("la_maketrian%d" % i,
         lambda mx, k=k, lower=lower: la(mx, "maketrian")(V(mx), offset=k, lower=lower, name="x"),
         {"data": shape}, ["_linalg_maketrian"])
