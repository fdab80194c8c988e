#!/usr/bin/env bash
# Usage: admitted.sh COMMAND [ARGS...]
#
# What a JobSet run's pods start with (workload.kind jobset): `exec COMMAND ARGS` when Kueue
# admitted the run, else a configuration error (exit 78: the JobSet fails the run at once), so a
# run Kueue does not manage never trains outside the queue's quota and placement.
#
# Kueue labels the pods of every run it admits with kueue.x-k8s.io/podset (kueue
# pkg/controller/jobframework/reconciler.go getPodSetsInfoFromStatus, v0.15.0 to v0.19.2); the
# pod spec passes that label in as KUEUE_PODSET, empty when the pod has none. A JobSet Kueue does
# not manage starts at once with no such label: on OpenShift when the namespace lacks the
# kueue.openshift.io/managed=true label Red Hat's build of Kueue requires, or when Kueue does
# not manage JobSets (its frameworks).
#
# Environment:
#   KUEUE_PODSET  the pod's kueue.x-k8s.io/podset label, empty when it has none
set -euo pipefail
readonly PROG=admitted

(($# >= 1)) || {
  echo "usage: $PROG COMMAND [ARGS...]" >&2
  exit 2
}
if [[ -z ${KUEUE_PODSET:-} ]]; then
  echo "$PROG: error: Kueue did not admit this run (the pod has no kueue.x-k8s.io/podset" \
    "label), so it would train outside the queue: Kueue does not manage JobSets in this" \
    "namespace. On OpenShift label the namespace for Red Hat's build of Kueue (a cluster" \
    "admin: oc label namespace ${POD_NAMESPACE:-<namespace>} kueue.openshift.io/managed=true);" \
    "elsewhere check that Kueue runs with jobset.x-k8s.io/jobset among its frameworks." \
    "Not starting $1." >&2
  exit 78
fi
exec "$@"
