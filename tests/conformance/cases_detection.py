"""Conformance cases for the detection operators: _contrib_box_nms (MXNet 1.9.1)."""
from cases import case, V, sym_op  # noqa: F401


def _rows(mx, center=False):
    # [class id, score, x1, y1, x2, y2] (corner) or [id, score, x, y, w, h] (center): boxes
    # of positive size so the IoUs are well defined.
    xy, wh = mx.sym.var("xy"), mx.sym.var("wh")
    box = mx.sym.concat(xy, wh, dim=-1) if center else mx.sym.concat(xy, xy + wh, dim=-1)
    return mx.sym.concat(mx.sym.var("cid"), mx.sym.var("score"), box, dim=-1)


_init = {"cid": ("int", 0, 3), "score": ("uniform", 0.0, 1.0), "xy": ("uniform", 0.0, 6.0),
         "wh": ("uniform", 1.0, 5.0)}
_nms_note = ("MXNet 1.9.1 box_nms backward overwrites the gradient regardless of req "
             "(in_grad = 0, then the scatter)")
for i, (lead, kw) in enumerate([
        ((), dict(overlap_thresh=0.3)),
        ((), dict(overlap_thresh=0.2, id_index=0, topk=6, valid_thresh=0.2)),
        ((), dict(overlap_thresh=0.2, id_index=0, force_suppress=True)),
        ((2,), dict(overlap_thresh=0.3, id_index=0, background_id=1)),
        ((2,), dict(overlap_thresh=0.4, out_format="center")),
        ((), dict(overlap_thresh=0.3, in_format="center", out_format="center"))]):
    center = kw.get("in_format") == "center"
    case("detection_box_nms%d" % i,
         lambda mx, kw=kw, center=center: mx.contrib.sym.box_nms(_rows(mx, center), name="nms",
                                                                 **kw),
         {"cid": lead + (10, 1), "score": lead + (10, 1), "xy": lead + (10, 2),
          "wh": lead + (10, 2)},
         ["_contrib_box_nms"], init=_init, no_grad=["cid"], add_ref="write2", note=_nms_note,
         grads=kw.get("out_format", "corner") == "corner" or center)
case("detection_box_nms_alias",
     lambda mx: mx.contrib.sym.box_non_maximum_suppression(_rows(mx), overlap_thresh=0.5,
                                                           name="nms"),
     {"cid": (6, 1), "score": (6, 1), "xy": (6, 2), "wh": (6, 2)},
     ["_contrib_box_nms"], init=_init, no_grad=["cid"], add_ref="write2", note=_nms_note)


# ------------------------------------------------------------------ legacy checkpoint ops
# (in this family's file: the ops old detection checkpoints contain)
for i, (shape, kw) in enumerate([((2, 3, 4, 4), dict(fix_gamma=False)),
                                 ((4, 3), dict()),
                                 ((2, 3, 3, 3), dict(use_global_stats=True, fix_gamma=False,
                                                     eps=0.01))]):
    case("legacy_BatchNorm_v1_%d" % i,
         lambda mx, kw=kw: mx.sym.BatchNorm_v1(V(mx), name="bn", **kw),
         {"data": shape}, ["BatchNorm_v1"],
         init={"bn_gamma": ("uniform", 0.5, 2.0), "bn_moving_var": ("uniform", 0.5, 2.0)})
for i, (shape, kw) in enumerate([((2, 3, 6, 6), dict(kernel=(3, 3), num_filter=4, pad=(1, 1))),
                                 ((2, 4, 7, 6), dict(kernel=(2, 3), num_filter=4, stride=(2, 1),
                                                     num_group=2, no_bias=True))]):
    case("legacy_Convolution_v1_%d" % i,
         lambda mx, kw=kw: mx.sym.Convolution_v1(V(mx), name="conv", **kw),
         {"data": shape}, ["Convolution_v1"], tol=(1e-4, 1e-4))
case("legacy_IdentityAttachKLSparseReg",
     lambda mx: mx.sym.IdentityAttachKLSparseReg(
         mx.sym.sigmoid(V(mx), name="sig"), sparseness_target=0.2, penalty=0.01,
         momentum=0.5, name="kl"),
     {"data": (4, 5)}, ["IdentityAttachKLSparseReg"],
     init={"kl_moving_avg": ("uniform", 0.2, 0.6)})


