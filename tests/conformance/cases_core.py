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
