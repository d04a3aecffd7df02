#!/usr/bin/env bash
# Builds Loom with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and runs the
# tests there: ctest (loom_tests, also with oneDNN capped at AVX2, the CLI and example
# programs, the fuzz corpus replays) and the Python tests (tests/python).
#
#   bash scripts/sanitize.sh              # build + every run above (what CI runs)
#   bash scripts/sanitize.sh --no-python  # without the Python tests
#   bash scripts/sanitize.sh --no-build   # run only (build-asan/ already built)
#
# Every finding fails its test: ASan errors, UBSan errors (-fno-sanitize-recover) and leaks
# (LeakSanitizer at every exit). tests/sanitizer/lsan.supp suppresses leaks of third-party
# code only, each entry with its reason. Left out: the conformance suite (MXNet's own
# interpreter and library, nothing of Loom's that the Python tests do not run) and the CUDA
# layer (not compiled here: nvcc code is not instrumented).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
python=1
build=1
for a in "$@"; do
  case "$a" in
    --no-python) python=0 ;;
    --no-build) build=0 ;;
    *) echo "sanitize: unknown argument $a" >&2; exit 2 ;;
  esac
done

bdir=build-asan
py="$root/.venv/bin/python"
# The cores to use, counted before OMP_NUM_THREADS=1 is exported below: nproc honours
# OMP_NUM_THREADS, so `ctest -j "$(nproc)"` after the export ran every test one after the other.
jobs="$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
if ((build)); then
  bash scripts/setup.sh
  generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  # Configured on every run (a no-op when nothing changed), so a build-asan/ from an older
  # version of this script picks up the flags below.
  # -O1 -g1 without NDEBUG: compiles in 2/3 of -O2's time, asserts stay on, stacks are
  # readable (-g1 keeps functions and line tables, not locals: 30% less compile time and
  # half the object size of -g). -fexpensive-optimizations (part of -O2) contracts a*b+c into FMAs as the
  # release build does: tests that check float results to the ulp (the EMA debias) see the
  # release build's rounding. x86-64-v3 (AVX2, FMA), not -march=native: with AVX-512, gcc 12
  # puts 64-byte-aligned vector slots in frames that ASan's use-after-return fake stack
  # aligns less, and an aligned load there faults (SEGV in a test body building an
  # initializer list; a toolchain bug, not Loom's). Both CPU kinds CI runs on have v3.
  # A unity build (batches of sources; the library's by directory, CMakeLists.txt): half the
  # CPU time of compiling file by file.
  cmake -S . -B "$bdir" "${generator[@]}" -DLOOM_SANITIZE=ON -DLOOM_CUDA=OFF \
    -DLOOM_NATIVE=OFF -DCMAKE_CXX_FLAGS="-march=x86-64-v3" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -fexpensive-optimizations -g1" \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=6 -DPython_EXECUTABLE="$py" >/dev/null
  start=$SECONDS
  cmake --build "$bdir" -j "$jobs"
  echo "sanitize: build took $((SECONDS - start)) s"
fi

# The first finding ends the process with an error; leaks are checked at every exit.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$root/tests/sanitizer/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

# The Python tests (tests/python) against build-asan/python; writes 0 (passed) or 1 to
# $pystatus. The interpreter is not instrumented, so the ASan runtime has to be the first
# library loaded (LD_PRELOAD; the extension pulls in libubsan itself), and libstdc++ with it:
# ASan resolves the real __cxa_throw when it starts, and without libstdc++ loaded by then the
# first C++ exception aborts ("CHECK failed ... real___cxa_throw"). PYTHONMALLOC=malloc:
# objects in pymalloc's arenas (mmap, not scanned by LeakSanitizer) would make every C++
# object a Python object owns look leaked. Child processes (examples, `python -m
# loom.draw`, Graphviz) inherit all of it; LOOM_CLI points test_viz at the instrumented CLI.
run_python_suite() {
  local pstart=$SECONDS pst=0
  run_python_tests() {
    LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)" \
      PYTHONMALLOC=malloc PYTHONPATH="$root/$bdir/python" LOOM_CLI="$root/$bdir/bin/loom" \
      "$py" -m pytest -q -p no:cacheprovider tests/python 2>&1 | tee "$bdir/python_tests.log"
    return "${PIPESTATUS[0]}"
  }
  if ! run_python_tests; then
    # LeakSanitizer's own tracer occasionally crashes at exit of a child process with many
    # threads ("Tracer caught signal 11 ... LeakSanitizer has encountered a fatal error"): that
    # is no finding, so the run is repeated once. A leak report, an ASan/UBSan error or a
    # failing assertion fails again and fails the script.
    if grep -q "LeakSanitizer has encountered a fatal error" "$bdir/python_tests.log" &&
      ! grep -q "detected memory leaks" "$bdir/python_tests.log"; then
      echo "sanitize: LeakSanitizer's tracer crashed (not a finding); running the Python tests again"
      run_python_tests || pst=1
    else
      pst=1
    fi
  fi
  echo "sanitize: Python tests took $((SECONDS - pstart)) s"
  echo "$pst" >"$pystatus"
}

# ctest without its pytest entries (they need the runtime preloaded: above); loom_tests_avx2
# runs loom_tests again with oneDNN capped at AVX2 (8-channel blocked layouts, no Winograd).
# The Python tests run beside ctest (their output follows ctest's): ctest is mostly those two
# single-threaded processes of 1.5 min each, and a third fills the gaps between them.
# A failure does not stop the later runs; the script fails at the end.
status=0
start=$SECONDS
pystatus="$bdir/python_tests.status"
rm -f "$pystatus"
if ((python)); then
  run_python_suite >"$bdir/python_tests.out" 2>&1 &
  pypid=$!
fi
(cd "$bdir" && ctest -j "$jobs" --output-on-failure --timeout 900 \
  -E '^(python_tests.*|conformance)$') || status=1
echo "sanitize: ctest took $((SECONDS - start)) s"

if ((python)); then
  wait "$pypid" || true
  cat "$bdir/python_tests.out"
  [ "$(cat "$pystatus" 2>/dev/null)" = 0 ] || status=1
fi
exit $status
