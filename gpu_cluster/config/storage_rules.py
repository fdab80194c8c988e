"""Rules for the claims' storage classes (storage.storageClass, storage.storageClassMode and
the shared claims' classes): that the class exists when the claims are created, provisions the
ReadWriteMany claims a shared mode asks for, and provisions the claims' sizes (Filestore).

rules.py runs them with the other rules across keys, where the config is loaded."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from gpu_cluster.facts.gke_storage import (
    CREATABLE_CLASSES,
    FILESTORE_CLASSES,
    GKE_DEFAULT_CLASS,
    GKE_PREINSTALLED_CLASSES,
    PERSISTENT_DISK_CLASSES,
    StorageClassMode,
)
from gpu_cluster.facts.kubernetes import parse_quantity
from gpu_cluster.facts.openshift_storage import CEPHFS_CLASS_BY_RBD_CLASS

if TYPE_CHECKING:  # the loader calls these rules (through rules.py): the types only
    from gpu_cluster.config.schema import Settings


def storage_class_problems(
    platform: str, storage_class: str | None, mode: StorageClassMode | None
) -> list[str]:
    """Why the claims' class would not exist when they are created, one message per problem,
    naming storage.storageClass or storage.storageClassMode and what is allowed."""
    key, mode_key = "gpu-cluster:storage.storageClass", "gpu-cluster:storage.storageClassMode"
    installed = ", ".join(map(repr, GKE_PREINSTALLED_CLASSES))
    creatable = ", ".join(map(repr, CREATABLE_CLASSES))
    if storage_class is None:  # storageClassMode alone is an unread key (reads.py)
        return []
    if mode == "create" and platform != "gke":
        return [
            f"{mode_key} = 'create' is only available on platform 'gke' (the program creates "
            f"{creatable} through GKE's Persistent Disk CSI driver); on {platform!r} the class "
            "must exist already: use 'reference' or remove storageClassMode"
        ]
    if platform != "gke" or mode == "reference":
        return []
    if storage_class in GKE_PREINSTALLED_CLASSES:
        if mode == "create":
            return [
                f"{mode_key} = 'create': GKE installs {storage_class!r} itself, so creating it "
                "again would fail (AlreadyExists); remove storageClassMode"
            ]
        return []
    if storage_class in CREATABLE_CLASSES:
        return []
    return [
        f"{key} = {storage_class!r}: GKE does not install it and the program cannot create it; "
        f"use a class GKE installs ({installed}), one the stack creates ({creatable}), or, "
        f"for a class that already exists in the cluster, set storage.storageClassMode: "
        "reference"
    ]


class NoSharedClaims(NamedTuple):
    """Why storage.storageClass provisions no shared (ReadWriteMany) claims: `which` is the key's
    value as a message names it, `why` the reason, `instead` the class to name."""

    which: str
    why: str
    instead: str


def no_shared_claims(s: Settings) -> NoSharedClaims | None:
    """Why the claims' class (unset: the cluster's default) provisions no ReadWriteMany claims,
    where the program knows: on GKE every Persistent Disk class, GKE's default included; on
    OpenShift the Ceph RBD classes of OpenShift Data Foundation. None otherwise."""
    named = s.storage.storage_class
    if named == "":  # pre-provisioned volumes, whatever their access modes
        return None
    if s.platform == "gke":
        storage_class = named if named is not None else GKE_DEFAULT_CLASS
        if storage_class not in PERSISTENT_DISK_CLASSES:
            return None
        default = f"unset (GKE's default, {GKE_DEFAULT_CLASS!r})"
        return NoSharedClaims(
            f"= {named!r}" if named is not None else default,
            "a Persistent Disk class provisions none",
            "name a ReadWriteMany class the cluster has (Filestore's: the stack turns its CSI "
            "driver on) with storage.storageClassMode: reference",
        )
    if named is None or named not in CEPHFS_CLASS_BY_RBD_CLASS:
        return None
    return NoSharedClaims(
        f"= {named!r}",
        "a Ceph RBD class provisions them only as block devices, not as the file systems the "
        "pods mount",
        "name a ReadWriteMany class the cluster has (the same Ceph cluster's CephFS class, "
        f"{CEPHFS_CLASS_BY_RBD_CLASS[named]!r}, or an NFS class)",
    )


def shared_claim_class_problems(s: Settings) -> list[str]:
    """Shared (ReadWriteMany) claims of a class that provisions none: every pod would wait for
    them."""
    refusal = no_shared_claims(s)
    if s.storage.mode != "rwx" or refusal is None:
        return []
    return [
        f"gpu-cluster:storage.storageClass {refusal.which}: storage.mode 'rwx' makes "
        f"ReadWriteMany claims, and {refusal.why} (the claims would stay Pending); "
        f"{refusal.instead}, or use storage.mode 'per-pod' (workload.kind 'statefulset')"
    ]


def filestore_size_problems(s: Settings) -> list[str]:
    """Claims on GKE of a Filestore class that the driver never provisions, and every pod would
    wait for: larger than the class's largest instance or share, or smaller than its smallest
    share (a smaller claim of an instance class gets an instance of the tier's minimum)."""
    if s.platform != "gke":
        return []
    storage = s.storage
    sized = [("storage.workspaceSize", storage.storage_class, storage.workspace_size)]
    if storage.datasets_size:
        sized.append(("storage.datasetsSize", storage.storage_class, storage.datasets_size))
    sized += [
        (f"storage.volumes[{i}].sharedClaim.size", claim.storage_class, claim.size)
        for i, v in enumerate(storage.volumes)
        if (claim := v.shared_claim) is not None and claim.size is not None
    ]
    out: list[str] = []
    for key, storage_class, size in sized:
        filestore = FILESTORE_CLASSES.get(storage_class or "")
        if filestore is None:
            continue
        amount = parse_quantity(size)
        too_small = not filestore.rounds_up and amount < parse_quantity(filestore.min_size)
        if too_small or amount > parse_quantity(filestore.max_size):
            allowed = (
                f"at most {filestore.max_size}"
                if filestore.rounds_up
                else f"{filestore.min_size} to {filestore.max_size}"
            )
            out.append(
                f"gpu-cluster:{key} = {size!r}: Filestore's {filestore.name!r} class provisions "
                f"{filestore.provisions} of {allowed}, and no claim of another size (it would "
                "stay Pending)"
            )
    return out
