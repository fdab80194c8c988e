"""The StorageClass a GKE stack's claims name when GKE does not install it (Hyperdisk Balanced:
gpu_cluster.plan.gke_storage decides which, and with what parameters)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs
from pulumi_kubernetes.storage.v1 import StorageClassInitArgs

from gpu_cluster.facts.gke_storage import StorageClassSpec


@dataclass(frozen=True)
class GkeStorageClassArgs:
    """spec: the class to create; its name is the one the claims use. labels: its labels."""

    spec: StorageClassSpec
    labels: dict[str, str] = field(default_factory=dict)


class GkeStorageClass(pulumi.ComponentResource):
    """A cluster-scoped StorageClass for the stack's claims, which depend on it.

    It holds no data: each PersistentVolume names its CSI driver and disk itself, and the class
    is read only when a claim is provisioned or grown. So `pulumi destroy` deletes it like any
    other object, also when the claims are retained (their volumes and data stay, bound to them;
    growing a retained claim needs the class back, which the next `pulumi up` creates). Retaining
    it instead would make that `pulumi up` fail on the leftover class (AlreadyExists)."""

    storage_class: k8s.storage.v1.StorageClass

    def __init__(
        self, name: str, args: GkeStorageClassArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:gke_storage:GkeStorageClass", name, None, opts)
        spec = args.spec
        self.storage_class = k8s.storage.v1.StorageClass(
            f"{name}-storage-class",
            StorageClassInitArgs(
                metadata=ObjectMetaArgs(name=spec.name, labels=args.labels or None),
                provisioner=spec.provisioner,
                parameters=dict(spec.parameters),
                volume_binding_mode=spec.volume_binding_mode,
                allow_volume_expansion=spec.allow_volume_expansion,
                reclaim_policy=spec.reclaim_policy,
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"storageClassName": self.storage_class.metadata.name})
