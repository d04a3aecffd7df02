"""Conformance cases of small core operators added for MXNet's own scripts and tests."""
from cases import case, V

# Shape constraint: lhs passes through with rhs's shape; rhs gets no gradient.
case("identity_like_rhs",
     lambda mx: mx.sym._internal._identity_with_attr_like_rhs(V(mx, "a"), V(mx, "b"),
                                                              name="ident"),
     {"a": (3, 4), "b": (3, 4)}, ["_identity_with_attr_like_rhs"], no_grad=["b"])
def _fc_with_constrained_weight(mx):
    w = V(mx, "w")
    wt = mx.sym._internal._identity_with_attr_like_rhs(mx.sym.broadcast_add(w, V(mx, "shift")),
                                                       w)
    return mx.sym.FullyConnected(V(mx), weight=wt, num_hidden=5, no_bias=True, name="fc")


case("identity_like_rhs_backward_infer", _fc_with_constrained_weight,
     {"data": (4, 6), "w": (5, 6), "shift": (1,)}, ["_identity_with_attr_like_rhs"])


def _mini_faster_rcnn(mx):
    """The shape of MXNet's Faster R-CNN example at toy size: backbone, RPN (class scores
    through a channel softmax, box deltas), Proposal, ROIPooling on the shared features, a
    classification head; outputs the class probabilities and the proposals."""
    data = V(mx)
    im_info = mx.sym.concat(V(mx, "hw"), V(mx, "imscale"), dim=1)
    conv = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=8, name="conv1")
    feat = mx.sym.Pooling(mx.sym.Activation(conv, act_type="relu", name="relu1"),
                          kernel=(4, 4), stride=(4, 4), pool_type="max", name="pool1")
    anchors = 6  # 2 scales x 3 ratios
    rpn_cls = mx.sym.Convolution(feat, kernel=(1, 1), num_filter=2 * anchors, name="rpn_cls")
    rpn_bbox = mx.sym.Convolution(feat, kernel=(1, 1), num_filter=4 * anchors,
                                  name="rpn_bbox")
    prob = mx.sym.SoftmaxActivation(mx.sym.Reshape(rpn_cls, shape=(0, 2, -1, 0)),
                                    mode="channel", name="rpn_prob")
    prob = mx.sym.Reshape(prob, shape=(0, 2 * anchors, -1, 0), name="rpn_prob_reshape")
    rois = mx.sym.contrib.Proposal(prob, rpn_bbox, im_info, feature_stride=4, scales=(2, 4),
                                   ratios=(0.5, 1, 2), rpn_pre_nms_top_n=40,
                                   rpn_post_nms_top_n=8, threshold=0.7, rpn_min_size=2,
                                   name="rois")
    pooled = mx.sym.ROIPooling(feat, rois, pooled_size=(2, 2), spatial_scale=0.25,
                               name="roi_pool")
    cls = mx.sym.softmax(mx.sym.FullyConnected(pooled, num_hidden=4, name="cls_score"),
                         name="cls_prob")
    return mx.sym.Group([cls, mx.sym.BlockGrad(rois, name="rois_out")])


case("mini_faster_rcnn", _mini_faster_rcnn,
     {"data": (1, 3, 32, 40), "hw": (1, 2), "imscale": (1, 1)},
     ["_contrib_Proposal", "ROIPooling"],
     init={"hw": ("uniform", 31.0, 32.0), "imscale": ("uniform", 0.9, 1.0)},
     no_grad=["hw", "imscale"], train=False,
     note="end to end in inference (Proposal is not differentiable; its NMS order decides "
          "which boxes ROIPooling sees)")


def _arcface_head(mx, s=8.0, m=0.5, classes=10):
    """insightface's ArcFace margin head (get_symbol, loss_type arcface): normalised
    embedding and weight, cos(theta + m) on the true class, scaled, into SoftmaxOutput."""
    label = V(mx, "softmax_label")
    nemb = mx.sym.L2Normalization(V(mx), mode="instance", name="fc1n") * s
    nw = mx.sym.L2Normalization(V(mx, "fc7_weight"), mode="instance", name="fc7n")
    fc7 = mx.sym.FullyConnected(nemb, nw, no_bias=True, num_hidden=classes, name="fc7")
    zy = mx.sym.pick(fc7, label, axis=1)
    theta = mx.sym.arccos(zy / s)
    diff = mx.sym.expand_dims(mx.sym.cos(theta + m) * s - zy, 1)
    gt = mx.sym.one_hot(label, depth=classes, on_value=1.0, off_value=0.0)
    return mx.sym.SoftmaxOutput(fc7 + mx.sym.broadcast_mul(gt, diff), label,
                                normalization="valid", name="softmax")


case("arcface_head", _arcface_head,
     {"data": (6, 8), "fc7_weight": (10, 8), "softmax_label": (6,)},
     ["L2Normalization", "pick", "arccos", "cos", "one_hot", "SoftmaxOutput"],
     init={"softmax_label": ("int", 0, 10)}, no_grad=["softmax_label"], head_grad=False,
     note="the whole margin head: forward, gradients of embedding and weight, req=add")
