"""An A3 GPU node pool: the GPU NICs' networks, compact placement, spot or reservation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import pulumi
import pulumi_gcp as gcp
from pulumi_gcp.compute import ResourcePolicyGroupPlacementPolicyArgs
from pulumi_gcp.container import (
    NodePoolArgs,
    NodePoolAutoscalingArgs,
    NodePoolManagementArgs,
    NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs,
    NodePoolNetworkConfigArgs,
    NodePoolNodeConfigArgs,
    NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs,
    NodePoolNodeConfigGcfsConfigArgs,
    NodePoolNodeConfigGuestAcceleratorArgs,
    NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs,
    NodePoolNodeConfigGvnicArgs,
    NodePoolNodeConfigHostMaintenancePolicyArgs,
    NodePoolNodeConfigReservationAffinityArgs,
    NodePoolNodeConfigSecondaryBootDiskArgs,
    NodePoolNodeConfigTaintArgs,
    NodePoolPlacementPolicyArgs,
    NodePoolQueuedProvisioningArgs,
)

from gpu_cluster.components.gke_cluster import (
    GKE_METADATA,
    NODE_OAUTH_SCOPES,
    SHIELDED_NODES,
    UPGRADE_SETTINGS,
)
from gpu_cluster.facts.machines import MACHINES

# The secondary boot disk's mode for preloaded container images (GKE API
# SecondaryBootDisk.Mode; docs.cloud.google.com/kubernetes-engine/docs/how-to/
# data-container-image-preloading).
CONTAINER_IMAGE_CACHE = "CONTAINER_IMAGE_CACHE"
# The GPU nodes' image: Container-Optimized OS with containerd, the one image streaming runs on
# (facts/gcp.py, above ARTIFACT_REGISTRY_IMAGE; tests/test_gke.py holds it), so no stack is
# refused for gcp.imageStreaming.
NODE_IMAGE = "COS_CONTAINERD"
# How long `pulumi up` waits for GKE to create the pool. A pool of a GPU cluster took ~35 min,
# past a 30 min timeout that then orphaned the cluster (NVIDIA/aicr#2065); the Terraform
# provider's own node pool default went from 30 to 60 min (GoogleCloudPlatform/magic-modules
# #17295) and then to 2 h after a 1 h 15 min node replacement (GoogleCloudPlatform/
# magic-modules#18250). Also the floor of an update (one that replaces no node).
POOL_CREATE_MINUTES = 120
# An update that recreates nodes does so one at a time (UPGRADE_SETTINGS: no surge, one
# unavailable), about 4-5 min each (gke-labs/kube-agents#1286: 35-45 min for 9 nodes).
POOL_UPDATE_MINUTES_PER_NODE = 5
# Deletion: the Terraform provider's node pool default (GoogleCloudPlatform/magic-modules#17295).
POOL_DELETE_MINUTES = 60


def pool_timeouts(node_count: int) -> pulumi.CustomTimeouts:
    """Create, update and delete timeouts for a pool of `node_count` nodes (its maximum for a
    flex-start pool): a large pool's rolling update takes longer than any fixed figure."""
    update = max(POOL_CREATE_MINUTES, POOL_UPDATE_MINUTES_PER_NODE * node_count)
    return pulumi.CustomTimeouts(
        create=f"{POOL_CREATE_MINUTES}m", update=f"{update}m", delete=f"{POOL_DELETE_MINUTES}m"
    )


