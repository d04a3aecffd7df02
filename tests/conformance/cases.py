"""Operator conformance cases, shared by the MXNet side (oracle_gen.py, run by the MXNet 1.9.1
interpreter) and the Loom side (test_*.py): every builder takes the framework module `mx`
(mxnet or loom) and returns a Symbol, so the same source builds the same graph in both.

Nothing here imports mxnet or loom.

Case fields:
  build(mx)    -> Symbol; ops named explicitly or auto-named under a fresh NameManager.
  shapes       input shapes for infer_shape (other arguments are inferred).
  init         {arg name: spec} value generators (see oracle_gen.random_array); default N(0,1).
  dtypes       {arg name: numpy dtype name} for non-float32 inputs.
  no_grad      argument names whose grad_req is null (labels, indices, conditions).
  head_grad    False: loss heads, backward() without head gradients.
  train        False: compare inference only (random ops such as Dropout).
  add          False: skip the grad_req='add' comparison.
  add_ref      "mxnet": Loom's add result must equal MXNet's add result.
               "write2": MXNet 1.9.1 gets req=add wrong for this op (see note); Loom must give
               init + 2 * (MXNet's write gradient), i.e. what add means.
  tol          (rtol, atol), default (1e-4, 1e-5); `note` says why when loosened.
"""
import zlib

DEFAULT_TOL = (1e-4, 1e-5)


class Case:
    def __init__(self, cid, build, shapes, init=None, dtypes=None, no_grad=(), head_grad=True,
                 train=True, add=True, add_ref="mxnet", tol=None, note="", ops=(),
                 outputs=None, grads=True, xfail=None):
        self.cid, self.build, self.shapes = cid, build, shapes
        self.init = init or {}
        self.dtypes = dtypes or {}
        self.no_grad = set(no_grad)
        self.head_grad, self.train, self.add, self.add_ref = head_grad, train, add, add_ref
        self.tol = tol or DEFAULT_TOL
        self.note = note
        self.ops = set(ops)
        self.outputs = outputs  # indices of the outputs compared (None: all)
        self.grads = grads      # False: MXNet's gradient is wrong; Loom's is checked elsewhere
        self.xfail = xfail      # a known Loom limitation (reason), the test is xfail(strict)

    @property
    def seed(self):
        return zlib.crc32(self.cid.encode()) & 0x7FFFFFFF

    def meta(self):
        return {"cid": self.cid, "no_grad": sorted(self.no_grad), "head_grad": self.head_grad,
                "train": self.train, "add": self.add, "add_ref": self.add_ref,
                "tol": list(self.tol), "note": self.note, "ops": sorted(self.ops),
                "outputs_compared": self.outputs, "grads": self.grads,
                "shapes": {k: list(v) for k, v in self.shapes.items()}}


CASES = []

# Ops whose req=add (kAddTo) backward is wrong in MXNet 1.9.1 (verified by the generator's
# own data: MXNet's add result is neither init + 2*write nor anything consistent). Loom
# implements add as documented (spec 3.1): the gradient array gains exactly the write
# result; such cases compare Loom's add with init + 2 * MXNet's write gradient.
MXNET_ADD_BUGS = {
    "SoftmaxOutput": "overwrites instead of accumulating (apache/mxnet#3751)",
    "Crop": "overwrites instead of accumulating (apache/mxnet#3751)",
    "clip": "overwrites instead of accumulating",
    "mean": "scales the accumulated array, not the new gradient (grad = (old + g) / n)",
    "elemwise_add": "adds the head gradient twice into the second input's gradient when both "
                    "inputs are variables",
    "LinearRegressionOutput": "applies the scaling step as a second accumulate (spec 4.2)",
    "LogisticRegressionOutput": "applies the scaling step as a second accumulate (spec 4.2)",
    "MAERegressionOutput": "applies the scaling step as a second accumulate (spec 4.2)",
    "SVMOutput": "writes its gradient regardless of req (spec 4.3)",
}


def case(cid, build, shapes, ops, **kw):
    bugs = [o for o in ops if o in MXNET_ADD_BUGS]
    if bugs and kw.get("add_ref", "mxnet") == "mxnet" and cid != "chain_mlp":
        kw["add_ref"] = "write2"
        kw["note"] = "; ".join([kw.get("note", "")] * bool(kw.get("note")) + [
            "MXNet 1.9.1 %s req=add %s" % (o, MXNET_ADD_BUGS[o]) for o in bugs])
    CASES.append(Case(cid, build, shapes, ops=ops, **kw))


def V(mx, name="data"):
    return mx.sym.var(name)


def sym_op(mx, name):
    """mx.sym.<name>, or mx.sym._internal.<name> for MXNet's underscore ops."""
    f = getattr(mx.sym, name, None)
    return f if f is not None else getattr(mx.sym._internal, name)


# --------------------------------------------------------------------------- Convolution
_conv = [
    # (data shape, kwargs)
    ((2, 4, 9, 9), dict(kernel=(3, 3), num_filter=6)),
    ((2, 4, 9, 9), dict(kernel=(1, 1), num_filter=5, no_bias=True)),
    ((2, 4, 9, 9), dict(kernel=(3, 3), num_filter=6, stride=(2, 2), pad=(1, 1))),
    ((2, 4, 10, 9), dict(kernel=(2, 3), num_filter=3, stride=(2, 1), pad=(0, 1))),
    ((2, 4, 11, 11), dict(kernel=(3, 3), num_filter=4, dilate=(2, 2), pad=(2, 2))),
    ((2, 4, 11, 11), dict(kernel=(3, 3), num_filter=4, dilate=(2, 3), stride=(2, 2))),
    ((2, 4, 9, 9), dict(kernel=(3, 3), num_filter=6, num_group=2, pad=(1, 1))),
    ((2, 8, 9, 9), dict(kernel=(3, 3), num_filter=8, num_group=8, pad=(1, 1))),  # depthwise
    ((2, 8, 9, 9), dict(kernel=(3, 3), num_filter=16, num_group=4, stride=(2, 2), no_bias=True)),
    ((1, 3, 16, 16), dict(kernel=(7, 7), num_filter=8, stride=(2, 2), pad=(3, 3))),
    ((2, 4, 12), dict(kernel=(3,), num_filter=5, stride=(2,), pad=(1,))),  # 1-D
    ((2, 4, 12), dict(kernel=(3,), num_filter=4, dilate=(2,), num_group=2)),
    ((1, 2, 6, 7, 7), dict(kernel=(3, 3, 3), num_filter=3, pad=(1, 1, 1))),  # 3-D
    ((1, 4, 6, 7, 7), dict(kernel=(2, 3, 3), num_filter=4, stride=(2, 2, 2), num_group=2)),
]
for i, (s, kw) in enumerate(_conv):
    case("conv%d" % i, lambda mx, kw=kw: mx.sym.Convolution(V(mx), name="conv", **kw),
         {"data": s}, ["Convolution"])

# --------------------------------------------------------------------------- Deconvolution
_deconv = [
    ((2, 4, 5, 5), dict(kernel=(3, 3), num_filter=3)),
    ((2, 4, 5, 5), dict(kernel=(3, 3), num_filter=3, no_bias=False)),
    ((2, 4, 5, 5), dict(kernel=(4, 4), num_filter=6, stride=(2, 2), pad=(1, 1))),
    ((2, 4, 5, 5), dict(kernel=(3, 3), num_filter=4, stride=(2, 2), pad=(1, 1), adj=(1, 1))),
    ((2, 4, 5, 6), dict(kernel=(3, 2), num_filter=4, stride=(2, 3), dilate=(2, 1))),
    ((2, 4, 5, 5), dict(kernel=(3, 3), num_filter=6, num_group=2, stride=(2, 2))),
    ((2, 4, 5, 5), dict(kernel=(4, 4), num_filter=3, stride=(2, 2), pad=(1, 1),
                        target_shape=(10, 10))),
    ((2, 4, 7), dict(kernel=(3,), num_filter=3, stride=(2,), pad=(1,))),
]
for i, (s, kw) in enumerate(_deconv):
    case("deconv%d" % i, lambda mx, kw=kw: mx.sym.Deconvolution(V(mx), name="deconv", **kw),
         {"data": s}, ["Deconvolution"])

