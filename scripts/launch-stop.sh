#!/usr/bin/env bash
# Usage: launch-stop.sh
#
# Stops the training that launch-torchrun.sh or launch-deepspeed.sh started in this container:
# SIGTERM to the launcher (torchrun and DeepSpeed's launcher pass it on to their workers), then
# waits until the launcher and every process below it have ended, the workers too once the
# launcher is gone: torchrun, SIGTERMed while it already shuts down after an error (a peer node
# lost, its rendezvous store gone), ends at once without waiting for the workers it has told to
# stop (torch/distributed/elastic/agent/server/api.py run: the signal's exception escapes its
# `finally` shutdown), and a worker saving a checkpoint, or blocked in a collective, is a
# training still running. After LAUNCH_STOP_GRACE seconds, SIGKILL to those still running.
# Nothing running is not an error. launch-all.sh (launchCommand, stopCommand) calls it on
# every pod when one fails or on Ctrl-C; idle-training.sh when a StatefulSet pod is deleted.
#
# Environment:
#   LAUNCH_PID_FILE    optional  default /tmp/gpu-cluster-launch.pid (written by the launchers)
#   LAUNCH_STOP_GRACE  optional  seconds between SIGTERM and SIGKILL; default 30
#   PROC_ROOT          optional  default /proc
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
readonly PROG=launch-stop KILLED_SECONDS=10
LAUNCH_PID_FILE=${LAUNCH_PID_FILE:-/tmp/gpu-cluster-launch.pid}
LAUNCH_STOP_GRACE=${LAUNCH_STOP_GRACE:-30}
PROC_ROOT=${PROC_ROOT:-/proc}
# shellcheck source=launch-common.sh
. "$(dirname "$0")/launch-common.sh" # running_launcher, alive, children, proc_start_time

[[ $LAUNCH_STOP_GRACE =~ ^[0-9]+$ ]] || {
  echo "$PROG: error: LAUNCH_STOP_GRACE='$LAUNCH_STOP_GRACE' is not a number of seconds" >&2
  exit 1
}
pid=$(running_launcher) || {
  echo "$PROG: no training running${pid:+ ($pid)}"
  exit 0
}

# The launcher and every process below it, each with its start time (a PID the kernel reuses
# names another process).
declare -A started=()
# Usage: track PID...: these and what runs below them
track() {
  local process start
  local -a below
  for process in "$@"; do
    if [[ -z ${started[$process]:-} ]] && start=$(proc_start_time "$process" 2>/dev/null); then
      started[$process]=$start
    fi
    mapfile -t below < <(children "$process")
    track "${below[@]}"
  done
}
still_running() {
  local process
  for process in "${!started[@]}"; do
    if alive "$process" &&
      [[ $(proc_start_time "$process" 2>/dev/null || true) == "${started[$process]}" ]]; then
      echo "$process"
    fi
  done
}

echo "$PROG: stopping training (pid $pid)"
track "$pid"
kill -TERM "$pid" 2>/dev/null || true
for ((waited = 0; ; waited++)); do
  mapfile -t running < <(still_running)
  ((${#running[@]})) || exit 0
  ((waited < LAUNCH_STOP_GRACE)) || break
  track "${running[@]}" # what they started since
  sleep 1
done
echo "$PROG: ${#running[@]} processes of the training (pid $pid) still running after ${LAUNCH_STOP_GRACE}s; killing them" >&2
kill -KILL "${running[@]}" 2>/dev/null || true
# Gone once the kernel has torn them down: at once, unless one is stuck in the kernel (a hung
# device), which SIGKILL does not end.
for ((waited = 0; waited < KILLED_SECONDS; waited++)); do
  mapfile -t running < <(still_running)
  ((${#running[@]})) || exit 0
  sleep 1
done
echo "$PROG: error: pids ${running[*]} still there ${KILLED_SECONDS}s after SIGKILL (stuck in the kernel: a hung device?)" >&2
exit 1
