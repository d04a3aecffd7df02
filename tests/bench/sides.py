"""One benchmark on one engine, run in a fresh process by compare.py so peak memory is the
process's own. Works under every interpreter: `import loom as mx`, `import mxnet as mx`, or
(peers, their own venv) onnxruntime / openvino without either.

    python sides.py {loom|mxnet} {mlp|r18_infer|r18_train|chain} [--seconds S]
    python sides.py {loom|mxnet|onnxruntime|openvino} infer --model-dir D --key K --batch B
                    [--threads N] [--seconds S] [--check OUT.npy]
Threads come from OMP_NUM_THREADS (and --threads for the peers' own settings). Prints one
JSON line: {"ms": median milliseconds per iteration, "min_ms", "iters", "peak_mb": max RSS}.
With --check it runs the model once on the fixed input, saves output 0 and times nothing.
"""
import argparse
import json
import os
import resource
import sys
import time

import numpy as np

side, bench = sys.argv[1], sys.argv[2]
ap = argparse.ArgumentParser()
ap.add_argument("--model-dir")
ap.add_argument("--key")
ap.add_argument("--batch", type=int, default=1)
ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
ap.add_argument("--seconds", type=float, default=2.0)
ap.add_argument("--check")
opt = ap.parse_args(sys.argv[3:])
if side == "loom":
    import loom as mx
elif side == "mxnet":
    import mxnet as mx

SHARED = os.environ.get("LOOM_SHARED_DIR",
                        os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))


def mlp():
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=512, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=512, name="fc2")
    net = mx.sym.Activation(net, act_type="relu", name="relu2")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc3")
    return mx.sym.SoftmaxOutput(net, name="softmax"), {"data": (64, 784)}


def resnet18(batch):
    sym = mx.sym.load(os.path.join(SHARED, "models", "09-xup6fup-opscan-resnet-18-symbol.json"))
    return sym, {"data": (batch, 3, 224, 224)}


def chain():
    x = mx.sym.Variable("x")
    s = x
    for i in range(100):
        s = mx.sym.relu(s) if i % 2 else mx.sym.negative(s)
    return mx.sym.MakeLoss(s), {"x": (8,)}


def bind(sym, shapes, train, grad_inputs=False):
    req = {a: ("write" if train and (grad_inputs or a not in shapes) and not a.endswith("label")
               else "null") for a in sym.list_arguments()}
    exe = sym.simple_bind(mx.cpu(), grad_req=req, **shapes)
    rng = np.random.RandomState(0)
    for k, v in exe.arg_dict.items():
        v[:] = (np.arange(int(np.prod(v.shape))) % 10).reshape(v.shape) if k.endswith("label") \
            else rng.uniform(-0.05, 0.05, v.shape)
    for k, v in exe.aux_dict.items():
        v[:] = 1.0 if "var" in k else 0.0
    return exe


def step_fn(exe, train, lr=0.01):
    params = [(exe.arg_dict[k], g) for k, g in exe.grad_dict.items() if g is not None] if train else []

    def step():
        exe.forward(is_train=train)
        if train:
            exe.backward()
            for w, g in params:
                mx.nd.sgd_update(w, g, lr=lr, out=w)
        exe.outputs[0].asnumpy()  # wait for the result on both engines
    return step


def fixed_input(shape):
    # The same values in every engine (legacy RandomState is stable across NumPy versions).
    return np.random.RandomState(42).uniform(-1, 1, shape).astype(np.float32)


def infer_fn():
    """A callable running one inference of the compare.py model on the fixed input and
    returning output 0 as a NumPy array."""
    meta = json.load(open(os.path.join(opt.model_dir, opt.key + ".json")))
    shape = (opt.batch,) + tuple(meta["chw"])
    x = fixed_input(shape)
    prefix = os.path.join(opt.model_dir, opt.key)
    if side in ("loom", "mxnet"):
        sym = mx.sym.load(prefix + "-symbol.json")
        params = mx.nd.load(prefix + "-0000.params")
        exe = sym.simple_bind(mx.cpu(), grad_req="null", **{meta["input"]: shape})
        for k, v in params.items():
            kind, name = k.split(":", 1)
            d = exe.arg_dict if kind == "arg" else exe.aux_dict
            if name in d:
                d[name][:] = v
        exe.arg_dict[meta["input"]][:] = x

        def run():
            exe.forward(is_train=False)
            # copyto: MXNet's asnumpy refuses some outputs left in its MKLDNN layout
            return exe.outputs[0].copyto(mx.cpu()).asnumpy()
        return run
    onnx_path = "%s-b%d.onnx" % (prefix, opt.batch)
    if side == "onnxruntime":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = opt.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        return lambda: sess.run(None, {name: x})[0]
    if side == "openvino":
        import openvino as ov
        core = ov.Core()
        # f32 like the others (OpenVINO picks bf16 by default on CPUs that have it), one
        # stream, latency mode, the same thread count.
        compiled = core.compile_model(core.read_model(onnx_path), "CPU", {
            "INFERENCE_NUM_THREADS": opt.threads, "NUM_STREAMS": 1,
            "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"})
        req = compiled.create_infer_request()

        def run():
            req.infer({0: x})
            return req.get_output_tensor(0).data.copy()
        return run
    raise SystemExit("sides.py: unknown engine " + side)


def time_steps(step, reps, warmup=2):
    """Runs `step` in chunks of `reps` for about --seconds (at least 3 chunks) after a
    warm-up; returns per-iteration milliseconds of each chunk."""
    for _ in range(warmup):
        step()
    times = []
    t_end = time.perf_counter() + opt.seconds
    while len(times) < 3 or time.perf_counter() < t_end:
        t = time.perf_counter()
        for _ in range(reps):
            step()
        times.append((time.perf_counter() - t) / reps * 1e3)
    return times


def report(times):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"ms": float(np.median(times)), "min_ms": min(times), "iters": len(times),
                      "peak_mb": peak}))


def main():
    if bench == "infer":
        run = infer_fn()
        if opt.check:
            np.save(opt.check, np.asarray(run(), dtype=np.float32))
            print(json.dumps({"checked": opt.check}))
            return
        report(time_steps(run, 1))
        return
    if bench == "mlp":
        sym, shapes = mlp()
        train, reps = True, 50
    elif bench == "r18_infer":
        sym, shapes = resnet18(1)
        train, reps = False, 10
    elif bench == "r18_train":
        sym, shapes = resnet18(16)
        train, reps = True, 3
    else:
        sym, shapes = chain()
        train, reps = True, 500
    exe = bind(sym, shapes, train, grad_inputs=(bench == "chain"))
    report(time_steps(step_fn(exe, train), reps, warmup=3))


main()
