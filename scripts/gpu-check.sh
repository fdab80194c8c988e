#!/bin/bash
# The node health runner's GPU check (node_health_runner.py): DCGM diagnostics at run level
# DCGM_LEVEL on the GPUs this pod was given, in NVIDIA's DCGM image. Exit 0 when every test
# passed; otherwise 1, with the failed tests' lines as the pod's termination message (what the
# runner logs for the node). A level-2 run takes about two minutes.
#
# Environment: DCGM_LEVEL (1-4), CHECK_DIR (writable; default /tmp), TERMINATION_LOG (default
# /dev/termination-log), HOSTENGINE_WAIT_SECONDS (default 30).
#
# nv-hostengine runs without root but "portions of diagnostics can require root"
# (docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/nv-hostengine.html):
# a test this pod may not run shows as a failure, with DCGM's words.
set -uo pipefail

level=${DCGM_LEVEL:?DCGM_LEVEL is not set}
dir=${CHECK_DIR:-/tmp}
termination_log=${TERMINATION_LOG:-/dev/termination-log}

say_failure() {
  printf '%s\n' "$1" | head -c 4096 > "$termination_log"
  printf 'gpu-check: FAIL: %s\n' "$1" >&2
  exit 1
}

# dcgmi talks to a host engine: this pod's own, on its GPUs, its files where it may write.
nv-hostengine --pid "$dir/nv-hostengine.pid" --log-filename "$dir/nv-hostengine.log" \
  || say_failure "nv-hostengine did not start"
trap 'nv-hostengine --term --pid "$dir/nv-hostengine.pid" >/dev/null 2>&1' EXIT
# Ready once it answers; which GPUs it found is the diagnostics' to judge (none is a failure).
answered=false
for _ in $(seq "${HOSTENGINE_WAIT_SECONDS:-30}"); do
  if dcgmi discovery --list > "$dir/discovery.txt" 2>&1; then
    answered=true
    break
  fi
  sleep 1
done
cat "$dir/discovery.txt"
"$answered" || say_failure "nv-hostengine did not answer: $(tail -n 3 "$dir/discovery.txt")"

dcgmi diag --run "$level" > "$dir/diag.txt" 2>&1
status=$?
cat "$dir/diag.txt"
# A failed test is a `Fail` in its row of dcgmi's table, whatever the exit status says.
failed=$(grep -E '\|[[:space:]]*Fail' "$dir/diag.txt")
if [ "$status" -ne 0 ] || [ -n "$failed" ]; then
  say_failure "dcgmi diag --run $level (exit $status): ${failed:-$(tail -n 5 "$dir/diag.txt")}"
fi
echo "gpu-check: dcgmi diag --run $level passed"
