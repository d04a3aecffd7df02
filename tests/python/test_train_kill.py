"""Checkpoints survive a killed process: a training run killed with SIGKILL right after a
checkpoint resumes, in a new process, to exactly the state of the uninterrupted run; and a
process killed while it is writing checkpoints never leaves a corrupt one behind (the write
is atomic: temp file, fsync, rename)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np

# Trains an MLP with BatchNorm (Adam, k=2, EMA with aux) for TOTAL micro-steps on fixed data,
# checkpointing after every micro-step; optionally resumes from a checkpoint, kills itself
# after micro-step KILL_AT, or writes the final state to OUT.
TRAIN = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    import loom as mx
    ckpt, resume, kill_at, out = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), sys.argv[4]
    TOTAL = 11
    h = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=16, name="fc1")
    h = mx.sym.BatchNorm(h, fix_gamma=False, name="bn")
    h = mx.sym.Activation(h, act_type="relu", name="act")
    loss = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(h, num_hidden=3, name="fc2"), name="softmax")
    step = mx.train.make_step(loss, optimizer=mx.optimizer.Adam(learning_rate=0.01), accumulate=2,
                              ema=mx.train.EMA(schedule="tf", init="zero_debias", include_aux=True))
    exe = mx.train.bind(step, data=(4, 6), softmax_label=(4,))
    rng = np.random.RandomState(0)
    x = rng.randn(4 * TOTAL, 6).astype(np.float32)
    y = rng.randint(0, 3, 4 * TOTAL).astype(np.float32)
    for n in ("fc1_weight", "fc2_weight", "bn_gamma"):
        exe.arg_dict[n][:] = rng.uniform(0.2, 1.0, exe.arg_dict[n].shape)
    exe.aux_dict["bn_moving_var"][:] = 1.0
    start = 0
    if resume:
        mx.train.load_checkpoint(ckpt, exe)
        start = int(exe.aux_dict["step_micro"].asnumpy()[0])
    for m in range(start, TOTAL):
        exe.forward(is_train=True, data=x[4 * m:4 * m + 4], softmax_label=y[4 * m:4 * m + 4])
        mx.train.save_checkpoint(ckpt, exe)
        if m + 1 == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
    if out:
        mx.train.save_checkpoint(out, exe)
""")

# Writes a large training state over and over until killed.
WRITER = textwrap.dedent("""
    import sys
    import loom as mx
    loss = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=1000,
                                                      name="fc"), name="softmax")
    step = mx.train.make_step(loss, optimizer=mx.optimizer.SGD(learning_rate=0.1, momentum=0.9))
    exe = mx.train.bind(step, data=(2, 2000), softmax_label=(2,))
    i = 0
    while True:
        i += 1
        exe.arg_dict["fc_weight"][:] = float(i)
        mx.train.save_checkpoint(sys.argv[1], exe)
        print(i, flush=True)
""")


def _run(tmp_path, script, *args, check=True):
    path = tmp_path / "script.py"
    path.write_text(script)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, str(path)] + [str(a) for a in args], env=env,
                       capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr[-3000:]
    return r


def test_killed_run_resumes_bit_for_bit(mx, tmp_path):
    full, ckpt, resumed = tmp_path / "full.params", tmp_path / "ckpt.params", tmp_path / "resumed.params"
    _run(tmp_path, TRAIN, tmp_path / "ckpt_full.params", 0, 0, full)
    # Killed after micro-step 5 of 11: mid-accumulation (k=2), after three real steps.
    r = _run(tmp_path, TRAIN, ckpt, 0, 5, "", check=False)
    assert r.returncode == -signal.SIGKILL, r.stderr[-3000:]
    assert int(mx.nd.load(str(ckpt))["step:step_micro"].asnumpy()[0]) == 5
    _run(tmp_path, TRAIN, ckpt, 1, 0, resumed)
    a, b = mx.nd.load(str(full)), mx.nd.load(str(resumed))
    assert set(a) == set(b)
    assert {"opt:fc1_weight_mean", "acc:fc1_weight_acc", "ema:bn_moving_mean_ema"} <= set(a)
    for k in a:
        np.testing.assert_array_equal(b[k].asnumpy(), a[k].asnumpy(), err_msg=k)


def test_kill_during_checkpoint_writes_leaves_a_whole_file(mx, tmp_path):
    ckpt = tmp_path / "state.params"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    rng = np.random.RandomState(1)
    for trial in range(4):
        p = subprocess.Popen([sys.executable, str(script), str(ckpt)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "1", p.stderr.read()  # one whole file exists
        time.sleep(rng.uniform(0.0, 0.3))  # then kill it at a random point of later writes
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdout.close()
        p.stderr.close()
        state = mx.nd.load(str(ckpt))  # must parse completely
        w = state["arg:fc_weight"].asnumpy()
        assert w.shape == (1000, 2000)
        assert (w == w.flat[0]).all() and w.flat[0] >= 1, "a checkpoint mixes two writes"
