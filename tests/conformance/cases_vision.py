"""Conformance cases for the vision operators: ROIPooling, _contrib_ROIAlign, GridGenerator,
BilinearSampler, SpatialTransformer, Correlation, _contrib_AdaptiveAvgPooling2D,
_contrib_BilinearResize2D, im2col, col2im (MXNet 1.9.1)."""
from cases import case, V, sym_op  # noqa: F401


def _rois(mx):
    # rows [batch index, x1, y1, x2, y2]: an integer batch index and box corners.
    return mx.sym.concat(mx.sym.var("bidx"), mx.sym.var("box"), dim=1)


_roi_init = {"bidx": ("int", 0, 2), "box": ("uniform", 0.0, 7.0)}
for i, kw in enumerate([dict(pooled_size=(2, 2), spatial_scale=1.0),
                        dict(pooled_size=(3, 2), spatial_scale=0.5)]):
    case("ROIPooling%d" % i,
         lambda mx, kw=kw: mx.sym.ROIPooling(V(mx), _rois(mx), name="roipool", **kw),
         {"data": (2, 3, 8, 8), "bidx": (4, 1), "box": (4, 4)}, ["ROIPooling"],
         init=_roi_init, no_grad=["bidx", "box"])
def _rois_wh(mx):
    # [batch index, x1, y1, x1 + w, y1 + h]: boxes of positive size (needed by aligned=True).
    xy = mx.sym.var("xy")
    return mx.sym.concat(mx.sym.var("bidx"), xy, xy + mx.sym.var("wh"), dim=1)


for i, kw in enumerate([dict(pooled_size=(2, 2), spatial_scale=1.0),
                        dict(pooled_size=(3, 2), spatial_scale=0.5, sample_ratio=2),
                        dict(pooled_size=(2, 2), spatial_scale=1.0, sample_ratio=2,
                             position_sensitive=True),
                        dict(pooled_size=(2, 2), spatial_scale=1.0, aligned=True)]):
    case("ROIAlign%d" % i,
         lambda mx, kw=kw: mx.sym.contrib.ROIAlign(V(mx), _rois_wh(mx), name="roialign",
                                                          **kw),
         {"data": (2, 8, 8, 8), "bidx": (4, 1), "xy": (4, 2), "wh": (4, 2)},
         ["_contrib_ROIAlign"],
         init={"bidx": ("int", 0, 2), "xy": ("uniform", -1.0, 6.0), "wh": ("uniform", 0.5, 4.0)},
         no_grad=["bidx", "xy", "wh"], tol=(1e-4, 1e-4))

case("GridGenerator_affine",
     lambda mx: mx.sym.GridGenerator(V(mx), transform_type="affine", target_shape=(4, 5),
                                     name="grid"),
     {"data": (2, 6)}, ["GridGenerator"])
case("GridGenerator_warp",
     lambda mx: mx.sym.GridGenerator(V(mx), transform_type="warp", name="grid"),
     {"data": (2, 2, 4, 5)}, ["GridGenerator"])
case("BilinearSampler0",
     lambda mx: mx.sym.BilinearSampler(V(mx), mx.sym.var("grid"), name="sampler"),
     {"data": (2, 3, 5, 6), "grid": (2, 2, 4, 4)}, ["BilinearSampler"],
     init={"grid": ("uniform", -1.1, 1.1)}, tol=(1e-4, 1e-4))
case("SpatialTransformer0",
     lambda mx: mx.sym.SpatialTransformer(V(mx), mx.sym.var("loc"), target_shape=(4, 5),
                                          transform_type="affine", sampler_type="bilinear",
                                          name="stn"),
     {"data": (2, 3, 6, 7), "loc": (2, 6)}, ["SpatialTransformer"],
     init={"loc": ("uniform", -0.8, 0.8)}, tol=(1e-4, 1e-4), add_ref="write2",
     note="MXNet 1.9.1 SpatialTransformer req=add overwrites: its CPU backward zeroes the data "
          "gradient and assigns the loc gradient whatever the request")

for i, kw in enumerate([dict(kernel_size=1, max_displacement=2, pad_size=2),
                        dict(kernel_size=3, max_displacement=1, stride1=2, pad_size=2,
                             is_multiply=False),
                        dict(kernel_size=1, max_displacement=2, stride2=2, pad_size=2)]):
    case("Correlation%d" % i,
         lambda mx, kw=kw: mx.sym.Correlation(mx.sym.var("data1"), mx.sym.var("data2"),
                                              name="corr", **kw),
         {"data1": (2, 2, 6, 5), "data2": (2, 2, 6, 5)}, ["Correlation"], tol=(1e-4, 1e-4))