@dataclass(frozen=True)
class GpuNodePoolArgs:
    """cluster: the GKE cluster's name; project, zone, region: where the pool lives.
    pool_name: the node pool's (and its nodes' cloud.google.com/gke-nodepool label).
    machine_type: an A3 or A4 machine (facts/machines.py MACHINES). node_count: fixed size.
    gpu_nics: (VPC name, subnet name) per additional NIC, in the node's NIC order (A3 Ultra /
    A4: the second gVNIC, then the 8 RDMA subnets).
    provisioning: on-demand, spot, a specific reservation (named by `reservation`, optionally
    <name>/reservationBlocks/<block>[/reservationSubBlocks/<sub-block>]), or flex-start (the
    pool scales from 0 to node_count as pods ask; max_run_duration_seconds caps each node;
    queued_provisioning: the nodes come only through ProvisioningRequests, all of a run's at
    once).
    maintenance_interval: GCE host maintenance interval, or None for the default.
    placement_policy_name, placement_max_distance: a named compact ResourcePolicy when a max
    distance is set; otherwise GKE's own compact placement (none with a reservation).
    service_account: the nodes' Google account (email), or None for the project's default
    Compute Engine account; after: what the pool waits for (that account and its roles).
    gke_metadata: pods see GKE's metadata server, not the node's credentials (the cluster must
    have Workload Identity).
    image_streaming: GKE image streaming (gcfs_config) on the pool's nodes.
    secondary_boot_disk_image: a disk image of container images every node gets as a secondary
    boot disk (CONTAINER_IMAGE_CACHE), or None."""

    cluster: pulumi.Input[str]
    project: str
    zone: str
    region: str
    pool_name: str
    machine_type: str
    node_count: int
    gpu_nics: Sequence[tuple[pulumi.Input[str], pulumi.Input[str]]] = field(default_factory=list)
    provisioning: Literal["on-demand", "spot", "reservation", "flex-start"] = "on-demand"
    reservation: str | None = None
    max_run_duration_seconds: int | None = None
    queued_provisioning: bool = False
    maintenance_interval: str | None = None
    placement_policy_name: str = ""
    placement_max_distance: int | None = None
    service_account: str | None = None
    after: Sequence[pulumi.Resource] = ()
    gke_metadata: bool = False
    image_streaming: bool = False
    secondary_boot_disk_image: str | None = None


def reservation_path(project: str, reservation: str) -> str:
    """The reservation (optionally /reservationBlocks/<b>[/reservationSubBlocks/<s>]) as a full
    projects/<p>/reservations/... path, the form cluster-toolkit always passes (modules/compute/
    gke-node-pool reservation_definitions.tf, 1047080); a bare name is in the pool's project."""
    if reservation.startswith("projects/"):
        return reservation
    return f"projects/{project}/reservations/{reservation}"


def _reservation_affinity(a: GpuNodePoolArgs) -> NodePoolNodeConfigReservationAffinityArgs | None:
    if a.provisioning == "reservation":
        return NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION",
            key="compute.googleapis.com/reservation-name",
            values=[reservation_path(a.project, a.reservation or "")],
        )
    if a.provisioning in ("flex-start", "spot"):
        # Spot and flex-start capacity never comes from a reservation (GoogleCloudPlatform/
        # cluster-toolkit modules/compute/gke-node-pool main.tf preconditions, 1047080).
        return NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="NO_RESERVATION")
    # On demand: GKE's default, ANY_RESERVATION (matching open reservations first), where
    # cluster-toolkit's gke-node-pool defaults to NO_RESERVATION; the reason is in
    # tests/vendor/gke_gpudirect.yaml (A3 Mega GPU node pool).
    return None


def _node_config(a: GpuNodePoolArgs) -> NodePoolNodeConfigArgs:
    flex = a.provisioning == "flex-start"
    machine = MACHINES[a.machine_type]
    return NodePoolNodeConfigArgs(
        machine_type=a.machine_type,
        image_type=NODE_IMAGE,
        disk_type=machine.boot_disk_type,
        ephemeral_storage_local_ssd_config=NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(
            local_ssd_count=machine.local_ssds
        ),
        oauth_scopes=NODE_OAUTH_SCOPES,
        service_account=a.service_account,
        workload_metadata_config=GKE_METADATA if a.gke_metadata else None,
        guest_accelerators=[
            NodePoolNodeConfigGuestAcceleratorArgs(
                type=machine.accelerator,
                count=machine.gpus,  # pods request gpusPerNode of them
                gpu_driver_installation_config=(
                    NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                        gpu_driver_version="LATEST"
                    )
                ),
            )
        ],
        # Always written, false too: the provider's gcfs_config is Optional and Computed, so a
        # block left out keeps whatever the pool has (hashicorp/terraform-provider-google
        # node_config.go schemaGcfsConfig, e03b7622) and turning streaming off would do nothing.
        gcfs_config=NodePoolNodeConfigGcfsConfigArgs(enabled=a.image_streaming),
        # Containers start from the images preloaded on this disk (GKE's secondary boot disks).
        secondary_boot_disks=[
            NodePoolNodeConfigSecondaryBootDiskArgs(
                disk_image=a.secondary_boot_disk_image, mode=CONTAINER_IMAGE_CACHE
            )
        ]
        if a.secondary_boot_disk_image
        else None,
        gvnic=NodePoolNodeConfigGvnicArgs(enabled=True),
        shielded_instance_config=SHIELDED_NODES,
        taints=[
            NodePoolNodeConfigTaintArgs(key="nvidia.com/gpu", value="present", effect="NO_SCHEDULE")
        ],
        spot=True if a.provisioning == "spot" else None,
        flex_start=True if flex else None,
        max_run_duration=(
            f"{a.max_run_duration_seconds}s" if a.max_run_duration_seconds is not None else None
        ),
        reservation_affinity=_reservation_affinity(a),
        host_maintenance_policy=(
            NodePoolNodeConfigHostMaintenancePolicyArgs(maintenance_interval=a.maintenance_interval)
            if a.maintenance_interval
            else None
        ),
    )


