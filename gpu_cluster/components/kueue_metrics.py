"""The KueueMetricsScrape component: Managed Service for Prometheus scraping the Kueue a GKE
stack installs (plan/kueue_metrics.py): a ServiceAccount that may read Kueue's metrics, its
token Secret, the collector's read of that Secret alone, and the PodMonitoring."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs
from pulumi_kubernetes.rbac.v1 import PolicyRuleArgs, RoleRefArgs, SubjectArgs

from gpu_cluster.facts.metrics_scrape import POD_MONITORING_API, POD_MONITORING_KIND
from gpu_cluster.plan.kueue_metrics import KueueScrapePlan

RBAC_GROUP = "rbac.authorization.k8s.io"


class KueueMetricsScrape(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        plan: KueueScrapePlan,
        labels: dict[str, str],
        namespace: pulumi.Resource,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """namespace: Kueue's, which the objects wait for (nothing else of Kueue: the
        ClusterRoleBinding may name its role before the chart creates it)."""
        super().__init__("gpu-cluster:monitoring:KueueMetricsScrape", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=[namespace])

        def meta(object_name: str, annotations: dict[str, str] | None = None) -> ObjectMetaArgs:
            return ObjectMetaArgs(
                name=object_name, namespace=plan.namespace, labels=labels, annotations=annotations
            )

        account = k8s.core.v1.ServiceAccount(
            f"{name}-account", metadata=meta(plan.name), opts=child
        )
        # What names the account waits for it.
        after_account = pulumi.ResourceOptions(parent=self, depends_on=[account])
        in_namespace = SubjectArgs(kind="ServiceAccount", name=plan.name, namespace=plan.namespace)
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-reader",
            metadata=ObjectMetaArgs(name=plan.name, labels=labels),
            role_ref=RoleRefArgs(api_group=RBAC_GROUP, kind="ClusterRole", name=plan.reader_role),
            subjects=[in_namespace],
            opts=after_account,
        )
        # A long-lived token, which the token controller writes into the Secret; the collector
        # reads it from there (no data of Pulumi's own). After its account: the controller
        # deletes a token Secret whose account does not exist (kubernetes v1.35.4
        # pkg/controller/serviceaccount/tokens_controller.go syncSecret).
        token = k8s.core.v1.Secret(
            f"{name}-token",
            metadata=meta(plan.token_secret, {"kubernetes.io/service-account.name": plan.name}),
            type="kubernetes.io/service-account-token",
            opts=after_account,
        )
        read = k8s.rbac.v1.Role(
            f"{name}-token-read",
            metadata=meta(f"{plan.token_secret}-read"),
            rules=[
                PolicyRuleArgs(
                    api_groups=[""],
                    resources=["secrets"],
                    resource_names=[plan.token_secret],
                    verbs=["get", "list", "watch"],
                )
            ],
            opts=child,
        )
        collector_namespace, collector = plan.collector
        k8s.rbac.v1.RoleBinding(
            f"{name}-token-read",
            metadata=meta(f"{plan.token_secret}-read"),
            role_ref=RoleRefArgs(api_group=RBAC_GROUP, kind="Role", name=read.metadata.name),
            subjects=[
                SubjectArgs(kind="ServiceAccount", name=collector, namespace=collector_namespace)
            ],
            opts=child,
        )
        k8s.apiextensions.CustomResource(
            f"{name}-pod-monitoring",
            api_version=POD_MONITORING_API,
            kind=POD_MONITORING_KIND,
            metadata=meta(plan.name),
            spec=plan.pod_monitoring_spec(),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[token])),
        )
        self.register_outputs({})