# --------------------------------------------------------------------------- Pooling
_pool = []
for pt in ("max", "avg", "sum"):
    for conv in ("valid", "full"):
        _pool.append(((2, 3, 9, 8), dict(kernel=(3, 3), stride=(2, 2), pool_type=pt,
                                         pooling_convention=conv)))
        _pool.append(((2, 3, 9, 9), dict(kernel=(3, 2), stride=(2, 2), pad=(1, 1),
                                         pool_type=pt, pooling_convention=conv)))
    _pool.append(((2, 3, 7, 6), dict(kernel=(1, 1), global_pool=True, pool_type=pt)))
    _pool.append(((2, 3, 7, 6), dict(kernel=(3, 3), global_pool=True, pool_type=pt,
                                     pooling_convention="full")))
    _pool.append(((2, 3, 10), dict(kernel=(3,), stride=(2,), pad=(1,), pool_type=pt)))
for cip in (True, False):
    _pool.append(((2, 3, 8, 8), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                                     count_include_pad=cip)))
    _pool.append(((2, 3, 9, 9), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                                     pooling_convention="full", count_include_pad=cip)))
_pool.append(((1, 2, 5, 6, 6), dict(kernel=(2, 2, 2), stride=(2, 2, 2), pool_type="max")))
_pool.append(((1, 2, 5, 6, 6), dict(kernel=(3, 3, 3), stride=(2, 2, 2), pad=(1, 1, 1),
                                    pool_type="avg")))
for i, (s, kw) in enumerate(_pool):
    case("pool%d_%s" % (i, kw["pool_type"]),
         lambda mx, kw=kw: mx.sym.Pooling(V(mx), name="pool", **kw), {"data": s}, ["Pooling"])

# --------------------------------------------------------------------------- activations
for act in ("relu", "sigmoid", "tanh", "softrelu", "softsign"):
    case("act_" + act, lambda mx, a=act: mx.sym.Activation(V(mx), act_type=a, name="act"),
         {"data": (3, 4, 5)}, ["Activation"])
_SELU_NOTE = ("MXNet 1.9.1's selu gradient for x <= 0 is lambda*(y + alpha) (its selu_grad "
              "applied to the scaled output) instead of y + lambda*alpha = lambda*alpha*exp(x); "
              "forward compared here, Loom's gradient checked numerically in test_7")
for act, kw in (("leaky", {}), ("leaky", {"slope": 0.1}), ("elu", {}), ("elu", {"slope": 0.7}),
                ("selu", {}), ("gelu", {}), ("prelu", {})):
    cid = "leaky_%s_%s" % (act, kw.get("slope", "def"))
    case(cid, lambda mx, a=act, kw=kw: mx.sym.LeakyReLU(V(mx), act_type=a, name="lrelu", **kw),
         {"data": (3, 4, 5, 2)}, ["LeakyReLU"],
         init={"lrelu_gamma": ("uniform", 0.05, 0.5)},
         grads=act != "selu", note=_SELU_NOTE if act == "selu" else "")
case("leaky_rrelu_inference", lambda mx: mx.sym.LeakyReLU(V(mx), act_type="rrelu", name="lrelu"),
     {"data": (3, 4, 5)}, ["LeakyReLU"], train=False, outputs=[0],
     note="rrelu draws random slopes in training; inference uses (lower+upper)/2; the hidden "
          "mask output is uninitialised memory in MXNet's inference and not compared")
_SA_NOTE = ("MXNet's instance mode softmaxes over the last axis (mshadow FlatTo2D) but its "
            "backward uses the channel formula for >2-d data, which is not the gradient of "
            "that forward; forward compared, Loom's gradient checked numerically in test_7")
for mode, s in (("instance", (2, 5, 3, 4)), ("channel", (2, 5, 3, 4)), ("instance", (3, 7)),
                ("channel", (2, 4, 6))):
    case("softmaxact_%s_%dd" % (mode, len(s)),
         lambda mx, m=mode: mx.sym.SoftmaxActivation(V(mx), mode=m, name="sa"),
         {"data": s}, ["SoftmaxActivation"], grads=not (mode == "instance" and len(s) > 2),
         note=_SA_NOTE if mode == "instance" and len(s) > 2 else "")

# --------------------------------------------------------------------------- BatchNorm
_bn = [
    ((4, 3, 5, 5), {}),
    ((4, 3, 5, 5), dict(fix_gamma=False)),
    ((4, 3, 5, 5), dict(fix_gamma=False, use_global_stats=True)),
    ((4, 3, 5, 5), dict(fix_gamma=True, use_global_stats=True)),
    ((4, 3, 5, 5), dict(fix_gamma=False, momentum=0.7, eps=1e-5)),
    ((4, 5, 3), dict(fix_gamma=False, axis=-1)),
    ((4, 3, 5, 6), dict(fix_gamma=False, axis=3)),
    ((4, 3, 5, 6), dict(fix_gamma=False, axis=2, use_global_stats=True)),
    ((6, 7), dict(fix_gamma=False)),
    ((4, 3, 2, 3, 3), dict(fix_gamma=False)),
]
for i, (s, kw) in enumerate(_bn):
    fixed = kw.get("fix_gamma", True)
    case("bn%d" % i, lambda mx, kw=kw: mx.sym.BatchNorm(V(mx), name="bn", **kw), {"data": s},
         ["BatchNorm"], init={"bn_gamma": ("uniform", 0.5, 1.5)},
         add_ref="write2" if fixed else "mxnet",
         note="MXNet 1.9.1 BatchNorm with fix_gamma writes 0 into gamma's gradient under req=add "
              "(the computed gradient is 0, so add must leave the array unchanged)"
         if fixed else "")

# --------------------------------------------------------------------------- FullyConnected
for i, (s, kw) in enumerate([((4, 7), dict(num_hidden=5)),
                             ((4, 3, 2, 2), dict(num_hidden=6)),
                             ((4, 7), dict(num_hidden=5, no_bias=True)),
                             ((4, 3, 7), dict(num_hidden=5, flatten=False)),
                             ((2, 3, 2, 7), dict(num_hidden=4, flatten=False, no_bias=True))]):
    case("fc%d" % i, lambda mx, kw=kw: mx.sym.FullyConnected(V(mx), name="fc", **kw),
         {"data": s}, ["FullyConnected"])

# --------------------------------------------------------------------------- softmax family
for op in ("softmax", "log_softmax"):
    for axis in (-1, 0, 1):
        for t in (None, 2.5):
            kw = {"axis": axis}
            if t is not None:
                kw["temperature"] = t
            case("%s_ax%d_t%s" % (op, axis, t),
                 lambda mx, op=op, kw=kw: getattr(mx.sym, op)(V(mx), name="sm", **kw),
                 {"data": (3, 4, 5)}, [op])

# --------------------------------------------------------------------------- LRN
for i, kw in enumerate([dict(nsize=3), dict(nsize=5, alpha=1e-3, beta=0.6, knorm=1.5),
                        dict(nsize=1, alpha=0.5, beta=0.75, knorm=2.0)]):
    case("lrn%d" % i, lambda mx, kw=kw: mx.sym.LRN(V(mx), name="lrn", **kw),
         {"data": (2, 6, 4, 4)}, ["LRN"])

# --------------------------------------------------------------------------- shape ops
_reshape = [
    ((2, 3, 4), dict(shape=(6, 4))),
    ((2, 3, 4), dict(shape=(0, -1))),
    ((2, 3, 4), dict(shape=(-2,))),
    ((2, 3, 4, 5), dict(shape=(0, 0, -3))),
    ((2, 3, 4, 5), dict(shape=(-3, -2))),
    ((2, 6, 4), dict(shape=(0, -4, 2, -1, 0))),
    ((2, 6, 4), dict(shape=(-4, 1, 2, -2))),
    ((2, 3, 4), dict(shape=(-1, 0), reverse=True)),
    ((10, 5, 4), dict(shape=(-1, 0), reverse=False)),
    ((2, 3, 4, 5), dict(shape=(0, -1, 0), reverse=True)),
    ((2, 3, 4), dict(shape=(4, 0, -1), reverse=True)),
]
for i, (s, kw) in enumerate(_reshape):
    case("reshape%d" % i, lambda mx, kw=kw: mx.sym.Reshape(V(mx), name="reshape", **kw),
         {"data": s}, ["Reshape"])
case("flatten4d", lambda mx: mx.sym.Flatten(V(mx), name="flat"), {"data": (2, 3, 4, 5)},
     ["Flatten"])
