#!/usr/bin/env bash
# Usage: launch-all.sh CLI TARGET... NAMESPACE STATEFULSET NODES LAUNCHER SCRIPT [ARGS...]
#   TARGET: --kubeconfig FILE and/or --context CONTEXT (then --cluster CLUSTER if the stack sets it)
#
# Runs on your machine, never inside a pod (the stack outputs launchCommand and verifyCommand
# run it through `python3 -m gpu_cluster.launch_all`): starts LAUNCHER SCRIPT ARGS in the
# training container of pods STATEFULSET-0..NODES-1 with `CLI TARGET... exec` (oc or kubectl;
# a kubeconfig file or a context is required, so it never acts on whichever cluster is current),
# waits for all, and exits with the exit code of the first pod that fails (0 if none).
# When one pod fails, the others would wait for it in NCCL until they time out, so the training
# on every other pod is stopped at once (launch-stop.sh in each pod). On Ctrl-C (or SIGTERM) the
# same happens and it exits 130: `CLI exec` does not pass signals on, so without this the
# remote processes would keep running. Written for bash 3.2 too (macOS).
set -euo pipefail

usage() {
  echo "usage: launch-all.sh CLI [--kubeconfig FILE] [--context CONTEXT] [--cluster CLUSTER]" \
    "NAMESPACE STATEFULSET NODES LAUNCHER SCRIPT [ARGS...] (a kubeconfig file or a context" \
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
if ((named == 0 || $# < 5)); then
  usage
fi
namespace=$1 sts=$2 nodes=$3
shift 3
[[ $nodes =~ ^[1-9][0-9]*$ ]] || {
  echo "launch-all: NODES='$nodes' is not a positive integer" >&2
  exit 2
}
readonly CONTAINER=training STOP=/opt/gpu-cluster/launch-stop.sh
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
: >"$failed"

on_pod() {
  "$cli" "${target[@]}" exec -n "$namespace" "$sts-$1" -c "$CONTAINER" -- "${@:2}"
}

stop_all() {
  local i pids=""
  for ((i = 0; i < nodes; i++)); do
    on_pod "$i" "$STOP" >&2 &
    pids+=" $!"
  done
  for i in $pids; do
    wait "$i" || true
  done
}

interrupted=0
stopped=0
# The handler only takes note; the loop below looks once a second (bash 3.2 has no `wait -n`,
# and checking then waiting would race with a signal arriving in between).
trap 'interrupted=1' INT TERM
pods=""
for ((i = 0; i < nodes; i++)); do
  (
    trap - INT TERM
    rc=0
    on_pod "$i" "$@" || rc=$?
    if ((rc != 0)); then
      echo "$sts-$i $rc" >>"$failed"
    fi
  ) &
  pods+=" $!"
done

running() {
  local pid
  for pid in $pods; do
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
for pid in $pods; do
  wait "$pid" || true
done

rc=0
if ((interrupted == 1)); then
  rc=130
elif [[ -s $failed ]]; then
  read -r pod rc <"$failed"
  echo "launch-all: first failure: $pod, exit $rc" >&2
fi
rm -rf "$state"
exit "$rc"
