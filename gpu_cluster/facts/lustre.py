"""Google Cloud Managed Lustre and GKE's Lustre CSI driver: what a stack's Lustre volume needs
on the network and in the PersistentVolume."""

from __future__ import annotations

# The CSI driver a PersistentVolume names; its volume handle is <project>/<zone>/<instance>
# and its attributes the instance's `ip` and `filesystem` (GoogleCloudPlatform/lustre-csi-driver
# docs/preprov-guide.md and pkg/util/util.go ParseVolumeID, 89f1eb7, 2026-08-19; AI-Hypercomputer/
# gpu-recipes src/helm-charts/storage/lustre/templates/pv.yaml, 2e1fd5e). cluster-toolkit's
# gke-persistent-volume template writes a five-part handle that ParseVolumeID refuses.
LUSTRE_DRIVER = "lustre.csi.storage.gke.io"

# Private services access for the instance on the host VPC, as cluster-toolkit's gke-a4
# blueprint reserves it (examples/gke-a4/gke-a4.yaml private_service_access prefix_length 22;
# modules/network/private-service-access: a VPC_PEERING global address, GCP picking the range,
# and the servicenetworking.googleapis.com connection; 1047080).
PSA_PREFIX_LENGTH = 22
PSA_SERVICE = "servicenetworking.googleapis.com"
# The port Lustre's servers reach their clients on: the blueprint's lustre_firewall_rule allows
# it from the PSA range. Port 6988 only for instances made with gke_support_enabled, which the
# stack leaves off, as the blueprint does: GKE nodes from 1.33.2-gke.4655000 use 988 (GKE API
# LustreCsiDriverConfig.enable_legacy_lustre_port; every GKE minor in support today is newer).
LUSTRE_PORT = "988"


def mount_point_parts(mount_point: str) -> tuple[str, str]:
    """`IP@tcp:/FILESYSTEM` (the instance's mountPoint, hashicorp/terraform-provider-google
    resource_lustre_instance.go) -> (IP, FILESYSTEM)."""
    address, _, filesystem = mount_point.partition(":/")
    return address.split("@")[0], filesystem
