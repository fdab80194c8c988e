#!/usr/bin/env bash
# Usage: idle-training.sh GRACE_SECONDS
#
# The command of a StatefulSet stack's training container, its PID 1: idles until a user starts
# the launcher in the container (launchCommand), and on SIGTERM (the pod deleted, rolled by
# `pulumi up`, evicted, its node drained) stops that training as launch-stop.sh does, giving it
# GRACE_SECONDS (the pod's terminationGracePeriodSeconds) before SIGKILL, then exits 0. The
# training started by `oc exec` is no child of PID 1, and a container's stop signal reaches
# only its PID 1 (the runtime's `kill` without `--all`: runc man/runc-kill.8.md); when PID 1
# exits, the kernel SIGKILLs every other process of its PID namespace (pid_namespaces(7)). So an
# idle command that only exits on SIGTERM ends the training at once, with no SIGTERM to save a
# checkpoint on.
set -euo pipefail
readonly PROG=idle-training

if (($# != 1)) || [[ ! $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $PROG GRACE_SECONDS (a positive integer)" >&2
  exit 2
fi
readonly GRACE_SECONDS=$1

stop_training() {
  LAUNCH_STOP_GRACE=$GRACE_SECONDS "$(dirname "$0")/launch-stop.sh" || true
  exit 0
}
trap stop_training TERM INT
sleep infinity &
wait
