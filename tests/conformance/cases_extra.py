"""cumsum, gradient multiplier / straight-through estimators, index_copy and the interleaved
multi-head attention matmuls (ids start with ex_)."""
from cases import case, V, sym_op


def contrib(mx, name):
    """mx.sym.contrib.<name>: MXNet's _contrib_ ops."""
    return getattr(mx.sym.contrib, name)


CUMSUM_ADD = dict(add_ref="write2", note="MXNet 1.9.1's _backward_np_cumsum ignores req "
                                         "(overwrites instead of accumulating)")

# --------------------------------------------------------------------------- cumsum
for i, (shape, kw) in enumerate([((2, 3, 4), dict()), ((2, 3, 4), dict(axis=1)),
                                 ((3, 5), dict(axis=1)), ((4, 2), dict(axis=0))]):
    case("ex_cumsum%d" % i, lambda mx, kw=kw: mx.sym.cumsum(V(mx, "a"), name="c", **kw),
         {"a": shape}, ["_np_cumsum"], **CUMSUM_ADD)
case("ex_cumsum_f64", lambda mx: mx.sym.cumsum(V(mx, "a"), axis=0, dtype="float64", name="c"),
     {"a": (4, 3)}, ["_np_cumsum"], grads=False,
     note="float64 output of a float32 input: forward only")
case("ex_cumsum_i32", lambda mx: mx.sym.cumsum(V(mx, "a"), axis=1, name="c"),
     {"a": (3, 4)}, ["_np_cumsum"], init={"a": ("int", -5, 6)}, dtypes={"a": "int32"},
     no_grad=["a"], grads=False)

# --------------------------------------------------------------------------- STE / multiplier
for i, s in enumerate([0.5, -2.0]):
    case("ex_gradmult%d" % i,
         lambda mx, s=s: contrib(mx, "gradientmultiplier")(V(mx), scalar=s, name="g"),
         {"data": (3, 4)}, ["_contrib_gradientmultiplier"])
case("ex_round_ste", lambda mx: contrib(mx, "round_ste")(V(mx), name="r"),
     {"data": (3, 4)}, ["_contrib_round_ste"], init={"data": ("normal", 3.0)})
case("ex_sign_ste", lambda mx: contrib(mx, "sign_ste")(V(mx), name="r"),
     {"data": (3, 4)}, ["_contrib_sign_ste"])

# --------------------------------------------------------------------------- index_copy
case("ex_index_copy0", lambda mx: contrib(mx, "index_copy")(
    V(mx, "old"), V(mx, "idx"), V(mx, "new"), name="ic"),
    {"old": (5, 3), "idx": (1,), "new": (1, 3)}, ["_contrib_index_copy"],
    init={"idx": ("int", 0, 5)}, no_grad=["idx"])
case("ex_index_copy1", lambda mx: contrib(mx, "index_copy")(
    V(mx, "old"), mx.sym.arange(start=4, stop=-1, step=-2), V(mx, "new"), name="ic"),
    {"old": (5, 2, 3), "new": (3, 2, 3)}, ["_contrib_index_copy"])

# --------------------------------------------------------------------------- interleaved
case("ex_selfatt_qk0", lambda mx: contrib(mx, "interleaved_matmul_selfatt_qk")(
    V(mx, "qkv"), heads=3, name="m"), {"qkv": (4, 2, 18)},
    ["_contrib_interleaved_matmul_selfatt_qk"])
case("ex_selfatt_valatt0", lambda mx: contrib(mx, "interleaved_matmul_selfatt_valatt")(
    V(mx, "qkv"), V(mx, "att"), heads=3, name="m"), {"qkv": (4, 2, 18), "att": (6, 4, 4)},
    ["_contrib_interleaved_matmul_selfatt_valatt"])
case("ex_encdec_qk0", lambda mx: contrib(mx, "interleaved_matmul_encdec_qk")(
    V(mx, "q"), V(mx, "kv"), heads=2, name="m"), {"q": (3, 2, 6), "kv": (5, 2, 12)},
    ["_contrib_interleaved_matmul_encdec_qk"])
case("ex_encdec_valatt0", lambda mx: contrib(mx, "interleaved_matmul_encdec_valatt")(
    V(mx, "kv"), V(mx, "att"), heads=2, name="m"), {"kv": (5, 2, 12), "att": (4, 3, 5)},
    ["_contrib_interleaved_matmul_encdec_valatt"])
