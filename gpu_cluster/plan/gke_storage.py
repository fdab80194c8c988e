"""Which StorageClass a GKE stack creates, if any, and whether its claims need Filestore's CSI
driver (pure: no Pulumi imports)."""

from __future__ import annotations

from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.gke_storage import (
    CREATABLE_CLASSES,
    FILESTORE_CLASSES,
    GKE_PREINSTALLED_CLASSES,
    StorageClassMode,
    StorageClassSpec,
)


def resolved_mode(
    platform: str, storage_class: str | None, mode: StorageClassMode | None
) -> StorageClassMode | None:
    """storage.storageClassMode with its default: none without a class; on GKE `create` for a
    class the program knows that GKE does not install, `reference` for every other class."""
    if storage_class is None:
        return None
    if mode is not None:
        return mode
    gke_creates = platform == "gke" and storage_class not in GKE_PREINSTALLED_CLASSES
    return "create" if gke_creates and storage_class in CREATABLE_CLASSES else "reference"


def storage_class_to_create(
    platform: str, storage_class: str | None, mode: StorageClassMode | None
) -> StorageClassSpec | None:
    """The StorageClass the stack creates, or None (the settings schema refuses a `create` the
    program cannot carry out)."""
    if storage_class is None or resolved_mode(platform, storage_class, mode) != "create":
        return None
    return CREATABLE_CLASSES[storage_class]


def uses_filestore(s: Settings) -> bool:
    """Whether a claim the stack creates names one of Filestore's classes: the workspace and
    datasets claims (storage.storageClass) or a shared claim of storage.volumes."""
    named = {
        s.storage.storage_class,
        *(v.shared_claim.storage_class for v in s.storage.volumes if v.shared_claim is not None),
    }
    return not named.isdisjoint(FILESTORE_CLASSES)