case("flatten2d", lambda mx: mx.sym.Flatten(V(mx), name="flat"), {"data": (2, 3)}, ["Flatten"])
for dim in (0, 1, 2):
    case("concat_dim%d" % dim,
         lambda mx, d=dim: mx.sym.Concat(V(mx, "a"), V(mx, "b"), V(mx, "c"), dim=d,
                                         name="concat"),
         {"a": (2, 3, 4), "b": [(3, 3, 4), (2, 2, 4), (2, 3, 5)][dim],
          "c": (2, 3, 4)}, ["Concat"])
for i, kw in enumerate([dict(num_outputs=3), dict(num_outputs=2, axis=2),
                        dict(num_outputs=3, axis=1, squeeze_axis=True),
                        dict(num_outputs=4, axis=0, squeeze_axis=True),
                        dict(num_outputs=2, axis=-1)]):
    case("slicechannel%d" % i,
         lambda mx, kw=kw: mx.sym.SliceChannel(V(mx), name="split", **kw),
         {"data": (4, 3, 6)}, ["SliceChannel"])
for i, kw in enumerate([dict(axis=1, begin=1, end=3), dict(axis=0, begin=0, end=None),
                        dict(axis=-1, begin=-3, end=-1), dict(axis=2, begin=2, end=None)]):
    case("slice_axis%d" % i, lambda mx, kw=kw: mx.sym.slice_axis(V(mx), name="sl", **kw),
         {"data": (3, 4, 5)}, ["slice_axis"])
for ax in (0, 1, 3, -1, -4):
    case("expand_dims%d" % ax, lambda mx, a=ax: mx.sym.expand_dims(V(mx), axis=a, name="ed"),
         {"data": (3, 4, 5)}, ["expand_dims"])
for i, axes in enumerate([None, (1, 0, 2), (2, 0, 1), (0, 2, 3, 1)]):
    s = (2, 3, 4, 5) if axes is not None and len(axes) == 4 else (2, 3, 4)
    case("transpose%d" % i,
         lambda mx, axes=axes: (mx.sym.transpose(V(mx), name="tr") if axes is None else
                                mx.sym.transpose(V(mx), axes=axes, name="tr")),
         {"data": s}, ["transpose"])

# --------------------------------------------------------------------------- binary ops
_bshapes = [((2, 3, 4), (2, 3, 4)), ((2, 1, 4), (1, 3, 4)), ((2, 3, 4), (1, 1, 1)),
            ((3, 1), (1, 5)), ((1, 3, 1, 2), (4, 1, 5, 1))]
for op in ("add", "sub", "mul", "div", "power", "maximum", "minimum"):
    for i, (sa, sb) in enumerate(_bshapes):
        init = {}
        if op == "power":
            init = {"a": ("uniform", 0.5, 2.0), "b": ("uniform", -1.5, 1.5)}
        elif op == "div":
            init = {"b": ("absmin", 0.5)}
        case("broadcast_%s%d" % (op, i),
             lambda mx, op=op: getattr(mx.sym, "broadcast_" + op)(V(mx, "a"), V(mx, "b"),
                                                                name="bc"),
             {"a": sa, "b": sb}, ["broadcast_" + op], init=init)
for op, fn in (("elemwise_add", "elemwise_add"), ("elemwise_sub", "elemwise_sub"),
               ("elemwise_mul", "elemwise_mul"), ("elemwise_div", "elemwise_div"),
               ("_maximum", "_maximum"), ("_minimum", "_minimum"), ("_power", "_power")):
    init = {"b": ("absmin", 0.5)} if op == "elemwise_div" else {}
    if op == "_power":
        init = {"a": ("uniform", 0.5, 2.0), "b": ("uniform", -1.5, 1.5)}
    case(op, lambda mx, fn=fn: sym_op(mx, fn)(V(mx, "a"), V(mx, "b"), name="ew"),
         {"a": (3, 4, 2), "b": (3, 4, 2)}, [op], init=init)
case("add_n", lambda mx: mx.sym.add_n(V(mx, "a"), V(mx, "b"), V(mx, "c"), name="addn"),
     {"a": (3, 4), "b": (3, 4), "c": (3, 4)}, ["add_n"])
for op, scalar, init in (("_plus_scalar", 1.5, None), ("_minus_scalar", 0.7, None),
                         ("_rminus_scalar", 0.7, None), ("_mul_scalar", -2.5, None),
                         ("_div_scalar", 3.0, None), ("_rdiv_scalar", 2.0, ("absmin", 0.5)),
                         ("_maximum_scalar", 0.2, None), ("_minimum_scalar", -0.1, None),
                         ("_power_scalar", 2.0, None), ("_power_scalar", 0.5,
                                                        ("uniform", 0.2, 2.0)),
                         ("_rpower_scalar", 1.7, None)):
    case("%s_%s" % (op, scalar),
         lambda mx, o=op, s=scalar: sym_op(mx, o)(V(mx), scalar=s, name="sc"),
         {"data": (3, 4, 2)}, [op], init={"data": init} if init else None)

for i, sigma in enumerate((1.0, 3.0)):
    case("smooth_l1_%d" % i, lambda mx, s=sigma: mx.sym.smooth_l1(V(mx), scalar=s, name="sl1"),
         {"data": (4, 5)}, ["smooth_l1"], init={"data": ("normal", 1.5)})

# --------------------------------------------------------------------------- unary math
_unary = {"abs": None, "ceil": None, "floor": None, "round": None, "sign": None,
          "exp": None, "expm1": None, "log": ("uniform", 0.2, 3.0),
          "log1p": ("uniform", -0.5, 3.0), "negative": None, "reciprocal": ("absmin", 0.5),
          "relu": None, "rsqrt": ("uniform", 0.2, 3.0), "sigmoid": None, "softsign": None,
          "sqrt": ("uniform", 0.2, 3.0), "square": None, "tanh": None, "_copy": None,
          "BlockGrad": None, "make_loss": None, "ones_like": None, "zeros_like": None,
          "rint": ("normal", 3.0), "trunc": ("normal", 3.0), "fix": ("normal", 3.0),
          "sin": ("normal", 2.0), "cos": ("normal", 2.0), "tan": ("uniform", -1.2, 1.2),
          "arcsin": ("uniform", -0.9, 0.9), "arccos": ("uniform", -0.9, 0.9), "arctan": ("normal", 2.0),
          "sinh": None, "cosh": None, "arcsinh": ("normal", 2.0), "arccosh": ("uniform", 1.1, 3.0),
          "arctanh": ("uniform", -0.9, 0.9), "degrees": None, "radians": ("normal", 90.0),
          "log2": ("uniform", 0.2, 3.0), "log10": ("uniform", 0.2, 3.0), "cbrt": ("uniform", 0.2, 3.0),
          "rcbrt": ("uniform", 0.2, 3.0), "erf": None}
for op, init in _unary.items():
    case("unary_" + op, lambda mx, o=op: sym_op(mx, o)(V(mx), name="u"),
         {"data": (3, 4, 5)}, [op], init={"data": init} if init else None,
         head_grad=op != "make_loss")
case("zeros_ones", lambda mx: mx.sym.broadcast_add(
    mx.sym.broadcast_mul(V(mx), mx.sym.ones(shape=(3, 4), name="o")),
    mx.sym.zeros(shape=(1, 4), name="z"), name="zo"), {"data": (3, 4)}, ["_zeros", "_ones"])
for i, kw in enumerate([dict(a_min=-0.5, a_max=0.8), dict(a_min=0.0, a_max=6.0)]):
    case("clip%d" % i, lambda mx, kw=kw: mx.sym.clip(V(mx), name="clip", **kw),
         {"data": (3, 4, 5)}, ["clip"], init={"data": ("normal", 3.0)})

# --------------------------------------------------------------------------- reductions
_red = [dict(), dict(axis=1), dict(axis=(0, 2)), dict(axis=1, keepdims=True),
        dict(axis=-1), dict(axis=(1,), exclude=True), dict(axis=(0, 2), keepdims=True),
        dict(axis=0, exclude=True, keepdims=True)]
for op in ("sum", "mean", "max", "min"):
    for i, kw in enumerate(_red):
        case("%s%d" % (op, i), lambda mx, op=op, kw=kw: getattr(mx.sym, op)(V(mx), name="r", **kw),
             {"data": (3, 4, 5)}, [op])

