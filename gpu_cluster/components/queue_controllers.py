"""The QueueControllers component: JobSet and Kueue installed from their upstream Helm charts
(workload.controllers.install), usable alone.

Each chart goes into a namespace of its own with the chart's default values, as
cluster-toolkit's kubectl-apply module installs them (GoogleCloudPlatform/cluster-toolkit
1047080 modules/management/kubectl-apply/main.tf; tests/vendor/gke_gpudirect.yaml lists what
differs). A Chart's objects are each a Pulumi resource awaited as any other, so what depends on
this component waits until both managers' Deployments are available, their webhooks serving."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

from gpu_cluster.plan.controllers import ControllerChart

QUEUE_CONTROLLERS_TYPE = "gpu-cluster:queue:QueueControllers"


class QueueControllers(pulumi.ComponentResource):
    """One namespace and one helm.v4.Chart per chart of `charts`, each after the one before."""

    def __init__(
        self,
        name: str,
        charts: Sequence[ControllerChart],
        labels: dict[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__(QUEUE_CONTROLLERS_TYPE, name, None, opts)
        before: list[pulumi.Resource] = []
        for chart in charts:
            namespace = k8s.core.v1.Namespace(
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
