"""The seam between the training pods and the controller object that runs them.

Everything but that object is written once (pod_template, claims, shared_objects); a workload
kind only says where its controller puts a pod's index and registers the controller object
from `TrainingPods`. stateful_set.STATEFUL_SET is today's kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1 import PodTemplateSpecArgs

from gpu_cluster.components.workload.args import TrainingWorkloadArgs


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


class WorkloadKind(Protocol):
    """A kind of controller object that runs the training pods, one per GPU node."""

    @property
    def node_rank_field(self) -> str:
        """The pod field (a downward-API fieldPath) in which this kind's controller puts the
        pod's index, the training container's NODE_RANK."""
        ...

    def controller(self, pods: TrainingPods) -> pulumi.Output[str]:
        """Registers the controller object that runs `pods`; returns its name."""
        ...
