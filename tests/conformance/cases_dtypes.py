"""Non-float32 dtypes of the ops whose CPU kernels compute float64 and float16 (ids start with
dt_): forward, backward and req=add in float64 against MXNet 1.9.1 at the default tolerance,
a few float16 cases at float16 tolerance, and mixed-dtype inputs (integer indices, integer
shape sources)."""
from cases import case, V, sym_op

F64 = "float64"


def _all(names, dtype):
    return {n: dtype for n in names}


# --------------------------------------------------------------------------- LeakyReLU family
for i, kw in enumerate([dict(act_type="leaky", slope=0.3), dict(act_type="elu", slope=0.7),
                        dict(act_type="gelu")]):
    case("dt_leaky%d" % i, lambda mx, kw=kw: mx.sym.LeakyReLU(V(mx), name="act", **kw),
         {"data": (3, 4, 5)}, ["LeakyReLU"], dtypes={"data": F64})
case("dt_selu", lambda mx: mx.sym.LeakyReLU(V(mx), act_type="selu", name="act"),
     {"data": (3, 4, 5)}, ["LeakyReLU"], dtypes={"data": F64}, grads=False,
     note="MXNet 1.9.1's generic (non-oneDNN, here float64) selu backward is "
          "lambda * (alpha + y) with y the output, which already carries lambda; its float32 "
          "oneDNN path and Loom use the derivative lambda * alpha * exp(x) (checked by the "
          "sweep's finite differences)")
# rrelu in inference: MXNet leaves the hidden mask output unwritten outside training.
case("dt_rrelu", lambda mx: mx.sym.LeakyReLU(V(mx), act_type="rrelu", name="act"),
     {"data": (3, 4, 5)}, ["LeakyReLU"], dtypes={"data": F64}, train=False, outputs=[0])
# prelu: gamma of shape (C,), (N, C) and (1,), broadcast over data axes 0 and 1 as MXNet does.
for i, (ds, gs) in enumerate([((3, 4), (4,)), ((3, 4), (3, 4)), ((2, 3, 2, 2), (2, 3)),
                              ((2, 3, 4), (1,))]):
    case("dt_prelu%d" % i,
         lambda mx: mx.sym.LeakyReLU(V(mx), V(mx, "gamma"), act_type="prelu", name="act"),
         {"data": ds, "gamma": gs}, ["LeakyReLU"], dtypes=_all(["data", "gamma"], F64),
         init={"gamma": ("uniform", 0.1, 0.5)})
case("dt_leaky_f16", lambda mx: mx.sym.LeakyReLU(V(mx), act_type="gelu", name="act"),
     {"data": (4, 6)}, ["LeakyReLU"], dtypes={"data": "float16"}, tol=(1e-2, 1e-2),
     note="float16: MXNet and Loom compute in float and round the result to half")

# --------------------------------------------------------------------------- Activation, softmax
for t in ("relu", "sigmoid", "tanh", "softrelu", "softsign"):
    case("dt_act_%s" % t, lambda mx, t=t: mx.sym.Activation(V(mx), act_type=t, name="act"),
         {"data": (3, 5)}, ["Activation"], dtypes={"data": F64})
for op in ("softmax", "log_softmax"):
    case("dt_%s" % op, lambda mx, op=op: getattr(mx.sym, op)(V(mx), axis=1, name="sm"),
         {"data": (2, 4, 3)}, [op], dtypes={"data": F64})
    case("dt_%s_f16" % op, lambda mx, op=op: getattr(mx.sym, op)(V(mx), name="sm"),
         {"data": (3, 5)}, [op], dtypes={"data": "float16"}, tol=(1e-2, 1e-2),
         note="float16 rounding")

# --------------------------------------------------------------------------- Pad
for mode in ("constant", "edge", "reflect"):
    case("dt_pad_%s" % mode,
         lambda mx, mode=mode: mx.sym.Pad(V(mx), mode=mode, pad_width=(0, 0, 0, 0, 1, 2, 2, 1),
                                          constant_value=1.5, name="pad"),
         {"data": (2, 2, 3, 4)}, ["Pad"], dtypes={"data": F64})
