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
. "$(dirname "$0")/launch-common.sh" # proc_start_time, shared with the launchers

[[ $LAUNCH_STOP_GRACE =~ ^[0-9]+$ ]] || {
  echo "$PROG: error: LAUNCH_STOP_GRACE='$LAUNCH_STOP_GRACE' is not a number of seconds" >&2
  exit 1
}
# Running: signalable and not a zombie (exited, waiting for its parent to reap it).
alive() {
  local stat=""
  kill -0 "$1" 2>/dev/null || return 1
  read -r stat <"$PROC_ROOT/$1/stat" 2>/dev/null || return 0
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

pid="" started=""
[[ -f $LAUNCH_PID_FILE ]] && read -r pid started <"$LAUNCH_PID_FILE" || true
if [[ ! $pid =~ ^[1-9][0-9]*$ ]] || ! alive "$pid"; then
  echo "$PROG: no training running"
  exit 0
fi
# The launcher finished long ago and the kernel gave its PID to another process: leave that be.
if [[ -n $started && $(proc_start_time "$pid" || true) != "$started" ]]; then
  echo "$PROG: no training running (pid $pid is another process now)"
  exit 0
fi

# Every process below $1 (children first found by their parent in /proc/<pid>/stat).
descendants() {
  local stat rest ppid child
  for stat in "$PROC_ROOT"/[0-9]*/stat; do
    read -r rest <"$stat" 2>/dev/null || continue
    child=${stat%/stat}
    child=${child##*/}
    rest=${rest##*) }   # fields after the command name, which may hold spaces
    read -r _ ppid _ <<<"$rest"
    if [[ $ppid == "$1" ]]; then
      echo "$child"
      descendants "$child"
    fi
  done
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
