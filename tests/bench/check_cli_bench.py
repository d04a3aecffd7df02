"""ctest check of `loom bench` (not a benchmark: no timing thresholds). Runs it on a small
convolutional graph for a few iterations and checks the output's format and consistency:
ordered percentiles, one profile row per kernel call site with every call counted, per-op
times that add up to the printed sum and roughly to the wall time, percentages summing to
100, the oneDNN implementation of each heavy op, the --trace file (one 'forward' event per
iteration, each kernel call inside its iteration, the same calls as the table), and usage
errors exiting with 2.

    python check_cli_bench.py path/to/loom
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ITERS = 6


def node(op, name, inputs, **attrs):
    d = {"op": op, "name": name, "inputs": [[i, 0, 0] for i in inputs]}
    if attrs:
        d["attrs"] = {k: str(v) for k, v in attrs.items()}
    return d


def small_net():
    nodes = [node("null", n, []) for n in ("data", "conv0_weight", "conv0_bias")]
    nodes.append(node("Convolution", "conv0", [0, 1, 2], kernel="(3, 3)", pad="(1, 1)",
                      num_filter=8))
    for n in ("bn0_gamma", "bn0_beta", "bn0_moving_mean", "bn0_moving_var"):
        nodes.append(node("null", n, []))
    nodes.append(node("BatchNorm", "bn0", [3, 4, 5, 6, 7], fix_gamma="False"))
    nodes.append(node("Activation", "relu0", [8], act_type="relu"))
    nodes.append(node("Pooling", "pool0", [9], kernel="(2, 2)", stride="(2, 2)",
                      pool_type="max"))
    nodes.append(node("null", "fc0_weight", []))
    nodes.append(node("null", "fc0_bias", []))
    nodes.append(node("FullyConnected", "fc0", [10, 11, 12], num_hidden=10))
    nodes.append(node("null", "softmax_label", []))
    nodes.append(node("SoftmaxOutput", "softmax", [13, 14]))
    args = [i for i, n in enumerate(nodes) if n["op"] == "null"]
    return {"nodes": nodes, "arg_nodes": args, "heads": [[len(nodes) - 1, 0, 0]],
            "attrs": {"mxnet_version": ["int", 10901]}}


def fail(msg, out=""):
    sys.exit("check_cli_bench: %s\n--- output ---\n%s" % (msg, out))


def main():
    loom = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "small-symbol.json")
        with open(model, "w") as f:
            json.dump(small_net(), f)
        trace_path = os.path.join(tmp, "trace.json")
        cmd = [loom, "bench", model, "--shape", "data=4,3,16,16", "--batch", "2",
               "--threads", "1", "--iters", str(ITERS), "--warmup", "2", "--trace", trace_path]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        out = r.stdout
        if r.returncode:
            fail("exit %d: %s" % (r.returncode, r.stderr), out)
        if "inputs: data=(2, 3, 16, 16)" not in out:
            fail("--batch 2 did not set the first dimension", out)
        m = re.search(r"latency ms: mean (\S+)  p50 (\S+)  p90 (\S+)  p99 (\S+)  min (\S+)  max (\S+)",
                      out)
        if not m:
            fail("no latency line", out)
        mean, p50, p90, p99, lo, hi = map(float, m.groups())
        if not (0 < lo <= p50 <= p90 <= p99 <= hi and lo <= mean <= hi):
            fail("percentiles out of order", out)
        m = re.search(r"throughput: (\S+) samples/s \(batch 2\), (\S+) batches/s", out)
        if not m or abs(float(m.group(1)) - 2 * float(m.group(2))) > 0.02 * float(m.group(1)):
            fail("throughput line wrong (samples/s must be 2x batches/s)", out)

        m = re.search(r"per-op profile: (\d+) iterations, wall (\S+) ms, ops sum (\S+) ms", out)
        if not m or int(m.group(1)) != ITERS:
            fail("no profile header for %d iterations" % ITERS, out)
        wall, ops_sum = float(m.group(2)), float(m.group(3))
        table = out[m.end():out.index("by op type:")]
        rows = re.findall(r"^\s*([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+(\S+)\s+(\S+)$", table,
                          re.M)
        if not rows:
            fail("empty profile table", out)
        nodes = {r[5]: r for r in rows}
        # conv0 runs alone or fused with its BatchNorm; every name appears once.
        if len(nodes) != len(rows) or not any(n.startswith("conv0") for n in nodes) or \
                "fc0" not in nodes:
            fail("profile rows do not name conv0 and fc0 once each", out)
        for r in rows:
            if int(r[2]) != ITERS:
                fail("node %s counted %s calls, expected %d" % (r[5], r[2], ITERS), out)
        total = sum(float(r[0]) for r in rows)
        if abs(total - ops_sum) > 0.01 * ops_sum + 0.01 * len(rows):
            fail("rows sum to %.3f ms, header says %.3f" % (total, ops_sum), out)
        if not (0.5 * wall <= ops_sum <= 1.001 * wall + 0.01):
            fail("per-op times (%.3f ms) do not add up to roughly the wall time (%.3f ms)"
                 % (ops_sum, wall), out)
        pct = sum(float(r[1]) for r in rows)
        if abs(pct - 100) > 0.1 * len(rows):
            fail("percentages sum to %.2f" % pct, out)
        impl = out[out.index("oneDNN implementations"):]
        for name in ("conv0", "fc0"):
            line = re.search(r"^\s+%s\s+\S+\s+(.*)$" % name, impl, re.M)
            if not line or "fwd=" not in line.group(1):
                fail("no oneDNN implementation shown for %s" % name, out)

        with open(trace_path) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
        iters = sorted((e for e in events if e["name"] == "forward"), key=lambda e: e["ts"])
        calls = [e for e in events if e["cat"] == "operator"]
        if len(iters) != ITERS:
            fail("trace has %d forward events, expected %d" % (len(iters), ITERS), out)
        slack = 0.5  # microseconds: same steady clock, rounding only
        for c in calls:
            if sum(1 for it in iters if it["ts"] - slack <= c["ts"]
                   and c["ts"] + c["dur"] <= it["ts"] + it["dur"] + slack) != 1:
                fail("trace event %s lies in no single iteration" % c, out)
        per_node = {}
        for c in calls:
            per_node[c["args"]["node"]] = per_node.get(c["args"]["node"], 0) + 1
        if per_node != {r[5]: ITERS for r in rows}:
            fail("trace calls per node %s differ from the table" % per_node, out)
        if abs(sum(c["dur"] for c in calls) / 1e3 - ops_sum) > 0.01 * ops_sum + 0.01:
            fail("trace durations do not add up to the table's sum", out)

        bad = subprocess.run([loom, "bench", model], capture_output=True, text=True)
        if bad.returncode != 2 or "--shape" not in bad.stderr:
            fail("bench without --shape must be a usage error (exit 2)", bad.stderr)
    print("check_cli_bench: ok")


main()
