"""Which StorageClass a GKE stack creates, if any (pure: no Pulumi imports)."""

from __future__ import annotations

from gpu_cluster.facts.gke_storage import (
    CREATABLE_CLASSES,
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