# The self-attention pair sharing one projection (both gradients add into qkv).
def selfatt_chain(mx):
    qkv = V(mx, "qkv")
    att = contrib(mx, "interleaved_matmul_selfatt_qk")(qkv, heads=2, name="qk")
    return contrib(mx, "interleaved_matmul_selfatt_valatt")(qkv, att, heads=2, name="m")


case("ex_selfatt_chain", selfatt_chain, {"qkv": (3, 2, 12)},
    ["_contrib_interleaved_matmul_selfatt_qk", "_contrib_interleaved_matmul_selfatt_valatt"])


# --------------------------------------------------------------------------- image ops
def image(mx, name):
    """mx.sym.image.<name>: MXNet's _image_ ops."""
    return getattr(mx.sym.image, name)


for i, (shape, kw) in enumerate([((5, 4, 3), dict(x=1, y=2, width=3, height=2)),
                                 ((2, 6, 5, 1), dict(x=0, y=1, width=5, height=4))]):
    case("ex_image_crop%d" % i, lambda mx, kw=kw: image(mx, "crop")(V(mx), name="c", **kw),
         {"data": shape}, ["_image_crop"])
# Even sizes: MXNet 1.9.1 leaves the middle column/row of an odd size unwritten.
for op in ("flip_left_right", "flip_top_bottom"):
    case("ex_image_%s" % op, lambda mx, op=op: image(mx, op)(V(mx), name="f"),
         {"data": (4, 6, 3)}, ["_image_" + op],
         note="MXNet's gradient is a copy of the head gradient (not flipped)")
case("ex_image_adjust_lighting", lambda mx: image(mx, "adjust_lighting")(
    V(mx), alpha=(0.1, -0.2, 0.3), name="l"), {"data": (3, 4, 3)}, ["_image_adjust_lighting"],
    tol=(1e-4, 1e-4))
for i, (shape, kw) in enumerate([((5, 7, 3), dict(size=(4, 3))),
                                 ((4, 5, 1), dict(size=(9, 6))),
                                 ((2, 6, 4, 3), dict(size=2, keep_ratio=True)),
                                 ((5, 7, 3), dict(size=(4, 9), interp=0)),
                                 ((8, 6, 3), dict(size=(3, 4)))]):
    case("ex_image_resize%d" % i, lambda mx, kw=kw: image(mx, "resize")(V(mx), name="r", **kw),
         {"data": shape}, ["_image_resize"], no_grad=["data"], grads=False, tol=(1e-4, 1e-4),
         note="not differentiable (MXNet registers a _copy gradient of the input's shape)")



# --------------------------------------------------------------------------- random image ops
# Deterministic configurations: a flip-symmetric image for the random flips, equal factors,
# alpha_std 0 (MXNet's gradient of each is a copy of the head gradient).
for op, fixed in (("flip_left_right", "flip_left_right"), ("flip_top_bottom", "flip_top_bottom")):
    def sym_flip(mx, op=op, fixed=fixed):
        x = V(mx)
        return image(mx, "random_" + op)(x + image(mx, fixed)(x, name="g"), name="f")
    case("ex_image_random_%s" % op, sym_flip, {"data": (4, 6, 3)},
         ["_image_random_" + op, "_image_" + fixed])
for op, kw in (("brightness", dict(min_factor=1.5, max_factor=1.5)),
               ("contrast", dict(min_factor=0.5, max_factor=0.5)),
               ("saturation", dict(min_factor=0.3, max_factor=0.3))):
    for i, shape in enumerate([(3, 4, 3), (3, 4, 1)]):
        case("ex_image_random_%s%d" % (op, i), lambda mx, op=op, kw=kw: image(
            mx, "random_" + op)(V(mx), name="r", **kw), {"data": shape}, ["_image_random_" + op])
case("ex_image_random_lighting", lambda mx: image(mx, "random_lighting")(
    V(mx), alpha_std=0.0, name="r"), {"data": (3, 4, 3)}, ["_image_random_lighting"])
# 3 channels only: MXNet 1.9.1 leaves the output of a 1-channel image unwritten (Loom copies).
case("ex_image_random_hue0", lambda mx: image(mx, "random_hue")(
    V(mx), min_factor=0.15, max_factor=0.15, name="r"), {"data": (3, 4, 3)},
    ["_image_random_hue"], init={"data": ("uniform", 0.0, 255.0)}, tol=(1e-4, 1e-3))
# Every colour stage maps a black image to itself, whatever the draws and their order.
case("ex_image_random_color_jitter", lambda mx: image(mx, "random_color_jitter")(
    V(mx) * 0, brightness=0.3, contrast=0.3, saturation=0.3, hue=0.1, name="r"),
    {"data": (3, 4, 3)}, ["_image_random_color_jitter"])
