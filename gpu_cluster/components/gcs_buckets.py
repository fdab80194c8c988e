"""The Cloud Storage buckets a TrainingStorage creates and the pods' grants on them (its Cloud
Storage side; GKE only: it imports pulumi-gcp, components/gcp_sdk.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi
import pulumi_gcp as gcp

if TYPE_CHECKING:
    from gpu_cluster.components.training_storage import BucketAccess


def training_buckets(
    name: str, access: BucketAccess, parent: pulumi.Resource, keep: pulumi.ResourceOptions
) -> tuple[dict[str, gcp.storage.Bucket], list[pulumi.Resource]]:
    """The buckets to create, by bucket name, and the pods' role on each granted bucket
    (created here or referenced by name)."""
    buckets = {
        bucket: _bucket(f"{name}-bucket-{bucket}", access, bucket, keep) for bucket in access.create
    }
    grants: list[pulumi.Resource] = [
        gcp.storage.BucketIAMMember(
            f"{name}-access-{bucket}",
            bucket=buckets[bucket].name if bucket in buckets else bucket,
            role=role,
            member=access.principal,
            opts=pulumi.ResourceOptions(parent=parent),
        )
        for bucket, role in access.grants.items()
    ]
    return buckets, grants


def _bucket(
    resource: str, access: BucketAccess, bucket: str, keep: pulumi.ResourceOptions
) -> gcp.storage.Bucket:
    """A bucket for training data as cluster-toolkit's A4 blueprint creates its training and
    checkpoint buckets (modules/file-system/cloud-storage-bucket with
    enable_hierarchical_namespace, 1047080): in the region, hierarchical namespace (folders that
    rename atomically, for checkpoints), which needs uniform bucket-level access; never
    destroyed with objects in it (force_destroy false). Public access prevented, beyond the
    module (least privilege: nothing here is public)."""
    return gcp.storage.Bucket(
        resource,
        gcp.storage.BucketArgs(
            name=bucket,
            project=access.project,
            location=access.region,
            uniform_bucket_level_access=True,
            hierarchical_namespace=gcp.storage.BucketHierarchicalNamespaceArgs(enabled=True),
            public_access_prevention="enforced",
            force_destroy=False,
        ),
        opts=keep,
    )
