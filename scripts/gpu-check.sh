#!/bin/bash
# The node health runner's GPU check (node_health_runner.py): DCGM diagnostics at run level
# DCGM_LEVEL, in NVIDIA's DCGM image, on the node's DCGM host engine. Three outcomes, by exit
# status, each with its reason as the pod's termination message (what the runner logs):
#   0   every test passed
#   1   the GPUs failed: DCGM reported an error it rates as the hardware's (below)
#   75  the check could not run or could not judge the GPUs (EX_TEMPFAIL, sysexits.h): no host
#       engine, no connection, a diagnostic DCGM could not start or finish, only errors of the
#       setup; the runner then leaves the node's taint alone and tries again later
#
# Environment: DCGM_LEVEL (1-4); DCGM_HOST_ENGINE (`host[:port]` of a running host engine, e.g.
# the GPU Operator's nvidia-dcgm Service, which sends each pod to its own node's; or `own`: start
# one in this pod); DIAG_TIMEOUT_SECONDS (the diagnostic is stopped past it; default 1800);
# CHECK_DIR (writable; default /tmp); TERMINATION_LOG (default /dev/termination-log);
# HOSTENGINE_WAIT_SECONDS (how long the host engine may take to answer; default 30).
#
# What counts as the GPUs' failure (NVIDIA/DCGM 72fa3fe): `dcgmi diag` exits with its
# dcgmReturn_t (dcgmi/main_dcgmi.cpp), DCGM_ST_NVVS_ISOLATE_ERROR (-51, 205) when an error's
# severity is DCGM_ERROR_ISOLATE, DCGM_ST_NVVS_ERROR (-30, 226) for any other error
# (dcgmi/Diag.cpp GetFailureResult) or for errors of the run itself, which come without the
# JSON report (RunDiagOnce); any other status means the diagnostic did not run (no connection,
# DCGM_ST_CONNECTION_NOT_VALID -21, 235; paused, timed out, already running...). Each error in
# the JSON report (`-j`) carries error_severity and error_category (dcgmi/Diag.cpp
# HelperJsonAddResult; dcgmlib/dcgm_errors.h). The GPUs failed on severity ISOLATE (2) or
# RESET (6), or on category PERF_THRESHOLD (1), PERF_VIOLATION (2), SOFTWARE_XID (5) or
# HARDWARE_* (9-15); errors only of the setup (SOFTWARE_CONFIG, _LIBRARY, _CUDA, _EUD, _OTHER,
# INTERNAL_OTHER: a denylisted driver, a missing library, no permission, a test skipped) judge
# nothing. A plugin's "Fail" status alone includes such setup errors, so it is not read.
set -uo pipefail

level=${DCGM_LEVEL:?DCGM_LEVEL is not set}
host_engine=${DCGM_HOST_ENGINE:-own}
dir=${CHECK_DIR:-/tmp}
termination_log=${TERMINATION_LOG:-/dev/termination-log}
readonly FAILED=1 NOT_RUN=75
# dcgmReturn_t values as dcgmi's exit status (NVIDIA/DCGM dcgmlib/dcgm_structs.h).
readonly DIAG_ERROR=226 DIAG_ISOLATE=205
readonly GPU_SEVERITIES='^(2|6)$' GPU_CATEGORIES='^(1|2|5|9|10|11|12|13|14|15)$'

finish() {
  local status=$1 message=$2
  printf '%s\n' "$message" | head -c 4096 > "$termination_log"
  case $status in
    "$FAILED") printf 'gpu-check: FAIL: %s\n' "$message" >&2 ;;
    *) printf 'gpu-check: NOT RUN: %s\n' "$message" >&2 ;;
  esac
  exit "$status"
}

# The host engine `dcgmi` talks to: the given one, or this pod's own.
dcgmi_host=()
if [ "$host_engine" = own ]; then
  nv-hostengine --pid "$dir/nv-hostengine.pid" --log-filename "$dir/nv-hostengine.log" \
    || finish "$NOT_RUN" "nv-hostengine did not start in the check's pod"
  trap 'nv-hostengine --term --pid "$dir/nv-hostengine.pid" >/dev/null 2>&1' EXIT
else
  dcgmi_host=(--host "$host_engine")
fi

# A diagnostic runs in the host engine, not in dcgmi: on SIGTERM (the pod's deadline, a
# deletion) dcgmi is told to stop it there (dcgmi/Diag.cpp stops the diag on a signal).
# The diagnostic is this shell's only job: asked by `jobs -p`, a signal that lands between its
# start and the line after (where `$!` would be saved) still reaches it.
trap 'jobs -p | xargs -r kill -TERM; wait
  finish "$NOT_RUN" "stopped (SIGTERM) before DCGM had judged the GPUs"' TERM INT

# Ready once it answers; which GPUs it found is the diagnostics' to judge.
answered=false
for _ in $(seq "${HOSTENGINE_WAIT_SECONDS:-30}"); do
  if timeout 10 dcgmi discovery "${dcgmi_host[@]}" --list > "$dir/discovery.txt" 2>&1; then
    answered=true
    break
  fi
  sleep 1
done
cat "$dir/discovery.txt"
if ! "$answered"; then
  where="the GPU Operator's host engine ($host_engine): is ClusterPolicy dcgm.enabled true, and the nvidia-dcgm pod running on this node"
  [ "$host_engine" = own ] && where="this pod's own host engine"
  finish "$NOT_RUN" "no answer from $where: $(tail -n 3 "$dir/discovery.txt" | tr '\n' ' ')"
fi

timeout --signal=TERM "${DIAG_TIMEOUT_SECONDS:-1800}" \
  dcgmi diag "${dcgmi_host[@]}" --run "$level" -j > "$dir/diag.json" 2> "$dir/diag.err" &
wait $!
status=$?
cat "$dir/diag.json" "$dir/diag.err"
# Every number after one of the two keys, wherever jsoncpp breaks its lines.
values_of() {
  grep -oE "\"$1\"[[:space:]]*:[[:space:]]*[0-9]+" "$dir/diag.json" | grep -oE '[0-9]+$'
}
# What DCGM said: its errors' words, else the last lines it printed.
said() {
  local words
  words=$(grep -oE '"warning"[[:space:]]*:[[:space:]]*"[^"]*"' "$dir/diag.json" \
    | sed -E 's/^"warning"[[:space:]]*:[[:space:]]*//' | sort -u | head -n 5 | tr '\n' ' ')
  [ -n "$words" ] || words=$(cat "$dir/diag.json" "$dir/diag.err" | tail -n 3 | tr '\n' ' ')
  printf '%s' "$words"
}
case $status in
  0) echo "gpu-check: dcgmi diag --run $level passed"; exit 0 ;;
  124) finish "$NOT_RUN" "dcgmi diag --run $level did not end within ${DIAG_TIMEOUT_SECONDS:-1800} s (stopped)" ;;
  "$DIAG_ERROR" | "$DIAG_ISOLATE") ;;
  *) finish "$NOT_RUN" "dcgmi diag --run $level could not run (exit $status): $(said)" ;;
esac
if [ "$status" -eq "$DIAG_ISOLATE" ] \
  || values_of error_severity | grep -qE "$GPU_SEVERITIES" \
  || values_of error_category | grep -qE "$GPU_CATEGORIES"; then
  finish "$FAILED" "dcgmi diag --run $level (exit $status): $(said)"
fi
finish "$NOT_RUN" "dcgmi diag --run $level (exit $status) reported only errors of its setup, none of the GPUs: $(said)"
