"""The training-data volumes a stack adds (storage.volumes): Cloud Storage buckets mounted
through GKE's Cloud Storage FUSE CSI driver, Managed Lustre instances through GKE's Lustre CSI
driver, and shared claims, as claims the training pods mount. Usable alone: give it the claims
gpu_cluster.plan.data_volumes decides and, on GKE, the buckets and who may use them and the
Lustre instances with the network they join."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1 import (
    CSIPersistentVolumeSourceArgs,
    ObjectReferenceArgs,
    PersistentVolumeClaimSpecArgs,
    PersistentVolumeSpecArgs,
    VolumeResourceRequirementsArgs,
)
from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

from gpu_cluster.facts.lustre import mount_point_parts
from gpu_cluster.plan.claims import (
    SKIP_AWAIT,
    claim_retention_annotations,
    retention_annotations,
)
from gpu_cluster.plan.data_volumes import DataClaim, LustreInstance, NewClaim, StaticVolume

if TYPE_CHECKING:
    # The GCP side needs pulumi-gcp, which an OpenShift install lacks (components/gcp_sdk.py):
    # gcs_buckets and managed_lustre are imported only for a storage that has one.
    import pulumi_gcp as gcp


@dataclass(frozen=True)
class BucketAccess:
    """The Cloud Storage side (GKE). project, region: where new buckets go. create: the buckets
    to create. grants: bucket -> the role the pods get on it. principal: the pods'
    ServiceAccount as an IAM principal."""

    project: str
    region: str
    create: Sequence[str]
    grants: dict[str, str]
    principal: pulumi.Input[str]


@dataclass(frozen=True)
class LustreNetwork:
    """The Managed Lustre side (GKE). project, zone: where the instances go. network: the VPC
    the nodes' first NIC is on, as its ID (projects/<project>/global/networks/<name>). prefix:
    the GCP names' prefix (<prefix>-lustre-psa, <prefix>-allow-lustre). create: the instances
    to create."""

    project: str
    zone: str
    network: pulumi.Input[str]
    prefix: str
    create: Sequence[LustreInstance]


@dataclass(frozen=True)
class TrainingStorageArgs:
    """namespace, labels: of the claims (and labels of the volumes). claims: the data volumes'
    claims. retain_on_delete, protect: storage.retainOnDelete and storage.protect, for
    everything that holds or reaches data (buckets, volumes, claims). buckets: the Cloud Storage
    side, None without buckets. lustre: the Managed Lustre side, None without instances to
    create. after: what the claims wait for (the namespace)."""

    namespace: str
    labels: dict[str, str]
    claims: Sequence[DataClaim]
    retain_on_delete: bool
    protect: bool
    buckets: BucketAccess | None = None
    lustre: LustreNetwork | None = None
    after: Sequence[pulumi.Resource] = field(default_factory=tuple)


class TrainingStorage(pulumi.ComponentResource):
    """Buckets (created or referenced) with the pods' access to them, Lustre instances with the
    network access they need, and per volume the claim the pods mount, bound to a
    PersistentVolume written here for a bucket or an instance.

    Buckets, instances, volumes and claims are kept on `pulumi destroy` and protected unless
    the stack opts out: a bucket or an instance holds the data (`pulumi destroy
    --exclude-protected` also keeps what an instance depends on: its peering and the VPC); a
    claim left behind keeps its volume bound, and a volume deleted under a bound claim would
    hang on its pv-protection finalizer. `ready`: what the training pods wait for (the claims,
    the volumes they bind to, which for a Lustre instance come once it is up, and the grants: a
    pod mounting a bucket it may not read fails its mount)."""

    claims: list[k8s.core.v1.PersistentVolumeClaim]
    ready: list[pulumi.Resource]

    def __init__(
        self, name: str, args: TrainingStorageArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:storage:TrainingStorage", name, None, opts)
        a = args
        keep = pulumi.ResourceOptions(
            parent=self, retain_on_delete=a.retain_on_delete, protect=a.protect
        )
        # Annotated here, not on the class: Pulumi evaluates a resource class's annotations when
        # it registers (pulumi/_types.py, resource_types), and `gcp` is the type checker's only.
        self.buckets: dict[str, gcp.storage.Bucket] = {}
        grants: list[pulumi.Resource] = []
        if a.buckets is not None:
            from gpu_cluster.components.gcs_buckets import training_buckets

            self.buckets, grants = training_buckets(name, a.buckets, self, keep)
        self.lustre: dict[str, gcp.lustre.Instance] = {}
        if a.lustre is not None and a.lustre.create:
            from gpu_cluster.components.managed_lustre import lustre_instances

            self.lustre = lustre_instances(name, a.lustre, self, keep)
        in_namespace = pulumi.ResourceOptions.merge(
            keep, pulumi.ResourceOptions(depends_on=list(a.after) or None)
        )
        self.claims = []
        volumes: list[pulumi.Resource] = []
        for claim in a.claims:
            if claim.new is None:
                continue
            if claim.new.static is not None:
                static = claim.new.static
                attributes: dict[str, pulumi.Input[str]] = dict(static.attributes)
                if static.address_of is not None:
                    mount_point = self.lustre[static.address_of].mount_point
                    attributes["ip"] = mount_point.apply(lambda m: mount_point_parts(m)[0])
                volumes.append(
                    _static_volume(
                        f"{name}-{claim.volume}-volume",
                        a,
                        claim,
                        claim.new,
                        static,
                        attributes,
                        keep,
                    )
                )
            self.claims.append(_claim(f"{name}-{claim.volume}", a, claim, in_namespace))
        self.ready = [*self.claims, *volumes, *grants]
        self.register_outputs(
            {
                "claimNames": [c.metadata.name for c in self.claims],
                "bucketNames": [b.name for b in self.buckets.values()],
            }
        )


def _static_volume(
    resource: str,
    a: TrainingStorageArgs,
    claim: DataClaim,
    new: NewClaim,
    volume: StaticVolume,
    attributes: dict[str, pulumi.Input[str]],
    keep: pulumi.ResourceOptions,
) -> k8s.core.v1.PersistentVolume:
    """The PersistentVolume a bucket's or instance's claim binds to, pre-bound to it (claimRef),
    as gpu-recipes' storage charts write them (src/helm-charts/storage/{gcs-fuse,lustre}/
    templates/pv.yaml, 2e1fd5e): ReadWriteMany, reclaim Retain (deleting the object never
    touches the data)."""
    return k8s.core.v1.PersistentVolume(
        resource,
        metadata=ObjectMetaArgs(
            name=volume.name,
            labels=a.labels,
            annotations=retention_annotations(a.retain_on_delete) or None,
        ),
        spec=PersistentVolumeSpecArgs(
            access_modes=["ReadWriteMany"],
            capacity={"storage": new.size},
            persistent_volume_reclaim_policy="Retain",
            storage_class_name=new.storage_class,
            claim_ref=ObjectReferenceArgs(namespace=a.namespace, name=claim.claim),
            mount_options=list(volume.mount_options) or None,
            csi=CSIPersistentVolumeSourceArgs(
                driver=volume.driver,
                volume_handle=volume.handle,
                volume_attributes=attributes,
            ),
        ),
        opts=keep,
    )


def _claim(
    resource: str, a: TrainingStorageArgs, claim: DataClaim, opts: pulumi.ResourceOptions
) -> k8s.core.v1.PersistentVolumeClaim:
    new = claim.new
    assert new is not None  # called for new claims only
    return k8s.core.v1.PersistentVolumeClaim(
        resource,
        metadata=ObjectMetaArgs(
            name=claim.claim,
            namespace=a.namespace,
            labels=a.labels,
            annotations={**SKIP_AWAIT, **claim_retention_annotations(a.retain_on_delete)},
        ),
        spec=PersistentVolumeClaimSpecArgs(
            access_modes=["ReadWriteMany"],
            storage_class_name=new.storage_class,
            volume_name=new.static.name if new.static is not None else None,
            resources=VolumeResourceRequirementsArgs(requests={"storage": new.size}),
        ),
        opts=opts,
    )
