"""mx.profiler's per-operator events from the C++ executor and the LOOM_PROFILE /
MXNET_PROFILER_AUTOSTART start-up switch.

Every kernel call of an executor pass becomes one 'operator' event named by its op as MXNet
names them, lying inside its pass's 'executor' event; the trace written at exit by an
autostarted profiler holds them."""
import json
import os
import subprocess
import sys

import numpy as np


def _net(mx):
    data = mx.sym.Variable("data")
    c = mx.sym.Convolution(data, num_filter=8, kernel=(3, 3), pad=(1, 1), name="conv0")
    b = mx.sym.BatchNorm(c, name="bn0")
    r = mx.sym.Activation(b, act_type="relu", name="relu0")
    f = mx.sym.FullyConnected(r, num_hidden=4, name="fc0")
    return mx.sym.SoftmaxOutput(f, name="softmax")


def _events(path):
    with open(path) as fh:
        return json.load(fh)["traceEvents"]


def test_operator_events_inside_their_pass(mx, tmp_path):
    prof = mx.profiler
    fname = str(tmp_path / "ops.json")
    prof.set_config(profile_all=True, filename=fname, aggregate_stats=True)
    prof.dumps(reset=True)
    exe = _net(mx).simple_bind(mx.cpu(), data=(2, 3, 6, 6))
    exe.arg_dict["data"][:] = np.random.RandomState(0).uniform(-1, 1, (2, 3, 6, 6))
    exe.forward(is_train=True)  # not profiled: creates the primitives
    ref = exe.outputs[0].asnumpy()
    prof.set_state("run")
    exe.forward(is_train=True)
    exe.backward()
    prof.set_state("stop")
    prof.dump()
    exe.forward(is_train=True)  # stopped: nothing recorded, and the pass still works
    np.testing.assert_array_equal(exe.outputs[0].asnumpy(), ref)

    events = [e for e in _events(fname) if e.get("ph") == "X"]
    passes = {e["name"]: e for e in events if e["cat"] == "executor"}
    ops = [e for e in events if e["cat"] == "operator"]
    fwd, bwd = passes["softmax_output::forward"], passes["softmax_output::backward"]
    names = [e["name"] for e in ops]
    for op in ("Convolution", "FullyConnected", "SoftmaxOutput", "_backward_Convolution",
               "_backward_BatchNorm", "_backward_FullyConnected", "_backward_SoftmaxOutput"):
        assert op in names, (op, names)
    nodes = {e["name"]: e["args"]["node"] for e in ops}
    assert nodes["Convolution"] == "conv0" and nodes["_backward_Convolution"] == "conv0"
    # a training BatchNorm that took over its ReLU is named by both; no ReLU call of its own
    assert nodes["BatchNorm+Activation"] == "bn0+relu0" and "Activation" not in names
    assert nodes["_backward_FullyConnected"] == "fc0"
    slack = 50.0  # microseconds: the two clocks are read at slightly different moments
    def inside(e, outer):
        return (outer["ts"] - slack <= e["ts"]
                and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] + slack)
    for e in ops:
        assert e["dur"] >= 0
        # backward ops (and the zero fills of gradients nobody writes) inside the backward
        # pass, the others inside the forward pass
        assert inside(e, fwd) or inside(e, bwd), (e, fwd, bwd)
        if e["name"].startswith("_backward_"):
            assert inside(e, bwd), (e, bwd)
        elif e["name"] != "_zeros":
            assert inside(e, fwd), (e, fwd)
    for outer in (fwd, bwd):
        inside = [e for e in ops if outer["ts"] - slack <= e["ts"] <= outer["ts"] + outer["dur"]]
        assert sum(e["dur"] for e in inside) <= outer["dur"] + slack
    # forward ops in graph order, before every backward op
    fwd_ops = [e for e in ops if not e["name"].startswith("_backward_")
               and e["name"] != "_zeros"]
    assert [e["args"]["node"] for e in fwd_ops][0] == "conv0"
    assert max(e["ts"] for e in fwd_ops) < min(e["ts"] for e in ops
                                               if e["name"].startswith("_backward_"))

    stats = json.loads(prof.dumps(format="json"))["Time"]["operator"]
    assert stats["Convolution"]["Count"] == 1 and stats["_backward_Convolution"]["Count"] == 1
    prof.dumps(reset=True)
    prof.set_config(profile_all=False, aggregate_stats=False, filename="profile.json")


def test_fused_calls_are_named_by_their_ops(mx, tmp_path):
    prof = mx.profiler
    fname = str(tmp_path / "fused.json")
    prof.set_config(profile_symbolic=True, filename=fname)
    exe = _net(mx).simple_bind(mx.cpu(), grad_req="null", data=(1, 3, 6, 6))
    for k, v in exe.aux_dict.items():
        v[:] = 1.0 if "var" in k else 0.0
    prof.set_state("run")
    exe.forward(is_train=False)
    prof.set_state("stop")
    prof.dump()
    ops = [e for e in _events(fname) if e.get("cat") == "operator"]
    # in inference the convolution applies its BatchNorm, and the ReLU the BatchNorm took
    # over, as one call: the event names all three
    fused = [e for e in ops if e["name"].startswith("Convolution")]
    assert len(fused) == 1 and fused[0]["name"] == "Convolution+BatchNorm+Activation", ops
    assert fused[0]["args"]["node"] == "conv0+bn0+relu0"
    assert not any(e["name"] in ("BatchNorm", "Activation") for e in ops)
    prof.set_config(profile_symbolic=True, filename="profile.json")


_SCRIPT = """
import numpy as np
import loom as mx
data = mx.sym.Variable("data")
y = mx.sym.FullyConnected(mx.sym.relu(data), num_hidden=3, name="fc")
exe = y.simple_bind(mx.cpu(), data=(2, 5))
exe.forward(is_train=True)
exe.backward(mx.nd.ones((2, 3)))
"""


def _autostarted(mx, tmp_path, env_name):
    fname = str(tmp_path / ("auto_%s.json" % env_name))
    env = dict(os.environ)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(mx.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([package_dir] + [p for p in [env.get("PYTHONPATH")] if p])
    env.pop("LOOM_PROFILE", None)
    env.pop("MXNET_PROFILER_AUTOSTART", None)
    env[env_name] = "1"
    env["LOOM_PROFILE_FILE"] = fname
    subprocess.run([sys.executable, "-c", _SCRIPT], env=env, check=True, cwd=str(tmp_path))
    return _events(fname)


def test_loom_profile_env_writes_trace_at_exit(mx, tmp_path):
    for env_name in ("LOOM_PROFILE", "MXNET_PROFILER_AUTOSTART"):
        events = _autostarted(mx, tmp_path, env_name)
        names = [e["name"] for e in events]
        assert "fc_output::forward" in names and "fc_output::backward" in names
        assert "FullyConnected" in names and "_backward_FullyConnected" in names
        assert "relu" in names or any(n.startswith("relu") for n in names), names
