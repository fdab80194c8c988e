"""The seam between the training pods and the controller object that runs them.

Everything but that object is written once (pod_template, claims, shared_objects); a workload
kind says what its pods do differently (`PodRole`: where the controller puts a pod's index, what
the training container runs, whether it restarts in place) and registers the controller object
from `TrainingPods`. stateful_set.STATEFUL_SET and job_set.JOB_SET are the kinds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1 import PodTemplateSpecArgs

from gpu_cluster.components.workload.args import TrainingWorkloadArgs
from gpu_cluster.facts.kueue import JOBSET_API

# The controller objects' resource types. Each kind's object aliases the other's type, and a
# change of `kind` replaces it, old object first: a switch of workload.kind is then one resource
# replaced, the old pods gone before the new ask for their GPUs. As a delete and a create, the
# engine would create and await the new object first, while the old one's pods hold the GPUs
# (seen on the real tier: JobSet to StatefulSet never became Ready; tests/real/test_engine.py).
STATEFUL_SET_TYPE = "kubernetes:apps/v1:StatefulSet"
JOB_SET_TYPE = f"kubernetes:{JOBSET_API}:JobSet"


def switching_from(other_type: str) -> pulumi.ResourceOptions:
    """The options that make a kind's object take over the other kind's (`other_type`)."""
    return pulumi.ResourceOptions(
        aliases=[pulumi.Alias(type_=other_type)],
        replace_on_changes=["kind"],
        delete_before_replace=True,
    )


@dataclass(frozen=True)
class PodRole:
    """What a kind's pods do differently from another kind's.

    node_rank_field: the pod field (a downward-API fieldPath) in which the controller puts the
    pod's index, the training container's NODE_RANK. command: the training container's.
    restart_policy: the pod's (None: the API default, Always). annotations: the pod template's,
    besides the network mode's. field_env: more of the training container's env from the pod's
    own fields (name -> fieldPath). subdomain: the headless Service the pods are named in, when
    their controller does not set it; active_deadline_seconds: how long a pod may run (None: no
    limit)."""

    node_rank_field: str
    command: tuple[str, ...]
    restart_policy: Literal["Never"] | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    field_env: dict[str, str] = field(default_factory=dict)
    subdomain: str | None = None
    active_deadline_seconds: int | None = None


@dataclass(frozen=True)
class TrainingPods:
    """What a controller object is built from, the same for every kind.

    resource_name: the controller resource's Pulumi name. args: the workload. template: its pods
    (pod_template.pod_template). service: the headless Service that names the pods in DNS.
    depends_on: what the controller object waits for (the scripts, Secrets and claims, and
    args.pods_after). parent: the TrainingWorkload component."""

    resource_name: str
    args: TrainingWorkloadArgs
    template: PodTemplateSpecArgs
    service: k8s.core.v1.Service
    depends_on: tuple[pulumi.Resource, ...]
    parent: pulumi.Resource


@dataclass(frozen=True)
class Controller:
    """The registered controller object and its name once created."""

    resource: pulumi.CustomResource
    name: pulumi.Output[str]


class WorkloadKind(Protocol):
    """A kind of controller object that runs the training pods, one per GPU node."""

    def pod_role(self, a: TrainingWorkloadArgs) -> PodRole:
        """What this kind's pods of workload `a` do differently."""
        ...

    def controller(self, pods: TrainingPods) -> Controller:
        """Registers the controller object that runs `pods`."""
        ...
