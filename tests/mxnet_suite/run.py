#!/usr/bin/env python3
"""Runs MXNet 1.9.1's own Python unit tests against Loom and compares with MXNet itself.

The MXNet sources are not part of this repository: LOOM_MXNET_SRC (or --src) names a local
copy of the apache/mxnet repository at tag 1.9.1 (only tests/python/unittest,
tests/python/common and python/mxnet/test_utils.py are read). Without it, or without the
MXNet 1.9.1 interpreter (LOOM_MXNET_ORACLE_PYTHON / --oracle-python), the harness says so
and skips (exit 0). See README.md.

Every test id (as pytest collects it, parametrized ids included) runs in its own process with
a timeout, first with MXNet 1.9.1 (the "oracle"; results cached by file hash under
~/.cache/loom/mxnet_suite/) and then, for the tests that pass there, with Loom through a
shim package `mxnet` that stands for `loom` (written at run time into the cache directory,
never into the repository).
"""
import argparse
import atexit
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import shim_files  # noqa: E402

HARNESS_VERSION = "1"
DEFAULT_FILES = [
    "test_module.py", "test_symbol.py", "test_executor.py", "test_infer_shape.py",
    "test_infer_type.py", "test_attr.py", "test_operator.py", "test_ndarray.py",
    "test_optimizer.py", "test_init.py", "test_metric.py", "test_io.py", "test_loss.py",
    "test_kvstore.py", "test_exc_handling.py", "test_model_parallel.py", "test_viz.py",
]
FALLBACK_SRC = os.path.expanduser("~/.cache/loom/mxnet-1.9.1-src")
FALLBACK_ORACLE = os.path.expanduser("~/.cache/loom/mxnet-1.9.1-venv/bin/python")
CACHE = os.environ.get("LOOM_SUITE_CACHE", os.path.expanduser("~/.cache/loom/mxnet_suite"))

# Which helper's files a loom module belongs to, for the "blocked by" summary.
OWNERS = {
    "module": "Module", "model": "Module", "callback": "Module", "kvstore": "Module",
    "optimizer": "optimizer", "lr_scheduler": "optimizer",
    "io": "io", "recordio": "io", "image": "io",
    "random": "utils", "test_utils": "utils", "monitor": "utils", "profiler": "utils",
    "contrib": "utils", "runtime": "utils", "util": "utils", "engine": "utils",
}


def log(*a):
    print(*a, flush=True)


# ------------------------------------------------------------------------------ setup
def write_shim(side, lend_test_utils=None):
    """Writes the shim directory for one side ('loom' or 'oracle'); returns its path."""
    os.makedirs(CACHE, exist_ok=True)
    d = tempfile.mkdtemp(prefix="shim-%s-" % side, dir=CACHE)
    atexit.register(shutil.rmtree, d, True)
    os.makedirs(os.path.join(d, "nose"))
    files = {
        "nose/__init__.py": shim_files.NOSE_INIT,
        "nose/tools.py": shim_files.NOSE_TOOLS,
        "loom_suite_plugin.py": shim_files.PLUGIN,
        "pytest.ini": shim_files.PYTEST_INI,
    }
    if side == "loom":
        os.makedirs(os.path.join(d, "mxnet"))
        files["mxnet/__init__.py"] = shim_files.MXNET_INIT
    for rel, text in files.items():
        with open(os.path.join(d, rel), "w") as f:
            f.write(text.lstrip("\n"))
    return d


def numpy_major(python):
    out = subprocess.run([python, "-c", "import numpy; print(numpy.__version__)"],
                         capture_output=True, text=True)
    return out.stdout.strip().split(".")[0] if out.returncode == 0 else "?"


def python_path(side, shim, python):
    parts = [shim]
    if side == "loom":
        parts.append(os.path.join(REPO, "build", "python"))
    # Optional extras such as scipy (README.md), built for that side's NumPy: deps-oracle,
    # deps-loom (NumPy 2) or deps-loom-numpy1 when Loom runs on NumPy 1.x.
    name = "deps-" + side
    if side == "loom" and numpy_major(python) == "1":
        name += "-numpy1"
    deps = os.path.join(CACHE, name)
    if os.path.isdir(deps):
        parts.append(deps)
    return os.pathsep.join(parts)


