#!/usr/bin/env bash
# Installs what Loom's build needs (Debian packages), only when something is missing, and
# the Python environment .venv (numpy, pybind11, pytest from PyPI), created once and reused.
#
#   setup.sh          everything the test command needs
#   setup.sh --demo   only what the demo's C++ build needs (no test libraries, no .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
demo=0
[ "${1:-}" = "--demo" ] && demo=1
pkgs=(cmake g++ make ninja-build libdnnl-dev nlohmann-json3-dev)
((demo)) || pkgs+=(libgtest-dev libbenchmark-dev graphviz libopenmpi-dev openmpi-bin)
# Python: venv support and headers for the extension, unless python3 on PATH has both.
if ((demo)); then
  :
elif ! command -v python3 >/dev/null 2>&1; then
  pkgs+=(python3 python3-venv python3-dev)
else
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || pkgs+=(python3-venv)
  python3 -c 'import os, sysconfig; assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' \
    >/dev/null 2>&1 || pkgs+=(python3-dev)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: need root (apt-get) to install: ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -qq
  apt_opts=(-y -qq)
  ((demo)) && apt_opts+=(--no-install-recommends)  # the demo's first epoch is on the clock
  DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" "${missing[@]}" >/dev/null
fi
((demo)) && exit 0

# Pinned so CI is reproducible; graphviz renders mx.viz pictures; opencv-python-headless
# decodes and resizes images for mx.image and mx.io.ImageRecordIter (OpenCV, as MXNet).
py_pkgs=(numpy==2.4.6 pybind11==3.1.0 pytest==9.2.0 graphviz==0.21 opencv-python-headless==5.0.0.93)
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import sys' >/dev/null 2>&1; then
  echo "setup: creating .venv"
  rm -rf .venv
  python3 -m venv .venv
fi
if ! .venv/bin/python -c 'import numpy, pybind11, pytest, graphviz, cv2' >/dev/null 2>&1; then
  echo "setup: installing ${py_pkgs[*]} into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check "${py_pkgs[@]}"
fi