# --------------------------------------------------------------------------- misc tensor
for dt in ("float64", "float16", "int32", "int64", "int8", "uint8"):
    case("cast_" + dt, lambda mx, dt=dt: mx.sym.Cast(V(mx), dtype=dt, name="cast"),
         {"data": (3, 4)}, ["Cast"], train=dt in ("float64", "float16"),
         init={"data": ("normal", 4.0) if dt != "uint8" else ("uniform", 0.0, 250.0)})
for src in ("int32", "float64", "float16", "uint8"):
    case("cast_%s_to_float32" % src, lambda mx: mx.sym.Cast(V(mx), dtype="float32", name="cast"),
         {"data": (3, 4)}, ["Cast"], dtypes={"data": src}, train=src != "int32" and src != "uint8",
         init={"data": ("int", 0, 200)})

# --------------------------------------------------------------------------- other dtypes
# Element-wise arithmetic, reductions and scalar ops on the dtypes MXNet programs use;
# integer inputs compare forward only (MXNet has no integer gradients).
for dt in ("float64", "float16", "int32", "int64", "int8", "uint8"):
    fl = dt.startswith("float")
    ints = {"a": ("int", 1, 9), "b": ("int", 1, 5)}
    for op in ("elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div"):
        case("%s_%s" % (op, dt), lambda mx, op=op: sym_op(mx, op)(V(mx, "a"), V(mx, "b"), name="ew"),
             {"a": (3, 4), "b": (3, 4)}, [op], dtypes={"a": dt, "b": dt}, train=fl,
             init=None if fl and op != "elemwise_div" else
             ({"b": ("absmin", 0.5)} if fl else ints),
             tol=(1e-2, 1e-2) if dt == "float16" else None)
    case("broadcast_mul_" + dt, lambda mx: mx.sym.broadcast_mul(V(mx, "a"), V(mx, "b"), name="bc"),
         {"a": (3, 4), "b": (1, 4)}, ["broadcast_mul"], dtypes={"a": dt, "b": dt}, train=fl,
         init=None if fl else ints, tol=(1e-2, 1e-2) if dt == "float16" else None)
    for op, sc in (("_plus_scalar", 3), ("_mul_scalar", 3), ("_div_scalar", 2),
                   ("_minus_scalar", 2), ("_maximum_scalar", 4)):
        case("%s_%s" % (op, dt), lambda mx, op=op, sc=sc: sym_op(mx, op)(V(mx), scalar=sc, name="sc"),
             {"data": (3, 4)}, [op], dtypes={"data": dt}, train=fl,
             init=None if fl else {"data": ("int", 0, 9)},
             tol=(1e-2, 1e-2) if dt == "float16" else None)
    for op in ("sum", "max"):
        case("%s_%s" % (op, dt), lambda mx, op=op: getattr(mx.sym, op)(V(mx), axis=1, name="r"),
             {"data": (3, 4)}, [op], dtypes={"data": dt}, train=fl,
             init=None if fl else {"data": ("int", 0, 9)},
             tol=(1e-2, 1e-2) if dt == "float16" else None)

# --------------------------------------------------------------------------- comparisons
# 1/0 in the input dtype, zero gradient; small integers (as float32) make ties common.
_ties = {"a": ("int", -2, 3), "b": ("int", -2, 3)}
for name in ("equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal",
             "logical_and", "logical_or", "logical_xor"):
    case("_" + name, lambda mx, n=name: sym_op(mx, "_" + n)(V(mx, "a"), V(mx, "b"), name="cmp"),
         {"a": (3, 4), "b": (3, 4)}, ["_" + name], init=_ties)
    case("broadcast_" + name,
         lambda mx, n=name: getattr(mx.sym, "broadcast_" + n)(V(mx, "a"), V(mx, "b"), name="cmp"),
         {"a": (3, 4), "b": (1, 4)}, ["broadcast_" + name], init=_ties)
    case("_%s_scalar" % name,
         lambda mx, n=name: sym_op(mx, "_%s_scalar" % n)(V(mx), scalar=1, name="cmp"),
         {"data": (3, 4)}, ["_%s_scalar" % name], init={"data": ("int", -2, 3)})
case("_equal_int32", lambda mx: sym_op(mx, "_equal")(V(mx, "a"), V(mx, "b"), name="cmp"),
     {"a": (3, 4), "b": (3, 4)}, ["_equal"], init=_ties, dtypes={"a": "int32", "b": "int32"},
     train=False)
for i, kw in enumerate(_red[:5]):
    case("prod%d" % i, lambda mx, kw=kw: mx.sym.prod(V(mx), name="r", **kw),
         {"data": (3, 4, 5)}, ["prod"], init={"data": ("uniform", 0.5, 1.5)})
case("where_same", lambda mx: mx.sym.where(V(mx, "cond"), V(mx, "x"), V(mx, "y"), name="w"),
     {"cond": (3, 4), "x": (3, 4), "y": (3, 4)}, ["where"],
     init={"cond": ("int", 0, 2)}, no_grad=["cond"])
case("where_rows", lambda mx: mx.sym.where(V(mx, "cond"), V(mx, "x"), V(mx, "y"), name="w"),
     {"cond": (3,), "x": (3, 4), "y": (3, 4)}, ["where"],
     init={"cond": ("int", 0, 2)}, no_grad=["cond"])
case("embedding", lambda mx: mx.sym.Embedding(V(mx), input_dim=7, output_dim=4, name="emb"),
     {"data": (3, 5)}, ["Embedding"], init={"data": ("int", 0, 7)}, no_grad=["data"])

# --------------------------------------------------------------------------- shape ops
for i, (shape, kw) in enumerate([((2, 1, 4), dict(shape=(2, 3, 4))), ((2, 1, 1), dict(shape=(0, 3, 5)))]):
    case("broadcast_to%d" % i, lambda mx, kw=kw: mx.sym.broadcast_to(V(mx), name="bt", **kw),
         {"data": shape}, ["broadcast_to"])
case("broadcast_axis", lambda mx: mx.sym.broadcast_axis(V(mx), axis=(0, 2), size=(3, 4), name="ba"),
     {"data": (1, 2, 1)}, ["broadcast_axis"])
case("broadcast_like0", lambda mx: mx.sym.broadcast_like(V(mx, "a"), V(mx, "b"), name="bl"),
     {"a": (1, 3), "b": (4, 3)}, ["broadcast_like"])
case("broadcast_like1", lambda mx: mx.sym.broadcast_like(V(mx, "a"), V(mx, "b"), lhs_axes=(0, 2),
                                                         rhs_axes=(1, 0), name="bl"),
     {"a": (1, 2, 1), "b": (5, 3)}, ["broadcast_like"])
for i, (shape, kw) in enumerate([((2, 1, 3, 1), dict()), ((2, 1, 3, 1), dict(axis=1)),
                                 ((1, 4, 1), dict(axis=(0, -1)))]):
    case("squeeze%d" % i, lambda mx, kw=kw: mx.sym.squeeze(V(mx), name="sq", **kw),
         {"data": shape}, ["squeeze"])
case("reshape_like0", lambda mx: mx.sym.reshape_like(V(mx, "a"), V(mx, "b"), name="rl"),
     {"a": (2, 6), "b": (3, 4)}, ["reshape_like"])
case("reshape_like1", lambda mx: mx.sym.reshape_like(V(mx, "a"), V(mx, "b"), lhs_begin=1,
                                                     rhs_begin=0, rhs_end=2, name="rl"),
     {"a": (5, 6), "b": (2, 3, 7)}, ["reshape_like"])

for i, (shape, reps) in enumerate([((2, 2), (2, 3)), ((2, 1, 3), (2,)), ((3, 2), (2, 1, 2))]):
    case("tile%d" % i, lambda mx, r=reps: mx.sym.tile(V(mx), reps=r, name="tile"),
         {"data": shape}, ["tile"])
for i, (shape, kw) in enumerate([((2, 3), dict(repeats=2, axis=1)), ((2, 2), dict(repeats=3)),
                                 ((2, 1, 3), dict(repeats=2, axis=-3))]):
    case("repeat%d" % i, lambda mx, kw=kw: mx.sym.repeat(V(mx), name="rep", **kw),
         {"data": shape}, ["repeat"])
for i, (shape, kw) in enumerate([((2, 3, 4), dict(dim1=0, dim2=2)), ((2, 3, 4, 2), dict(dim1=1, dim2=3)),
                                 ((3, 2), dict())]):
    case("swapaxis%d" % i, lambda mx, kw=kw: mx.sym.SwapAxis(V(mx), name="swap", **kw),
         {"data": shape}, ["SwapAxis"])
