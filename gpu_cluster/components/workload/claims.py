"""The workload's user-data claims as Kubernetes objects: the standalone claims plan.claims
decides, and the per-pod claim templates that give each pod its own."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1 import (
    PersistentVolumeClaimArgs,
    PersistentVolumeClaimSpecArgs,
    VolumeResourceRequirementsArgs,
)
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

from gpu_cluster.components.workload.args import TrainingWorkloadArgs
from gpu_cluster.config.storage import StorageSettings
from gpu_cluster.plan.claims import (
    SKIP_AWAIT,
    Claim,
    claim_retention_annotations,
    training_claims,
    volume_sizes,
)


@dataclass(frozen=True)
class RegisteredClaim:
    claim: Claim
    resource: k8s.core.v1.PersistentVolumeClaim


def register_claims(
    name: str, a: TrainingWorkloadArgs, parent: pulumi.Resource
) -> list[RegisteredClaim]:
    """User-data claims as standalone resources <name>-<claim key>, so `pulumi up` can grow them
    in place. Each waits for `claims_after` (the StorageClass it names, when the platform creates
    it). Retained on destroy unless storage.retainOnDelete is false; protected (any replacement
    or deletion stops at preview) unless storage.protect is false."""
    keep = pulumi.ResourceOptions(
        parent=parent,
        retain_on_delete=a.storage.retain_on_delete,
        protect=a.storage.protect,
        depends_on=list(a.claims_after) or None,
    )
    return [
        RegisteredClaim(
            claim,
            k8s.core.v1.PersistentVolumeClaim(
                f"{name}-{claim.key}",
                metadata=ObjectMetaArgs(
                    name=claim.name,
                    namespace=a.namespace,
                    labels=a.labels,
                    annotations={
                        **SKIP_AWAIT,
                        **claim_retention_annotations(a.storage.retain_on_delete),
                    },
                ),
                spec=_claim_spec(a.storage, claim.size, claim.access_mode),
                opts=keep,
            ),
        )
        for claim in training_claims(a.storage, a.name, a.replicas)
    ]


def per_pod_claim_templates(a: TrainingWorkloadArgs) -> list[PersistentVolumeClaimArgs] | None:
    """Per-pod claim templates (storage.mode per-pod): they give each pod its volumes; the
    claims themselves are the standalone ones `register_claims` registers under the same
    names."""
    if a.storage.mode != "per-pod":
        return None
    return [
        PersistentVolumeClaimArgs(
            metadata=ObjectMetaArgs(name=volume, labels=a.labels),
            spec=_claim_spec(a.storage, size, "ReadWriteOnce"),
        )
        for volume, size in volume_sizes(a.storage)
    ]


def _claim_spec(
    storage: StorageSettings, size: str, access_mode: str
) -> PersistentVolumeClaimSpecArgs:
    return PersistentVolumeClaimSpecArgs(
        access_modes=[access_mode],
        storage_class_name=storage.storage_class,
        resources=VolumeResourceRequirementsArgs(requests={"storage": size}),
    )
