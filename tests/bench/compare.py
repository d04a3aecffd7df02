"""Loom side by side with MXNet 1.9.1 and, with --peers, ONNX Runtime and OpenVINO: one run,
same thread count, every engine in a fresh process per measurement, engines alternating
within each round, several rounds; prints Markdown tables of medians, spreads and ratios
(>1 means Loom is faster).

    PYTHONPATH=build/python .venv/bin/python tests/bench/compare.py [--threads 2]
        [--peers mxnet,onnxruntime,openvino] [--rounds 3] [--quick] [--only KEY ...]

Without --peers (or with --peers mxnet) it runs the original Loom-vs-MXNet set (MLP and
ResNet-18 train steps, ResNet-18 b1 inference, an element-wise chain). With ONNX peers it runs
the inference models (ResNet-18/50 v1 and MobileNet v1 1.0 from the Gluon model zoo,
MobileFaceNet from ../shared/models; random weights, batch 1 and 16) for all engines and the
train steps against MXNet. Every inference output is checked against MXNet's (Loom's without
MXNet) before anything is timed. The MXNet interpreter comes from scripts/setup_oracle.sh
(LOOM_ORACLE_PYTHON); ONNX Runtime and OpenVINO from scripts/setup_bench.sh's venv
(LOOM_BENCH_PEER_PYTHON); models are made once into ~/.cache/loom/bench-models.
The machine's FMA peak is measured in the same run (tests/bench/fma_peak.cc, built with g++).
All engines inherit the environment: ONEDNN_MAX_CPU_ISA (passed on as DNNL_MAX_CPU_ISA too,
the only name MXNet's oneDNN 2.4 reads) caps Loom's and MXNet's oneDNN, not ONNX Runtime's
MLAS nor OpenVINO's kernels.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
CACHE = os.environ.get("LOOM_CACHE", os.path.expanduser("~/.cache/loom"))
SHARED = os.environ.get("LOOM_SHARED_DIR", os.path.join(ROOT, "..", "shared"))
LEGACY = [
    ("mlp", "MLP 784-512-512-10 train step, batch 64"),
    ("r18_infer", "ResNet-18 inference, batch 1, 224x224"),
    ("r18_train", "ResNet-18 train step, batch 16, 224x224"),
    ("chain", "100 small element-wise nodes, forward+backward"),
]
MODELS = [("r18", "ResNet-18 v1"), ("r50", "ResNet-50 v1"), ("mobilenet", "MobileNet v1 1.0"),
          ("mfn", "MobileFaceNet 112x112")]
ENGINES = ["loom", "mxnet", "onnxruntime", "openvino"]
NAMES = {"loom": "Loom", "mxnet": "MXNet 1.9.1", "onnxruntime": "ONNX Runtime",
         "openvino": "OpenVINO"}


def note(msg):
    print("compare: " + msg, file=sys.stderr)
    sys.stderr.flush()


def oracle_python():
    py = os.environ.get("LOOM_ORACLE_PYTHON")
    if py:
        return py
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts", "setup_oracle.sh")],
                         capture_output=True, text=True)
    if out.returncode:
        note("no MXNet 1.9.1 oracle (scripts/setup_oracle.sh failed):\n" + out.stderr[-1500:])
        return None
    return out.stdout.strip()


def peer_python(engine):
    py = os.environ.get("LOOM_BENCH_PEER_PYTHON",
                        os.path.join(CACHE, "bench-peers-venv", "bin", "python"))
    if not os.path.exists(py):
        note("%s: no peer venv at %s; run scripts/setup_bench.sh (or set "
             "LOOM_BENCH_PEER_PYTHON). Continuing without it." % (engine, py))
        return None
    ok = subprocess.run([py, "-c", "import " + engine], capture_output=True, text=True)
    if ok.returncode:
        note("%s: %s cannot import it; run scripts/setup_bench.sh. Continuing without it."
             % (engine, py))
        return None
    return py


def flops_of(symbol_json, shapes):
    """Multiply-add FLOPs (2 per MAC) of Convolution, Deconvolution and FullyConnected in one
    forward pass, from the inferred shapes (counted with Loom's symbol API)."""
    import loom as mx
    sym = mx.sym.load(symbol_json) if isinstance(symbol_json, str) else symbol_json
    internals = sym.get_internals()
    arg_shapes, out_shapes, _ = internals.infer_shape(**shapes)
    args = dict(zip(internals.list_arguments(), arg_shapes))
    outs = dict(zip(internals.list_outputs(), out_shapes))
    total = 0
    nodes = json.loads(sym.tojson())["nodes"]
    for node in nodes:
        op, name = node["op"], node["name"]
        if op not in ("Convolution", "Deconvolution", "FullyConnected"):
            continue
        w = args.get(nodes[node["inputs"][1][0]]["name"])
        out = outs.get(name + "_output")
        if w is None or out is None:
            continue
        if op == "Deconvolution":  # MACs = input elements x (out channels/g x kernel)
            total += 2 * int(np.prod(out)) * int(np.prod(w[1:])) * w[0] // max(1, out[1])
        else:
            total += 2 * int(np.prod(out)) * int(np.prod(w[1:]))
    return total


def fma_peak(threads):
    """GFLOP/s of an FMA loop on 1 thread and on `threads`, with the vector width oneDNN may
    use in this environment (AVX2 when ONEDNN_MAX_CPU_ISA caps it or without AVX-512)."""
    exe = os.path.join(CACHE, "bench", "fma_peak")
    src = os.path.join(HERE, "fma_peak.cc")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        os.makedirs(os.path.dirname(exe), exist_ok=True)
        out = subprocess.run(["g++", "-O3", "-funroll-loops", "-fopenmp", "-o", exe, src], capture_output=True,
                             text=True)
        if out.returncode:
            note("cannot build fma_peak:\n" + out.stderr[-1000:])
            return None
    cap = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").lower()
    with open("/proc/cpuinfo") as f:
        has512 = " avx512f" in f.read()
    isa = "avx512" if has512 and not cap.startswith(("avx2", "avx", "sse")) else "avx2"
    res = {"isa": isa}
    for t in sorted({1, threads}):
        vals = []
        for _ in range(2):
            r = subprocess.run([exe, isa, str(t), "0.4"], capture_output=True, text=True)
            if r.returncode == 0:
                vals.append(float(r.stdout))
        res[t] = max(vals) if vals else None
    return res


def cpu_name():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "?"


class Runner:
    def __init__(self, args, pythons):
        self.args, self.pythons = args, pythons
        self.model_dir = os.path.join(CACHE, "bench-models")

    def run(self, engine, argv, check=None):
        env = dict(os.environ, OMP_NUM_THREADS=str(self.args.threads),
                   OMP_WAIT_POLICY=self.args.wait_policy)
        if engine != "loom":
            env.pop("PYTHONPATH", None)
        cmd = [self.pythons[engine], os.path.join(HERE, "sides.py"), engine] + argv + [
            "--threads", str(self.args.threads), "--seconds", str(self.args.seconds)]
        if check:
            cmd += ["--check", check]
        for attempt in range(4):
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
            # A shared build tree may be relinking _loom.so: wait and try again.
            if out.returncode == 0 or "file too short" not in out.stderr:
                break
            time.sleep(20)
        if out.returncode:
            note("%s %s failed:\n%s" % (engine, " ".join(argv), out.stderr[-2000:]))
            return None
        return json.loads(out.stdout.strip().splitlines()[-1])

    def prepare(self, key, batches):
        """Makes the model's files (under the oracle); False when that is impossible."""
        if "mxnet" not in self.pythons:
            meta = os.path.join(self.model_dir, key + ".json")
            if os.path.exists(meta):
                return True
            note("%s: the models are made by MXNet 1.9.1's exporter; no oracle" % key)
            return False
        out = subprocess.run([self.pythons["mxnet"], os.path.join(HERE, "bench_models.py"),
                              self.model_dir, key, ",".join(map(str, batches))],
                             capture_output=True, text=True, env=dict(os.environ,
                                                                      OMP_NUM_THREADS="1"))
        if out.returncode:
            note("%s: making the model failed (is onnx in the oracle venv? run "
                 "scripts/setup_bench.sh):\n%s" % (key, out.stderr[-1500:]))
            return False
        return True


def check_outputs(runner, engines, argv, tmp):
    """Runs each engine once on the fixed input; returns the engines whose output 0 equals the
    reference's (MXNet's, else Loom's) within a relative tolerance, and a note per mismatch."""
    outs = {}
    for e in engines:
        path = os.path.join(tmp, e + ".npy")
        if runner.run(e, argv, check=path) is not None:
            outs[e] = np.load(path)
    ref_e = "mxnet" if "mxnet" in outs else "loom"
    if ref_e not in outs:
        return [], ["no reference output"]
    ref = outs[ref_e].astype(np.float64)
    scale = max(float(np.abs(ref).max()), 1e-6)
    good, notes = [], []
    for e, o in outs.items():
        if o.shape != ref.shape:
            notes.append("%s output shape %s != %s" % (e, o.shape, ref.shape))
            continue
        err = float(np.abs(o.astype(np.float64) - ref).max()) / scale
        if err > 1e-3:
            notes.append("%s differs from %s: max |diff| = %.2g of max |out|" % (e, ref_e, err))
            continue
        good.append(e)
    return good, notes


def summarize(vals):
    return statistics.median(vals), min(vals), max(vals)


def fmt_ms(s):
    med, lo, hi = s
    digits = 2 if med < 10 else 1 if med < 100 else 0
    if len({lo, hi}) == 1:
        return "%.*f" % (digits, med)
    return "%.*f (%.*f-%.*f)" % (digits, med, digits, lo, digits, hi)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peers", default="mxnet",
                    help="comma-separated: mxnet, onnxruntime, openvino (default mxnet)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    ap.add_argument("--seconds", type=float, default=2.0,
                    help="timed seconds per engine process (default 2)")
    ap.add_argument("--quick", action="store_true",
                    help="one round of 0.3 s per engine, batch 1 only")
    ap.add_argument("--only", nargs="*", help="row keys: mlp r18_infer r18_train chain, "
                    "or MODEL_bB with MODEL in r18 r50 mobilenet mfn and B in 1 16")
    ap.add_argument("--wait-policy", default=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
                    help="OMP_WAIT_POLICY for every engine (default PASSIVE, Loom's default)")
    args = ap.parse_args()
    # MXNet 1.9.1's oneDNN (2.4) reads only DNNL_MAX_CPU_ISA, Loom's 2.6 either name: a cap
    # given under one name is passed on under both, so every oneDNN runs capped.
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    if cap:
        os.environ["ONEDNN_MAX_CPU_ISA"] = os.environ["DNNL_MAX_CPU_ISA"] = cap
    if args.quick:
        args.rounds, args.seconds = 1, 0.3
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    for p in peers:
        if p not in ENGINES[1:]:
            raise SystemExit("compare: unknown peer '%s' (mxnet, onnxruntime, openvino)" % p)
    onnx_peers = [p for p in peers if p != "mxnet"]

    pythons = {"loom": sys.executable}
    oracle = oracle_python()
    if oracle:
        pythons["mxnet"] = oracle
    elif "mxnet" in peers:
        note("MXNet 1.9.1 is missing: its columns stay empty")
    for p in onnx_peers:
        py = peer_python(p)
        if py:
            pythons[p] = py
    engines = [e for e in ENGINES if e == "loom" or (e in peers and e in pythons)]
    runner = Runner(args, pythons)

    # Rows: (key, title, engines, sides.py argv, forward FLOPs or None, flop factor)
    rows = []
    batches = [1] if args.quick else [1, 16]
    if onnx_peers:
        for key, title in MODELS:
            for b in batches:
                rk = "%s_b%d" % (key, b)
                if args.only and rk not in args.only:
                    continue
                rows.append((rk, "%s inference, batch %d" % (title, b), engines,
                             ["infer", "--model-dir", runner.model_dir, "--key", key,
                              "--batch", str(b)], (key, b), 1))
        legacy = [l for l in LEGACY if l[0] in ("mlp", "r18_train")]
    else:
        legacy = LEGACY
    for key, title in legacy:
        if args.only and key not in args.only:
            continue
        rows.append((key, title, [e for e in engines if e in ("loom", "mxnet")], [key],
                     key, 3 if "train" in key or key == "mlp" else 1))

    peak = fma_peak(args.threads)
    print("CPU: %s, %d threads, oneDNN ISA cap: %s; FMA peak (%s loop): %s GFLOP/s per core, "
          "%s GFLOP/s on %d threads\n" % (
              cpu_name(), args.threads,
              os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "none",
              peak and peak["isa"], peak and peak.get(1), peak and peak.get(args.threads),
              args.threads))
    cols = [NAMES[e] + " ms" for e in engines]
    print("| benchmark | " + " | ".join(cols) + " | Loom vs fastest peer | peak MB " +
          "/".join(NAMES[e].split()[0] for e in engines) + " | Loom GFLOP/s (% of peak) |")
    print("|" + " --- |" * (len(engines) + 4))
    sys.stdout.flush()
    prepared = {}
    for key, title, row_engines, argv, flop_key, factor in rows:
        cells_note = []
        if argv[0] == "infer":
            model = argv[4]
            if model not in prepared:
                prepared[model] = runner.prepare(model, batches)
            if not prepared[model]:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                row_engines, notes = check_outputs(runner, row_engines, argv, tmp)
            cells_note += notes
            if "loom" not in row_engines:
                print("| %s | Loom output check failed: %s |" % (title, "; ".join(notes)))
                continue
        res = {e: [] for e in row_engines}
        for r in range(args.rounds):
            order = row_engines[r % len(row_engines):] + row_engines[:r % len(row_engines)]
            for e in order:
                out = runner.run(e, argv)
                if out:
                    res[e].append(out)
        ms = {e: summarize([o["ms"] for o in v]) for e, v in res.items() if v}
        mb = {e: statistics.median(o["peak_mb"] for o in v) for e, v in res.items() if v}
        if "loom" not in ms:
            print("| %s | Loom failed |" % title)
            continue
        others = [e for e in ms if e != "loom"]
        if others:
            fastest = min(others, key=lambda e: ms[e][0])
            # Spread of the ratio: worst and best pairing of the rounds' medians.
            ratio = "%.2fx vs %s (%.2f-%.2f)" % (
                ms[fastest][0] / ms["loom"][0], NAMES[fastest], ms[fastest][1] / ms["loom"][2],
                ms[fastest][2] / ms["loom"][1])
        else:
            ratio = "-"
        gf = "-"
        try:
            if argv[0] == "infer":
                m, b = flop_key
                meta = json.load(open(os.path.join(runner.model_dir, m + ".json")))
                fl = flops_of(os.path.join(runner.model_dir, m + "-symbol.json"),
                              {meta["input"]: (b,) + tuple(meta["chw"])})
            elif key == "mlp":
                fl = 2 * 64 * (784 * 512 + 512 * 512 + 512 * 10)
            elif key.startswith("r18"):
                fl = flops_of(os.path.join(SHARED, "models",
                                           "09-xup6fup-opscan-resnet-18-symbol.json"),
                              {"data": (16 if key == "r18_train" else 1, 3, 224, 224)})
            else:
                fl = 0
            if fl:
                g = factor * fl / (ms["loom"][0] * 1e6)
                p = peak and peak.get(args.threads)
                gf = "%.1f (%.0f%%)" % (g, 100 * g / p) if p else "%.1f" % g
        except Exception as exc:  # the FLOP count is informative only
            note("%s: cannot count FLOPs: %s" % (key, exc))
        cells = [fmt_ms(ms[e]) if e in ms else "-" for e in engines]
        mem = "/".join("%.0f" % mb[e] if e in mb else "-" for e in engines)
        print("| %s | %s | %s | %s | %s |%s" % (title, " | ".join(cells), ratio, mem, gf,
                                               " " + "; ".join(cells_note) if cells_note else ""))
        sys.stdout.flush()
    end = fma_peak(args.threads)
    print("\nFMA peak measured again at the end: %s GFLOP/s per core, %s on %d threads "
          "(the %% column uses the start's)." % (end and end.get(1), end and end.get(args.threads),
                                                 args.threads))
    print("ms: median of %d rounds (min-max), each the median iteration of one fresh process "
          "(%.1f s timed); engines alternate within a round. Train rows: GFLOP/s count 3x the "
          "forward FLOPs. GFLOP/s are effective: direct-convolution and matrix-product FLOPs "
          "over the time (Winograd convolutions do fewer, so they can pass the FMA peak)."
          % (args.rounds, args.seconds))


if __name__ == "__main__":
    main()
