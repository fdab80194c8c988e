"""StorageClasses on GKE: the ones every cluster has, and the ones this program creates when a
stack's claims name one GKE does not install (pure: no Pulumi imports).

A StorageClass holds no data. It is read when a claim is provisioned (which disk to create) and
when a claim grows (allowVolumeExpansion); each PersistentVolume names its CSI driver and disk
itself. Deleting the class therefore deletes no volume, and a claim bound to a volume keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# The StorageClasses GKE installs itself in a Standard cluster, whose Compute Engine Persistent
# Disk CSI driver is on by default: standard-rwo (pd-balanced, the default class) and premium-rwo
# (pd-ssd) (docs.cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/
# gce-pd-csi-driver), and standard (pd-standard, in-tree provisioner kubernetes.io/gce-pd)
# (docs.cloud.google.com/kubernetes-engine/docs/concepts/persistent-volumes); consulted
# 2026-11-23. Filestore's *-rwx classes come only with its CSI driver, which the cluster does not
# enable. No Hyperdisk class is installed (docs.cloud.google.com/kubernetes-engine/docs/how-to/
# persistent-volumes/hyperdisk: "Create a Hyperdisk volume" starts by creating a StorageClass).
GKE_PREINSTALLED_CLASSES = ("standard-rwo", "premium-rwo", "standard")

# The Compute Engine Persistent Disk CSI driver's provisioner name (same GKE page).
PD_CSI_PROVISIONER = "pd.csi.storage.gke.io"

# What the program does about the class the claims name (storage.storageClassMode).
StorageClassMode = Literal["create", "reference"]


@dataclass(frozen=True)
class StorageClassSpec:
    """A StorageClass the program creates. name: its metadata.name, the stack's
    storage.storageClass. provisioner, parameters: the CSI driver and its disk parameters.
    volume_binding_mode, allow_volume_expansion, reclaim_policy: as Kubernetes spells them."""

    name: str
    provisioner: str
    parameters: tuple[tuple[str, str], ...]
    volume_binding_mode: str
    allow_volume_expansion: bool
    reclaim_policy: str


# Hyperdisk Balanced through the PD CSI driver, as GoogleCloudPlatform/cluster-toolkit
# modules/file-system/gke-storage/storage-class/hyperdisk-balanced-sc.yaml.tftpl creates it
# (1047080, 2026-06-25): type, provisioned throughput and IOPS, volume expansion; the module's
# default binding mode WaitForFirstConsumer (variables.tf; the disk is created in the zone of the
# node the pod lands on); reclaim policy Delete as in its README example and in GKE's own
# standard-rwo/premium-rwo, so a claim the stack deletes (storage.retainOnDelete: false) takes its
# disk along. The same parameters are GKE's example for Hyperdisk Balanced High Availability
# (docs.cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/regional-pd).
HYPERDISK_BALANCED = StorageClassSpec(
    name="hyperdisk-balanced",
    provisioner=PD_CSI_PROVISIONER,
    parameters=(
        ("type", "hyperdisk-balanced"),
        ("provisioned-throughput-on-create", "250Mi"),
        ("provisioned-iops-on-create", "7000"),
    ),
    volume_binding_mode="WaitForFirstConsumer",
    allow_volume_expansion=True,
    reclaim_policy="Delete",
)

# The classes the program knows how to create, by the name the claims use.
CREATABLE_CLASSES: dict[str, StorageClassSpec] = {HYPERDISK_BALANCED.name: HYPERDISK_BALANCED}


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


def storage_class_problems(
    platform: str, storage_class: str | None, mode: StorageClassMode | None
) -> list[str]:
    """Why the claims' class would not exist when they are created, one message per problem,
    naming storage.storageClass or storage.storageClassMode and what is allowed."""
    key, mode_key = "gpu-cluster:storage.storageClass", "gpu-cluster:storage.storageClassMode"
    installed = ", ".join(map(repr, GKE_PREINSTALLED_CLASSES))
    creatable = ", ".join(map(repr, CREATABLE_CLASSES))
    if storage_class is None:
        if mode is None:
            return []
        return [
            f"{mode_key} = {mode!r} is only used with storage.storageClass (unset: the claims use "
            "the cluster's default class); set the class or remove storageClassMode"
        ]
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
