#!/usr/bin/env bash
# Builds Loom and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
# Passive OpenMP waiting: spinning threads are much slower whenever the cores are shared.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# One virtual CUDA architecture (sm_80 PTX, no machine code) instead of the product's two
# real ones: every .cu file still goes through nvcc's front end and code generation with
# warnings as errors (no code depends on the architecture), without ptxas, in about half the
# time. Applies when build/ is first configured; `cmake -B build
# -DCMAKE_CUDA_ARCHITECTURES="80;90"` restores the product's.
bash scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=80-virtual
# The MXNet 1.9.1 oracle of tests/conformance (cached venv outside the repo); a failure here
# stops the run: the conformance suite is never skipped silently.
LOOM_ORACLE_PYTHON="$(bash scripts/setup_oracle.sh)"
export LOOM_ORACLE_PYTHON
(cd build && ctest -j "$(nproc)" --output-on-failure --timeout 600)
# The Python tests on NumPy 1.26 (the release build's package; .venv has NumPy 2).
bash scripts/test_numpy1.sh
# The C++ and Python tests once more under AddressSanitizer + UndefinedBehaviorSanitizer, in
# build-asan/ (scripts/sanitize.sh); LOOM_SANITIZE=0 skips that.
if [ "${LOOM_SANITIZE:-1}" != 0 ]; then
  bash scripts/sanitize.sh
fi
