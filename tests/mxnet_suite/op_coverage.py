"""Which of MXNet 1.9.1's registered operators Loom has, and why the others are left out.

Compares `mx.operator.get_all_registered_operators()` of the MXNet 1.9.1 oracle (cached by
run.py in ~/.cache/loom/mxnet_suite/mxnet_ops-v2.json, or asked from the oracle here) with
Loom's registry and the Python-level functions of mx.nd / mx.sym, and prints a markdown
section for the README: counts per reason and the names of the ops left out without a
family reason. Not part of CI (it needs the oracle).

    .venv/bin/python tests/mxnet_suite/op_coverage.py [--oracle-python PY] > /tmp/ops.md
"""
import argparse
import collections
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.path.join(os.path.expanduser("~"), ".cache", "loom", "mxnet_suite")

# Families left out on purpose, matched in order: (reason, predicate on the name).
FAMILIES = [
    ("MXNet's internal backward nodes (Loom derives each op's backward itself)",
     lambda n: "_backward" in n),
    ("NumPy interface of MXNet 2 (mx.np / mx.npx; Loom implements the 1.x legacy API)",
     lambda n: n.startswith(("_np", "_npi", "_npx"))),
    ("sparse storage (csr / row_sparse; Loom's arrays are dense)",
     lambda n: "sparse" in n.lower() or "_dgl_" in n or n in ("cast_storage", "_contrib_getnnz",
                                                               "_contrib_edge_id", "_scatter_elemwise_div",
                                      "_scatter_minus_scalar", "_scatter_plus_scalar")),
    ("multi-device training internals (SyncBatchNorm's cross-GPU reduction)",
     lambda n: n == "_contrib_SyncBatchNorm"),
    ("quantisation / int8 graph passes",
     lambda n: "quantize" in n or "quantized" in n or n.startswith("_contrib_calibrate")
     or "requantize" in n),
    ("MKL-DNN / TensorRT subgraph fusions (Loom fuses in its own executor)",
     lambda n: n.startswith(("_sg_", "_TensorRT", "_trt"))),
    ("Gluon / autograd / control-flow internals (_CachedOp, _foreach, _while_loop, _cond, ...)",
     lambda n: n in ("_CachedOp", "_CachedOpThreadSafe", "_CustomFunction", "_foreach",
                     "_while_loop", "_cond", "_NoGradient", "_grad_add", "_set_value",
                     "_copyto", "_CrossDeviceCopy", "_NDArray", "_Native", "reset_arrays",
                     "_rnn_param_concat", "_zeros_without_dtype", "_imdecode",
                     "_cvimdecode", "_cvimread", "_cvimresize", "_cvcopyMakeBorder")),
    ("fused multi-tensor optimizer kernels (Loom's bucketed update ops do this in-graph)",
     lambda n: n.startswith(("multi_", "preloaded_multi_", "_multi_"))
     or n in ("mp_lamb_update_phase1", "mp_lamb_update_phase2", "mp_nag_mom_update",
              "multi_lars", "multi_sum_sq")),
]


def mxnet_ops(oracle):
    path = os.path.join(CACHE, "mxnet_ops-v2.json")
    if os.path.exists(path):
        with open(path) as f:
            return set(json.load(f))
    code = ("import json, mxnet as mx;"
            "print(json.dumps(sorted(mx.operator.get_all_registered_operators())))")
    p = subprocess.run([oracle, "-c", code], capture_output=True, text=True, timeout=300,
                       check=True)
    return set(json.loads(p.stdout.strip().splitlines()[-1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--oracle-python", default=os.environ.get(
        "LOOM_MXNET_ORACLE_PYTHON",
        os.path.join(os.path.expanduser("~"), ".cache", "loom", "mxnet-1.9.1-venv", "bin",
                     "python")))
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    import loom as mx
    from loom import _ops
    theirs = mxnet_ops(args.oracle_python)
    ours = set(_ops.all_ops())
    python_level = {n for n in theirs - ours
                    if callable(getattr(mx.nd, n, None)) and callable(getattr(mx.sym, n, None))}
    missing = sorted(theirs - ours - python_level)
    by_reason = collections.OrderedDict((r, []) for r, _ in FAMILIES)
    unexplained = []
    for n in missing:
        for reason, pred in FAMILIES:
            if pred(n):
                by_reason[reason].append(n)
                break
        else:
            unexplained.append(n)
    print("MXNet 1.9.1 registers %d operator names (aliases included). Loom registers %d "
          "names; **%d of MXNet's are Loom operators** and %d more are Python functions of "
          "mx.nd and mx.sym in Loom (the random samplers, shuffle, ...).\n"
          % (len(theirs), len(ours), len(theirs & ours), len(python_level)))
    print("| left out | names | reason |")
    print("|---|---:|---|")
    for reason, names in by_reason.items():
        if names:
            print("| %s | %d | %s |" % (", ".join(names[:3]) + (", ..." if len(names) > 3
                                                                 else ""), len(names), reason))
    print("\nNot yet in Loom (%d): %s." % (len(unexplained), ", ".join(
        "`%s`" % n for n in unexplained) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
