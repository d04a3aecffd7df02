#!/usr/bin/env bash
# Configures and builds Loom in build/ (CUDA layer too when nvcc is present, the Python
# package loom against .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
py="$PWD/.venv/bin/python"
if [ ! -f build/CMakeCache.txt ]; then
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$py" "$@" >/dev/null
elif ! grep -q "^Python_EXECUTABLE:[A-Z]*=$py\$" build/CMakeCache.txt; then
  # A tree configured before the Python package existed (or with another interpreter).
  cmake -S . -B build -DPython_EXECUTABLE="$py" "$@" >/dev/null
fi
# nproc counts OMP_NUM_THREADS as a limit: the cores without it.
cmake --build build -j "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
