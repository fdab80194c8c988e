"""The objects the training pods use besides their controller and claims, whatever kind of
controller runs them: the scripts ConfigMap, the headless Service peers resolve each other
through, the peers-only NetworkPolicy, the Secrets the pods read by reference and the object that
has the platform's Prometheus scrape their run's metrics."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1 import (
    EnvVarArgs,
    EnvVarSourceArgs,
    SecretKeySelectorArgs,
    ServicePortArgs,
    ServiceSpecArgs,
)
from pulumi_kubernetes.meta.v1 import LabelSelectorArgs, ObjectMetaArgs
from pulumi_kubernetes.networking.v1 import (
    NetworkPolicyIngressRuleArgs,
    NetworkPolicyPeerArgs,
    NetworkPolicySpecArgs,
)

from gpu_cluster.components.metrics_scrape import scrape_object, scrapers_ingress
from gpu_cluster.components.workload.args import TrainingWorkloadArgs


def scripts_config_map(
    name: str, a: TrainingWorkloadArgs, opts: pulumi.ResourceOptions
) -> k8s.core.v1.ConfigMap:
    """The launch scripts and rendered files (<name>-scripts), mounted into every pod."""
    return k8s.core.v1.ConfigMap(
        f"{name}-scripts",
        metadata=ObjectMetaArgs(name=f"{a.name}-scripts", namespace=a.namespace, labels=a.labels),
        data=a.scripts,
        opts=opts,
    )


def headless_service(
    name: str, a: TrainingWorkloadArgs, opts: pulumi.ResourceOptions
) -> k8s.core.v1.Service:
    """The headless Service that gives every pod a DNS name for rendezvous."""
    return k8s.core.v1.Service(
        f"{name}-headless",
        metadata=ObjectMetaArgs(name=a.service_name, namespace=a.namespace, labels=a.labels),
        spec=ServiceSpecArgs(
            cluster_ip="None",
            # Rendezvous must resolve peers before they are Ready.
            publish_not_ready_addresses=True,
            selector=a.labels,
            ports=[ServicePortArgs(name="rendezvous", port=a.master_port, protocol="TCP")],
        ),
        opts=opts,
    )


def peers_only_policy(
    name: str, a: TrainingWorkloadArgs, opts: pulumi.ResourceOptions
) -> k8s.networking.v1.NetworkPolicy:
    """Peers reach each other on any port (NCCL picks them); the platform's Prometheus reaches
    their `metrics` port when they serve one; nothing else may connect in."""
    scrape = a.metrics_scrape
    scrapers = [scrapers_ingress(scrape)] if scrape is not None else []
    return k8s.networking.v1.NetworkPolicy(
        f"{name}-peers-only",
        metadata=ObjectMetaArgs(
            name=f"{a.name}-peers-only", namespace=a.namespace, labels=a.labels
        ),
        spec=NetworkPolicySpecArgs(
            pod_selector=LabelSelectorArgs(match_labels=a.labels),
            policy_types=["Ingress"],
            ingress=[
                NetworkPolicyIngressRuleArgs(
                    from_=[
                        NetworkPolicyPeerArgs(pod_selector=LabelSelectorArgs(match_labels=a.labels))
                    ]
                ),
                *scrapers,
            ],
        ),
        opts=opts,
    )


def opaque_secret(
    name: str,
    a: TrainingWorkloadArgs,
    suffix: str,
    data: pulumi.Output[dict[str, str]],
    opts: pulumi.ResourceOptions,
) -> k8s.core.v1.Secret:
    """An Opaque Secret <name>-<suffix> holding `data` (a Pulumi secret)."""
    return k8s.core.v1.Secret(
        f"{name}-{suffix}",
        metadata=ObjectMetaArgs(name=f"{a.name}-{suffix}", namespace=a.namespace, labels=a.labels),
        type="Opaque",
        string_data=data,
        opts=opts,
    )


def secret_env_refs(secret: k8s.core.v1.Secret, keys: tuple[str, ...]) -> list[EnvVarArgs]:
    """Env variables `keys`, each read from the key of that name in `secret`."""
    return [
        EnvVarArgs(
            name=key,
            value_from=EnvVarSourceArgs(
                secret_key_ref=SecretKeySelectorArgs(name=secret.metadata.name, key=key)
            ),
        )
        for key in keys
    ]


def metrics_scrape_object(
    name: str, a: TrainingWorkloadArgs, opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource | None:
    """The platform's object (PodMonitor, PodMonitoring) that has its Prometheus scrape the
    training pods' run metrics: every run's pods of the stack, submitted ones too."""
    scrape = a.metrics_scrape
    if scrape is None:
        return None
    metadata = ObjectMetaArgs(name=f"{a.name}-metrics", namespace=a.namespace, labels=a.labels)
    return scrape_object(f"{name}-metrics", scrape, metadata, a.labels, opts)