def base_env(side, shim, args):
    env = dict(os.environ)
    env["PYTHONPATH"] = python_path(
        side, shim, args.loom_python if side == "loom" else args.oracle_python)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["MXNET_TEST_SEED"] = str(args.seed)
    env["MXNET_MODULE_SEED"] = str(args.seed)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.pop("LOOM_SUITE_LEND_TEST_UTILS", None)
    env.pop("LOOM_SUITE_LENIENT", None)
    if side == "loom" and args.lenient:
        env["LOOM_SUITE_LENIENT"] = "1"
    if side == "loom" and args.lend_test_utils:
        env["LOOM_SUITE_LEND_TEST_UTILS"] = os.path.join(args.src, "python", "mxnet",
                                                         "test_utils.py")
    return env


def pytest_cmd(python, shim, udir):
    return [python, "-m", "pytest", "-q", "-p", "loom_suite_plugin", "-p", "no:cacheprovider",
            "-c", os.path.join(shim, "pytest.ini"), "--rootdir", udir, "-o",
            "console_output_style=classic"]


def file_hash(udir, name, extra):
    h = hashlib.sha256()
    for p in [os.path.join(udir, name), os.path.join(udir, "common.py"),
              os.path.join(udir, "..", "common", "models.py")]:
        if os.path.exists(p):
            with open(p, "rb") as f:
                h.update(f.read())
    h.update(extra.encode())
    return h.hexdigest()[:16]


# ------------------------------------------------------------------------------ running
def collect(python, shim, env, udir, name, timeout):
    for attempt in range(4):
        ids, err = _collect(python, shim, env, udir, name, timeout)
        if not err or not _BUILD_GONE.search(str(err)):
            return ids, err
        time.sleep(20)
    return ids, err


def _collect(python, shim, env, udir, name, timeout):
    cmd = pytest_cmd(python, shim, udir) + ["--collect-only", os.path.join(udir, name)]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(env, LOOM_SUITE_RESULT=os.path.join(tmp, "r.json"))
        try:
            p = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            return [], {"when": "collect", "outcome": "timeout", "longrepr": "collection timed out"}
        ids = [ln.strip() for ln in p.stdout.splitlines() if "::" in ln and ln.startswith(name)]
        err = None
        try:
            with open(env["LOOM_SUITE_RESULT"]) as f:
                recs = json.load(f)
            bad = [r for r in recs if r.get("when") == "collect"]
            if bad:
                err = bad[0]
        except (OSError, ValueError):
            if not ids:
                err = {"when": "collect", "outcome": "failed",
                       "longrepr": (p.stdout + p.stderr)[-4000:]}
        return ids, err


_BUILD_GONE = re.compile(r"_loom\.cpython[^ ]*\.so|libloom[^ ]*\.so|"
                         r"No module named 'loom\._loom'")


def run_one(python, shim, env, udir, nodeid, timeout):
    """One test id in its own process; returns its record. A failure to load Loom's
    extension (being rebuilt at that moment) is retried after a pause, three times."""
    for attempt in range(4):
        rec = _run_one(python, shim, env, udir, nodeid, timeout)
        text = (rec.get("exc_msg") or "") + (rec.get("longrepr") or "")
        if rec["outcome"] in ("passed", "skipped") or not _BUILD_GONE.search(text) \
                or "ImportError" not in text + (rec.get("exc_type") or ""):
            return rec
        time.sleep(20)
    return rec


def _run_one(python, shim, env, udir, nodeid, timeout):
    tmp = tempfile.mkdtemp(prefix="loom_suite_")
    res = os.path.join(tmp, "result.json")
    env = dict(env, LOOM_SUITE_RESULT=res, TMPDIR=tmp)
    cmd = pytest_cmd(python, shim, udir) + ["-x", "--tb=short", os.path.join(udir, nodeid)]
    t0 = time.time()
    rec = {"nodeid": nodeid}
    try:
        p = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            rec.update(outcome="timeout", exc_type="Timeout",
                       exc_msg="no result after %ss" % timeout)
            return rec
        recs = []
        try:
            with open(res) as f:
                recs = json.load(f)
        except (OSError, ValueError):
            pass
        failed = [r for r in recs if r.get("outcome") == "failed"]
        if failed:
            rec.update(failed[0])
            rec["outcome"] = "failed"
        elif any(r.get("outcome") == "skipped" for r in recs):
            rec["outcome"] = "skipped"
            sk = [r for r in recs if r.get("outcome") == "skipped"][0]
            rec["exc_msg"] = sk.get("exc_msg", "")
        elif any(r.get("outcome") == "passed" and r.get("when") == "call" for r in recs) \
                and p.returncode == 0:
            rec["outcome"] = "passed"
        else:
            rec["outcome"] = "crash"
            rec["exc_type"] = "Crash"
            rec["exc_msg"] = ("exit status %s; " % p.returncode) + out[-1500:]
        rec["nodeid"] = nodeid
        return rec
    finally:
        rec["seconds"] = round(time.time() - t0, 2)
        shutil.rmtree(tmp, ignore_errors=True)


