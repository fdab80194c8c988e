#!/usr/bin/env bash
# Usage: . launch-common.sh   (sourced by launch-torchrun.sh and launch-deepspeed.sh, after they
#                              set PROG)
#
# What both launchers share: error exits, the usage check, the NCCL settings (the GPUDirect
# release's script, the file detect-rdma.sh writes), validation of the rendezvous environment,
# the optional preflight, and the launcher's PID record that launch-stop.sh and
# launch-status.sh read (and their reading of it).
set -euo pipefail
: "${PROG:?set PROG before sourcing launch-common.sh}"

# A configuration error exits 78 (EX_CONFIG, sysexits.h): a JobSet fails the run on it at once
# instead of restarting pods that would fail the same way; a usage error exits 2.
die() {
  echo "$PROG: error: $*" >&2
  exit 78
}

# Usage: require_script "$@"
# A usage error without SCRIPT; a configuration error when SCRIPT is not a readable file. Checked
# here because torchrun hides it: Python exits 2 for a script it cannot open, but torchrun exits
# 1 whatever its workers' codes (torch/distributed/run.py: the ChildFailedError its run raises
# ends it), which a JobSet takes for a failure a restart may mend. An option first (`-m MODULE`)
# is the launcher's to check.
require_script() {
  if (($# < 1)); then
    echo "usage: $PROG SCRIPT [ARGS...]  (see the comment at the top of $0 for the environment)" >&2
    exit 2
  fi
  [[ $1 == -* || (-f $1 && -r $1) ]] ||
    die "training script $1 is not there or not readable: is its volume mounted, and its path (workload.command, launchCommand's script) right?"
}

# A missing NCCL_INIT_SCRIPT exits 69 (EX_UNAVAILABLE, sysexits.h): the node agent that installs
# it may not have run on this node yet, so a restart can succeed.
readonly NCCL_INIT_SCRIPT_MISSING=69

# Usage: load_nccl_env
# The NCCL settings, in the order Google's GKE workloads apply them: the GPUDirect release's own
# script, then what the pod sets after it; then the file detect-rdma.sh writes (OpenShift).
load_nccl_env() {
  source_nccl_init_script || exit "$NCCL_INIT_SCRIPT_MISSING"
  source_nccl_env_file
}

# Usage: source_nccl_init_script
# Sources NCCL_INIT_SCRIPT (unset: nothing to do), the release's script that exports its NCCL
# settings (gIB's set_nccl_env.sh, TCPXO's nccl-env-profile.sh), as Google's workloads do:
# without -e, -u or pipefail, which its scripts are not written for (nccl-env-profile.sh expands
# LD_LIBRARY_PATH whether set or not). Then every NCCL_* variable the pod started with is set
# again: the pod carries only what Google's workloads export after the script, and the stack's
# NCCL_DEBUG. Returns 1, naming the file, when it is not there.
source_nccl_init_script() {
  [[ -n ${NCCL_INIT_SCRIPT:-} ]] || return 0
  if [[ ! -f $NCCL_INIT_SCRIPT || ! -r $NCCL_INIT_SCRIPT ]]; then
    echo "$PROG: error: NCCL_INIT_SCRIPT $NCCL_INIT_SCRIPT is missing: the GPUDirect node agent (kube-system DaemonSet nccl-*-installer) has not installed it on this node yet, or the release (gcp.gpudirectRelease) ships none" >&2
    return 1
  fi
  local name setting options
  local -a pod_settings=()
  while IFS= read -r name; do
    pod_settings+=("$name=${!name}")
  done < <(compgen -e NCCL_)
  options=$(set +o)
  set +e +u +o pipefail
  # shellcheck source=/dev/null # installed on the node by Google's installer
  . "$NCCL_INIT_SCRIPT"
  eval "$options"
  for setting in "${pod_settings[@]}"; do
    export "${setting?}"
  done
  # An empty entry in the path is the working directory (ld.so(8)); nccl-env-profile.sh leaves a
  # trailing one where the image sets no LD_LIBRARY_PATH.
  if [[ ${LD_LIBRARY_PATH:-} == *: ]]; then
    export LD_LIBRARY_PATH=${LD_LIBRARY_PATH%:}
  fi
  echo "$PROG: NCCL settings from $NCCL_INIT_SCRIPT" >&2
}

source_nccl_env_file() {
  NCCL_ENV_FILE=${NCCL_ENV_FILE:-/var/run/gpu-cluster/nccl.env}
  if [[ -f $NCCL_ENV_FILE ]]; then
    # shellcheck source=/dev/null # written at pod start by detect-rdma.sh
    . "$NCCL_ENV_FILE"
    echo "$PROG: NCCL settings from $NCCL_ENV_FILE" >&2
  fi
}

require() {
  local name=$1
  [[ -n ${!name:-} ]] || die "$name is not set"
}

# A positive integer (no sign, no leading zero).
require_count() {
  require "$1"
  [[ ${!1} =~ ^[1-9][0-9]*$ ]] || die "$1='${!1}' is not a positive integer"
}

# NNODES, GPUS_PER_NODE, MASTER_ADDR and MASTER_PORT, as every launcher needs them.
require_rendezvous() {
  require_count NNODES
  require_count GPUS_PER_NODE
  require MASTER_ADDR
  require_count MASTER_PORT
  ((MASTER_PORT <= 65535)) || die "MASTER_PORT=$MASTER_PORT is not a valid port (1-65535)"
}

# Usage: proc_start_time PID
# When process PID started (field 22 of /proc/PID/stat, clock ticks since boot): with the PID
# it names one process, so a PID the kernel has since reused is not taken for it (proc(5)).
proc_start_time() {
  local stat fields
  read -r stat <"${PROC_ROOT:-/proc}/$1/stat" || return 1
  stat=${stat##*) } # fields from the third on; the command name before may hold spaces
  read -r -a fields <<<"$stat"
  echo "${fields[19]}"
}

# Usage: alive PID
# Running: signalable and not a zombie (exited, waiting for its parent to reap it).
alive() {
  local stat=""
  kill -0 "$1" 2>/dev/null || return 1
  # Braced: a redirection that fails is reported before a 2>/dev/null after it applies.
  { read -r stat <"${PROC_ROOT:-/proc}/$1/stat"; } 2>/dev/null || return 0
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

# Usage: pid=$(running_launcher)
# The PID of the launcher (or the trainer it became) that LAUNCH_PID_FILE names, if it still
# runs; else returns 1, printing why when it is not plain (a PID reused).
running_launcher() {
  local pid="" started=""
  [[ -f ${LAUNCH_PID_FILE:-} ]] && read -r pid started <"$LAUNCH_PID_FILE" || true
  if [[ ! $pid =~ ^[1-9][0-9]*$ ]] || ! alive "$pid"; then
    return 1
  fi
  # The launcher finished long ago and the kernel gave its PID to another process: not ours.
  if [[ -n $started && $(proc_start_time "$pid" || true) != "$started" ]]; then
    echo "pid $pid is another process now"
    return 1
  fi
  echo "$pid"
}

# Usage: children PID
# The processes whose parent is PID (field 4 of /proc/<pid>/stat).
children() {
  local stat rest ppid child
  for stat in "${PROC_ROOT:-/proc}"/[0-9]*/stat; do
    { read -r rest <"$stat"; } 2>/dev/null || continue # ended since the glob
    child=${stat%/stat}
    child=${child##*/}
    rest=${rest##*) } # fields after the command name, which may hold spaces
    read -r _ ppid _ <<<"$rest"
    [[ $ppid != "$1" ]] || echo "$child"
  done
}

# Usage: descendants PID
# Every process below PID.
descendants() {
  local child
  for child in $(children "$1"); do
    echo "$child"
    descendants "$child"
  done
}

# Usage: wait_for_child PID
# Returns the exit status of this shell's child PID once it has ended: a trapped signal ends
# `wait` early (status 128+signal) while the child goes on, so it is waited for again.
wait_for_child() {
  local rc=0
  wait "$1" || rc=$?
  while kill -0 "$1" 2>/dev/null; do
    rc=0
    wait "$1" || rc=$?
  done
  return "$rc"
}

# Write this shell's PID and start time where launch-stop.sh finds them, before anything else:
# a stop while the launcher still checks its node (preflight) then reaches it, and it ends there
# (exit 143) instead of going on into a rendezvous that waits for pods already stopped. The
# caller later `exec`s the trainer, which keeps both; a launcher that ends before removes them.
record_launch_pid() {
  LAUNCH_PID_FILE=${LAUNCH_PID_FILE:-/tmp/gpu-cluster-launch.pid}
  echo "$$ $(proc_start_time $$)" >"$LAUNCH_PID_FILE" ||
    die "cannot write $LAUNCH_PID_FILE (set LAUNCH_PID_FILE)"
  trap 'rm -f "$LAUNCH_PID_FILE" || true' EXIT
  trap 'stop_checks; echo "$PROG: stopped (SIGTERM) before training started" >&2; exit 143' TERM
}

# Usage: start_run_metrics
# With RUN_METRICS_PORT set, the run's metrics (run_metrics.py beside this script: steps and
# restarts, on that port) from this launcher's own output, which from here on is copied into the
# exporter's named pipes as well as to where it went before. The exporter is a process of this
# container, not a sidecar: no file to grow with the log, no volume or container to size.
# `tee -p` (GNU coreutils) goes on writing the training's output when the exporter is gone;
# a tee without it, or an exporter that does not start in RUN_METRICS_START_SECONDS, leaves
# the training without metrics, never stopped.
start_run_metrics() {
  [[ -n ${RUN_METRICS_PORT:-} ]] || return 0
  local dir exporter i
  if ! tee -p </dev/null >/dev/null 2>&1 || ! dir=$(mktemp -d); then
    echo "$PROG: warning: no GNU tee -p or no temporary directory; no run metrics" >&2
    return 0
  fi
  "${RUN_METRICS_PYTHON:-python3}" "$(dirname "$0")/run_metrics.py" "$dir" "$$" &
  exporter=$!
  for ((i = 0; i < ${RUN_METRICS_START_SECONDS:-10} * 10; i++)); do
    [[ -e $dir/ready ]] || ! alive "$exporter" && break
    sleep 0.1
  done
  if [[ ! -e $dir/ready ]]; then
    kill "$exporter" 2>/dev/null || true
    echo "$PROG: warning: run metrics did not start (run_metrics.py); training without them" >&2
    return 0
  fi
  # A tee's open of its named pipe waits for a reader, and the exporter may be gone by then
  # (killed, crashed): the launcher holds both pipes open (fds 3 and 4, read and write) until
  # each tee has opened its own, and then lets go, so that writes to a pipe nobody reads fail
  # (tee -p goes on) instead of filling it. Two commands: in one, bash would leave the first
  # tee's pipe open in the second tee, and the first would never see its input end.
  exec 3<>"$dir/stdout" 4<>"$dir/stderr"
  exec > >(exec 3>&- 4>&- tee -p "$dir/stdout")
  has_open "$!" "$dir/stdout"
  exec 2> >(exec 3>&- 4>&- tee -p "$dir/stderr" >&2)
  has_open "$!" "$dir/stderr"
  exec 3>&- 4>&-
}

# Usage: has_open PID PATH
# Waits (up to 5 s) until process PID has PATH open.
has_open() {
  local i fd
  for ((i = 0; i < 50; i++)); do
    for fd in /proc/"$1"/fd/*; do
      [[ $(readlink "$fd" 2>/dev/null) == "$2" ]] && return 0
    done
    sleep 0.1
  done
}

# The check running now (run_preflight), and what it started, stopped with it.
checks=""
stop_checks() {
  [[ -n $checks ]] || return 0
  local -a below
  # Found before the check ends: its children then leave its tree.
  mapfile -t below < <(descendants "$checks")
  kill -TERM "$checks" "${below[@]}" 2>/dev/null || true
}

# Usage: run_preflight TRAINER
# With PREFLIGHT=1, environment problems (GPUs, /dev/shm, memlock, RDMA links) fail here with a
# clear list instead of as a hang or an NCCL error minutes into the job.
run_preflight() {
  local preflight rc=0
  case ${PREFLIGHT:-0} in
    0) ;;
    1)
      preflight=${PREFLIGHT_BIN:-$(dirname "$0")/preflight.sh}
      [[ -x $preflight ]] || die "preflight $preflight not found or not executable (set PREFLIGHT_BIN)"
      # Its report goes to stderr: stdout belongs to the trainer. In the background, so that a
      # SIGTERM ends the `wait` at once and stops it (record_launch_pid).
      PREFLIGHT_LAUNCHER=$1 "$preflight" >&2 &
      checks=$!
      wait "$checks" || rc=$?
      checks=""
      if ((rc != 0)); then
        echo "$PROG: error: preflight failed (exit $rc); not starting $1" >&2
        exit "$rc"
      fi
      ;;
    *) die "PREFLIGHT='$PREFLIGHT' is not 0 or 1" ;;
  esac
}
