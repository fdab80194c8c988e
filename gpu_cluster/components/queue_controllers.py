"""The QueueControllers component: JobSet and Kueue installed from their upstream Helm charts
(workload.controllers.install), usable alone; and ExistingQueueControllers, the check that the
cluster's own serve what a stack writes when it installs none.

Each chart goes into a namespace of its own with the chart's default values, as
cluster-toolkit's kubectl-apply module installs them (GoogleCloudPlatform/cluster-toolkit
1047080 modules/management/kubectl-apply/main.tf; tests/vendor/gke_gpudirect.yaml lists what
differs). A Chart's objects are each a Pulumi resource awaited as any other, so what depends on
this component waits until both managers' Deployments are available, their webhooks serving."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

from gpu_cluster.facts.kueue import (
    JOBSET_MIN_VERSION,
    KUEUE_API,
    KUEUE_MIN_VERSION,
    release_text,
)
from gpu_cluster.plan.controllers import ControllerChart, ExistingControllers, ServedApi

QUEUE_CONTROLLERS_TYPE = "gpu-cluster:queue:QueueControllers"


class QueueControllers(pulumi.ComponentResource):
    """One namespace and one helm.v4.Chart per chart of `charts`, each after the one before.
    namespaces: each chart's, by its release."""

    namespaces: dict[str, k8s.core.v1.Namespace]

    def __init__(
        self,
        name: str,
        charts: Sequence[ControllerChart],
        labels: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(QUEUE_CONTROLLERS_TYPE, name, None, opts)
        self.namespaces = {}
        before: list[pulumi.Resource] = []
        for chart in charts:
            namespace = self.namespaces[chart.release] = k8s.core.v1.Namespace(
                f"{name}-{chart.release}-namespace",
                metadata=ObjectMetaArgs(name=chart.namespace, labels=labels),
                opts=pulumi.ResourceOptions(parent=self),
            )
            installed = k8s.helm.v4.Chart(
                f"{name}-{chart.release}",
                k8s.helm.v4.ChartArgs(
                    chart=chart.chart,
                    version=chart.version,
                    # The release name, which prefixes the chart's objects: kueue-controller-
                    # manager, as the controllers' own manifests name them.
                    name=chart.release,
                    namespace=chart.namespace,
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[namespace, *before]),
            )
            before = [installed]
        self.register_outputs({})


class ExistingQueueControllers(pulumi.ComponentResource):
    """Reads what `existing` names: each definition, failing the program unless it serves its
    version, and the referenced LocalQueue. Reads run in `pulumi preview` too, so a cluster
    without Kueue or JobSet, or with releases too old, fails the preview, before `pulumi up`
    writes anything that waits for this component."""

    def __init__(
        self, name: str, existing: ExistingControllers, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:queue:ExistingQueueControllers", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        checked: list[pulumi.Output[str]] = []
        for api in existing.crds:
            definition = k8s.apiextensions.v1.CustomResourceDefinition.get(
                f"{name}-{api.crd.split('.')[0]}", api.crd, opts=child
            )
            checked.append(definition.spec.apply(functools.partial(_served, api)))
        if existing.local_queue is not None:
            namespace, queue = existing.local_queue
            k8s.apiextensions.CustomResource.get(
                f"{name}-local-queue", KUEUE_API, "LocalQueue", f"{namespace}/{queue}", opts=child
            )
        self.register_outputs({"served": pulumi.Output.all(*checked)})


def _served(api: ServedApi, spec: k8s.apiextensions.v1.outputs.CustomResourceDefinitionSpec) -> str:
    served = [v.name for v in spec.versions if v.served]
    if api.version not in served:
        raise pulumi.RunError(
            f"gpu-cluster:workload.controllers.install is false (the stack uses the Kueue and "
            f"JobSet the cluster runs), but the cluster's {api.crd} serves "
            f"{', '.join(served) or 'no version'}, not {api.version}, which the stack writes: "
            f"upgrade them (Kueue {release_text(KUEUE_MIN_VERSION)} or later, JobSet "
            f"{release_text(JOBSET_MIN_VERSION)} or later)"
        )
    return api.version
