"""The commands a person runs on a JobSet stack's run (workload.kind jobset): submit it again,
watch it, read its logs, stop it (pure). Every kubectl/oc call names the stack's cluster."""

from __future__ import annotations

import shlex

from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.kueue import JOB_COMPLETION_INDEX_ANNOTATION, JOBSET_NAME_LABEL
from gpu_cluster.plan.launch import TRAINING_CONTAINER, Kube

# The JobSet resource by its full name: `jobset` alone could be another API's short name.
JOBSET_RESOURCE = "jobsets.jobset.x-k8s.io"
# Kueue's Workload: one per queued JobSet, with the admission and the queue position.
WORKLOAD_RESOURCE = "workloads.kueue.x-k8s.io"


def _pods_of_run(s: Settings) -> str:
    return f"{JOBSET_NAME_LABEL}={s.name}"


def submit_command(stack: str, urn: str) -> str:
    """A new run: Pulumi deletes the JobSet (a finished or stopped run) and creates it again,
    touching nothing else in the stack (pulumi up --target-replace)."""
    return shlex.join(["pulumi", "up", "--stack", stack, "--target-replace", urn, "--yes"])


def runs_command(stack: str) -> str:
    """The stack's named runs (`gpu-cluster run list`): runs anyone the stack names submits from
    its run template, without the stack; `run submit|status|logs|stop` go on from there. As the
    other commands run the package: `python3 -m`, from the project directory (the stack's file
    names its context) or with the package installed."""
    return shlex.join(["python3", "-m", "gpu_cluster", "run", "list", "--stack", stack])


def ledger_command(stack: str, run: str) -> str:
    """`gpu-cluster run status` of `run` (the stack's own): where its time went, its goodput
    ledger, besides its pods and start; run as runs_command is."""
    return shlex.join(["python3", "-m", "gpu_cluster", "run", "status", run, "--stack", stack])


def status_command(s: Settings, kube: Kube) -> str:
    """The run (restarts, completion, suspended while queued), its Kueue Workload (admitted,
    why not yet) and its pods with their nodes."""
    run = shlex.join(kube.argv("get", "-n", s.namespace, JOBSET_RESOURCE, s.name))
    queue = shlex.join(kube.argv("get", "-n", s.namespace, WORKLOAD_RESOURCE))
    pods = shlex.join(
        kube.argv("get", "-n", s.namespace, "pods", "-o", "wide", "-l", _pods_of_run(s))
    )
    return f"{run} && {queue} && {pods}"


def logs_command(s: Settings, kube: Kube) -> str:
    """Follow the training output of pod 0 (rank 0 prints the progress)."""
    # The Job controller copies the completion index to a pod label of the same name (PodIndexLabel,
    # beta and on by default from Kubernetes 1.28).
    selector = f"{_pods_of_run(s)},{JOB_COMPLETION_INDEX_ANNOTATION}=0"
    return shlex.join(
        kube.argv("logs", "-n", s.namespace, "-f", "-l", selector, "-c", TRAINING_CONTAINER)
    )


def stop_command(s: Settings, kube: Kube) -> str:
    """Stop the run: delete the JobSet (its Jobs and pods go with it; claims stay)."""
    return shlex.join(kube.argv("delete", "-n", s.namespace, JOBSET_RESOURCE, s.name))
