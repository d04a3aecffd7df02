#!/usr/bin/env bash
# Creates (once) what tests/bench/compare.py needs beyond the MXNet oracle, and prints the
# peer interpreter on stdout (the only stdout line):
#   - `onnx` inside the MXNet 1.9.1 oracle venv (scripts/setup_oracle.sh), for MXNet's own
#     ONNX exporter (mx.onnx.export_model); it uses onnx.mapping, gone after onnx 1.15;
#   - a peer venv, ${LOOM_CACHE:-$HOME/.cache/loom}/bench-peers-venv, with ONNX Runtime and
#     OpenVINO from PyPI (current NumPy: it never imports mxnet).
# Idempotent: a marker file skips the work once both import. Nothing goes into the repo.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cache="${LOOM_CACHE:-$HOME/.cache/loom}"
venv="$cache/bench-peers-venv"
py="$venv/bin/python"

fail() {
  echo "setup_bench: $*" >&2
  exit 1
}

oracle="${LOOM_ORACLE_PYTHON:-$(bash "$here/setup_oracle.sh")}"
if ! "$oracle" -c 'import onnx, mxnet' >/dev/null 2>&1; then
  echo "setup_bench: installing onnx into the oracle venv ($oracle)" >&2
  "$oracle" -m pip install -q 'onnx==1.14.1' >&2 || fail "pip install onnx into the oracle venv failed"
  "$oracle" -c 'import onnx, mxnet; assert mxnet.__version__ == "1.9.1"' >&2 ||
    fail "the oracle venv no longer imports mxnet 1.9.1 with onnx"
fi

check() {
  "$py" -c 'import onnxruntime, openvino, numpy' >/dev/null 2>&1
}

if [ -f "$venv/.loom-bench-ok" ] && [ -x "$py" ] && check; then
  echo "$py"
  exit 0
fi

base_py="${LOOM_BENCH_BASE_PYTHON:-$(command -v python3)}"
[ -x "$venv/bin/python" ] || "$base_py" -m venv "$venv" >&2 || fail "cannot create $venv"
"$py" -m pip install -q onnxruntime openvino numpy >&2 ||
  fail "pip install onnxruntime openvino into $venv failed"
check || fail "$venv does not import onnxruntime and openvino"
touch "$venv/.loom-bench-ok"
echo "$py"