case("dt_pad_f16",
     lambda mx: mx.sym.Pad(V(mx), mode="edge", pad_width=(0, 0, 0, 0, 1, 1, 2, 0), name="pad"),
     {"data": (1, 2, 3, 3)}, ["Pad"], dtypes={"data": "float16"}, tol=(1e-2, 1e-2),
     note="float16 rounding")

# --------------------------------------------------------------------------- normalisations
case("dt_groupnorm", lambda mx: mx.sym.GroupNorm(V(mx), V(mx, "gamma"), V(mx, "beta"),
                                                 num_groups=2, name="gn"),
     {"data": (2, 4, 3, 2), "gamma": (2,), "beta": (2,)}, ["GroupNorm"],
     dtypes=_all(["data", "gamma", "beta"], F64))
case("dt_layernorm", lambda mx: mx.sym.LayerNorm(V(mx), V(mx, "gamma"), V(mx, "beta"), name="ln"),
     {"data": (3, 5), "gamma": (5,), "beta": (5,)}, ["LayerNorm"],
     dtypes=_all(["data", "gamma", "beta"], F64))
# (InstanceNorm: MXNet 1.9.1 takes float32 only; Loom's shared kernel also computes float64.)
case("dt_groupnorm_f16", lambda mx: mx.sym.GroupNorm(V(mx), V(mx, "gamma"), V(mx, "beta"),
                                                     num_groups=2, name="gn"),
     {"data": (2, 4, 3), "gamma": (2,), "beta": (2,)}, ["GroupNorm"],
     dtypes=_all(["data", "gamma", "beta"], "float16"), tol=(2e-2, 2e-2),
     note="float16 rounding of inputs, outputs and gradients")
for mode in ("instance", "channel", "spatial"):
    case("dt_l2norm_%s" % mode, lambda mx, mode=mode: mx.sym.L2Normalization(V(mx), mode=mode,
                                                                            name="l2"),
         {"data": (2, 3, 4)}, ["L2Normalization"], dtypes={"data": F64})

# --------------------------------------------------------------------------- products
case("dt_fc", lambda mx: mx.sym.FullyConnected(V(mx), num_hidden=4, name="fc"),
     {"data": (3, 2, 5)}, ["FullyConnected"], dtypes=_all(["data", "fc_weight", "fc_bias"], F64))
case("dt_fc_noflat", lambda mx: mx.sym.FullyConnected(V(mx), num_hidden=3, no_bias=True,
                                                      flatten=False, name="fc"),
     {"data": (2, 3, 4)}, ["FullyConnected"], dtypes=_all(["data", "fc_weight"], F64))
case("dt_batch_dot", lambda mx: mx.sym.batch_dot(V(mx, "a"), V(mx, "b"), transpose_b=True,
                                                 name="bd"),
     {"a": (2, 3, 4), "b": (2, 5, 4)}, ["batch_dot"], dtypes=_all(["a", "b"], F64))

# --------------------------------------------------------------------------- mixed dtypes
case("dt_embedding_i32", lambda mx: mx.sym.Embedding(V(mx), input_dim=6, output_dim=3, name="emb"),
     {"data": (2, 4)}, ["Embedding"], dtypes={"data": "int32"}, init={"data": ("int", 0, 6)},
     no_grad=["data"])
case("dt_embedding_f64", lambda mx: mx.sym.Embedding(V(mx), input_dim=5, output_dim=2,
                                                     dtype="float64", name="emb"),
     {"data": (3,)}, ["Embedding"], dtypes={"data": F64, "emb_weight": F64},
     init={"data": ("int", 0, 5)}, no_grad=["data"])
for op, kw in (("reshape_like", {}), ("broadcast_like", {}), ("slice_like", {})):
    shapes = {"reshape_like": ((2, 6), (3, 4)), "broadcast_like": ((1, 4), (3, 4)),
              "slice_like": ((4, 5), (2, 3))}[op]
    case("dt_%s_i32" % op, lambda mx, op=op: getattr(mx.sym, op)(V(mx, "a"), V(mx, "b"), name="l"),
         {"a": shapes[0], "b": shapes[1]}, [op], dtypes={"b": "int32"},
         init={"b": ("int", 0, 5)}, no_grad=["b"])