for i, kw in enumerate([dict(output_size=(3, 2)), dict(output_size=4), dict()]):
    case("AdaptiveAvgPooling2D%d" % i,
         lambda mx, kw=kw: mx.sym.contrib.AdaptiveAvgPooling2D(V(mx), name="aap", **kw),
         {"data": (2, 3, 7, 6)}, ["_contrib_AdaptiveAvgPooling2D"])

for i, kw in enumerate([dict(height=7, width=9), dict(height=3, width=4, align_corners=False),
                        dict(scale_height=2.0, scale_width=0.5), dict(mode="to_odd_up"),
                        dict(mode="odd_scale", scale_height=2.0, scale_width=2.0)]):
    case("BilinearResize2D%d" % i,
         lambda mx, kw=kw: mx.sym.contrib.BilinearResize2D(V(mx), name="resize", **kw),
         {"data": (2, 2, 4, 5)}, ["_contrib_BilinearResize2D"], tol=(1e-4, 1e-4))
case("BilinearResize2D_like",
     lambda mx: mx.sym.contrib.BilinearResize2D(V(mx), mx.sym.var("like"), mode="like",
                                                         name="resize"),
     {"data": (2, 2, 4, 5), "like": (2, 1, 6, 3)}, ["_contrib_BilinearResize2D"], tol=(1e-4, 1e-4),
     add_ref="write2",
     note="MXNet 1.9.1 BilinearResize2D mode=like req=add overwrites the like input's (zero) "
          "gradient instead of leaving it")

for i, kw in enumerate([dict(kernel=(2, 3)),
                        dict(kernel=(3, 3), stride=(2, 2), dilate=(1, 2), pad=(1, 1))]):
    case("im2col%d" % i, lambda mx, kw=kw: mx.sym.im2col(V(mx), name="im2col", **kw),
         {"data": (2, 2, 6, 7)}, ["im2col"])
case("col2im0",
     lambda mx: mx.sym.col2im(V(mx), output_size=(6, 7), kernel=(3, 3), stride=(2, 2),
                              dilate=(1, 2), pad=(1, 1), name="col2im"),
     {"data": (2, 18, 9)}, ["col2im"])
case("col2im1",
     lambda mx: mx.sym.col2im(V(mx), output_size=(4, 5), kernel=(2, 2), name="col2im"),
     {"data": (1, 8, 12)}, ["col2im"])


def _rrois(mx):
    # [batch index, centre x, centre y, w, h, theta in degrees]
    return mx.sym.concat(mx.sym.var("bidx"), mx.sym.var("cxy"), mx.sym.var("wh"),
                         mx.sym.var("theta"), dim=1)


for i, kw in enumerate([dict(pooled_size=(2, 3), spatial_scale=1.0),
                        dict(pooled_size=(2, 2), spatial_scale=0.5, sampling_ratio=2)]):
    case("RROIAlign%d" % i,
         lambda mx, kw=kw: mx.sym.contrib.RROIAlign(V(mx), _rrois(mx), name="rroialign", **kw),
         {"data": (2, 3, 8, 8), "bidx": (4, 1), "cxy": (4, 2), "wh": (4, 2), "theta": (4, 1)},
         ["_contrib_RROIAlign"],
         init={"bidx": ("int", 0, 2), "cxy": ("uniform", 0.0, 8.0), "wh": ("uniform", 0.5, 6.0),
               "theta": ("uniform", 0.0, 180.0)},
         no_grad=["data", "bidx", "cxy", "wh", "theta"], train=False, tol=(1e-4, 1e-4),
         note="MXNet 1.9.1 registers no gradient for RROIAlign: inference only")

for i, kw in enumerate([dict(spatial_scale=0.5, output_dim=2, pooled_size=2),
                        dict(spatial_scale=1.0, output_dim=1, pooled_size=3, group_size=2)]):
    case("PSROIPooling%d" % i,
         lambda mx, kw=kw: mx.sym.contrib.PSROIPooling(V(mx), _rois_wh(mx), name="psroi", **kw),
         {"data": (2, 8, 8, 8), "bidx": (3, 1), "xy": (3, 2), "wh": (3, 2)},
         ["_contrib_PSROIPooling"],
         init={"bidx": ("int", 0, 2), "xy": ("uniform", 0.0, 6.0), "wh": ("uniform", 0.5, 6.0)},
         no_grad=["bidx", "xy", "wh"], tol=(1e-4, 1e-4))

