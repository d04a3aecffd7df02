#!/usr/bin/env bash
# The fault drill: a 2-rank job where rank 1 raises (throw), dies (kill) or stops (stall) while
# rank 0 waits in an allreduce. Passes when the job ends non-zero within the bound, before the
# outer `timeout`, with a message naming the failing or stalled rank.
#   run_fault.sh <mpirun> throw|kill|stall <program and arguments>   (gets --fault=<kind>)
# The program is loom_dist_tests or `python tests/dist/dist_python.py` (its "throw" raises a
# Python exception on rank 1).
set -uo pipefail
mpirun="$1" kind="$2"
shift 2
bound=40
export OMP_NUM_THREADS=1 LOOM_DIST_TIMEOUT_S=3 PYTHONPATH="${PYTHONPATH:-}"
start=$SECONDS
out=$(timeout -s KILL $bound "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np 2 \
        -x OMP_NUM_THREADS -x LOOM_DIST_TIMEOUT_S -x PYTHONPATH "$@" --fault="$kind" 2>&1)
rc=$?
took=$((SECONDS - start))
echo "$out" | tail -n 30
echo "fault drill '$kind': exit $rc after ${took} s"
if [ $rc -eq 0 ] || [ $took -ge $bound ]; then  # an outer-timeout kill takes $bound s
  echo "FAIL: the job must exit non-zero by itself within $bound s"; exit 1
fi
case "$kind" in
  throw) want='rank 1 of 2: uncaught (exception|RuntimeError): rank 1 failed on purpose' ;;
  kill) want='rank 1 .*(exited on signal 9|Killed)' ;;
  stall) want='allreduce #[0-9]+ of 4 float32 on rank 0 of 2 \(mpi\) did not complete within 3 s' ;;
esac
if ! echo "$out" | grep -Eq "$want"; then
  echo "FAIL: no message matching: $want"; exit 1
fi
echo "PASS"
