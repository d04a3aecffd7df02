#!/usr/bin/env bash
# Runs a GoogleTest binary (all its tests in one process: ctest's loom_tests entries) and,
# when the process dies inside a test (a crash, an abort, a sanitizer report, an exit), names
# that test on the last line of the output, which ctest --output-on-failure shows; gtest's own
# summary names the tests whose assertions failed.
#
#   run_gtest.sh BINARY [ARGS...]
set -uo pipefail
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if ((status != 0)); then
  # The last test started and not finished (gtest ends each with "[       OK ]" or "[  FAILED  ]").
  last="$(awk '/^\[ RUN      \] /{t=$4} /^\[       OK \] |^\[  FAILED  \] [^0-9]/{n=$4; sub(/,$/, "", n); if (n == t) t=""}
              END{print t}' "$log")"
  how="exited with status $status"
  if ((status > 128)); then how="was killed by signal $((status - 128))"; fi
  if [ -n "$last" ]; then
    echo "run_gtest: $(basename "$1") $how inside test $last"
  elif ((status > 128)); then
    echo "run_gtest: $(basename "$1") $how outside any test"
  fi
fi
exit "$status"
