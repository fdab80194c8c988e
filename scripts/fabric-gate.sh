#!/usr/bin/env bash
# Usage: fabric-gate.sh [CHECK_ARGS...] -- [LAUNCHER [ARGS...]]
#
# What a JobSet run's pods start with (workload.kind jobset, verify.enabled): first the
# all_gather fabric check across every pod of the run, on the nodes the run got, through
# launch-torchrun.sh with its own rendezvous; then, only when it passed, `exec LAUNCHER ARGS`
# (the training launcher). The health runner's pairwise check runs it with no LAUNCHER: the
# check alone, its verdict the exit code. A failed check exits with its launcher's code, so no
# training starts on a slow or wrong fabric: torchrun's 1 for any rank's failure (whatever the
# rank's own code), on which the JobSet restarts the run, or the launcher's configuration error
# (78) from before torchrun started, on which it fails the run at once. A check that could not
# run (each rank here that said how it ended said 2, a setup error: no PyTorch, no CUDA, a
# failed rendezvous; allreduce_check.py writes it to FABRIC_CHECK_EXIT_DIR) judged no fabric:
# 75 (EX_TEMPFAIL, sysexits.h), which the health runner records as `error`, not as a failed
# node, and on which a JobSet restarts the run. Stopped (SIGTERM, SIGINT) during the check, it
# stops the check and exits 128+signal.
#
# Environment: what launch-torchrun.sh reads (NNODES, GPUS_PER_NODE, MASTER_ADDR, MASTER_PORT,
# RDZV_ID, ...); TORCHRUN_NNODES and RDZV_ID are set here for the check: the whole run, and
# <RDZV_ID>-fabric-check, so it never meets the training rendezvous.
#   CHECK_SCRIPT  optional  default allreduce_check.py beside this script
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
readonly PROG=fabric-gate
# allreduce_check.py's setup error and its failure (fabric_verdict.py); what this gate exits
# with when the check could not run.
readonly CHECK_SETUP=2 CHECK_FAIL=1 NOT_RUN=75
# shellcheck source=launch-common.sh
. "$(dirname "$0")/launch-common.sh" # wait_for_child

usage() {
  echo "usage: $PROG [CHECK_ARGS...] -- [LAUNCHER [ARGS...]]" >&2
  exit 2
}

check_args=()
while (($# > 0)) && [[ $1 != -- ]]; do
  check_args+=("$1")
  shift
done
(($# >= 1)) || usage # no `--`
shift
unstarted=${1:+; not starting $1}

here=$(dirname "$0")
ended=$(mktemp -d)

# A stop while the check runs (the pod deleted, the run preempted or replaced): this script is
# the container's PID 1, to which the kernel delivers no signal it has no handler for
# (pid_namespaces(7), "The namespace init process"), so without a trap the check would run on
# until the kubelet's SIGKILL at the end of the grace period. The trap hands the signal to the
# check's launcher (torchrun, which stops its ranks); the gate then ends 128+signal, starting
# nothing.
stopped=""
stop_check() {
  stopped=$1
  [[ -z ${check:-} ]] || kill -s "$1" "$check" 2>/dev/null || true
}
trap 'stop_check TERM' TERM
trap 'stop_check INT' INT
FABRIC_CHECK_EXIT_DIR=$ended TORCHRUN_NNODES=${NNODES:-} RDZV_ID="${RDZV_ID:-gpu-cluster}-fabric-check" \
  "$here/launch-torchrun.sh" "${CHECK_SCRIPT:-$here/allreduce_check.py}" "${check_args[@]}" &
check=$!
[[ -z $stopped ]] || kill -s "$stopped" "$check" 2>/dev/null || true
rc=0
wait_for_child "$check" || rc=$?
said=$(cat "$ended"/rank-* 2>/dev/null || true)
rm -rf "$ended"
if [[ -n $stopped ]]; then
  echo "$PROG: stopped (SIG$stopped) during the fabric check$unstarted" >&2
  exit $((128 + $(kill -l "$stopped")))
fi
if ((rc != 0)); then
  if grep -qx "$CHECK_SETUP" <<<"$said" && ! grep -qx "$CHECK_FAIL" <<<"$said"; then
    echo "$PROG: the fabric check could not run (exit $rc; its ranks: a setup error)$unstarted" >&2
    exit "$NOT_RUN"
  fi
  echo "$PROG: the fabric check failed (exit $rc)$unstarted" >&2
  exit "$rc"
fi
if (($# == 0)); then
  echo "$PROG: the fabric check passed" >&2
  exit 0
fi
echo "$PROG: the fabric check passed; starting $1" >&2
exec "$@"
