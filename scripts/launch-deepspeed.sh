#!/usr/bin/env bash
# Usage: launch-deepspeed.sh SCRIPT [ARGS...]
#
# Starts DeepSpeed for this node. Run it on every pod of the cluster. Pods cannot ssh/pdsh to
# each other, so this uses DeepSpeed's --no_ssh mode (DeepSpeed >= 0.14.5): each node launches
# its own workers with an explicit --node_rank. In that mode the hostfile is never contacted; it
# only sizes the world (one `<host> slots=<n>` line per node, first --num_nodes lines used), so it
# must list exactly NNODES hosts. Sources the NCCL settings first (launch-common.sh
# load_nccl_env).
#
# Environment:
#   NODE_RANK           required  this node's rank, 0..NNODES-1
#   NNODES              required  number of nodes (pods)
#   GPUS_PER_NODE       required  worker processes per node
#   MASTER_ADDR         required  address of node 0
#   MASTER_PORT         required  port on node 0
#   DEEPSPEED_HOSTFILE  optional  default /opt/gpu-cluster/hostfile
#   DEEPSPEED_CONFIG    optional  default /opt/gpu-cluster/ds_config.json
#   NCCL_ENV_FILE       optional  default /var/run/gpu-cluster/nccl.env (sourced if present)
#   NCCL_INIT_SCRIPT    optional  the GPUDirect release's NCCL script, sourced first (exit 69
#                                 if missing); the pod's NCCL_* values are set again after it
#   DEEPSPEED_BIN       optional  default deepspeed
#   PREFLIGHT           optional  1 = run preflight.sh first and stop if it fails; default 0
#   LAUNCH_PID_FILE     optional  default /tmp/gpu-cluster-launch.pid (for launch-stop.sh)
#   PREFLIGHT_BIN       optional  default preflight.sh beside this script
#   RUN_METRICS_PORT    optional  serve the run's metrics on it (run_metrics.py); unset: none
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
readonly PROG=launch-deepspeed
# shellcheck source=launch-common.sh
. "$(dirname "$0")/launch-common.sh"
record_launch_pid
start_run_metrics

require_script "$@"
load_nccl_env
require_rendezvous
require NODE_RANK
[[ $NODE_RANK =~ ^(0|[1-9][0-9]*)$ ]] || die "NODE_RANK='$NODE_RANK' is not a non-negative integer"
((NODE_RANK < NNODES)) || die "NODE_RANK=$NODE_RANK is out of range for NNODES=$NNODES (0..$((NNODES - 1)))"

DEEPSPEED_HOSTFILE=${DEEPSPEED_HOSTFILE:-/opt/gpu-cluster/hostfile}
DEEPSPEED_CONFIG=${DEEPSPEED_CONFIG:-/opt/gpu-cluster/ds_config.json}
DEEPSPEED_BIN=${DEEPSPEED_BIN:-deepspeed}

# Without a hostfile DeepSpeed silently falls back to a single local node, and with fewer lines
# than --num_nodes it shrinks the world, so check it here. Same rules as DeepSpeed's parser:
# blank lines and # comments are skipped, every other line is `<host> slots=<n>`, hosts unique.
[[ -f $DEEPSPEED_HOSTFILE ]] || die "hostfile $DEEPSPEED_HOSTFILE not found (set DEEPSPEED_HOSTFILE)"
declare -A seen=()
hosts=0
lineno=0
while IFS= read -r line || [[ -n $line ]]; do
  lineno=$((lineno + 1))
  line=${line#"${line%%[![:space:]]*}"}
  [[ -z $line || $line == \#* ]] && continue
  [[ $line =~ ^([^[:space:]]+)[[:space:]]+slots=[0-9]+ ]] ||
    die "$DEEPSPEED_HOSTFILE line $lineno is not '<host> slots=<n>': $line"
  host=${BASH_REMATCH[1]}
  [[ -z ${seen[$host]:-} ]] || die "$DEEPSPEED_HOSTFILE lists host $host twice"
  seen[$host]=1
  hosts=$((hosts + 1))
done <"$DEEPSPEED_HOSTFILE"
((hosts == NNODES)) ||
  die "$DEEPSPEED_HOSTFILE has $hosts host lines but NNODES=$NNODES; it needs exactly one line per node"

[[ -f $DEEPSPEED_CONFIG ]] || die "DeepSpeed config $DEEPSPEED_CONFIG not found (set DEEPSPEED_CONFIG)"

run_preflight deepspeed

# Not every PyTorch image has DeepSpeed: without preflight, say so here instead of exec's
# "command not found".
command -v "$DEEPSPEED_BIN" >/dev/null ||
  die "$DEEPSPEED_BIN not found: this image has no DeepSpeed. launcher.kind deepspeed needs DeepSpeed >= 0.14.5 (--no_ssh) in the image (e.g. pip install 'deepspeed>=0.14.5' in an image built from it); or set launcher.kind to torchrun"

# Not exec'd, unlike torchrun: DeepSpeed's runner (`deepspeed`) sets a SIGTERM handler only for
# pdsh (deepspeed/launcher/runner.py main), so in --no_ssh mode SIGTERM kills it at once and its
# child, DeepSpeed's launcher (deepspeed.launcher.launch, which stops the workers on SIGTERM and
# SIGINT: launch.py sigkill_handler), runs on; as its container's PID 1 (a JobSet pod, through
# fabric-gate.sh) the runner would not even get the kubelet's SIGTERM, which the kernel gives a
# namespace's init only for a signal it handles (pid_namespaces(7)). So this shell stays, stops
# that launcher on SIGTERM or SIGINT, and exits with the runner's code.
# DeepSpeed's launcher stops the workers alike on either signal; before the runner has started
# it, the runner itself is stopped.
stopping=""
stop_launcher() {
  stopping=1
  [[ -n ${runner:-} ]] || return 0
  local -a launchers
  mapfile -t launchers < <(children "$runner")
  kill -TERM "${launchers[@]:-$runner}" 2>/dev/null || true
}
trap stop_launcher TERM INT
"$DEEPSPEED_BIN" \
  --no_ssh \
  --node_rank="$NODE_RANK" \
  --hostfile="$DEEPSPEED_HOSTFILE" \
  --num_nodes="$NNODES" \
  --num_gpus="$GPUS_PER_NODE" \
  --master_addr="$MASTER_ADDR" \
  --master_port="$MASTER_PORT" \
  "$@" \
  --deepspeed_config "$DEEPSPEED_CONFIG" &
runner=$!
[[ -z $stopping ]] || stop_launcher
rc=0
wait_for_child "$runner" || rc=$?
exit "$rc"