for i, (shape, kw) in enumerate([
        ((3, 4), dict(begin=(0, 1), end=(2, 3))),
        ((5, 4, 2), dict(begin=(None, -3), end=(None, None), step=(2, 1))),
        ((5, 3), dict(begin=(None,), end=(None,), step=(-2,))),
        ((4, 2), dict(begin=(3,), end=(0,), step=(-1,))),
        ((5, 4), dict(begin=(-1, 1), end=(-10, -1), step=(-1, 2)))]):
    case("slice%d" % i, lambda mx, kw=kw: mx.sym.slice(V(mx), name="sl", **kw),
         {"data": shape}, ["slice"])
for i, (n, shape, axis) in enumerate([(3, (2, 3), 0), (2, (2, 3), -1), (2, (2, 1, 3), 1)]):
    case("stack%d" % i, lambda mx, n=n, ax=axis: mx.sym.stack(*[V(mx, "x%d" % k) for k in range(n)],
                                                              axis=ax, name="st"),
         {"x%d" % k: shape for k in range(n)}, ["stack"])

for i, (ls, rs, kw) in enumerate([((3, 4), (4, 5), {}), ((2, 3, 4), (2, 5), dict(transpose_a=True)),
                                  ((3, 4), (5, 2, 4), dict(transpose_b=True)),
                                  ((2, 3), (5, 2), dict(transpose_a=True, transpose_b=True)),
                                  ((3,), (3,), {}), ((2, 3, 4), (4, 5), {})]):
    case("dot%d" % i, lambda mx, kw=kw: mx.sym.dot(V(mx, "a"), V(mx, "b"), name="dot", **kw),
         {"a": ls, "b": rs}, ["dot"])
for i, (ls, rs, kw) in enumerate([((2, 3, 4), (2, 4, 5), {}), ((2, 4, 3), (2, 4, 2), dict(transpose_a=True)),
                                  ((3, 2, 4), (3, 5, 4), dict(transpose_b=True)),
                                  ((2, 3, 2), (2, 4, 3), dict(transpose_a=True, transpose_b=True))]):
    case("batch_dot%d" % i, lambda mx, kw=kw: mx.sym.batch_dot(V(mx, "a"), V(mx, "b"), name="bd", **kw),
         {"a": ls, "b": rs}, ["batch_dot"])

for i, (shape, like, kw) in enumerate([((3, 4, 5), (2, 3), dict(axes=(0, 1))), ((3, 4), (2, 3), {}),
                                       ((3, 4), (2, 3), dict(axes=(-1,)))]):
    case("slice_like%d" % i, lambda mx, kw=kw: mx.sym.slice_like(V(mx), V(mx, "like"), name="sll", **kw),
         {"data": shape, "like": like}, ["slice_like"])
for i, (shape, kw) in enumerate([
        ((1, 2, 3, 3), dict(mode="constant", pad_width=(0, 0, 0, 0, 1, 2, 2, 1), constant_value=-1)),
        ((2, 1, 3, 3), dict(mode="edge", pad_width=(0, 0, 0, 0, 1, 2, 2, 1))),
        ((1, 1, 3, 4), dict(mode="reflect", pad_width=(0, 0, 0, 0, 1, 2, 2, 1))),
        ((1, 2, 2, 2, 3), dict(mode="edge", pad_width=(0, 0, 0, 0, 1, 0, 0, 1, 1, 1)))]):
    case("pad%d" % i, lambda mx, kw=kw: mx.sym.Pad(V(mx), name="pad", **kw), {"data": shape}, ["Pad"])
case("softmax_cross_entropy", lambda mx: mx.sym.softmax_cross_entropy(V(mx), V(mx, "label"), name="sce"),
     {"data": (4, 5), "label": (4,)}, ["softmax_cross_entropy"], init={"label": ("int", 0, 5)},
     no_grad=["label"])

# --------------------------------------------------------------------------- indexing
for i, (shape, ishape, kw, lo, hi) in enumerate([((3, 4), (4,), {}, -2, 6),
                                                 ((3, 4), (2, 3), dict(axis=1, mode="wrap"), -6, 9),
                                                 ((2, 3, 4), (2,), dict(axis=-1), 0, 4)]):
    case("take%d" % i, lambda mx, kw=kw: mx.sym.take(V(mx), V(mx, "idx"), name="take", **kw),
         {"data": shape, "idx": ishape}, ["take"], init={"idx": ("int", lo, hi)}, no_grad=["idx"])
for op in ("argmax", "argmin"):
    for i, kw in enumerate([dict(axis=1), dict(), dict(axis=0, keepdims=True)]):
        case("%s%d" % (op, i), lambda mx, op=op, kw=kw: getattr(mx.sym, op)(V(mx), name="arg", **kw),
             {"data": (3, 4, 2)}, [op], grads=False)
# MXNet registers no gradient for argmax_channel (backward raises); Loom's is zero.
case("argmax_channel", lambda mx: mx.sym.argmax_channel(V(mx), name="argc"), {"data": (3, 5)},
     ["argmax_channel"], no_grad=["data"], grads=False, train=False)
for i, (shape, kw) in enumerate([((2, 5), dict(k=2)), ((4, 3), dict(k=2, ret_typ="value", axis=0)),
                                 ((2, 3), dict(k=3, ret_typ="both", is_ascend=True, axis=None)),
                                 ((3, 4), dict(k=2, ret_typ="mask"))]):
    diff = kw.get("ret_typ") == "value"
    case("topk%d" % i, lambda mx, kw=kw: mx.sym.topk(V(mx), name="topk", **kw), {"data": shape}, ["topk"],
         grads=diff, no_grad=[] if diff else ["data"], train=diff)
for i, (shape, kw) in enumerate([((2, 5), {}), ((4, 3), dict(axis=0, is_ascend=False)), ((2, 3), dict(axis=None))]):
    # MXNet 1.9.1's sort backward fails when axis is left at its default (axis="" reaches
    # _backward_topk); Loom's gradient is checked by finite differences in the op sweep.
    case("sort%d" % i, lambda mx, kw=kw: mx.sym.sort(V(mx), name="sort", **kw), {"data": shape}, ["sort"],
         train="axis" in kw, grads="axis" in kw, no_grad=[] if "axis" in kw else ["data"])
    case("argsort%d" % i, lambda mx, kw=kw: mx.sym.argsort(V(mx), name="asort", **kw), {"data": shape},
         ["argsort"], grads=False, no_grad=["data"], train=False)
for i, kw in enumerate([dict(), dict(ord=1, axis=1), dict(axis=(0, 2), keepdims=True), dict(axis=-1)]):
    case("norm%d" % i, lambda mx, kw=kw: mx.sym.norm(V(mx), name="norm", **kw), {"data": (2, 3, 4)}, ["norm"])

# --------------------------------------------------------------------------- normalisation layers
# output_mean_var stays off: MXNet 1.9.1 drops gradients reaching the mean/std outputs, Loom
# differentiates them (checked by finite differences in the op sweep).
for i, (shape, kw) in enumerate([((3, 5), {}), ((2, 3, 4), dict(axis=1, eps=0.01)), ((2, 2, 3), dict(axis=-1))]):
    case("layer_norm%d" % i, lambda mx, kw=kw: mx.sym.LayerNorm(V(mx), name="ln", **kw), {"data": shape},
         ["LayerNorm"])
for i, (shape, kw) in enumerate([((2, 3, 4), {}), ((2, 2, 3, 2), dict(eps=1e-5))]):
    case("instance_norm%d" % i, lambda mx, kw=kw: mx.sym.InstanceNorm(V(mx), name="inorm", **kw),
         {"data": shape}, ["InstanceNorm"])
for i, (shape, kw) in enumerate([((2, 4, 3), dict(num_groups=2)), ((2, 3, 2, 2), {}), ((1, 6, 2), dict(num_groups=3))]):
    case("group_norm%d" % i, lambda mx, kw=kw: mx.sym.GroupNorm(V(mx), name="gn", **kw), {"data": shape},
         ["GroupNorm"])

# --------------------------------------------------------------------------- ArcFace head ops
for i, (shape, kw) in enumerate([((3, 5), dict()), ((2, 3, 4), dict(mode="instance", eps=0.5)),
                                 ((2, 3, 2, 2), dict(mode="channel")), ((2, 4, 3), dict(mode="channel")),
                                 ((2, 3, 2, 3), dict(mode="spatial"))]):
    case("l2norm%d" % i, lambda mx, kw=kw: mx.sym.L2Normalization(V(mx), name="l2", **kw),
         {"data": shape}, ["L2Normalization"])
