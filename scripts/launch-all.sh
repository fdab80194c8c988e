#!/usr/bin/env bash
# Usage: launch-all.sh CLI TARGET... NAMESPACE STATEFULSET NODES COMMAND [ARGS...]
#   TARGET: --kubeconfig FILE and/or --context CONTEXT (then --cluster CLUSTER if the stack sets it)
#
# Runs on your machine, never inside a pod (the stack outputs launchCommand, verifyCommand and
# stopCommand run it through `python3 -m gpu_cluster.launch_all`): starts COMMAND ARGS (a
# launcher and its script, or launch-stop.sh) in the training container of pods
# STATEFULSET-0..NODES-1 with `CLI TARGET... exec` (oc or kubectl;
# a kubeconfig file or a context is required, so it never acts on whichever cluster is current),
# waits for all, and exits with the exit code of the first pod that fails (0 if none).
# When one pod fails, the others would wait for it in NCCL until they time out, so the training
# on every other pod is stopped at once (launch-stop.sh in each pod). On Ctrl-C (or SIGTERM) the
# same happens and it exits 130: `CLI exec` does not pass signals on, so without this the
# remote processes would keep running. A stream that ends without the launcher having ended (a
# laptop asleep, a VPN or API server gone for a while: `CLI exec` exits 1, as it does for the
# remote command's exit 1) is no failure: the pod is asked whether its launcher still runs
# (launch-status.sh) and, while it does, asked again every LAUNCH_ALL_POLL_SECONDS (10); its
# exit code is then unknown, and counts as 1 when no pod failed. Stopping a pod is given
# LAUNCH_ALL_STOP_SECONDS (60: launch-stop.sh's 30 s grace, and the exec around it); a pod whose
# stop did not end by then (a node that does not answer) is given up: its stream is closed, and
# launch-all ends saying that its training may still run there. Written for bash 3.2 too
# (macOS), which has no timeout(1).
set -euo pipefail

