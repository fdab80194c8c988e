#!/usr/bin/env bash
# Usage: launch-status.sh
#
# Says whether the training that launch-torchrun.sh or launch-deepspeed.sh started in this
# container still runs: exit 0 and "running (pid N)", or exit 3 and "not running" (3: "program
# is not running", as an init script's status action answers; LSB Core, Init Script Actions).
# launch-all.sh asks it when its `exec` stream to a pod ends without the launcher's own exit
# code, so a dropped connection is not taken for the training failing.
#
# Environment:
#   LAUNCH_PID_FILE    optional  default /tmp/gpu-cluster-launch.pid (written by the launchers)
#   PROC_ROOT          optional  default /proc
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
readonly PROG=launch-status NOT_RUNNING=3
LAUNCH_PID_FILE=${LAUNCH_PID_FILE:-/tmp/gpu-cluster-launch.pid}
# shellcheck source=launch-common.sh
. "$(dirname "$0")/launch-common.sh" # running_launcher

if pid=$(running_launcher); then
  echo "$PROG: running (pid $pid)"
else
  echo "$PROG: not running${pid:+ ($pid)}"
  exit "$NOT_RUNNING"
fi