_deform = [
    # (data, offset channels per deformable group factor, kwargs)
    ((2, 4, 5, 6), dict(kernel=(3, 3), num_filter=3, pad=(1, 1))),
    ((1, 4, 6, 6), dict(kernel=(3, 3), num_filter=4, pad=(2, 2), dilate=(2, 2), num_group=2,
                        num_deformable_group=2)),
    ((2, 2, 6, 5), dict(kernel=(2, 3), num_filter=2, stride=(2, 1), no_bias=True)),
]
for i, (s, kw) in enumerate(_deform):
    kh, kw_ = kw["kernel"]
    dg = kw.get("num_deformable_group", 1)
    oh = (s[2] + 2 * kw.get("pad", (0, 0))[0] - (kw.get("dilate", (1, 1))[0] * (kh - 1) + 1)) \
        // kw.get("stride", (1, 1))[0] + 1
    ow = (s[3] + 2 * kw.get("pad", (0, 0))[1] - (kw.get("dilate", (1, 1))[1] * (kw_ - 1) + 1)) \
        // kw.get("stride", (1, 1))[1] + 1
    case("DeformableConvolution%d" % i,
         lambda mx, kw=kw: mx.sym.contrib.DeformableConvolution(
             V(mx), mx.sym.var("offset"), name="dconv", **kw),
         {"data": s, "offset": (s[0], dg * 2 * kh * kw_, oh, ow)},
         ["_contrib_DeformableConvolution"],
         init={"offset": ("uniform", -1.5, 1.5)}, tol=(1e-4, 1e-4), add_ref="write2",
         note="MXNet 1.9.1 DeformableConvolution req=add overwrites the data and offset "
              "gradients (its col2im writes them)")
    case("ModulatedDeformableConvolution%d" % i,
         lambda mx, kw=kw: mx.sym.contrib.ModulatedDeformableConvolution(
             V(mx), mx.sym.var("offset"), mx.sym.var("mask"), name="mdconv", **kw),
         {"data": s, "offset": (s[0], dg * 2 * kh * kw_, oh, ow), "mask": (s[0], dg * kh * kw_, oh, ow)},
         ["_contrib_ModulatedDeformableConvolution"],
         init={"offset": ("uniform", -1.5, 1.5), "mask": ("uniform", 0.0, 1.0)}, tol=(1e-4, 1e-4),
         train=False,
         note="MXNet 1.9.1 has no CPU backward for ModulatedDeformableConvolution ('only "
              "implemented in GPU'): forward only; Loom's gradient is checked by the op sweep")

for i, kw in enumerate([dict(spatial_scale=1.0, output_dim=2, group_size=2, pooled_size=2,
                             sample_per_part=2, trans_std=0.1),
                        dict(spatial_scale=1.0, output_dim=2, group_size=3, pooled_size=3,
                             part_size=3, sample_per_part=1, trans_std=0.1)]):
    case("DeformablePSROIPooling%d" % i,
         lambda mx, kw=kw: mx.sym.contrib.DeformablePSROIPooling(
             V(mx), _rois_wh(mx), mx.sym.var("trans"), name="dpsroi", **kw),
         {"data": (2, 2 * kw["group_size"] ** 2, 12, 12), "bidx": (3, 1), "xy": (3, 2),
          "wh": (3, 2), "trans": (3, 2, kw.get("part_size", kw["pooled_size"]),
                                  kw.get("part_size", kw["pooled_size"]))},
         ["_contrib_DeformablePSROIPooling"],
         # boxes well inside the map: no sample is clamped to the border (where MXNet's trans
         # gradient is not the derivative of its forward)
         init={"bidx": ("int", 0, 2), "xy": ("uniform", 2.0, 4.0), "wh": ("uniform", 2.0, 5.0),
               "trans": ("uniform", -1.0, 1.0)},
         no_grad=["bidx", "xy", "wh"], tol=(1e-4, 1e-4))
case("DeformablePSROIPooling_notrans",
     lambda mx: mx.sym.contrib.DeformablePSROIPooling(
         V(mx), _rois_wh(mx), spatial_scale=0.5, output_dim=1, group_size=2, pooled_size=2,
         sample_per_part=2, no_trans=True, name="dpsroi"),
     {"data": (2, 4, 8, 8), "bidx": (3, 1), "xy": (3, 2), "wh": (3, 2)},
     ["_contrib_DeformablePSROIPooling"],
     init={"bidx": ("int", 0, 2), "xy": ("uniform", 0.0, 10.0), "wh": ("uniform", 0.5, 8.0)},
     no_grad=["bidx", "xy", "wh"], tol=(1e-4, 1e-4))


def _im_info(mx):
    # [height, width, scale] per image
    return mx.sym.concat(mx.sym.var("hw"), mx.sym.var("imscale"), dim=1)


_prop_kw = dict(scales=(2, 4), ratios=(0.5, 1, 2), feature_stride=4, rpn_pre_nms_top_n=40,
                rpn_post_nms_top_n=12, threshold=0.6, rpn_min_size=3)
