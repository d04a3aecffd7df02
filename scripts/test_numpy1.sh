#!/usr/bin/env bash
# Runs the Python tests (tests/python) once more on NumPy 1.x: Loom runs on current NumPy,
# and everything it returns or accepts must work on NumPy 1.26 too (MXNet-era user code
# often pins it). The venv is cached outside the repository, in
# ${LOOM_CACHE:-$HOME/.cache/loom}/numpy1-venv, made from the interpreter .venv was made
# from (the extension in build/python is built for that Python). OpenCV is left out, so
# the tests also cover mx.image's clear ImportError.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${LOOM_CACHE:-$HOME/.cache/loom}"
venv="$cache/numpy1-venv"
pkgs=(numpy==1.26.4 pytest==9.2.0 graphviz==0.21)
base="$(.venv/bin/python -c 'import sys; print(sys._base_executable)')"
if ! "$venv/bin/python" -c 'import numpy, pytest, graphviz, sys; assert numpy.__version__ == "1.26.4"; sys.exit(0 if sys.version_info[:2] == tuple(map(int, sys.argv[1].split("."))) else 1)' \
     "$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" >/dev/null 2>&1; then
  echo "test_numpy1: creating $venv (${pkgs[*]})"
  rm -rf "$venv"
  mkdir -p "$cache"
  "$base" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${pkgs[@]}"
fi
echo "test_numpy1: tests/python on NumPy $("$venv/bin/python" -c 'import numpy; print(numpy.__version__)')"
PYTHONPATH="$PWD/build/python" OMP_NUM_THREADS=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/python
