"""Runs examples/data_parallel/data_parallel.py as a user would: two ranks under mpirun write
a checkpoint, then one process resumes it. Checks that training learns (the EMA's validation
loss falls over the epochs), that the resumed single process evaluates the gathered EMA of
the checkpoint to exactly the figures the two ranks printed last, and that it trains on.

    python check_data_parallel_example.py MPIEXEC   (PYTHONPATH must reach the loom package)
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "examples", "data_parallel", "data_parallel.py")
LINE = re.compile(r"EMA validation accuracy ([0-9.]+), loss ([0-9.]+)")


def run(cmd):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if out.returncode:
        sys.exit("FAIL: %s exited %d\n%s%s" % (cmd, out.returncode, out.stdout, out.stderr))
    return out.stdout


def main():
    mpiexec = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "dp.params")
        two = run([mpiexec, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
                   "-np", "2", "-x", "OMP_NUM_THREADS=1", "-x", "PYTHONPATH",
                   sys.executable, SCRIPT, "--epochs", "3", "--checkpoint", ckpt])
        epochs = LINE.findall(two)
        assert len(epochs) == 3, two                      # printed once, by rank 0
        assert "checkpoint %s written by 2 process(es)" % ckpt in two, two
        losses = [float(l) for _, l in epochs]
        assert losses[2] < losses[0] - 0.05, two           # it learns
        one = run([sys.executable, SCRIPT, "--resume", ckpt, "--epochs", "0"])
        assert "resumed %s with 1 process(es)" % ckpt in one, one
        assert LINE.findall(one) == [epochs[-1]], (one, epochs[-1])
        more = run([sys.executable, SCRIPT, "--resume", ckpt, "--epochs", "1"])
        assert len(LINE.findall(more)) == 1, more
    print("data_parallel example: 2 ranks %s, resumed by 1 process: %s" % (epochs, LINE.findall(one)))


if __name__ == "__main__":
    main()
