#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan) in build-fuzz/ and runs a campaign.
#
#   bash scripts/fuzz.sh [BUDGET] [JOBS] [HARNESS...]
#
# BUDGET is seconds per harness (default 60) or runs per harness as "runs=N". JOBS harnesses
# run at a time (default 1), one libFuzzer process each. HARNESS defaults to all four:
# fuzz_json fuzz_params fuzz_npy fuzz_cli_shape. Every harness starts from its committed
# corpus (tests/fuzz/corpus/<harness>) and grows a working copy in build-fuzz/corpus/; crash
# inputs land in build-fuzz/artifacts/<harness>/. Prints executions per harness at the end and
# exits non-zero when any harness found something.
#
#   bash scripts/fuzz.sh merge      adds working-corpus inputs (<= 8 KiB) that reach new coverage
#                                   to tests/fuzz/corpus (libFuzzer -merge=1)
#   bash scripts/fuzz.sh replay     runs every harness once over its committed corpus
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
all=(fuzz_json fuzz_params fuzz_npy fuzz_cli_shape)

if [ ! -f build-fuzz/CMakeCache.txt ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DLOOM_FUZZ=ON -DLOOM_TESTS=OFF \
    -DLOOM_CUDA=OFF -DLOOM_NATIVE=OFF -DLOOM_PYTHON=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build build-fuzz -j 2 --target "${all[@]}"

export OMP_NUM_THREADS=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [ -f tests/fuzz/lsan.supp ]; then export LSAN_OPTIONS=suppressions=$root/tests/fuzz/lsan.supp; fi

flags_for() {  # common libFuzzer flags of one harness
  local h=$1
  echo "-timeout=30 -rss_limit_mb=3072 -print_final_stats=1"
  case $h in
    fuzz_json) echo "-dict=$root/tests/fuzz/mxnet.dict -max_len=65536" ;;
    fuzz_params | fuzz_npy) echo "-max_len=4096" ;;
    fuzz_cli_shape) echo "-max_len=256" ;;
  esac
}

case ${1:-} in
  merge)
    # Adds to each committed corpus the working-corpus inputs that reach new coverage. Only
    # inputs of at most 8 KiB are offered, so the committed corpora stay small.
    for h in "${all[@]}"; do
      [ -d build-fuzz/corpus/$h ] || continue
      rm -rf build-fuzz/small/$h && mkdir -p build-fuzz/small/$h
      find build-fuzz/corpus/$h -type f -size -8193c -exec cp {} build-fuzz/small/$h/ \;
      build-fuzz/fuzz/$h -merge=1 $(flags_for $h) tests/fuzz/corpus/$h build-fuzz/small/$h 2>&1 |
        grep -E "MERGE-OUTER: [0-9]+ new files" || true
      echo "$h: $(ls tests/fuzz/corpus/$h | wc -l) files, $(du -sh tests/fuzz/corpus/$h | cut -f1)"
    done
    exit 0 ;;
  replay)
    for h in "${all[@]}"; do build-fuzz/fuzz/$h -runs=0 tests/fuzz/corpus/$h 2>&1 | tail -1; done
    exit 0 ;;
esac

budget=${1:-60}
jobs=${2:-1}
shift $(( $# > 2 ? 2 : $# ))
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=("${all[@]}")
if [[ $budget == runs=* ]]; then limit="-runs=${budget#runs=}"; else limit="-max_total_time=$budget"; fi

mkdir -p build-fuzz/logs
run_one() {
  local h=$1
  mkdir -p build-fuzz/corpus/$h build-fuzz/artifacts/$h
  # The first directory receives new inputs; the committed corpus is only read.
  build-fuzz/fuzz/$h $limit $(flags_for $h) -artifact_prefix=build-fuzz/artifacts/$h/ \
    build-fuzz/corpus/$h tests/fuzz/corpus/$h >build-fuzz/logs/$h.log 2>&1 || true
}
running=0
for h in "${harnesses[@]}"; do
  run_one "$h" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
done
wait

status=0
printf "%-16s %14s %10s %8s  %s\n" harness execs exec/s seconds findings
for h in "${harnesses[@]}"; do
  log=build-fuzz/logs/$h.log
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo 0)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || echo 0)
  secs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1 | grep -o '[0-9]* second' | grep -o '[0-9]*' || echo "?")
  found=$(ls build-fuzz/artifacts/$h 2>/dev/null | wc -l)
  printf "%-16s %14s %10s %8s  %s\n" "$h" "${execs:-0}" "${speed:-0}" "${secs:-?}" "$found"
  [ "$found" -eq 0 ] || status=1
done
exit $status