for i, kw in enumerate([dict(depth=4), dict(depth=3, on_value=2.5, off_value=-1.0)]):
    # Indices in [-1, 6): out of range and negative ones give all-off rows.
    case("one_hot%d" % i, lambda mx, kw=kw: mx.sym.one_hot(V(mx), name="oh", **kw),
         {"data": (2, 5)}, ["one_hot"], init={"data": ("int", -1, 6)}, no_grad=["data"],
         head_grad=False)
for i, (shape, ishape, kw, hi) in enumerate([
        ((3, 4), (3,), dict(), 6), ((2, 3, 2), (2, 1, 2), dict(axis=1, keepdims=True), 3),
        ((3, 4), (4,), dict(axis=0, mode="wrap"), 8), ((3, 4), (4,), dict(axis=0, mode="wrap"), 8),
        ((4, 5), (4,), dict(axis=1), 5)]):
    lo = -7 if kw.get("mode") == "wrap" and i == 3 else 0
    case("pick%d" % i, lambda mx, kw=kw: mx.sym.pick(V(mx), V(mx, "index"), name="pick", **kw),
         {"data": shape, "index": ishape}, ["pick"], init={"index": ("int", lo, hi)},
         no_grad=["index"])
case("upsampling_nearest", lambda mx: mx.sym.UpSampling(V(mx), scale=2, sample_type="nearest",
                                                       num_args=1, name="up"),
     {"data": (2, 3, 4, 5)}, ["UpSampling"])
case("upsampling_nearest3", lambda mx: mx.sym.UpSampling(V(mx), scale=3, sample_type="nearest",
                                                        num_args=1, name="up"),
     {"data": (1, 2, 3, 3)}, ["UpSampling"])
case("upsampling_nearest_multi_concat",
     lambda mx: mx.sym.UpSampling(V(mx, "a"), V(mx, "b"), scale=2, sample_type="nearest",
                                  num_args=2, multi_input_mode="concat", name="up"),
     {"a": (2, 3, 4, 4), "b": (2, 2, 8, 8)}, ["UpSampling"])
case("upsampling_nearest_multi_sum",
     lambda mx: mx.sym.UpSampling(V(mx, "a"), V(mx, "b"), scale=2, sample_type="nearest",
                                  num_args=2, multi_input_mode="sum", name="up"),
     {"a": (2, 3, 4, 4), "b": (2, 3, 8, 8)}, ["UpSampling"])
case("upsampling_bilinear",
     lambda mx: mx.sym.UpSampling(V(mx), scale=2, sample_type="bilinear", num_filter=3,
                                  num_args=1, name="up"),
     {"data": (2, 3, 4, 5)}, ["UpSampling"])
case("crop_like", lambda mx: mx.sym.Crop(V(mx, "a"), V(mx, "b"), num_args=2, name="crop"),
     {"a": (2, 3, 8, 9), "b": (2, 1, 5, 6)}, ["Crop"])
case("crop_like_center",
     lambda mx: mx.sym.Crop(V(mx, "a"), V(mx, "b"), num_args=2, center_crop=True, name="crop"),
     {"a": (2, 3, 8, 9), "b": (2, 1, 5, 6)}, ["Crop"])
case("crop_hw", lambda mx: mx.sym.Crop(V(mx), num_args=1, h_w=(4, 5), offset=(1, 2),
                                       name="crop"),
     {"data": (2, 3, 8, 9)}, ["Crop"])
case("crop_hw_center", lambda mx: mx.sym.Crop(V(mx), num_args=1, h_w=(3, 4), center_crop=True,
                                              name="crop"),
     {"data": (2, 3, 8, 9)}, ["Crop"])
case("dropout_inference", lambda mx: mx.sym.Dropout(V(mx), p=0.3, name="drop"),
     {"data": (3, 4)}, ["Dropout"], train=False,
     note="training-mode Dropout is random; inference is the identity")
# A small chain so op interplay (in-place, shared inputs, fan-out) is exercised too.
def _chain(mx):
    x = V(mx)
    h = mx.sym.Activation(mx.sym.FullyConnected(x, num_hidden=8, name="fc1"), act_type="tanh",
                          name="a1")
    return mx.sym.FullyConnected(h * 2.0 + x * 0.5 + 1.0, num_hidden=3, name="fc2")


case("chain_mlp", _chain, {"data": (4, 8)},
    ["FullyConnected", "Activation", "_mul_scalar", "_plus_scalar", "elemwise_add"])

# --------------------------------------------------------------------------- loss heads
_K = 5


def _label(n=_K, lo=0):
    return ("int", lo, n)


for norm in ("null", "batch", "valid"):
    for ign in (False, True):
        case("softmaxout_%s_ignore%s" % (norm, ign),
             lambda mx, n=norm, i=ign: mx.sym.SoftmaxOutput(
                 V(mx), V(mx, "label"), normalization=n, use_ignore=i, ignore_label=2,
                 name="so"),
             {"data": (6, _K), "label": (6,)}, ["SoftmaxOutput"], init={"label": _label()},
             no_grad=["label"], head_grad=False)
    case("softmaxout_multi_%s" % norm,
         lambda mx, n=norm: mx.sym.SoftmaxOutput(V(mx), V(mx, "label"), multi_output=True,
                                                 normalization=n, use_ignore=True,
                                                 ignore_label=1, name="so"),
         {"data": (3, _K, 4), "label": (3, 4)}, ["SoftmaxOutput"], init={"label": _label()},
         no_grad=["label"], head_grad=False)
case("softmaxout_preserve", lambda mx: mx.sym.SoftmaxOutput(
    V(mx), V(mx, "label"), preserve_shape=True, name="so"),
    {"data": (3, 4, _K), "label": (3, 4)}, ["SoftmaxOutput"], init={"label": _label()},
    no_grad=["label"], head_grad=False)
case("softmaxout_smooth", lambda mx: mx.sym.SoftmaxOutput(
    V(mx), V(mx, "label"), smooth_alpha=0.1, grad_scale=2.5, name="so"),
    {"data": (6, _K), "label": (6,)}, ["SoftmaxOutput"], init={"label": _label()},
    no_grad=["label"], head_grad=False)
# Not compared: SoftmaxOutput on >2-d data without multi_output/preserve_shape. MXNet 1.9.1
# infers the label as data.shape[:-1] and its inference forward softmaxes over the last axis,
# while its training forward and backward view the data as (N, size/N) with N labels; it
# rejects an (N,) label. Loom implements the (N, size/N) view with N labels (spec 4.1).
case("softmaxout_soft_label", lambda mx: mx.sym.SoftmaxOutput(
    V(mx), V(mx, "label"), grad_scale=0.5, name="so"),
    {"data": (4, _K), "label": (4, _K)}, ["SoftmaxOutput"], init={"label": ("uniform", 0, 1)},
    no_grad=["label"], head_grad=False)
case("softmax_alias", lambda mx: mx.sym.Softmax(V(mx), V(mx, "label"), name="so"),
     {"data": (6, _K), "label": (6,)}, ["SoftmaxOutput"], init={"label": _label()},
     no_grad=["label"], head_grad=False)
_REG_NOTE = ("MXNet 1.9.1's regression outputs apply req=add as a second accumulate of the "
             "scaling step (spec 4.2); Loom applies the scaled gradient once")
for op in ("LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput"):
    for i, (s, ls, gs) in enumerate([((6, 1), (6,), 1.0), ((4, 3), (4, 3), 2.0),
                                     ((2, 3, 2), (2, 6), 0.5)]):
        case("%s%d" % (op, i), lambda mx, op=op, gs=gs: getattr(mx.sym, op)(
            V(mx), V(mx, "label"), grad_scale=gs, name="reg"),
            {"data": s, "label": ls}, [op], init={"label": ("uniform", 0, 1)},
            no_grad=["label"], head_grad=False, add_ref="write2", note=_REG_NOTE)
_SVM_NOTE = ("MXNet 1.9.1's SVMOutput writes its gradient regardless of req (spec 4.3); Loom "
             "honours req=add")
