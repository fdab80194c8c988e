"""The Kueue objects a JobSet stack creates (workload.queue.mode create): their names, the GPU
nodes' flavor, the placement levels and the quota of one run (pure)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from gpu_cluster.config.derived import queue_name
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.workload import cluster_scoped_name, topology_levels
from gpu_cluster.facts.gcp import FLEX_START_MAX_SECONDS
from gpu_cluster.facts.kubernetes import GPU_RESOURCE, parse_quantity
from gpu_cluster.facts.kueue import (
    GKE_QUEUED_PROVISIONING_CLASS,
    KUEUE_DEFAULT_PREEMPTION,
    MAX_RUN_DURATION_ANNOTATION,
)
from gpu_cluster.plan.health_gate import HealthGatePlan, health_gate_plan
from gpu_cluster.plan.podspec import SCRIPTS_DIR, Container

# What a JobSet run's pods start with: the rest of their command only once Kueue admitted the
# run (scripts/admitted.sh).
ADMISSION_GATE = "admitted.sh"


def admission_gated(command: tuple[str, ...]) -> tuple[str, ...]:
    """A JobSet run's command: `command`, which the pods run only when Kueue admitted them."""
    return (f"{SCRIPTS_DIR}/{ADMISSION_GATE}", *command)


@dataclass(frozen=True)
class QueuePlan:
    """cluster_queue, flavor, topology: the cluster-scoped objects' names (topology None: no
    Topology, the levels are unknown). local_queue: the namespace's LocalQueue. levels: the
    Topology's node labels. node_labels: the labels that pick the stack's GPU nodes, the
    flavor's. quota: resource -> the ClusterQueue's nominal quota. provisioning_class: the
    ProvisioningRequest class an admission check asks GKE's autoscaler for before a run is
    admitted (queued provisioning), None: none. health_gate: the node health gate's, None:
    none."""

    cluster_queue: str
    flavor: str
    topology: str | None
    local_queue: str
    levels: tuple[str, ...]
    node_labels: dict[str, str]
    quota: dict[str, str]
    provisioning_class: str | None = None
    health_gate: HealthGatePlan | None = None
    preemption: str = KUEUE_DEFAULT_PREEMPTION
    priority_classes: tuple[tuple[str, int], ...] = ()


def queue_plan(
    s: Settings,
    node_labels: dict[str, str],
    extra_resources: dict[str, int],
    init_containers: Sequence[Container],
) -> QueuePlan | None:
    """The queue of stack `s` whose GPU nodes carry `node_labels`; its training container
    requests `extra_resources` (the network mode's) besides CPU, memory and GPUs, after
    `init_containers` (in the pod's order, sidecars among them). None when the stack references
    a queue."""
    if s.workload.queue.mode == "reference":
        return None
    scoped = cluster_scoped_name(s)
    levels = topology_levels(s)
    training = {
        "cpu": parse_quantity(s.pod.cpu_request),
        "memory": parse_quantity(s.pod.memory_request),
        GPU_RESOURCE: Fraction(s.gpus_per_node),
        **{name: Fraction(count) for name, count in extra_resources.items()},
    }
    per_pod = pod_requests(training, init_containers)
    topology = _named_for(scoped, {"levels": levels}) if levels else None
    # Without a Topology the flavor's node labels may change in place.
    flavor = (
        _named_for(scoped, {"nodeLabels": node_labels, "topologyName": topology})
        if topology is not None
        else scoped
    )
    return QueuePlan(
        cluster_queue=scoped,
        flavor=flavor,
        topology=topology,
        local_queue=queue_name(s),
        levels=levels,
        node_labels=node_labels,
        quota={name: _quantity(value * s.nodes) for name, value in per_pod.items()},
        provisioning_class=GKE_QUEUED_PROVISIONING_CLASS if queued_provisioning(s) else None,
        health_gate=health_gate_plan(s),
        preemption=s.workload.queue.preemption,
        priority_classes=priority_classes(s),
    )


def _named_for(base: str, spec: object) -> str:
    """`base` and a digest of `spec`: the name of a Kueue object whose spec cannot change once
    it is in use. A Topology's levels are immutable, and so are a ResourceFlavor's node labels
    and topologyName once it has one (kueue v0.19.2 charts/kueue/templates/crd/
    kueue.x-k8s.io_topologies.yaml, kueue.x-k8s.io_resourceflavors.yaml x-kubernetes-
    validations); and neither can be deleted and made again under its name while in use (Kueue
    keeps its kueue.x-k8s.io/resource-in-use finalizer while a flavor names the Topology and a
    ClusterQueue the flavor). A new spec is so a new object: created, the ClusterQueue moved to
    it, and only then the old one deleted."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:8]
    return f"{base}-{digest}"


def priority_classes(s: Settings) -> tuple[tuple[str, int], ...]:
    """The priority classes a run of stack `s` may ask for: (name, value)."""
    return tuple((c.name, c.value) for c in s.workload.queue.priority_classes)


def queued_provisioning(s: Settings) -> bool:
    return s.gcp is not None and s.gcp.queued_provisioning


def run_annotations(s: Settings) -> dict[str, str]:
    """The JobSet's annotations for its ProvisioningRequest: how long GKE keeps the nodes
    (gcp.maxRunDurationSeconds, else the longest a flex-start VM runs)."""
    if s.gcp is None or not queued_provisioning(s):
        return {}
    seconds = s.gcp.max_run_duration_seconds or FLEX_START_MAX_SECONDS
    return {MAX_RUN_DURATION_ANNOTATION: str(seconds)}


Requests = dict[str, Fraction]


def pod_requests(training: Requests, init_containers: Sequence[Container]) -> Requests:
    """What a pod requests as Kueue counts it against the quota: Kubernetes' effective pod
    requests (kubernetes staging/src/k8s.io/component-helpers/resource/helpers.go PodRequests,
    which kueue pkg/workload resources uses): the containers plus the sidecars, or the largest
    init step with the sidecars started before it, whichever is more."""
    steady = dict(training)
    sidecars: Requests = {}
    largest_init: Requests = {}
    for container in init_containers:
        own = {
            "cpu": parse_quantity(container.cpu_request),
            "memory": parse_quantity(container.memory_request),
        }
        if container.restart_policy == "Always":
            steady = _add(steady, own)
            sidecars = _add(sidecars, own)
            during = dict(sidecars)
        else:
            during = _add(own, sidecars)
        largest_init = _max(largest_init, during)
    return _max(steady, largest_init)


def _add(a: Requests, b: Requests) -> Requests:
    return {k: a.get(k, Fraction(0)) + b.get(k, Fraction(0)) for k in a.keys() | b.keys()}


def _max(a: Requests, b: Requests) -> Requests:
    return {k: max(a.get(k, Fraction(0)), b.get(k, Fraction(0))) for k in a.keys() | b.keys()}


def _quantity(value: Fraction) -> str:
    """`value` as a quantity: whole units when it is whole, else milli-units rounded up."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{math.ceil(value * 1000)}m"