# ------------------------------------------------------------------ MultiBoxDetection (SSD)
def _mbdet(mx, **kw):
    cls = mx.sym.softmax(mx.sym.var("cls"), axis=1, name="cls_prob")
    xy = mx.sym.var("axy")
    anchor = mx.sym.reshape(mx.sym.concat(xy, xy + mx.sym.var("awh"), dim=1), shape=(1, -1, 4))
    return mx.contrib.sym.MultiBoxDetection(cls, mx.sym.var("loc"), anchor, name="det", **kw)


_det_note = ("not differentiable; MXNet 1.9.1 writes the zero gradient regardless of req "
             "(add overwrites)")
for i, kw in enumerate([dict(), dict(threshold=0.2, nms_threshold=0.3),
                        dict(force_suppress=True, nms_topk=5, clip=False,
                             variances=(0.2, 0.2, 0.1, 0.1)),
                        dict(nms_threshold=0)]):
    case("detection_MultiBoxDetection%d" % i, lambda mx, kw=kw: _mbdet(mx, **kw),
         {"cls": (2, 4, 12), "loc": (2, 48), "axy": (12, 2), "awh": (12, 2)},
         ["_contrib_MultiBoxDetection"],
         init={"axy": ("uniform", 0.0, 0.6), "awh": ("uniform", 0.1, 0.4),
               "loc": ("normal", 0.5), "cls": ("normal", 2.0)},
         add_ref="write2", note=_det_note)


# ------------------------------------------------------------------ MultiBoxTarget (SSD)
def _mbtarget(mx, pad, **kw):
    axy = mx.sym.var("axy")
    anchor = mx.sym.reshape(mx.sym.concat(axy, axy + mx.sym.var("awh"), dim=1),
                            shape=(1, -1, 4))
    gxy = mx.sym.var("gxy")
    label = mx.sym.concat(mx.sym.var("gcls"), gxy, gxy + mx.sym.var("gwh"), dim=2)
    if pad:  # a -1 padding row after the ground truths
        label = mx.sym.concat(label, mx.sym.ones(shape=(2, 1, 5)) * -1, dim=1)
    return mx.contrib.sym.MultiBoxTarget(anchor, label, mx.sym.var("cls_pred"), name="tgt",
                                         **kw)


for i, (pad, kw) in enumerate([(False, dict()),
                               (True, dict(overlap_threshold=0.3, negative_mining_ratio=2,
                                           negative_mining_thresh=0.5)),
                               (True, dict(overlap_threshold=0, ignore_label=-2,
                                           variances=(0.2, 0.2, 0.1, 0.1)))]):
    case("detection_MultiBoxTarget%d" % i, lambda mx, pad=pad, kw=kw: _mbtarget(mx, pad, **kw),
         {"axy": (16, 2), "awh": (16, 2), "gcls": (2, 3, 1), "gxy": (2, 3, 2),
          "gwh": (2, 3, 2), "cls_pred": (2, 4, 16)},
         ["_contrib_MultiBoxTarget"],
         init={"axy": ("uniform", 0.0, 0.7), "awh": ("uniform", 0.1, 0.4),
               "gcls": ("int", 0, 3), "gxy": ("uniform", 0.0, 0.7),
               "gwh": ("uniform", 0.1, 0.4)},
         no_grad=["axy", "awh", "gcls", "gxy", "gwh"], add_ref="write2",
         note="not differentiable; MXNet 1.9.1 writes cls_pred's zero gradient regardless of "
              "req (add overwrites) and never writes the anchor/label gradients")
for i, kw in enumerate([dict(kernel=(3, 3)),
                        dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1)),
                        dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pooling_convention="full"),
                        dict(kernel=(3, 2), stride=(2, 2), pad=(1, 1), pool_type="avg"),
                        dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                             pooling_convention="full"),
                        dict(kernel=(3, 3), stride=(2, 2), pool_type="avg",
                             pooling_convention="full"),
                        dict(kernel=(2, 2), stride=(2, 2), pad=(1, 1), pool_type="sum",
                             pooling_convention="full"),
                        dict(kernel=(1, 1), global_pool=True, pool_type="avg"),
                        dict(kernel=(1, 1), global_pool=True, pool_type="max")]):
    case("legacy_Pooling_v1_%d" % i,
         lambda mx, kw=kw: mx.sym.Pooling_v1(V(mx), name="pool", **kw),
         {"data": (2, 3, 7, 8)}, ["Pooling_v1"])
