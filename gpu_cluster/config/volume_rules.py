"""Rules for `storage.volumes`: where each training-data volume may be mounted and what each
platform offers."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from gpu_cluster.facts.fabric import GPU_LINK_MAX_GBPS
from gpu_cluster.facts.gke_storage import GKE_DEFAULT_CLASS, PERSISTENT_DISK_CLASSES
from gpu_cluster.facts.openshift_storage import CEPHFS_CLASS_BY_RBD_CLASS

if TYPE_CHECKING:  # the loader calls these rules (through rules.py): the types only
    from gpu_cluster.config.schema import Settings

# Directories a data volume must neither hide nor sit in: the image's system directories (a
# volume over /usr hides the training image's own files) and where the program mounts its own
# volumes into the training container (/workspace, /datasets, /code, and, within the system
# directories, /dev/shm, /opt/gpu-cluster, /run/tcpx, /usr/local/nvidia, /var/run/gpu-cluster;
# tests/test_volumes.py checks every rendered mount of it lies in one of these).
RESERVED_MOUNT_ROOTS = (
    "/bin", "/dev", "/etc", "/lib", "/lib64", "/opt", "/proc", "/run", "/sbin", "/sys", "/tmp",
    "/usr", "/var", "/workspace", "/datasets", "/code",
)  # fmt: skip
# Pod volume names the program gives its own volumes (tests/test_volumes.py checks every
# rendered pod's volumes against this list); `workspace` and `datasets` also name its claims.
RESERVED_VOLUME_NAMES = (
    "dshm", "gpu-cluster-scripts", "nccl-env", "code", "workspace", "datasets", "nvidia-libs",
    "aperture-devices", "tcpx-socket", "nvidia-install", "gib", "sys", "proc-sys",
)  # fmt: skip


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root + "/")


def volume_problems(s: Settings) -> list[str]:
    out: list[str] = []
    volumes = s.storage.volumes
    for name, count in Counter(v.name for v in volumes).items():
        if count > 1:
            out.append(f"gpu-cluster:storage.volumes: {count} volumes are named {name!r}")
    paths = [v.mount_path for v in volumes]
    for i, volume in enumerate(volumes):
        key = f"gpu-cluster:storage.volumes[{i}]"
        if volume.name in RESERVED_VOLUME_NAMES:
            out.append(
                f"{key}.name = {volume.name!r}: the pods already have a volume of that name; "
                f"not one of {', '.join(RESERVED_VOLUME_NAMES)}"
            )
        roots = [r for r in RESERVED_MOUNT_ROOTS if _within(volume.mount_path, r)]
        roots += [r for r in RESERVED_MOUNT_ROOTS if _within(r, volume.mount_path)]
        if roots:
            out.append(
                f"{key}.mountPath = {volume.mount_path!r} overlaps {roots[0]} (the image's or "
                f"the pod's own); not in or above any of {', '.join(RESERVED_MOUNT_ROOTS)}"
            )
        others = [p for j, p in enumerate(paths) if j != i]
        nested = [
            p for p in others if _within(volume.mount_path, p) or _within(p, volume.mount_path)
        ]
        if nested:
            out.append(
                f"{key}.mountPath = {volume.mount_path!r} overlaps another volume's {nested[0]}"
            )
        for field, rate in (
            ("minWriteGbps", volume.min_write_gbps),
            ("minReadGbps", volume.min_read_gbps),
        ):
            if rate is not None and rate > GPU_LINK_MAX_GBPS:
                out.append(
                    f"{key}.{field} = {rate:g}: above the {GPU_LINK_MAX_GBPS:g} GB/s of the "
                    "fastest GPU link (NVLink 5), more than any node's NICs carry to storage, so "
                    "the check could never pass"
                )
        claim = volume.shared_claim
        if claim is not None and s.platform == "gke" and claim.size:
            if not claim.storage_class:
                out.append(
                    f"{key}.sharedClaim.storageClass: required on GKE for a new claim (GKE's "
                    f"default class, {GKE_DEFAULT_CLASS}, is ReadWriteOnce): name an RWX class, "
                    "such as Filestore's standard-rwx (the stack turns its CSI driver on)"
                )
            elif claim.storage_class in PERSISTENT_DISK_CLASSES:
                out.append(
                    f"{key}.sharedClaim.storageClass = {claim.storage_class!r}: a Persistent "
                    "Disk class, which provisions no ReadWriteMany claim (it would stay "
                    "Pending): name an RWX class, such as Filestore's standard-rwx (the stack "
                    "turns its CSI driver on)"
                )
        rbd = claim.storage_class if claim is not None and s.platform == "openshift" else None
        if rbd is not None and rbd in CEPHFS_CLASS_BY_RBD_CLASS:
            out.append(
                f"{key}.sharedClaim.storageClass = {rbd!r}: a Ceph RBD class, which provisions "
                "no ReadWriteMany file system (the claim would stay Pending): name an RWX class, "
                f"such as the same Ceph cluster's CephFS class, {CEPHFS_CLASS_BY_RBD_CLASS[rbd]!r}"
            )
    buckets = [v.gcs_fuse.bucket for v in volumes if v.gcs_fuse and v.gcs_fuse.mode == "create"]
    instances = [
        v.managed_lustre.instance
        for v in volumes
        if v.managed_lustre and v.managed_lustre.mode == "create"
    ]
    for what, section, names in (
        ("bucket", "gcsFuse", buckets),
        ("Lustre instance", "managedLustre", instances),
    ):
        out += [
            f"gpu-cluster:storage.volumes: {what} {name!r} is created by {count} volumes; create "
            f"it in one and reference it ({section}.mode: reference) in the others"
            for name, count in Counter(names).items()
            if count > 1
        ]
    return out