for lin in (False, True):
    for i, kw in enumerate([{}, dict(margin=0.5, regularization_coefficient=2.0)]):
        case("svm_linear%s_%d" % (lin, i), lambda mx, lin=lin, kw=kw: mx.sym.SVMOutput(
            V(mx), V(mx, "label"), use_linear=lin, name="svm", **kw),
            {"data": (6, _K), "label": (6,)}, ["SVMOutput"], init={"label": _label()},
            no_grad=["label"], head_grad=False, add_ref="write2", note=_SVM_NOTE)
for norm in ("null", "batch", "valid"):
    for i, kw in enumerate([{}, dict(grad_scale=3.0, valid_thresh=0.3)]):
        case("makeloss_%s%d" % (norm, i), lambda mx, n=norm, kw=kw: mx.sym.MakeLoss(
            V(mx), normalization=n, name="ml", **kw),
            {"data": (4, 5)}, ["MakeLoss"], head_grad=False)
def _group(mx):
    x = V(mx)
    return mx.sym.Group([
        mx.sym.SoftmaxOutput(mx.sym.FullyConnected(x, num_hidden=_K, name="fc"),
                             V(mx, "label"), name="so"),
        mx.sym.LinearRegressionOutput(mx.sym.FullyConnected(x, num_hidden=2, name="fc2"),
                                      V(mx, "reg_label"), name="lro"),
        mx.sym.MakeLoss(mx.sym.sum(mx.sym.square(x, name="sq"), name="ss"), grad_scale=0.1,
                        name="ml"),
        mx.sym.BlockGrad(mx.sym.FullyConnected(x, num_hidden=3, name="fc3"), name="bg")])


case("group_heads", _group,
    {"data": (4, 6), "label": (4,), "reg_label": (4, 2)},
    ["SoftmaxOutput", "LinearRegressionOutput", "MakeLoss", "BlockGrad", "Group"],
    init={"label": _label(), "reg_label": ("uniform", 0, 1)},
    no_grad=["label", "reg_label"], head_grad=False, add_ref="write2", note=_REG_NOTE)
case("blockgrad_mid", lambda mx: mx.sym.FullyConnected(
    mx.sym.BlockGrad(mx.sym.FullyConnected(V(mx), num_hidden=4, name="fc1"), name="bg") + V(mx, "b"),
    num_hidden=2, name="fc2"), {"data": (3, 5), "b": (3, 4)}, ["BlockGrad"])


# Cases of newer operator families live in cases_<family>.py beside this file (they import
# case/V from here); they are loaded here so CASES is complete wherever cases is imported.
def _load_family_files():
    import glob
    import importlib
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "cases_*.py"))):
        importlib.import_module(os.path.splitext(os.path.basename(path))[0])


_load_family_files()


def by_id():
    return {c.cid: c for c in CASES}


# --------------------------------------------------------------------------- update ops
# (op, kwargs, state names). Each runs STEPS imperative steps on seeded weight/grad/states;
# MXNet writes every step's weight and states.
UPDATE_STEPS = 4
UPDATES = [
    ("sgd_update", dict(lr=0.1), []),
    ("sgd_update", dict(lr=0.1, wd=0.01, rescale_grad=0.5, clip_gradient=0.3), []),
    ("sgd_mom_update", dict(lr=0.1, momentum=0.9), ["mom"]),
    ("sgd_mom_update", dict(lr=0.05, momentum=0.8, wd=0.02, rescale_grad=2.0,
                            clip_gradient=0.5), ["mom"]),
    ("nag_mom_update", dict(lr=0.1, momentum=0.9), ["mom"]),
    ("nag_mom_update", dict(lr=0.05, momentum=0.7, wd=0.01, rescale_grad=0.5,
                            clip_gradient=0.4), ["mom"]),
    ("adam_update", dict(lr=0.01), ["mean", "var"]),
    ("adam_update", dict(lr=0.02, beta1=0.8, beta2=0.99, epsilon=1e-6, wd=0.01,
                         rescale_grad=0.5, clip_gradient=0.3), ["mean", "var"]),
    ("rmsprop_update", dict(lr=0.01), ["n"]),
    ("rmsprop_update", dict(lr=0.01, gamma1=0.8, epsilon=1e-6, wd=0.01, rescale_grad=0.5,
                            clip_gradient=0.3, clip_weights=0.6), ["n"]),
    ("rmspropalex_update", dict(lr=0.01), ["n", "g", "delta"]),
    ("rmspropalex_update", dict(lr=0.01, gamma1=0.9, gamma2=0.8, wd=0.01, clip_gradient=0.5,
                                clip_weights=0.7), ["n", "g", "delta"]),
    ("_adamw_update", dict(lr=0.01, eta=0.5, wd=0.01), ["mean", "var", "rescale_grad"]),
    ("_adamw_update", dict(lr=0.01, eta=1.0, wd=0.1, clip_gradient=0.2, beta1=0.8),
     ["mean", "var", "rescale_grad"]),
]


# LAMB, the way MXNet's LAMB optimizer drives its two ops each step t = 1, 2, ...:
# g = lamb_update_phase1(w, grad, mean, var, t=t, ...); r1 = ||w||, r2 = ||g||;
# w = lamb_update_phase2(w, g, r1, r2, lr=...).
# Update ops of newer families (compared imperatively like the ones above).
import cases_misc2 as _misc2  # noqa: E402
UPDATES += _misc2.UPDATES_MISC2

LAMB_CASES = [
    (dict(beta1=0.9, beta2=0.999, epsilon=1e-6, wd=0.01), dict(lr=0.01)),
    (dict(beta1=0.8, beta2=0.99, epsilon=1e-6, wd=0.0, bias_correction=False,
          rescale_grad=0.5, clip_gradient=0.3), dict(lr=0.05, lower_bound=0.5, upper_bound=2.0)),
]


# The shared real model files: input shapes from ../shared/models/README.md (batch 1 unless
# fixed). 20 needs the WarpCTC plugin, which MXNet 1.9.1 does not have either.
MODEL_INPUTS = {
    "01": {"data": (1, 100), "softmax_label": (1,)},
    "02": {"data": (1, 3, 12, 12)},
    "03": {"data": (1, 3, 24, 24), "prob1_label": (1,)},
    "04": {"data": (1, 3, 48, 48), "prob1_label": (1,)},
    "05": {"data": (1, 15, 24, 24)},
    "06": {"data": (1, 3, 12, 12)},
    "07": {"data": (1, 3, 224, 224), "softmax_label": (1,)},
    "08": {"data": (1, 3, 300, 300), "softmax_label": (1,)},
    "09": {"data": (1, 3, 224, 224), "softmax_label": (1,)},
    "10": {"data": (1, 3, 224, 224)},
    "11": {"data": (1, 3, 224, 224), "softmax_label": (1,)},
    "12": {"data": (1, 3, 112, 112)},
    "13": {"data": (1, 3, 112, 112)},
    "14": {"data": (1, 3, 112, 112)},
    "15": {"data": (1, 3, 224, 224)},
    "16": {"data": (1, 3, 640, 640)},
    "17": {"data": (1, 4)},
    "18": {"data": (1, 1, 28, 28)},
    "19": {"data": (1, 1, 28, 28)},
    "20": {"data": (1, 30, 100), "l0_init_h": (1, 128), "l0_init_c": (1, 128),
           "l1_init_h": (1, 128), "l1_init_c": (1, 128), "label": (1, 4)},
    "21": {"data": (1, 3, 112, 112)},
    "22": {"images": (6, 40, 3, 112, 112), "body": (6, 40, 36), "specters": (6, 9, 3, 40, 40),
           "emotions": (6, 7), "arr": (6, 1), "val": (6, 1)},
}


# Gluon model zoo: (name, spatial size, batches). Everything at its native size (224, 299 for
# inceptionv3); the deepest/largest variants (resnet34/101/152, vgg11_bn, the 0.25 width
# mobilenets) at batch 1 only to keep the suite's time budget.
ZOO = [
    ("resnet18_v1", 224, (1, 4)), ("resnet34_v1", 224, (1,)), ("resnet50_v1", 224, (1, 4)),
    ("resnet101_v1", 224, (1,)), ("resnet152_v1", 224, (1,)),
    ("resnet18_v2", 224, (1, 4)), ("resnet34_v2", 224, (1,)), ("resnet50_v2", 224, (1, 4)),
    ("resnet101_v2", 224, (1,)), ("resnet152_v2", 224, (1,)),
    ("mobilenet1.0", 224, (1, 4)), ("mobilenet0.25", 224, (1,)),
    ("mobilenetv2_1.0", 224, (1, 4)), ("mobilenetv2_0.25", 224, (1,)),
    ("vgg11", 224, (1, 4)), ("vgg11_bn", 224, (1,)), ("alexnet", 224, (1, 4)),
    ("squeezenet1.0", 224, (1, 4)), ("squeezenet1.1", 224, (1, 4)),
    ("densenet121", 224, (1, 4)), ("inceptionv3", 299, (1, 4)),
]




