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
# The Python tests on NumPy 1.26 (the release build's package; .venv has NumPy 2) run beside
# ctest, their output after ctest's: ctest's last minute or so is the conformance suite alone.
# (nproc counts OMP_NUM_THREADS as a limit: not the cores.)
bash scripts/test_numpy1.sh >build/test_numpy1.log 2>&1 &
numpy1=$!
ctest_status=0
(cd build && ctest -j "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)" --output-on-failure \
  --timeout 600) || ctest_status=$?
numpy1_status=0
wait "$numpy1" || numpy1_status=$?
cat build/test_numpy1.log
if ((ctest_status || numpy1_status)); then
  echo "test: ctest exited with $ctest_status, the NumPy 1.26 tests with $numpy1_status" >&2
  exit 1
fi
# The C++ and Python tests once more under AddressSanitizer + UndefinedBehaviorSanitizer, in
# build-asan/ (scripts/sanitize.sh); LOOM_SANITIZE=0 skips that.
if [ "${LOOM_SANITIZE:-1}" != 0 ]; then
  bash scripts/sanitize.sh
fi