for i, (op, n, kw) in enumerate([("Proposal", 1, dict(_prop_kw, output_score=True)),
                                 ("MultiProposal", 3, dict(_prop_kw, output_score=True)),
                                 ("MultiProposal", 2, dict(_prop_kw, rpn_pre_nms_top_n=-1,
                                                           rpn_post_nms_top_n=30))]):
    case("%s%d" % (op, i),
         lambda mx, op=op, kw=kw: getattr(mx.sym.contrib, op)(
             mx.sym.var("cls_prob"), mx.sym.var("bbox_pred"), _im_info(mx), name="prop", **kw),
         {"cls_prob": (n, 12, 5, 6), "bbox_pred": (n, 24, 5, 6), "hw": (n, 2), "imscale": (n, 1)},
         ["_contrib_" + op],
         init={"cls_prob": ("uniform", 0.0, 1.0), "bbox_pred": ("normal", 0.3),
               "hw": ("uniform", 14.0, 24.0), "imscale": ("uniform", 0.5, 1.0)},
         no_grad=["hw", "imscale"], tol=(1e-4, 1e-4),
         note="not differentiable: zero gradients")


_ZERO_NOTE = ("not differentiable: zero gradients; MXNet 1.9.1 req=add overwrites the gradient "
              "with zeros instead of leaving it")


def _corner_boxes(mx, name):
    # [x1, y1, x1 + w, y1 + h] with positive sizes
    xy = mx.sym.var(name + "_xy")
    return mx.sym.concat(xy, xy + mx.sym.var(name + "_wh"), dim=-1)


_box_init = lambda *names: dict(  # noqa: E731
    [(n + "_xy", ("uniform", 0.0, 1.0)) for n in names] +
    [(n + "_wh", ("uniform", 0.1, 0.8)) for n in names])
for i, (fmt, sa, sb) in enumerate([("corner", (3,), (2, 2)), ("center", (2, 2), (4,))]):
    case("box_iou%d" % i,
         lambda mx, fmt=fmt: mx.sym.contrib.box_iou(_corner_boxes(mx, "a"), _corner_boxes(mx, "b"),
                                                    format=fmt, name="iou"),
         {"a_xy": sa + (2,), "a_wh": sa + (2,), "b_xy": sb + (2,), "b_wh": sb + (2,)},
         ["_contrib_box_iou"], init=_box_init("a", "b"),
         add_ref="write2", note=_ZERO_NOTE)
for i, kw in enumerate([dict(threshold=0.2), dict(threshold=0.7, is_ascend=True, topk=2)]):
    case("bipartite_matching%d" % i,
         lambda mx, kw=kw: mx.sym.contrib.bipartite_matching(V(mx), name="match", **kw),
         {"data": (2, 4, 3)}, ["_contrib_bipartite_matching"],
         init={"data": ("uniform", 0.0, 1.0)},
         add_ref="write2", note=_ZERO_NOTE)
case("box_encode0",
     lambda mx: mx.sym.contrib.box_encode(mx.sym.var("samples"), mx.sym.var("matches"),
                                          _corner_boxes(mx, "anc"), _corner_boxes(mx, "ref"),
                                          mx.sym.var("means"), mx.sym.var("stds"), name="enc"),
     {"samples": (2, 5), "matches": (2, 5), "anc_xy": (2, 5, 2), "anc_wh": (2, 5, 2),
      "ref_xy": (2, 3, 2), "ref_wh": (2, 3, 2), "means": (4,), "stds": (4,)},
     ["_contrib_box_encode"],
     init=dict(_box_init("anc", "ref"), samples=("int", -1, 2), matches=("int", 0, 3),
               means=("normal", 0.1), stds=("uniform", 0.1, 0.3)),
     no_grad=["samples", "matches"], add_ref="write2", note=_ZERO_NOTE)
for i, kw in enumerate([dict(std0=0.1, std1=0.1, std2=0.2, std3=0.2),
                        dict(format="corner", clip=0.3)]):
    case("box_decode%d" % i,
         lambda mx, kw=kw: mx.sym.contrib.box_decode(V(mx), _corner_boxes(mx, "anc"), name="dec",
                                                     **kw),
         {"data": (2, 4, 4), "anc_xy": (1, 4, 2), "anc_wh": (1, 4, 2)}, ["_contrib_box_decode"],
         init=_box_init("anc"), add_ref="write2", note=_ZERO_NOTE)
for i, kw in enumerate([dict(sizes=(0.75, 0.5, 0.25), ratios=(1, 2, 0.5)),
                        dict(sizes=(0.4,), ratios=(3, 1), clip=True, steps=(0.3, 0.2),
                             offsets=(0.2, 0.7))]):
    case("MultiBoxPrior%d" % i,
         lambda mx, kw=kw: mx.sym.contrib.MultiBoxPrior(V(mx), name="prior", **kw),
         {"data": (1, 2, 4, 5)}, ["_contrib_MultiBoxPrior"],
         add_ref="write2", note=_ZERO_NOTE)
