"""The training-data volumes a stack adds (storage.volumes), as claims the pods mount and the
volumes those claims bind to (pure: no Pulumi imports).

Every volume reaches the pods as a ReadWriteMany claim: a shared claim as the stack asks for it,
a Cloud Storage bucket as a claim bound to a PersistentVolume the stack writes for the GKE Cloud
Storage FUSE CSI driver (static provisioning, as Google's gpu-recipes storage chart does). So
both workload kinds mount them the same way, and the claims follow the workspace's retention.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from gpu_cluster.config.schema import Settings
from gpu_cluster.config.storage import DataVolume
from gpu_cluster.facts.gcs import (
    CHECKPOINT_MOUNT_OPTIONS,
    DATA_MOUNT_OPTIONS,
    GCS_FUSE_DRIVER,
    INJECT_ANNOTATION,
    MACHINE_TYPE_WORKAROUND,
    NOMINAL_CAPACITY,
    READ_ROLE,
    READ_WRITE_ROLE,
    SIDECAR_ANNOTATIONS,
    STATIC_CLASS,
    VOLUME_ATTRIBUTES,
)


@dataclass(frozen=True)
class StaticVolume:
    """A PersistentVolume the stack writes for one claim. name: cluster-wide, so it carries the
    namespace, and the bucket, so another bucket is another volume (and the claim bound to it is
    replaced: protected like every claim); driver, handle, mount_options, attributes: its CSI
    source."""

    name: str
    driver: str
    handle: str
    mount_options: tuple[str, ...]
    attributes: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class NewClaim:
    """A claim the stack creates: its request, class, and the volume it binds to (None: the
    class provisions one)."""

    size: str
    storage_class: str | None
    static: StaticVolume | None


@dataclass(frozen=True)
class DataClaim:
    """One data volume as the pods see it. volume: the pod volume's name; claim: the claim's;
    new: how the stack creates the claim, None for an existing one."""

    volume: str
    claim: str
    mount_path: str
    read_only: bool
    new: NewClaim | None


def data_claims(s: Settings) -> list[DataClaim]:
    return [_claim(s, v) for v in s.storage.volumes]


def _claim(s: Settings, v: DataVolume) -> DataClaim:
    claim = f"{s.name}-{v.name}"
    if v.shared_claim is not None:
        shared = v.shared_claim
        new = None if shared.size is None else NewClaim(shared.size, shared.storage_class, None)
        return DataClaim(v.name, shared.claim_name or claim, v.mount_path, v.read_only, new)
    assert v.gcs_fuse is not None  # DataVolume has exactly one source
    gcs = v.gcs_fuse
    options = DATA_MOUNT_OPTIONS
    if gcs.use == "checkpoints":
        machine = s.gcp.machine_type if s.gcp is not None else ""
        workaround = MACHINE_TYPE_WORKAROUND.get(machine)
        options = (*CHECKPOINT_MOUNT_OPTIONS, *((workaround,) if workaround else ()))
    only_dir = (f"only-dir:{gcs.only_dir}",) if gcs.only_dir else ()
    static = StaticVolume(
        name=f"{s.namespace}-{claim}-{gcs.bucket}".replace("_", "-"),
        driver=GCS_FUSE_DRIVER,
        handle=gcs.bucket,
        mount_options=(*options, *only_dir),
        attributes=VOLUME_ATTRIBUTES,
    )
    return DataClaim(
        v.name, claim, v.mount_path, v.read_only, NewClaim(NOMINAL_CAPACITY, STATIC_CLASS, static)
    )


def buckets_to_create(s: Settings) -> list[str]:
    return [
        v.gcs_fuse.bucket
        for v in s.storage.volumes
        if v.gcs_fuse is not None and v.gcs_fuse.mode == "create"
    ]


def bucket_grants(s: Settings) -> dict[str, str]:
    """The role the pods' account gets on each bucket they mount: read-write if any volume
    writes to it, else read-only."""
    grants: dict[str, str] = {}
    for v in s.storage.volumes:
        if v.gcs_fuse is None:
            continue
        if not v.read_only or v.gcs_fuse.bucket not in grants:
            grants[v.gcs_fuse.bucket] = READ_ROLE if v.read_only else READ_WRITE_ROLE
    return grants


def uses_gcs_fuse(s: Settings) -> bool:
    return any(v.gcs_fuse is not None for v in s.storage.volumes)


def pod_annotations(s: Settings) -> dict[str, str]:
    """What the pods carry for their data volumes: with a bucket, GKE's webhook injects the
    gcsfuse sidecar, sized as the annotations say; and a hash of the volumes' mount options, so
    a pod restarts when they change (a mounted volume keeps the options it was mounted with)."""
    claims = data_claims(s)
    if not claims:
        return {}
    digest = hashlib.sha256(json.dumps([asdict(c) for c in claims]).encode()).hexdigest()[:16]
    fuse = {INJECT_ANNOTATION: "true", **dict(SIDECAR_ANNOTATIONS)} if uses_gcs_fuse(s) else {}
    return {**fuse, "gpu-cluster/volumes-sha256": digest}