def run_many(python, shim, env, udir, ids, timeout, jobs, label):
    out = {}
    if not ids:
        return out
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        futs = {ex.submit(run_one, python, shim, env, udir, i, timeout): i for i in ids}
        done = 0
        for fut in concurrent.futures.as_completed(futs):
            r = fut.result()
            out[futs[fut]] = r
            done += 1
            if done % 20 == 0 or done == len(ids):
                log("  [%s] %d/%d" % (label, done, len(ids)))
    return out


# ------------------------------------------------------------------------------ classifying
_NUMERIC = re.compile(r"Not equal to tolerance|Mismatch|exceeds tolerance|Items are not equal|"
                      r"Arrays are not|not almost equal|Error .* exceeds|allclose|"
                      r"Mismatched elements|rtol=", re.I)
_MOD_ATTR = re.compile(r"module '([\w.]+)'(?: \(loom\))? has no attribute '(\w+)'")
_OBJ_ATTR = re.compile(r"'([\w.]+)' object has no attribute '(\w+)'")
_TYPE_ATTR = re.compile(r"type object '(\w+)' has no attribute '(\w+)'")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_UNKNOWN_OP = re.compile(r"(?:unknown op(?:erator)?|not registered|no op named)\W+'?([\w.]+)", re.I)


def loom_blame(rec):
    """The loom module the failure surfaced in (deepest frame in a loom source file)."""
    for fn, _line, _func, _src in reversed(rec.get("frames") or []):
        m = re.search(r"[/\\]loom[/\\](\w+)\.py$", fn)
        if m:
            return m.group(1)
    return None


_OUT_OF_SCOPE = re.compile(r"\bautograd\b|\bgluon\b|attach_grad|HybridBlock")


def test_sources(path):
    """test function name -> its source text."""
    import ast
    with open(path) as f:
        text = f.read()
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = ast.get_source_segment(text, node) or ""
    return out


def classify(rec, mx_ops, sources=None):
    """(category, detail) for a failing record."""
    outcome = rec.get("outcome")
    if "removed in the NumPy 2.0 release" in (rec.get("exc_msg") or ""):
        return "test itself needs NumPy < 2", ""
    func = rec.get("nodeid", "").split("::")[-1].split("[")[0]
    src = (sources or {}).get(func, "")
    lines_txt = " ".join(str(f[3]) for f in rec.get("frames") or [])
    if rec.get("when") != "collect" and outcome != "passed" and (
            _OUT_OF_SCOPE.search(src) or _OUT_OF_SCOPE.search(lines_txt)):
        return "out of scope (Gluon/autograd)", ""
    if outcome == "timeout":
        return "timeout", ""
    if outcome == "crash":
        return "crash", (rec.get("exc_msg") or "")[:60].splitlines()[0] if rec.get("exc_msg") else ""
    typ = rec.get("exc_type") or ""
    msg = rec.get("exc_msg") or rec.get("longrepr") or ""
    frames_txt = " ".join("%s %s" % (f[0], f[3]) for f in rec.get("frames") or [])
    nodeid = rec.get("nodeid", "")
    if shim_files_stub_tag() in msg or "mxnet.gluon" in msg or "mxnet.autograd" in msg:
        return "out of scope (Gluon/autograd)", ""
    low = (nodeid + " " + msg).lower()
    if rec.get("when") != "collect":
        if re.search(r"sparse|csr|row_sparse|\bstype\b|tostype|storage_type", low):
            return "sparse-only", ""
        if re.search(r"\bgpu\b|cuda|cudnn", low):
            return "GPU-only", ""
    if rec.get("when") == "collect" or typ in ("ImportError", "ModuleNotFoundError"):
        m = _NO_MODULE.search(msg)
        if m:
            return "import error", "module " + m.group(1)
        m = _CANNOT_IMPORT.search(msg)
        if m:
            return "import error", "%s.%s" % (m.group(2), m.group(1))
        m = _MOD_ATTR.search(msg)
        if m:
            return "import error", "%s.%s" % (m.group(1), m.group(2))
        last = [ln for ln in msg.splitlines() if ln.startswith("E ")]
        return "import error", (last[-1][2:].strip() if last else msg[-80:].strip())[:80]
    if typ == "AttributeError":
        m = _MOD_ATTR.search(msg)
        if m:
            mod, name = m.groups()
            mod = mod.replace("mxnet", "loom")
            if name in mx_ops and mod.split(".")[-1] in ("ndarray", "symbol", "nd", "sym", "op",
                                                         "random", "contrib", "linalg", "image",
                                                         "sparse"):
                return "unknown op", name
            return "missing name", "%s.%s" % (mod, name)
        for rx in (_OBJ_ATTR, _TYPE_ATTR):
            m = rx.search(msg)
            if m:
                return "missing name", "%s.%s" % m.groups()
        return "error: AttributeError", msg[:80]
    if "UnknownOp" in typ or _UNKNOWN_OP.search(msg):
        m = _UNKNOWN_OP.search(msg)
        return "unknown op", m.group(1) if m else msg[:60]
    if typ == "AssertionError":
        if _NUMERIC.search(msg) or "assert_almost_equal" in frames_txt or "assert_allclose" in frames_txt:
            return "numeric mismatch", ""
        return "assertion", (msg.splitlines()[0] if msg else "")[:80]
    if typ == "NotImplementedError":
        return "not implemented", msg.splitlines()[0][:80] if msg else ""
    first = msg.strip().splitlines()[0] if msg.strip() else ""
    return "error: " + typ, first[:80]


