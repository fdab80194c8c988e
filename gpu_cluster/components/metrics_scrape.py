"""What every pod set the platform's Prometheus scrapes has: the object that has it scraped
(PodMonitor, PodMonitoring) and the NetworkPolicy rule that lets that Prometheus in on the pods'
`metrics` port alone; for the training pods' run metrics and the node health runner's."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import LabelSelectorArgs, ObjectMetaArgs
from pulumi_kubernetes.networking.v1 import (
    NetworkPolicyIngressRuleArgs,
    NetworkPolicyPeerArgs,
    NetworkPolicyPortArgs,
)

from gpu_cluster.plan.run_metrics import METRICS_PORT_NAME, MetricsScrape


def scrapers_ingress(scrape: MetricsScrape) -> NetworkPolicyIngressRuleArgs:
    """From the namespaces the platform's Prometheus runs in, to the `metrics` port only."""
    return NetworkPolicyIngressRuleArgs(
        from_=[
            NetworkPolicyPeerArgs(
                namespace_selector=LabelSelectorArgs(match_labels=scrape.scrapers)
            )
        ],
        ports=[NetworkPolicyPortArgs(port=METRICS_PORT_NAME, protocol="TCP")],
    )


def scrape_object(
    name: str,
    scrape: MetricsScrape,
    metadata: ObjectMetaArgs,
    pod_labels: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> k8s.apiextensions.CustomResource:
    """`scrape`'s object (`metadata`'s) that has the pods carrying `pod_labels` scraped."""
    return k8s.apiextensions.CustomResource(
        name,
        api_version=scrape.api_version,
        kind=scrape.kind,
        metadata=metadata,
        spec=scrape.spec(pod_labels),
        opts=opts,
    )