class GpuNodePool(pulumi.ComponentResource):
    """The GPU node pool, with its compact placement policy when one is asked for."""

    node_pool: gcp.container.NodePool

    def __init__(
        self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:gpu_pool:GpuNodePool", name, None, opts)
        a = args
        flex = a.provisioning == "flex-start"
        policy_name: pulumi.Output[str] | None = None
        if a.placement_max_distance is not None:
            policy_name = gcp.compute.ResourcePolicy(
                f"{name}-placement",
                name=a.placement_policy_name,
                project=a.project,
                region=a.region,
                group_placement_policy=ResourcePolicyGroupPlacementPolicyArgs(
                    collocation="COLLOCATED", max_distance=a.placement_max_distance
                ),
                opts=pulumi.ResourceOptions(parent=self),
            ).name
        self.node_pool = gcp.container.NodePool(
            f"{name}-{a.pool_name}",
            NodePoolArgs(
                name=a.pool_name,
                project=a.project,
                location=a.zone,
                cluster=a.cluster,
                # Flex-start: no static size; GKE obtains the nodes when the pods ask for them,
                # as cluster-toolkit's and xpk's flex-start pools do (autoscaling, location
                # policy ANY, no auto-repair: GKE would re-request capacity for a repair).
                node_count=None if flex else a.node_count,
                autoscaling=NodePoolAutoscalingArgs(
                    total_min_node_count=0, total_max_node_count=a.node_count, location_policy="ANY"
                )
                if flex
                else None,
                # A block or sub-block is zonal: GKE needs the pool's zone spelled out
                # (cluster-toolkit gke-node-pool main.tf precondition).
                node_locations=[a.zone] if "/reservationBlocks/" in (a.reservation or "") else None,
                node_config=_node_config(a),
                network_config=NodePoolNetworkConfigArgs(
                    additional_node_network_configs=[
                        NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
                            network=network, subnetwork=subnet
                        )
                        for network, subnet in a.gpu_nics
                    ]
                )
                if a.gpu_nics
                else None,
                # A reservation brings its own placement; adding one fails pool creation.
                # Flex-start gets best-effort compact placement from GKE (AI-Hypercomputer/xpk
                # sets none for flex-start).
                placement_policy=None
                if a.provisioning in ("reservation", "flex-start")
                else NodePoolPlacementPolicyArgs(type="COMPACT", policy_name=policy_name),
                # Queued nodes are neither repaired nor upgraded: GKE would replace a node a
                # run holds (cluster-toolkit examples/gke-consumption-options/dws-flex-start-
                # queued-provisioning/gke-a3-ultragpu.yaml: auto_repair, auto_upgrade false).
                management=NodePoolManagementArgs(
                    auto_repair=not flex, auto_upgrade=not a.queued_provisioning
                ),
                queued_provisioning=NodePoolQueuedProvisioningArgs(enabled=True)
                if a.queued_provisioning
                else None,
                upgrade_settings=UPGRADE_SETTINGS,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(a.after),
                custom_timeouts=pool_timeouts(a.node_count),
            ),
        )
        self.register_outputs({"nodePoolName": self.node_pool.name})