# --------------------------------------------------------------------------- more tensor ops
# shape_array/size_array (int64 outputs, zero gradient), logical_not, reverse/flip, softmin,
# hard_sigmoid, hypot, batch_take, diag, depth_to_space/space_to_depth, moments, gamma/gammaln.
MXNET_ADD_BUGS["reverse"] = "overwrites instead of accumulating (its kernel ignores req)"
for op in ("shape_array", "size_array"):
    for i, shape in enumerate([(2, 3, 4), (5,)]):
        case("%s%d" % (op, i), lambda mx, op=op: getattr(mx.sym, op)(V(mx), name="sa"),
             {"data": shape}, [op], no_grad=["data"], grads=False)
case("logical_not0", lambda mx: mx.sym.logical_not(V(mx), name="lnot"), {"data": (3, 4)},
     ["logical_not"], init={"data": ("int", -1, 2)}, grads=False)
case("logical_not_i32", lambda mx: mx.sym.logical_not(V(mx), name="lnot"), {"data": (3, 4)},
     ["logical_not"], init={"data": ("int", -2, 3)}, dtypes={"data": "int32"}, no_grad=["data"],
     grads=False)
for i, (shape, kw) in enumerate([((3, 4), dict(axis=0)), ((2, 3, 4), dict(axis=(1, 2))),
                                 ((2, 3, 4), dict(axis=2))]):
    case("reverse%d" % i, lambda mx, kw=kw: mx.sym.reverse(V(mx), name="rev", **kw),
         {"data": shape}, ["reverse"])
case("flip0", lambda mx: mx.sym.flip(V(mx), axis=1, name="rev"), {"data": (2, 5)}, ["reverse"])
for i, (shape, kw) in enumerate([((2, 3, 5), dict()), ((2, 3, 4), dict(axis=1, temperature=2.0)),
                                 ((3, 4), dict(axis=0, temperature=0.5))]):
    case("softmin%d" % i, lambda mx, kw=kw: mx.sym.softmin(V(mx), name="smin", **kw),
         {"data": shape}, ["softmin"])
for i, kw in enumerate([dict(), dict(alpha=0.7, beta=0.3)]):
    case("hard_sigmoid%d" % i, lambda mx, kw=kw: mx.sym.hard_sigmoid(V(mx), name="hs", **kw),
         {"data": (3, 5)}, ["hard_sigmoid"], init={"data": ("normal", 3.0)})
case("hypot0", lambda mx: sym_op(mx, "_hypot")(V(mx, "a"), V(mx, "b"), name="hyp"),
     {"a": (2, 3), "b": (2, 3)}, ["_hypot"])
for i, (sa, sb) in enumerate([((2, 3), (1, 3)), ((2, 1, 4), (3, 1))]):
    case("broadcast_hypot%d" % i,
         lambda mx: mx.sym.broadcast_hypot(V(mx, "a"), V(mx, "b"), name="hyp"),
         {"a": sa, "b": sb}, ["broadcast_hypot"])
for i, s in enumerate([1.5, -2.0]):
    case("hypot_scalar%d" % i, lambda mx, s=s: sym_op(mx, "_hypot_scalar")(V(mx), scalar=s, name="hyp"),
         {"data": (3, 4)}, ["_hypot_scalar"])
# MXNet registers no gradient for batch_take (deprecated for pick); Loom's is checked by the
# unit sweep. Indices are int32 in MXNet; out-of-range ones clip.
case("batch_take0", lambda mx: mx.sym.batch_take(V(mx, "a"), V(mx, "indices"), name="bt"),
     {"a": (5, 4), "indices": (5,)}, ["batch_take"], init={"indices": ("int", -2, 7)},
     dtypes={"indices": "int32"}, no_grad=["a", "indices"], grads=False, train=False)
for i, (shape, kw) in enumerate([((3, 4), dict()), ((3, 4), dict(k=1)), ((4,), dict(k=-2)),
                                 ((3,), dict(k=1)),
                                 ((2, 3, 4), dict(k=1, axis1=2, axis2=0)),
                                 ((2, 3, 4), dict(k=-1, axis1=-1, axis2=1))]):
    case("diag%d" % i, lambda mx, kw=kw: mx.sym.diag(V(mx), name="diag", **kw),
         {"data": shape}, ["diag"])
for i, (shape, b) in enumerate([((2, 8, 2, 3), 2), ((1, 9, 1, 2), 3)]):
    case("depth_to_space%d" % i,
         lambda mx, b=b: mx.sym.depth_to_space(V(mx), block_size=b, name="d2s"),
         {"data": shape}, ["depth_to_space"])
for i, (shape, b) in enumerate([((2, 2, 4, 6), 2), ((1, 1, 3, 6), 3)]):
    case("space_to_depth%d" % i,
         lambda mx, b=b: mx.sym.space_to_depth(V(mx), block_size=b, name="s2d"),
         {"data": shape}, ["space_to_depth"])
MXNET_ADD_BUGS["moments"] = ("gives neither init + write nor anything consistent "
                             "(x=[1,2,4], grad 10, heads 1: [2.78, 3.44, 4.78])")
for i, (shape, kw) in enumerate([((2, 3, 4), dict(axes=(1,))),
                                 ((2, 3, 4), dict(axes=(0, 2), keepdims=True)),
                                 ((3, 5), dict(axes=(-1,))), ((3, 5), dict(axes=(0, 1)))]):
    case("moments%d" % i, lambda mx, kw=kw: mx.sym.moments(V(mx), name="mom", **kw),
         {"data": shape}, ["moments"])
for op in ("gamma", "gammaln"):
    for i, spec in enumerate([("uniform", 0.3, 4.0), ("uniform", -2.9, -2.1)]):
        case("%s%d" % (op, i), lambda mx, op=op: getattr(mx.sym, op)(V(mx), name="g"),
             {"data": (3, 4)}, [op], init={"data": spec})
# The copy-like ops on integer dtypes (forward only: no gradient for integers).
case("reverse_i32", lambda mx: mx.sym.reverse(V(mx), axis=(0, 1), name="rev"), {"data": (3, 4)},
     ["reverse"], init={"data": ("int", -50, 50)}, dtypes={"data": "int32"}, no_grad=["data"],
     grads=False)
case("diag_i64", lambda mx: mx.sym.diag(V(mx), k=-1, name="diag"), {"data": (4,)}, ["diag"],
     init={"data": ("int", -50, 50)}, dtypes={"data": "int64"}, no_grad=["data"], grads=False)
case("diag_u8", lambda mx: mx.sym.diag(V(mx), k=1, name="diag"), {"data": (3, 4)}, ["diag"],
     init={"data": ("int", 0, 200)}, dtypes={"data": "uint8"}, no_grad=["data"], grads=False)
case("depth_to_space_i32", lambda mx: mx.sym.depth_to_space(V(mx), block_size=2, name="d2s"),
     {"data": (1, 8, 2, 3)}, ["depth_to_space"], init={"data": ("int", -50, 50)},
     dtypes={"data": "int32"}, no_grad=["data"], grads=False)
case("space_to_depth_i32", lambda mx: mx.sym.space_to_depth(V(mx), block_size=2, name="s2d"),
     {"data": (1, 2, 4, 6)}, ["space_to_depth"], init={"data": ("int", -50, 50)},
     dtypes={"data": "int32"}, no_grad=["data"], grads=False)
case("shape_array_i32", lambda mx: mx.sym.shape_array(V(mx), name="sa"), {"data": (2, 3)},
     ["shape_array"], init={"data": ("int", 0, 5)}, dtypes={"data": "int32"}, no_grad=["data"],
     grads=False)
case("logical_not_f64", lambda mx: mx.sym.logical_not(V(mx), name="lnot"), {"data": (3, 4)},
     ["logical_not"], init={"data": ("int", -1, 2)}, dtypes={"data": "float64"}, no_grad=["data"],
     grads=False)
case("softmin_f64", lambda mx: mx.sym.softmin(V(mx), axis=1, temperature=0.7, name="smin"),
     {"data": (3, 4)}, ["softmin"], dtypes={"data": "float64"})
