#!/usr/bin/env bash
# Usage: fabric-gate.sh [CHECK_ARGS...] -- LAUNCHER [ARGS...]
#
# What a JobSet run's pods start with (workload.kind jobset, verify.enabled): first the
# all_gather fabric check across every pod of the run, on the nodes the run got, through
# launch-torchrun.sh with its own rendezvous; then, only when it passed, `exec LAUNCHER ARGS`
# (the training launcher). A failed check exits with its launcher's code, so no training starts
# on a slow or wrong fabric: torchrun's 1 for any rank's failure (whatever the rank's own code),
# on which the JobSet restarts the run, or the launcher's configuration error (78) from before
# torchrun started, on which it fails the run at once.
#
# Environment: what launch-torchrun.sh reads (NNODES, GPUS_PER_NODE, MASTER_ADDR, MASTER_PORT,
# RDZV_ID, ...); TORCHRUN_NNODES and RDZV_ID are set here for the check: the whole run, and
# <RDZV_ID>-fabric-check, so it never meets the training rendezvous.
#   CHECK_SCRIPT  optional  default allreduce_check.py beside this script
set -euo pipefail
readonly PROG=fabric-gate

usage() {
  echo "usage: $PROG [CHECK_ARGS...] -- LAUNCHER [ARGS...]" >&2
  exit 2
}

check_args=()
while (($# > 0)) && [[ $1 != -- ]]; do
  check_args+=("$1")
  shift
done
(($# >= 2)) || usage # no `--`, or nothing to launch after it
shift

here=$(dirname "$0")
rc=0
TORCHRUN_NNODES=${NNODES:-} RDZV_ID="${RDZV_ID:-gpu-cluster}-fabric-check" \
  "$here/launch-torchrun.sh" "${CHECK_SCRIPT:-$here/allreduce_check.py}" "${check_args[@]}" || rc=$?
if ((rc != 0)); then
  echo "$PROG: the fabric check failed (exit $rc); not starting $1" >&2
  exit "$rc"
fi
echo "$PROG: the fabric check passed; starting $1" >&2
exec "$@"
