#!/usr/bin/env bash
# Usage: launch-torchrun.sh SCRIPT [ARGS...]
#
# Starts torchrun for this node. Run it on every pod of the cluster; the c10d rendezvous on
# MASTER_ADDR:MASTER_PORT assigns node ranks, so no per-pod rank is needed. Sources the NCCL
# settings written by detect-rdma.sh first.
#
# Environment:
#   NNODES                 required  number of nodes (pods)
#   GPUS_PER_NODE          required  worker processes per node
#   MASTER_ADDR            required  rendezvous host (pod 0)
#   MASTER_PORT            required  rendezvous port
#   TORCHRUN_NNODES        optional  torchrun --nnodes, N or MIN:MAX for elastic; default $NNODES
#   TORCHRUN_MAX_RESTARTS  optional  default 0
#   RDZV_ID                optional  default gpu-cluster
#   NCCL_ENV_FILE          optional  default /var/run/gpu-cluster/nccl.env (sourced if present)
#   TORCHRUN_BIN           optional  default torchrun
#   PREFLIGHT              optional  1 = run preflight.sh first and stop if it fails; default 0
#   PREFLIGHT_BIN          optional  default preflight.sh beside this script
set -euo pipefail

readonly PROG=launch-torchrun

die() {
  echo "$PROG: error: $*" >&2
  exit 1
}

if (($# < 1)); then
  echo "usage: $PROG SCRIPT [ARGS...]  (see the comment at the top of $0 for the environment)" >&2
  exit 2
fi

NCCL_ENV_FILE=${NCCL_ENV_FILE:-/var/run/gpu-cluster/nccl.env}
if [[ -f $NCCL_ENV_FILE ]]; then
  # shellcheck source=/dev/null # written at pod start by detect-rdma.sh
  . "$NCCL_ENV_FILE"
  echo "$PROG: NCCL settings from $NCCL_ENV_FILE" >&2
fi

require() {
  local name=$1
  [[ -n ${!name:-} ]] || die "$name is not set"
}

# A positive integer (no sign, no leading zero).
require_count() {
  require "$1"
  [[ ${!1} =~ ^[1-9][0-9]*$ ]] || die "$1='${!1}' is not a positive integer"
}

require_count NNODES
require_count GPUS_PER_NODE
require MASTER_ADDR
require_count MASTER_PORT
((MASTER_PORT <= 65535)) || die "MASTER_PORT=$MASTER_PORT is not a valid port (1-65535)"

TORCHRUN_NNODES=${TORCHRUN_NNODES:-$NNODES}
TORCHRUN_MAX_RESTARTS=${TORCHRUN_MAX_RESTARTS:-0}
RDZV_ID=${RDZV_ID:-gpu-cluster}
TORCHRUN_BIN=${TORCHRUN_BIN:-torchrun}

# torchrun asserts 0 < MIN <= MAX; fail here with a readable message instead.
if [[ $TORCHRUN_NNODES =~ ^([1-9][0-9]*)(:([1-9][0-9]*))?$ ]]; then
  min=${BASH_REMATCH[1]} max=${BASH_REMATCH[3]:-${BASH_REMATCH[1]}}
  ((min <= max)) || die "TORCHRUN_NNODES='$TORCHRUN_NNODES': MIN is larger than MAX"
else
  die "TORCHRUN_NNODES='$TORCHRUN_NNODES' is not N or MIN:MAX (positive integers)"
fi
[[ $TORCHRUN_MAX_RESTARTS =~ ^[0-9]+$ ]] ||
  die "TORCHRUN_MAX_RESTARTS='$TORCHRUN_MAX_RESTARTS' is not a non-negative integer"

# Environment problems (GPUs, /dev/shm, memlock, RDMA links) fail here with a clear list instead of
# as a hang or an NCCL error minutes into the job.
PREFLIGHT=${PREFLIGHT:-0}
case $PREFLIGHT in
  0) ;;
  1)
    preflight=${PREFLIGHT_BIN:-$(dirname "$0")/preflight.sh}
    [[ -x $preflight ]] || die "preflight $preflight not found or not executable (set PREFLIGHT_BIN)"
    rc=0
    # Its report goes to stderr: stdout belongs to the trainer.
    "$preflight" >&2 || rc=$?
    if ((rc != 0)); then
      echo "$PROG: error: preflight failed (exit $rc); not starting torchrun" >&2
      exit "$rc"
    fi
    ;;
  *) die "PREFLIGHT='$PREFLIGHT' is not 0 or 1" ;;
esac

exec "$TORCHRUN_BIN" \
  --nnodes="$TORCHRUN_NNODES" \
  --nproc-per-node="$GPUS_PER_NODE" \
  --rdzv-backend=c10d \
  --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" \
  --rdzv-id="$RDZV_ID" \
  --max-restarts="$TORCHRUN_MAX_RESTARTS" \
  "$@"
