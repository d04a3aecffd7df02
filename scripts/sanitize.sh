#!/usr/bin/env bash
# Builds Loom with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and runs the
# C++ tests there (ctest: loom_tests, the CLI and example programs, the fuzz corpus replays).
#
#   bash scripts/sanitize.sh            # build + ctest (what CI runs)
#   bash scripts/sanitize.sh --python   # also the Python tests (tests/python) under ASan
#   bash scripts/sanitize.sh --no-build # run only (build-asan/ already built)
#
# Every finding fails its test: ASan errors, UBSan errors (-fno-sanitize-recover) and leaks
# (LeakSanitizer at exit). tests/sanitizer/lsan.supp suppresses leaks of third-party
# libraries only, each with its reason. The Python and conformance entries of ctest are left
# out here (an uninstrumented interpreter needs the ASan runtime preloaded: --python).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
python=0
build=1
for a in "$@"; do
  case "$a" in
    --python) python=1 ;;
    --no-build) build=0 ;;
    *) echo "sanitize: unknown argument $a" >&2; exit 2 ;;
  esac
done

bdir=build-asan
py="$root/.venv/bin/python"
if ((build)); then
  bash scripts/setup.sh
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  if [ ! -f "$bdir/CMakeCache.txt" ]; then
    # -O1 -g without NDEBUG: compiles in 2/3 of -O2's time, asserts stay on, stacks are
    # readable. -fexpensive-optimizations (part of -O2) contracts a*b+c into FMAs as the
    # release build does: tests that check float results to the ulp (the EMA debias) see the
    # release build's rounding. No CUDA (nvcc code is not instrumented).
    cmake -S . -B "$bdir" "${generator[@]}" -DLOOM_SANITIZE=ON -DLOOM_CUDA=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -fexpensive-optimizations -g" \
      -DPython_EXECUTABLE="$py" >/dev/null
  fi
  start=$SECONDS
  cmake --build "$bdir" -j "${LOOM_SANITIZE_JOBS:-$(nproc)}"
  echo "sanitize: build took $((SECONDS - start)) s"
fi

supp="$root/tests/sanitizer"
# The first finding ends the process with an error; leaks are checked at every exit.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

start=$SECONDS
(cd "$bdir" && ctest -j "$(nproc)" --output-on-failure --timeout 900 -E '^(python_tests.*|conformance)$')
echo "sanitize: ctest took $((SECONDS - start)) s"

if ((python)); then
  # The interpreter is not instrumented, so the ASan runtime has to be the first library
  # loaded (LD_PRELOAD; the extension pulls in libubsan itself). PYTHONMALLOC=malloc: with
  # pymalloc's arenas (mmap, not scanned by LeakSanitizer) every C++ object owned by a Python
  # object would look leaked. Child processes (examples, `python -m loom.draw`, the CLI)
  # inherit all of it; LOOM_CLI points test_viz at the instrumented CLI.
  start=$SECONDS
  LD_PRELOAD="$(gcc -print-file-name=libasan.so)" PYTHONMALLOC=malloc \
    PYTHONPATH="$root/$bdir/python" LOOM_CLI="$root/$bdir/bin/loom" \
    "$py" -m pytest -q -p no:cacheprovider tests/python
  echo "sanitize: python tests took $((SECONDS - start)) s"
fi
