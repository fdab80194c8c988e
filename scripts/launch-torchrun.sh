#!/usr/bin/env bash
# Usage: launch-torchrun.sh SCRIPT [ARGS...]
#
# Starts torchrun for this node. Run it on every pod of the cluster; the c10d rendezvous on
# MASTER_ADDR:MASTER_PORT assigns node ranks, so no per-pod rank is needed. Sources the NCCL
# settings first (launch-common.sh load_nccl_env).
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
#   NCCL_INIT_SCRIPT       optional  the GPUDirect release's NCCL script, sourced first (exit 69
#                                    if missing); the pod's NCCL_* values are set again after it
#   TORCHRUN_BIN           optional  default torchrun
#   PREFLIGHT              optional  1 = run preflight.sh first and stop if it fails; default 0
#   LAUNCH_PID_FILE        optional  default /tmp/gpu-cluster-launch.pid (for launch-stop.sh)
#   PREFLIGHT_BIN          optional  default preflight.sh beside this script
#   RUN_METRICS_PORT       optional  serve the run's metrics on it (run_metrics.py); unset: none
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
readonly PROG=launch-torchrun
# shellcheck source=launch-common.sh
. "$(dirname "$0")/launch-common.sh"
record_launch_pid
start_run_metrics

require_script "$@"
load_nccl_env
require_rendezvous

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

run_preflight torchrun

exec "$TORCHRUN_BIN" \
  --nnodes="$TORCHRUN_NNODES" \
  --nproc-per-node="$GPUS_PER_NODE" \
  --rdzv-backend=c10d \
  --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" \
  --rdzv-id="$RDZV_ID" \
  --max-restarts="$TORCHRUN_MAX_RESTARTS" \
  "$@"
