"""The training-data volumes a stack adds (storage.volumes), as claims the pods mount and the
volumes those claims bind to (pure: no Pulumi imports).

Every volume reaches the pods as a ReadWriteMany claim: a shared claim as the stack asks for it,
a Cloud Storage bucket or a Managed Lustre instance as a claim bound to a PersistentVolume the
stack writes for GKE's CSI driver (static provisioning, as Google's gpu-recipes storage charts
do). So both workload kinds mount them the same way, and the claims follow the workspace's
retention.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from gpu_cluster.config.schema import Settings
from gpu_cluster.config.storage import DataVolume
from gpu_cluster.facts.gcs import (
    CHECKPOINT_MOUNT_OPTIONS,
    DATA_MOUNT_OPTIONS,
    GCS_FUSE_DRIVER,
    INJECT_ANNOTATION,
    NOMINAL_CAPACITY,
    READ_ROLE,
    READ_WRITE_ROLE,
    SIDECAR_ANNOTATIONS,
    STATIC_CLASS,
    VOLUME_ATTRIBUTES,
)
from gpu_cluster.facts.lustre import LUSTRE_DRIVER, mount_point_parts
from gpu_cluster.facts.machines import MACHINES


@dataclass(frozen=True)
class StaticVolume:
    """A PersistentVolume the stack writes for one claim. name: cluster-wide, so it carries the
    namespace, and the bucket or Lustre instance, so another one is another volume (and the
    claim bound to it is replaced: protected like every claim); driver, handle, mount_options,
    attributes: its CSI source."""

    name: str
    driver: str
    handle: str
    mount_options: tuple[str, ...]
    attributes: tuple[tuple[str, str], ...]
    # A Lustre instance the stack creates: its mount point, known once it exists, gives `ip`.
    address_of: str | None = None


@dataclass(frozen=True)
class LustreInstance:
    """A Managed Lustre instance the stack creates (storage.volumes[].managedLustre)."""

    instance: str
    capacity_gib: int
    throughput: int
    filesystem: str


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
    if v.managed_lustre is not None:
        return _lustre_claim(s, v, claim)
    assert v.gcs_fuse is not None  # DataVolume has exactly one source
    gcs = v.gcs_fuse
    options = DATA_MOUNT_OPTIONS
    if gcs.use == "checkpoints":
        workaround = MACHINES[s.gcp.machine_type].gcsfuse_checkpoint_option if s.gcp else None
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


def _lustre_claim(s: Settings, v: DataVolume, claim: str) -> DataClaim:
    """A Lustre instance's claim, bound to a volume as gpu-recipes' lustre chart writes it: no
    class, the instance's capacity, handle <project>/<zone>/<instance>, its ip and filesystem."""
    lustre, gcp = v.managed_lustre, s.gcp
    assert lustre is not None and gcp is not None  # managedLustre is read on GKE only
    if lustre.mount_point is not None:
        ip, filesystem = mount_point_parts(lustre.mount_point)
        attributes: tuple[tuple[str, str], ...] = (("ip", ip), ("filesystem", filesystem))
    else:
        attributes = (("filesystem", lustre.filesystem),)
    static = StaticVolume(
        name=f"{s.namespace}-{claim}-{lustre.instance}",
        driver=LUSTRE_DRIVER,
        handle=f"{gcp.project}/{gcp.zone}/{lustre.instance}",
        mount_options=(),
        attributes=attributes,
        address_of=lustre.instance if lustre.mode == "create" else None,
    )
    size = f"{lustre.capacity_gib}Gi"
    return DataClaim(v.name, claim, v.mount_path, v.read_only, NewClaim(size, "", static))


def lustre_to_create(s: Settings) -> list[LustreInstance]:
    return [
        LustreInstance(m.instance, m.capacity_gib, m.throughput, m.filesystem)
        for v in s.storage.volumes
        if (m := v.managed_lustre) is not None and m.mode == "create"
    ]


def uses_lustre(s: Settings) -> bool:
    return any(v.managed_lustre is not None for v in s.storage.volumes)


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


def pod_annotations(claims: Sequence[DataClaim]) -> dict[str, str]:
    """What the pods carry for their data volumes `claims` (data_claims): with a bucket, GKE's
    webhook injects the gcsfuse sidecar, sized as the annotations say; and a hash of what the
    volumes the stack writes mount (source, options, attributes), so a pod restarts when it
    changes (a mounted volume keeps what it was mounted with; a changed claim or path changes
    the pods anyway)."""
    if not claims:
        return {}
    written = [c.new.static for c in claims if c.new is not None and c.new.static is not None]
    mounted = [(v.handle, v.mount_options, v.attributes) for v in written]
    digest = hashlib.sha256(json.dumps(mounted).encode()).hexdigest()[:16]
    buckets = any(v.driver == GCS_FUSE_DRIVER for v in written)
    fuse = {INJECT_ANNOTATION: "true", **dict(SIDECAR_ANNOTATIONS)} if buckets else {}
    return {**fuse, "gpu-cluster/volumes-sha256": digest}
