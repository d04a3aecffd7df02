"""Every operator Loom registers is either exercised against MXNet by this suite or listed
here with the reason it is not."""
import cases as C

# Registered in Loom, no MXNet 1.9.1 twin, or covered elsewhere.
NOT_COMPARED = {
    "Custom": "the seed scenario (test_2_losses_seed) runs the same Python class in both",
    "adamw_update": "Loom's attribute form of _adamw_update (no MXNet op of that name); "
                    "_adamw_update is compared",
    "_square_sum": "MXNet 1.9.1 implements it for row_sparse input only (a dense case fails "
                   "there with 'Operator not implemented'); the C++ op sweep checks Loom's "
                   "dense kernel against a reference",
    "fill_element_0index": "MXNet 1.9.1 cannot compose it as a symbol; MXNet's own "
                           "test_ndarray_fill (tests/mxnet_suite) and the op sweep cover it",
    "_assign": "Loom's switched assignment for training-step graphs (no MXNet op); "
               "checked against a reference by the C++ op sweep",
}


# Loom's own training-step ops (`_loom_*`: counters, predicates, accumulation, EMA, in-graph
# gradients, learning-rate schedules) have no MXNet twin; tests/unit/test_ops_ema.cc,
# test_step_graph.cc and test_step_builder.cc check them against closed forms.
LOOM_ONLY_PREFIX = "_loom_"


def test_every_registered_op_is_compared(mx):
    from loom import _ops
    registered = {info.name for _, info in _ops.function_names()}
    covered = set()
    for c in C.CASES:
        covered |= c.ops
    covered |= {u[0] for u in C.UPDATES}
    covered |= {"lamb_update_phase1", "lamb_update_phase2"} if C.LAMB_CASES else set()
    missing = sorted(op for op in registered - covered - set(NOT_COMPARED)
                     if not op.startswith(LOOM_ONLY_PREFIX))
    assert not missing, "registered ops without a conformance case: %s" % missing
