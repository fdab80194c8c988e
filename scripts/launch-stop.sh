#!/usr/bin/env bash
# Usage: launch-stop.sh
#
# Stops the training that launch-torchrun.sh or launch-deepspeed.sh started in this container:
# SIGTERM to the launcher (torchrun and DeepSpeed's launcher pass it on to their workers), then,
# after LAUNCH_STOP_GRACE seconds, SIGKILL to it and every process below it. Nothing running is
# not an error. launch-all.sh (launchCommand) calls it on every pod when one fails or on Ctrl-C.
#
# Environment:
#   LAUNCH_PID_FILE    optional  default /tmp/gpu-cluster-launch.pid (written by the launchers)
#   LAUNCH_STOP_GRACE  optional  seconds between SIGTERM and SIGKILL; default 30
#   PROC_ROOT          optional  default /proc
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
readonly PROG=launch-stop
LAUNCH_PID_FILE=${LAUNCH_PID_FILE:-/tmp/gpu-cluster-launch.pid}
LAUNCH_STOP_GRACE=${LAUNCH_STOP_GRACE:-30}
PROC_ROOT=${PROC_ROOT:-/proc}
# shellcheck source=launch-common.sh
. "$(dirname "$0")/launch-common.sh" # running_launcher, alive, descendants

[[ $LAUNCH_STOP_GRACE =~ ^[0-9]+$ ]] || {
  echo "$PROG: error: LAUNCH_STOP_GRACE='$LAUNCH_STOP_GRACE' is not a number of seconds" >&2
  exit 1
}
pid=$(running_launcher) || {
  echo "$PROG: no training running${pid:+ ($pid)}"
  exit 0
}

echo "$PROG: stopping training (pid $pid)"
kill -TERM "$pid" 2>/dev/null || true
for ((waited = 0; waited < LAUNCH_STOP_GRACE; waited++)); do
  alive "$pid" || exit 0
  sleep 1
done
mapfile -t below < <(descendants "$pid")
echo "$PROG: still running after ${LAUNCH_STOP_GRACE}s; killing pid $pid and ${#below[@]} below it" >&2
kill -KILL "$pid" "${below[@]}" 2>/dev/null || true
