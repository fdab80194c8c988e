"""StorageClasses on GKE: the ones every cluster has, and the ones this program can create when a
stack's claims name one GKE does not install.

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
# 2026-11-23. Filestore's *-rwx classes come only with its CSI driver, which the stack turns on
# when its claims name one (FILESTORE_CLASSES). No Hyperdisk class is installed
# (docs.cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/hyperdisk: "Create a
# Hyperdisk volume" starts by creating a StorageClass).
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

# GKE's default class in a Standard cluster: the one a claim without a class gets (same GKE page).
GKE_DEFAULT_CLASS = "standard-rwo"

# Persistent Disk classes (GKE's own and the one the program creates; `standard`'s in-tree
# provisioner is served by the same CSI driver since CSI migration): no ReadWriteMany file system.
# The driver refuses a multi-writer volume with a mount access type, so a ReadWriteMany claim of
# such a class stays Pending (kubernetes-sigs/gcp-compute-persistent-disk-csi-driver v1.28.1
# pkg/gce-pd-csi-driver/utils.go validateVolumeCapability: "specified multi writer with mount
# access type").
PERSISTENT_DISK_CLASSES = (*GKE_PREINSTALLED_CLASSES, *CREATABLE_CLASSES)


@dataclass(frozen=True)
class FilestoreClass:
    """A StorageClass GKE installs once its Filestore CSI driver is on. name: the class;
    provisions: what a claim of it gets (an instance of a Filestore service tier, or a share of
    one); min_size, max_size: the smallest and largest of those (Kubernetes quantities);
    rounds_up: a smaller claim gets one of min_size (the driver rounds the request up), else the
    driver refuses it and the claim stays Pending. A larger claim always stays Pending."""

    name: str
    provisions: str
    min_size: str
    max_size: str
    rounds_up: bool


# The StorageClasses GKE installs once its Filestore CSI driver is on, with their sizes. Classes:
# docs.cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/filestore-csi-driver,
# "Create a StorageClass" (read 2026-11-28). Sizes:
# kubernetes-sigs/gcp-filestore-csi-driver 2edb466 (2026-06-24) pkg/csi_driver/controller.go
# tierToCapacityRange, whose getRequestCapacity rounds a smaller request up to the tier's minimum
# and passes a larger one on, which Filestore refuses beyond the tier's maximum
# (cloud.google.com/filestore/docs/service-tiers, read 2026-11-28); a share's: pkg/util/
# multishare_defs.go MinShareSizeBytes, MaxShareSizeBytes, outside which getShareRequestCapacity
# (pkg/csi_driver/multishare_controller.go) refuses the request.
FILESTORE_CLASSES: dict[str, FilestoreClass] = {
    c.name: c
    for c in (
        # Basic HDD: from 100 GiB on GKE 1.33 and later (service-tiers "Basic HDD (on GKE)"), 1 TiB
        # before (the driver's older minimum).
        FilestoreClass("standard-rwx", "a basic HDD instance", "100Gi", "63.9Ti", rounds_up=True),
        FilestoreClass("premium-rwx", "a basic SSD instance", "2.5Ti", "63.9Ti", rounds_up=True),
        FilestoreClass("enterprise-rwx", "an enterprise instance", "1Ti", "10Ti", rounds_up=True),
        # A share of an enterprise instance the driver packs shares into; the GKE page's manifest
        # of the class sets no max-volume-size, so the driver's default share range holds.
        FilestoreClass(
            "enterprise-multishare-rwx",
            "an enterprise instance's share",
            "100Gi",
            "1Ti",
            rounds_up=False,
        ),
        # Zonal: 1 TiB to 9.75 TiB from GKE 1.31, 10 TiB to 100 TiB (the driver picks the band by
        # the request; the GKE page's table of tiers and versions).
        FilestoreClass("zonal-rwx", "a zonal instance", "1Ti", "100Ti", rounds_up=True),
        # Regional: GKE 1.33.4-gke.1172000 and later (the GKE page's table); the class name as a
        # GKE cluster lists it (`kubectl get storageclass`), the page's class list names none.
        FilestoreClass("regional-rwx", "a regional instance", "100Gi", "100Ti", rounds_up=True),
    )
}