def shim_files_stub_tag():
    return "LOOM_SUITE_OUT_OF_SCOPE"


def mxnet_op_names(oracle):
    path = os.path.join(CACHE, "mxnet_ops-v2.json")
    if os.path.exists(path):
        with open(path) as f:
            return set(json.load(f))
    # Registered operators only: names like sym.maximum are Python functions in MXNet and
    # count as missing names, not as missing operators.
    code = ("import json, mxnet as mx;"
            "print(json.dumps(sorted(mx.operator.get_all_registered_operators())))")
    try:
        p = subprocess.run([oracle, "-c", code], capture_output=True, text=True, timeout=120)
        ops = json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:
        return set()
    os.makedirs(CACHE, exist_ok=True)
    with open(path, "w") as f:
        json.dump(ops, f)
    return set(ops)


# ------------------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=os.environ.get("LOOM_MXNET_SRC"),
                    help="MXNet 1.9.1 source tree (env LOOM_MXNET_SRC)")
    ap.add_argument("--oracle-python", default=os.environ.get("LOOM_MXNET_ORACLE_PYTHON"),
                    help="python of a venv with mxnet==1.9.1 and pytest "
                         "(env LOOM_MXNET_ORACLE_PYTHON)")
    ap.add_argument("--loom-python", default=os.environ.get("LOOM_PYTHON"),
                    help="python for the Loom side (default: the repo's .venv)")
    ap.add_argument("--files", nargs="*", help="test files (default: the 17 core files)")
    ap.add_argument("-k", dest="kw", help="only test ids containing this substring")
    ap.add_argument("--jobs", "-j", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per test")
    ap.add_argument("--seed", type=int, default=42, help="MXNET_TEST_SEED / MXNET_MODULE_SEED")
    ap.add_argument("--report", help="write a markdown report here (and .json beside it)")
    ap.add_argument("--lend-test-utils", action="store_true",
                    help="diagnosis only: lend MXNet's own test_utils.py to the Loom side")
    ap.add_argument("--lenient", action="store_true",
                    help="diagnosis only: names and modules loom lacks become placeholders "
                         "(a missing decorator leaves the function alone), so files blocked "
                         "at import show their other failures")
    ap.add_argument("--refresh-oracle", action="store_true", help="ignore cached MXNet results")
    ap.add_argument("--all", action="store_true",
                    help="also run on Loom the tests that do not pass on MXNet")
    ap.add_argument("--failures", action="store_true", help="print every failing test")
    ap.add_argument("--debug", metavar="FILE::TEST",
                    help="run one test id on Loom in the foreground, full output; no table")
    args = ap.parse_args()

    if not args.src and os.path.isdir(FALLBACK_SRC):
        args.src = FALLBACK_SRC
    udir = os.path.join(args.src or "", "tests", "python", "unittest")
    if not args.src or not os.path.isdir(udir):
        log("SKIP: the MXNet 1.9.1 sources are not available (set LOOM_MXNET_SRC to a copy of "
            "apache/mxnet at tag 1.9.1); the MXNet-suite harness did not run.")
        return 0
    if not args.oracle_python and os.path.exists(FALLBACK_ORACLE):
        args.oracle_python = FALLBACK_ORACLE
    if not args.oracle_python or not os.path.exists(args.oracle_python):
        log("SKIP: no MXNet 1.9.1 interpreter (set LOOM_MXNET_ORACLE_PYTHON to the python of a "
            "venv with mxnet==1.9.1 and pytest); the MXNet-suite harness did not run.")
        return 0
    chk = subprocess.run([args.oracle_python, "-c", "import mxnet, pytest; print(mxnet.__version__)"],
                         capture_output=True, text=True)
    if chk.returncode != 0:
        log("SKIP: %s cannot import mxnet and pytest (%s); the MXNet-suite harness did not run."
            % (args.oracle_python, chk.stderr.strip().splitlines()[-1:]))
        return 0
    if not args.loom_python:
        venv = os.path.join(REPO, ".venv", "bin", "python")
        args.loom_python = venv if os.path.exists(venv) else sys.executable
    os.makedirs(CACHE, exist_ok=True)

    files = args.files or DEFAULT_FILES
    files = [os.path.basename(f) for f in files]
    oshim = write_shim("oracle")
    lshim = write_shim("loom")
    oenv = base_env("oracle", oshim, args)
    lenv = base_env("loom", lshim, args)
    if args.debug:
        cmd = pytest_cmd(args.loom_python, lshim, udir) + ["--tb=long", os.path.join(udir, args.debug)]
        with tempfile.TemporaryDirectory() as tmp:
            return subprocess.run(cmd, cwd=tmp, env=lenv).returncode
    mx_ops = mxnet_op_names(args.oracle_python)
    mode = "lent-test-utils" if args.lend_test_utils else ("lenient" if args.lenient else "loom")

    results = {}
    t_start = time.time()
    for name in files:
        if not os.path.exists(os.path.join(udir, name)):
            log("%s: not in %s, skipped" % (name, udir))
            continue
        key = file_hash(udir, name, "|".join([HARNESS_VERSION, shim_files.PLUGIN,
                                              shim_files.NOSE_TOOLS, str(args.seed),
                                              args.oracle_python]))
        cpath = os.path.join(CACHE, "oracle", "%s-%s.json" % (name[:-3], key))
        cache = {"ids": None, "results": {}}
        if os.path.exists(cpath) and not args.refresh_oracle:
            with open(cpath) as f:
                cache = json.load(f)
        oracle_error = None
        if cache["ids"] is None:
            log("%s: collecting with MXNet" % name)
            ids, err = collect(args.oracle_python, oshim, oenv, udir, name, 300)
            if err and not ids:
                text = str(err.get("longrepr", err))
                last = [ln for ln in text.replace("\\n", "\n").splitlines() if ln.startswith("E ")]
                oracle_error = (last[-1][1:].strip() if last else text[-200:])[:120]
                log("  MXNet cannot collect %s: %s (not cached; the file counts 0)"
                    % (name, oracle_error))
            else:
                cache["ids"] = ids
        ids = cache["ids"] or []
        if args.kw:
            ids = [i for i in ids if args.kw in i]
        # a crash (no result from pytest at all) says more about the machine than about
        # MXNet: those are run again rather than taken from the cache
        todo = [i for i in ids if i not in cache["results"]
                or cache["results"][i]["outcome"] == "crash"]
        if todo:
            log("%s: running %d tests with MXNet 1.9.1" % (name, len(todo)))
            cache["results"].update(run_many(args.oracle_python, oshim, oenv, udir, todo,
                                             args.timeout, args.jobs, "mxnet " + name))
            os.makedirs(os.path.dirname(cpath), exist_ok=True)
            with open(cpath, "w") as f:
                json.dump(cache, f)
        ores = {i: cache["results"][i] for i in ids}
        passing = [i for i in ids if ores[i]["outcome"] == "passed"]
        run_ids = ids if args.all else passing
        log("%s: %d collected, %d pass on MXNet; running %d with Loom"
            % (name, len(ids), len(passing), len(run_ids)))
        _, cerr = collect(args.loom_python, lshim, lenv, udir, name, 300)
        if cerr:
            lres = {}
            for i in run_ids:
                r = dict(cerr)
                r["nodeid"] = i
                r["outcome"] = "failed"
                lres[i] = r
        else:
            lres = run_many(args.loom_python, lshim, lenv, udir, run_ids, args.timeout,
                            args.jobs, "loom " + name)
        sources = test_sources(os.path.join(udir, name))
        for i in run_ids:
            r = lres[i]
            if r["outcome"] != "passed":
                r["category"], r["detail"] = classify(r, mx_ops, sources)
                r["blame"] = loom_blame(r)
        results[name] = {"ids": ids, "mxnet": ores, "loom": lres, "passing": passing,
                         "oracle_error": oracle_error}

    report(results, args, mode, time.time() - t_start)
    return 0


def report(results, args, mode, seconds):
    rows = []
    cats = collections.Counter()
    details = collections.Counter()
    blame = collections.Counter()
    tot_mx = tot_loom = tot_oos = 0
    failures = []
    for name, r in results.items():
        passing = r["passing"]
        lp = [i for i in passing if r["loom"][i]["outcome"] == "passed"]
        fc = collections.Counter()
        oos = 0
        for i in passing:
            lr = r["loom"][i]
            if lr["outcome"] == "passed":
                continue
            c = lr["category"]
            fc[c] += 1
            cats[c] += 1
            if c == "out of scope (Gluon/autograd)":
                oos += 1
            if lr.get("detail"):
                details["%s: %s" % (c, lr["detail"])] += 1
            b = lr.get("blame")
            if b:
                blame[b] += 1
            failures.append((i, c, lr.get("detail", ""),
                             (lr.get("exc_type") or "") + ": " +
                             ((lr.get("exc_msg") or lr.get("longrepr") or "").strip().splitlines() or [""])[0][:160]))
        tot_mx += len(passing)
        tot_loom += len(lp)
        tot_oos += oos
        pct = 100.0 * len(lp) / len(passing) if passing else 0.0
        top = ", ".join("%s %d" % kv for kv in fc.most_common(3))
        if r.get("oracle_error"):
            top = "MXNet cannot collect the file: " + r["oracle_error"]
        rows.append((name, len(passing), len(lp), oos, pct, top))

    title = "MXNet 1.9.1 unit tests on Loom"
    if mode == "lent-test-utils":
        title += " -- DIAGNOSIS with MXNet's own test_utils.py lent (not the headline number)"
    elif mode != "loom":
        title += " -- DIAGNOSIS with placeholders for missing names (not the headline number)"
    lines = ["# " + title, "",
             "| file | MXNet-passing | Loom-passing | out of scope | % | top failure reasons |",
             "|---|---:|---:|---:|---:|---|"]
    for name, m, lp, oos, pct, top in rows:
        lines.append("| %s | %d | %d | %d | %.0f%% | %s |" % (name, m, lp, oos, pct, top))
    tpct = 100.0 * tot_loom / tot_mx if tot_mx else 0.0
    ipct = 100.0 * tot_loom / (tot_mx - tot_oos) if tot_mx - tot_oos else 0.0
    lines.append("| **total** | **%d** | **%d** | **%d** | **%.1f%%** | in scope: %.1f%% |"
                 % (tot_mx, tot_loom, tot_oos, tpct, ipct))
    lines += ["", "## Failure categories", ""]
    lines += ["- %s: %d" % kv for kv in cats.most_common()]
    lines += ["", "## Most frequent details", ""]
    lines += ["- %s: %d" % kv for kv in details.most_common(60)]
    lines += ["", "## Loom module where failures surfaced (deepest loom frame)", ""]
    lines += ["- %s (%s): %d" % (b, OWNERS.get(b, "core"), n) for b, n in blame.most_common()]
    lines += ["", "## Failing tests", ""]
    lines += ["- `%s` -- %s %s -- %s" % f for f in sorted(failures)]
    lines += ["", "(%s; %.0f s; seed %d; timeout %ss per test)" %
              (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), seconds, args.seed,
               args.timeout)]
    text = "\n".join(lines)
    cut = text.index("## Failing tests")
    print(text if args.failures else text[:cut])
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n")
        jpath = os.path.splitext(args.report)[0] + ".json"
        with open(jpath, "w") as f:
            json.dump({"mode": mode, "results": results}, f, indent=1)
        log("report: %s, %s" % (args.report, jpath))


if __name__ == "__main__":
    sys.exit(main())
