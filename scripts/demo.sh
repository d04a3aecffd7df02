#!/usr/bin/env bash
# Builds only what the demo needs (the core library and train_mlp: no CUDA layer, tests or
# Python package, in build-demo/) and trains the MLP defined in examples/mlp/mlp-symbol.json
# on synthetic data. The build is -O1: the time to the first epoch is what counts here (1.6
# minutes on 2 cores instead of 2.6 at -O3, same results; the MLP's heavy lifting is in
# oneDNN). The test command (scripts/test.sh) builds everything, optimised, in build/.
set -euo pipefail
cd "$(dirname "$0")/.."
# Passive OpenMP waiting: spinning threads are much slower whenever the cores are shared.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
bash scripts/setup.sh --demo
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if [ ! -f build-demo/CMakeCache.txt ]; then
  cmake -S . -B build-demo "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
        "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -DLOOM_CUDA=OFF -DLOOM_MPI=OFF -DLOOM_TESTS=OFF \
        -DLOOM_PYTHON=OFF >/dev/null
fi
cmake --build build-demo -j "$(nproc)" --target train_mlp
exec build-demo/bin/train_mlp examples/mlp/mlp-symbol.json --save build-demo/mlp "$@"
