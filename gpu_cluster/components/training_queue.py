"""The TrainingQueue component: the Kueue queue a stack's JobSets wait in, usable alone.

A ResourceFlavor for the GPU nodes (with the Topology Kueue places pods by, when the levels are
known), a ClusterQueue whose quota is one run on every GPU node (with a ProvisioningRequest
admission check when the nodes come through queued provisioning), and the namespace's
LocalQueue that points at it; with the node health gate, its AdmissionCheck too (the controller
that answers it is NodeHealthGate); the WorkloadPriorityClasses runs may ask for. Object
shapes: kueue apis/kueue/v1beta2 (v0.17.1, v0.19.2)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from gpu_cluster.components.k8s_objects import ManifestResource
from gpu_cluster.facts.kubernetes import GPU_RESOURCE
from gpu_cluster.facts.kueue import (
    KUEUE_API,
    KUEUE_DEFAULT_PREEMPTION,
    PROVISIONING_CHECK_CONTROLLER,
)
from gpu_cluster.plan.health_gate import HEALTH_GATE_CONTROLLER
from gpu_cluster.plan.queue import QueuePlan


class TrainingQueue(pulumi.ComponentResource):
    """Topology (optional), ResourceFlavor, ClusterQueue and LocalQueue of `plan`, each after
    `controllers` (Kueue, when the stack installs it); the LocalQueue in `namespace` waits for
    `after` (the namespace)."""

    local_queue: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        plan: QueuePlan,
        namespace: str,
        labels: dict[str, str],
        after: Sequence[pulumi.Resource] = (),
        controllers: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-cluster:queue:TrainingQueue", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(controllers))

        def cluster_object(
            suffix: str,
            kind: str,
            object_name: str,
            spec: object,
            names: Sequence[pulumi.Resource] = (),
        ) -> ManifestResource:
            return ManifestResource(
                f"{name}-{suffix}",
                {
                    "apiVersion": KUEUE_API,
                    "kind": kind,
                    "metadata": {"name": object_name, "labels": labels},
                    "spec": spec,
                },
                pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=list(names))),
            )

        # The flavor names the Topology, and the ClusterQueue the flavor: each is made after
        # what it names and, when that is replaced (a new spec is a new name: plan.queue), moved
        # to the new one before the old one is deleted.
        flavor_spec: dict[str, object] = {"nodeLabels": plan.node_labels}
        topology: list[pulumi.Resource] = []
        if plan.topology is not None:
            topology.append(
                cluster_object(
                    "topology",
                    "Topology",
                    plan.topology,
                    {"levels": [{"nodeLabel": level} for level in plan.levels]},
                )
            )
            flavor_spec["topologyName"] = plan.topology
        flavor = cluster_object("flavor", "ResourceFlavor", plan.flavor, flavor_spec, topology)
        checks: list[str] = []
        if plan.provisioning_class is not None:
            # Before admitting a run Kueue asks the cluster autoscaler for all its nodes at
            # once (a ProvisioningRequest of this class), and admits it once they are there.
            cluster_object(
                "provisioning",
                "ProvisioningRequestConfig",
                plan.cluster_queue,
                {
                    "provisioningClassName": plan.provisioning_class,
                    "managedResources": [GPU_RESOURCE],
                },
            )
            cluster_object(
                "admission-check",
                "AdmissionCheck",
                plan.cluster_queue,
                {
                    "controllerName": PROVISIONING_CHECK_CONTROLLER,
                    "parameters": {
                        "apiGroup": KUEUE_API.split("/")[0],
                        "kind": "ProvisioningRequestConfig",
                        "name": plan.cluster_queue,
                    },
                },
            )
            checks.append(plan.cluster_queue)
        if plan.health_gate is not None:
            # Kueue admits a run only once the gate's controller (NodeHealthGate) found every
            # node Topology Aware Scheduling placed it on healthy.
            cluster_object(
                "node-health-check",
                "AdmissionCheck",
                plan.health_gate.check,
                {"controllerName": HEALTH_GATE_CONTROLLER},
            )
            checks.append(plan.health_gate.check)
        # v1beta2 has only the strategy form: a v1beta1-style spec.admissionChecks would be
        # pruned by the API server and runs admitted with no check asked (kueue apis/kueue/
        # v1beta2 clusterqueue_types.go AdmissionChecksStrategy, v0.17.1 and v0.19.2).
        strategy = (
            {"admissionChecksStrategy": {"admissionChecks": [{"name": c} for c in checks]}}
            if checks
            else {}
        )
        for class_name, value in plan.priority_classes:
            # A WorkloadPriorityClass has no spec: its value is top-level (kueue apis/kueue/
            # v1beta2/workloadpriorityclass_types.go, v0.19.2).
            ManifestResource(
                f"{name}-priority-{class_name}",
                {
                    "apiVersion": KUEUE_API,
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": class_name, "labels": labels},
                    "value": value,
                },
                child,
            )
        # Kueue's default is left out: a stack that sets none renders as before.
        preemption = (
            {"preemption": {"withinClusterQueue": plan.preemption}}
            if plan.preemption != KUEUE_DEFAULT_PREEMPTION
            else {}
        )
        resources = sorted(plan.quota)
        cluster_queue = cluster_object(
            "cluster-queue",
            "ClusterQueue",
            plan.cluster_queue,
            {
                # Only the stack's namespace submits to it (through its LocalQueue).
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceGroups": [
                    {
                        "coveredResources": resources,
                        "flavors": [
                            {
                                "name": plan.flavor,
                                "resources": [
                                    {"name": r, "nominalQuota": plan.quota[r]} for r in resources
                                ],
                            }
                        ],
                    }
                ],
                **strategy,
                **preemption,
            },
            [flavor],
        )
        ManifestResource(
            f"{name}-local-queue",
            {
                "apiVersion": KUEUE_API,
                "kind": "LocalQueue",
                "metadata": {"name": plan.local_queue, "namespace": namespace, "labels": labels},
                "spec": {"clusterQueue": plan.cluster_queue},
            },
            pulumi.ResourceOptions(parent=self, depends_on=[cluster_queue, *after]),
        )
        self.local_queue = pulumi.Output.from_input(plan.local_queue)
        self.register_outputs({"localQueue": self.local_queue})