usage() {
  echo "usage: launch-all.sh CLI [--kubeconfig FILE] [--context CONTEXT] [--cluster CLUSTER]" \
    "NAMESPACE STATEFULSET NODES COMMAND [ARGS...] (a kubeconfig file or a context" \
    "is required)" >&2
  exit 2
}
(($# >= 1)) || usage
cli=$1
shift
target=()
named=0
while (($# >= 2)) && [[ $1 == --kubeconfig || $1 == --context || $1 == --cluster ]]; do
  [[ -n $2 ]] || usage
  [[ $1 == --cluster ]] || named=1
  target+=("$1" "$2")
  shift 2
done
if ((named == 0 || $# < 4)); then
  usage
fi
namespace=$1 sts=$2 nodes=$3
shift 3
[[ $nodes =~ ^[1-9][0-9]*$ ]] || {
  echo "launch-all: NODES='$nodes' is not a positive integer" >&2
  exit 2
}
readonly CONTAINER=training STOP=/opt/gpu-cluster/launch-stop.sh
readonly STATUS=/opt/gpu-cluster/launch-status.sh NOT_RUNNING=3 # launch-status.sh's answers
STOP_SECONDS=${LAUNCH_ALL_STOP_SECONDS:-60}
POLL_SECONDS=${LAUNCH_ALL_POLL_SECONDS:-10}
# How long a status query may take, and a pod may go unanswering before it counts as failed.
readonly STATUS_SECONDS=30 REACH_SECONDS=300
for knob in STOP_SECONDS POLL_SECONDS; do
  [[ ${!knob} =~ ^[1-9][0-9]*$ ]] || {
    echo "launch-all: LAUNCH_ALL_$knob='${!knob}' is not a positive number of seconds" >&2
    exit 2
  }
done
# Before anything starts: a missing CLI or an unreachable cluster is one message, not a failure
# per pod (each of which would stop the training everywhere).
if ! command -v "$cli" >/dev/null; then
  echo "launch-all: $cli is not installed or not on PATH; nothing was started" >&2
  exit 127
fi
rc=0
reached=$("$cli" "${target[@]}" get pod -n "$namespace" "$sts-0" -o name 2>&1) || rc=$?
if ((rc != 0)); then
  echo "launch-all: cannot reach pod $sts-0 in namespace $namespace (${target[*]}):" \
    "${reached%%$'\n'*}; nothing was started. Check that context; on GKE run the command" \
    "\`pulumi stack output getCredentialsCommand\` prints" >&2
  exit "$rc"
fi
state=$(mktemp -d)
# One line per failed pod, "<pod> <exit code>", in the order they failed.
failed=$state/failed
# One line per pod whose training ended while its stream was lost.
unknown=$state/unknown
# One line per pod (its index) whose stop did not end within STOP_SECONDS.
unanswered=$state/unanswered
: >"$failed"
: >"$unknown"
: >"$unanswered"

# Usage: (on_pod I COMMAND...): COMMAND in pod I's training container, as this process (so
# a signal to it reaches the CLI itself): call it in a subshell.
on_pod() {
  exec "$cli" "${target[@]}" exec -n "$namespace" "$sts-$1" -c "$CONTAINER" -- "${@:2}"
}

# Usage: on_pod_within SECONDS I COMMAND...: on_pod, stopped (SIGTERM to the CLI) once it has
# run SECONDS; then returns 124, as timeout(1) does.
on_pod_within() {
  local seconds=$1 pid rc=0 began=$SECONDS
  shift
  on_pod "$@" &
  pid=$!
  (
    for ((waited = 0; waited < seconds; waited++)); do
      kill -0 "$pid" || exit 0
      sleep 1
    done
    kill -TERM "$pid"
  ) >/dev/null 2>&1 &
  wait "$pid" || rc=$?
  if ((rc != 0 && SECONDS - began >= seconds)); then
    echo "launch-all: $sts-$1: '${*:2}' did not end within ${seconds}s; stopped waiting for it" >&2
    return 124
  fi
  return "$rc"
}

# Usage: stop_on I: launch-stop.sh on pod I; noted in $unanswered when it did not end in time.
stop_on() {
  local rc=0
  on_pod_within "$STOP_SECONDS" "$1" "$STOP" >&2 || rc=$?
  ((rc != 124)) || echo "$1" >>"$unanswered"
}

# Stops the training on every pod; then gives up the pods whose stop did not end in time.
stop_all() {
  local i pids=""
  for ((i = 0; i < nodes; i++)); do
    stop_on "$i" &
    pids+=" $!"
  done
  for i in $pids; do
    wait "$i" || true
  done
  while read -r i; do
    give_up "$i"
  done <"$unanswered"
}

# Usage: give_up I: stops following pod I, whose stop did not end: its launch (and the polls
# that follow it), then its stream, which would otherwise stay open as long as the pod does not
# answer.
give_up() {
  local stream=""
  kill -TERM "${launches[$1]}" 2>/dev/null || true
  read -r stream 2>/dev/null <"$state/stream-$1" || true
  [[ -z $stream ]] || kill -TERM "$stream" 2>/dev/null || true
  echo "launch-all: gave up on $sts-$1, which does not answer: its training may still run" \
    "there (statusCommand asks, stopCommand stops it)" >&2
}

# Usage: launcher_runs I: whether the launcher on pod I still runs (launch-status.sh). A pod
# that does not answer is asked again every POLL_SECONDS; one that does not answer for
# REACH_SECONDS, or is not there, counts as not running.
launcher_runs() {
  local said rc waited=0
  while :; do
    rc=0
    said=$(on_pod_within "$STATUS_SECONDS" "$1" "$STATUS" 2>&1) || rc=$?
    case $rc in
      0) return 0 ;;
      "$NOT_RUNNING") return 1 ;;
    esac
    [[ $said != *"(NotFound)"* ]] || return 1
    if ((waited >= REACH_SECONDS)); then
      echo "launch-all: $sts-$1 did not answer for ${REACH_SECONDS}s: ${said%%$'\n'*}" >&2
      return 1
    fi
    sleep "$POLL_SECONDS"
    waited=$((waited + POLL_SECONDS))
  done
}

# Usage: launch_on I ARGS...: the launcher on pod I, its failure recorded in $failed; followed
# in the pod when the stream ends but the launcher runs on (then recorded in $unknown).
launch_on() {
  local i=$1 rc=0 pod=$sts-$1
  shift
  (
    # The stream's PID, for give_up: this subshell's, which the CLI takes over (bash 3.2 has
    # no BASHPID; a child's parent is this subshell).
    sh -c 'echo "$PPID"' >"$state/stream-$i"
    on_pod "$i" "$@"
  ) || rc=$?
  ((rc != 0)) || return 0
  if ! launcher_runs "$i"; then
    echo "$pod $rc" >>"$failed"
    return 0
  fi
  echo "launch-all: lost the stream to $pod (exit $rc), but its training runs on;" \
    "following it there" >&2
  while sleep "$POLL_SECONDS" && launcher_runs "$i"; do :; done
  echo "launch-all: $pod's training has ended; its exit code is unknown (its stream was lost)" >&2
  echo "$pod" >>"$unknown"
}

interrupted=0
stopped=0
# The handler only takes note; the loop below looks once a second (bash 3.2 has no `wait -n`,
# and checking then waiting would race with a signal arriving in between).
trap 'interrupted=1' INT TERM
launches=()
for ((i = 0; i < nodes; i++)); do
  (
    trap - INT TERM
    launch_on "$i" "$@"
  ) &
  launches[i]=$!
done

running() {
  local pid
  for pid in "${launches[@]}"; do
    kill -0 "$pid" 2>/dev/null && return 0
  done
  return 1
}

while running; do
  sleep 1 &
  wait $! || true
  if ((stopped == 0)) && ((interrupted == 1)); then
    stopped=1
    echo "launch-all: interrupted; stopping the training on every pod" >&2
    stop_all
  elif ((stopped == 0)) && [[ -s $failed ]]; then
    stopped=1
    read -r pod rc <"$failed"
    echo "launch-all: $pod failed (exit $rc); stopping the training on every pod" >&2
    stop_all
  fi
done
for pid in "${launches[@]}"; do
  wait "$pid" || true
done

rc=0
if ((interrupted == 1)); then
  rc=130
elif [[ -s $failed ]]; then
  read -r pod rc <"$failed"
  echo "launch-all: first failure: $pod, exit $rc" >&2
elif [[ -s $unknown ]]; then
  rc=1
  echo "launch-all: no pod failed, but the exit code of $(tr '\n' ' ' <"$unknown")is unknown" >&2
fi
rm -rf "$state"
exit "$rc"
