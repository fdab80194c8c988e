"""An OpenShift JobSet stack on Kueue set up as Red Hat's operator sets it up: managing jobs only
in namespaces labelled kueue.openshift.io/managed=true (tools/realtier/controllers.py).

- A namespace the stack creates carries the label: Kueue admits the run, and its pods carry the
  kueue.x-k8s.io/podset label the pods' admission gate reads (scripts/admitted.sh, through
  KUEUE_PODSET).
- A referenced namespace without the label: the JobSet is not Kueue's. No Workload; JobSet
  creates the pods at once, unqueued, and without that label, so the gate fails them (exit 78:
  the run fails, tests/test_scripts.py) instead of letting them train outside the queue. Once
  the namespace is labelled, the run submitted again is admitted.
"""

from __future__ import annotations

import functools

import pytest

from gpu_cluster.config.workload import REPLICATED_JOB
from gpu_cluster.facts.kueue import (
    JOBSET_API,
    OPENSHIFT_MANAGED_NAMESPACE_LABEL,
    PODSET_LABEL,
)
from tests.real.cluster_state import provision, referenced_objects
from tests.real.conftest import Cluster
from tests.real.queue_state import pods_of_an_admitted_run, run_pods, running, workload_of
from tools.realtier.kube import Kube, Object, wait_for
from tools.realtier.stacks import render

pytestmark = pytest.mark.real

JOBSET = ("workload.kind=jobset", "workload.command[0]=/workspace/train.py")


def test_a_namespace_the_stack_creates_is_opted_in_and_the_run_admitted(
    openshift_queued_cluster: Cluster,
) -> None:
    cluster, kube = openshift_queued_cluster, openshift_queued_cluster.kube
    stack = render("nerc-production", (*JOBSET, "namespaceMode=create"))
    (namespace,) = stack.of_kind("Namespace")
    assert namespace["metadata"]["labels"][OPENSHIFT_MANAGED_NAMESPACE_LABEL] == "true"
    provision(kube, stack)
    kube.create_all(stack.objects())
    for pod in pods_of_an_admitted_run(cluster, stack):
        assert pod["metadata"]["labels"][PODSET_LABEL] == REPLICATED_JOB


def test_in_a_namespace_red_hat_s_kueue_does_not_manage_the_pods_carry_no_admission(
    openshift_queued_cluster: Cluster,
) -> None:
    cluster, kube = openshift_queued_cluster, openshift_queued_cluster.kube
    stack = render("nerc-production", JOBSET)
    s = stack.settings
    assert s.namespace_mode == "reference"
    provision(kube, stack)
    kube.create_all(referenced_objects(stack))  # the namespace, as its owner made it
    kube.create_all(stack.objects())

    # Not Kueue's: JobSet creates the pods at once, with no Workload and no podset label.
    pods = wait_for(
        "the unqueued pods", functools.partial(running, kube, s.namespace, s.name, s.nodes)
    )
    assert workload_of(kube, s.namespace, s.name) is None
    assert [p for p in pods if PODSET_LABEL in p["metadata"].get("labels", {})] == []

    # A cluster admin labels the namespace; the run, submitted again, is queued and admitted.
    (job_set,) = stack.of_kind("JobSet")
    kube.delete(JOBSET_API, "JobSet", s.name, s.namespace)
    wait_for("the unqueued run gone", functools.partial(no_pods, kube, s.namespace, s.name))
    # Only the label changes, as with `oc label namespace`.
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": s.namespace,
                "labels": {OPENSHIFT_MANAGED_NAMESPACE_LABEL: "true"},
            },
        }
    )
    wait_for(
        "Kueue to see the label",
        functools.partial(submitted_suspended, kube, job_set),
        explain=lambda: f"{s.namespace} labelled, but Kueue's webhook left the JobSet running",
    )
    for pod in pods_of_an_admitted_run(cluster, stack):
        assert pod["metadata"]["labels"][PODSET_LABEL] == REPLICATED_JOB


def no_pods(kube: Kube, namespace: str, name: str) -> bool:
    return not run_pods(kube, namespace, name)


def submitted_suspended(kube: Kube, job_set: Object) -> bool:
    """Submit the run; True when Kueue's webhook suspended it (queued). Kueue reads the
    namespace's label through its informer, so a submit right after `oc label` can still find
    it unmanaged (seen once in CI): that submit is taken back and tried again."""
    created = kube.create(job_set)
    if created["spec"].get("suspend"):
        return True
    meta = job_set["metadata"]
    kube.delete(JOBSET_API, "JobSet", meta["name"], meta["namespace"])
    wait_for("the unqueued run gone", functools.partial(no_jobset, kube, meta))
    return False


def no_jobset(kube: Kube, meta: Object) -> bool:
    gone = not kube.exists(JOBSET_API, "JobSet", meta["name"], meta["namespace"])
    return gone and no_pods(kube, meta["namespace"], meta["name"])
