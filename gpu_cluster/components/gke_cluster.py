"""A VPC-native GKE cluster with multi-networking and its untainted system pool."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
from pulumi_gcp.container import (
    ClusterAddonsConfigArgs,
    ClusterAddonsConfigGcpFilestoreCsiDriverConfigArgs,
    ClusterAddonsConfigGcsFuseCsiDriverConfigArgs,
    ClusterAddonsConfigLustreCsiDriverConfigArgs,
    ClusterArgs,
    ClusterAuthenticatorGroupsConfigArgs,
    ClusterIpAllocationPolicyArgs,
    ClusterMaintenancePolicyArgs,
    ClusterMaintenancePolicyDailyMaintenanceWindowArgs,
    ClusterMaintenancePolicyMaintenanceExclusionArgs,
    ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs,
    ClusterMasterAuthorizedNetworksConfigArgs,
    ClusterMasterAuthorizedNetworksConfigCidrBlockArgs,
    ClusterMonitoringConfigArgs,
    ClusterMonitoringConfigManagedPrometheusArgs,
    ClusterMonitoringConfigManagedPrometheusAutoMonitoringConfigArgs,
    ClusterPrivateClusterConfigArgs,
    ClusterReleaseChannelArgs,
    ClusterWorkloadIdentityConfigArgs,
    NodePoolArgs,
    NodePoolAutoscalingArgs,
    NodePoolManagementArgs,
    NodePoolNodeConfigArgs,
    NodePoolNodeConfigGvnicArgs,
    NodePoolNodeConfigShieldedInstanceConfigArgs,
    NodePoolNodeConfigWorkloadMetadataConfigArgs,
    NodePoolUpgradeSettingsArgs,
)

from gpu_cluster.config.sections.gcp import SystemPoolSettings
from gpu_cluster.facts.gke_monitoring import AUTO_MONITORING_SCOPE
from gpu_cluster.plan.gke_identity import workload_pool

# Nodes pull the plugin and sidecar images from Artifact Registry and reach Google APIs.
NODE_OAUTH_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
# GKE's own workloads run on this pool (GoogleCloudPlatform/cluster-toolkit
# modules/scheduler/gke-cluster main.tf `system_node_pools`, name "system").
SYSTEM_POOL = "system"
# Upgrade one node at a time and never create a spare: an A3 surge node needs capacity that a
# reservation or a stockout rarely has (cluster-toolkit modules/compute/gke-node-pool and
# modules/scheduler/gke-cluster variables.tf `upgrade_settings`, 1047080).
UPGRADE_SETTINGS = NodePoolUpgradeSettingsArgs(strategy="SURGE", max_surge=0, max_unavailable=1)
# Shielded nodes with secure boot: only signed kernel modules load (COS's and GKE's GPU driver
# are signed). cluster-toolkit modules/compute/gke-node-pool and modules/scheduler/gke-cluster
# main.tf `shielded_instance_config`, `enable_secure_boot` default true (1047080).
SHIELDED_NODES = NodePoolNodeConfigShieldedInstanceConfigArgs(
    enable_secure_boot=True, enable_integrity_monitoring=True
)
# Pods reach Google APIs as their Kubernetes ServiceAccount's Workload Identity, never as the
# node: GKE's metadata server hides the node's credentials from them (cluster-toolkit
# modules/compute/gke-node-pool main.tf `workload_metadata_config`, 1047080;
# cloud.google.com/kubernetes-engine/docs/how-to/workload-identity).
GKE_METADATA = NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA")
# Start of the minor-upgrade hold. Fixed (a moving start would show a diff on every run); it
# lies in the past, as cluster-toolkit's gke-a3-highgpu blueprint's does (2026-04-01).
HOLD_START = "2026-11-01T00:00:00Z"


@dataclass(frozen=True)
class GkeClusterArgs:
    """cluster_name, project, zone: the cluster (zonal: compact placement is single-zone).
    network, subnetwork: the host VPC and its subnet, with secondary ranges "pods" and
    "services". control_plane_cidr: the private control plane's /28, or None for public nodes.
    release_channel, min_master_version: GKE's. hold_minor_upgrades: hold minor and node
    upgrades until the minor's end of support. deletion_protection: GKE's flag and Pulumi's
    protect. system_pool: the CPU pool for GKE's own workloads. authorized_networks: (CIDR,
    display name) of each outside range the control plane's endpoint accepts; empty closes it
    to all but the cluster's own nodes and Google's management. node_service_account: the
    nodes' Google account (email), or None for the project's default Compute Engine account;
    nodes_after: what the pools wait for (that account and its roles). gcs_fuse_csi,
    lustre_csi, filestore_csi: turn on GKE's Cloud Storage FUSE, Lustre or Filestore CSI driver
    (the stack mounts buckets or Lustre instances, or its claims name a Filestore class).
    monitoring_components: what GKE sends to Cloud Monitoring (Managed Prometheus always on).
    rbac_security_group: gke-security-groups@<domain> for Google Groups for RBAC, or None."""

    cluster_name: str
    project: str
    zone: str
    network: pulumi.Input[str]
    subnetwork: pulumi.Input[str]
    control_plane_cidr: str | None
    release_channel: str
    min_master_version: str
    hold_minor_upgrades: bool = True
    deletion_protection: bool = True
    system_pool: SystemPoolSettings = field(default_factory=SystemPoolSettings)
    authorized_networks: Sequence[tuple[str, str]] = ()
    node_service_account: str | None = None
    nodes_after: Sequence[pulumi.Resource] = ()
    gcs_fuse_csi: bool = False
    lustre_csi: bool = False
    filestore_csi: bool = False
    monitoring_components: Sequence[str] = ()
    rbac_security_group: str | None = None


def _addons(a: GkeClusterArgs) -> ClusterAddonsConfigArgs | None:
    """GKE's Cloud Storage FUSE, Lustre and Filestore CSI drivers where the stack mounts a bucket
    or a Lustre instance or its claims name a Filestore class, as cluster-toolkit's gke-cluster
    module turns them on (main.tf `gcs_fuse_csi_driver_config`, `lustre_csi_driver_config`,
    `gcp_filestore_csi_driver_config`; `enable_gcsfuse_csi`, `enable_managed_lustre_csi`,
    `enable_filestore_csi`, 1047080; no legacy Lustre port: see facts/lustre.py); an addon is
    updated in place (hashicorp/terraform-provider-google resource_container_cluster.go: no
    ForceNew under addons_config, e03b7622). Left unset otherwise: the fields are computed, so a
    stack that stops using them leaves a driver on rather than turning it off under pods that
    may still use it."""
    if not (a.gcs_fuse_csi or a.lustre_csi or a.filestore_csi):
        return None
    return ClusterAddonsConfigArgs(
        gcs_fuse_csi_driver_config=ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True)
        if a.gcs_fuse_csi
        else None,
        lustre_csi_driver_config=ClusterAddonsConfigLustreCsiDriverConfigArgs(enabled=True)
        if a.lustre_csi
        else None,
        gcp_filestore_csi_driver_config=ClusterAddonsConfigGcpFilestoreCsiDriverConfigArgs(
            enabled=True
        )
        if a.filestore_csi
        else None,
    )


def _monitoring_config(a: GkeClusterArgs) -> ClusterMonitoringConfigArgs:
    """The components' metrics and Managed Service for Prometheus, without its automatic
    application monitoring, as cluster-toolkit's gke-cluster module sets them (main.tf
    `monitoring_config`, 1047080); updated in place (hashicorp/terraform-provider-google-beta
    v7.45.0 resource_container_cluster.go: no ForceNew under monitoring_config)."""
    return ClusterMonitoringConfigArgs(
        enable_components=list(a.monitoring_components),
        managed_prometheus=ClusterMonitoringConfigManagedPrometheusArgs(
            enabled=True,
            auto_monitoring_config=ClusterMonitoringConfigManagedPrometheusAutoMonitoringConfigArgs(
                scope=AUTO_MONITORING_SCOPE
            ),
        ),
    )


def _authorized_networks(a: GkeClusterArgs) -> ClusterMasterAuthorizedNetworksConfigArgs:
    """Always on (the block's presence enables it), with only the listed ranges, and without
    the blanket allowance for every Google Cloud VM's public address, as cluster-toolkit's
    gke-cluster module renders it (main.tf `master_authorized_networks_config`, variables.tf
    `gcp_public_cidrs_access_enabled` default false, 1047080)."""
    return ClusterMasterAuthorizedNetworksConfigArgs(
        cidr_blocks=[
            ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(cidr_block=cidr, display_name=name)
            for cidr, name in a.authorized_networks
        ],
        gcp_public_cidrs_access_enabled=False,
    )


def kubeconfig(cluster_name: str, endpoint: str, ca_certificate: str) -> str:
    """In-memory kubeconfig that authenticates with gcloud's GKE auth plugin (no file on disk)."""
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "provideClusterInfo": True,
            "installHint": "gcloud components install gke-gcloud-auth-plugin",
        }
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": cluster_name,
                    "cluster": {
                        "server": f"https://{endpoint}",
                        "certificate-authority-data": ca_certificate,
                    },
                }
            ],
            "users": [{"name": cluster_name, "user": user}],
            "contexts": [
                {"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}
            ],
            "current-context": cluster_name,
        }
    )


def _maintenance_policy(a: GkeClusterArgs) -> ClusterMaintenancePolicyArgs | None:
    """Holds minor and node upgrades until the minor's end of support, so the cluster stays on
    the GKE minor its GPUDirect release is published for (cluster-toolkit
    examples/gke-a3-highgpu/gke-a3-highgpu.yaml `maintenance_exclusions`, 1047080); patch
    upgrades of the control plane still apply."""
    if not a.hold_minor_upgrades:
        return None
    return ClusterMaintenancePolicyArgs(
        # cluster-toolkit modules/scheduler/gke-cluster `maintenance_start_time` default 09:00.
        daily_maintenance_window=ClusterMaintenancePolicyDailyMaintenanceWindowArgs(
            start_time="09:00"
        ),
        maintenance_exclusions=[
            ClusterMaintenancePolicyMaintenanceExclusionArgs(
                exclusion_name="no-minor-or-node-upgrades-indefinite",
                start_time=HOLD_START,
                exclusion_options=(
                    ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                        scope="NO_MINOR_OR_NODE_UPGRADES",
                        end_time_behavior="UNTIL_END_OF_SUPPORT",
                    )
                ),
            )
        ],
    )


def _system_pool_args(a: GkeClusterArgs, cluster: pulumi.Input[str]) -> NodePoolArgs:
    """An untainted CPU pool: GKE's system workloads (kube-dns, metrics-server, konnectivity
    agents) tolerate neither the GPU pool's taint nor, provably for every one of them on every
    GKE version, cluster-toolkit's `components.gke.io/gke-managed-components` taint; untainted,
    they and any CPU helper a user adds always schedule (a deviation from cluster-toolkit,
    listed in tests/vendor/gke_cluster.yaml)."""
    sp = a.system_pool
    return NodePoolArgs(
        name=SYSTEM_POOL,
        project=a.project,
        location=a.zone,
        cluster=cluster,
        initial_node_count=sp.min_nodes,
        autoscaling=NodePoolAutoscalingArgs(
            total_min_node_count=sp.min_nodes, total_max_node_count=sp.max_nodes
        ),
        node_config=NodePoolNodeConfigArgs(
            machine_type=sp.machine_type,
            disk_size_gb=sp.disk_size_gb,
            image_type="COS_CONTAINERD",
            oauth_scopes=NODE_OAUTH_SCOPES,
            service_account=a.node_service_account,
            workload_metadata_config=GKE_METADATA,
            gvnic=NodePoolNodeConfigGvnicArgs(enabled=True),
            shielded_instance_config=SHIELDED_NODES,
        ),
        management=NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
        upgrade_settings=UPGRADE_SETTINGS,
    )


class GkeCluster(pulumi.ComponentResource):
    """The cluster (no default pool) and its system pool; `kubeconfig` reaches it."""

    cluster: gcp.container.Cluster
    system_pool: gcp.container.NodePool
    kubeconfig: pulumi.Output[str]

    def __init__(
        self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:gke_cluster:GkeCluster", name, None, opts)
        a = args
        self.cluster = gcp.container.Cluster(
            f"{name}-cluster",
            ClusterArgs(
                name=a.cluster_name,
                project=a.project,
                location=a.zone,
                network=a.network,
                subnetwork=a.subnetwork,
                networking_mode="VPC_NATIVE",
                ip_allocation_policy=ClusterIpAllocationPolicyArgs(
                    cluster_secondary_range_name="pods", services_secondary_range_name="services"
                ),
                # Multi-networking (one pod interface per GPU VPC) needs Dataplane V2.
                datapath_provider="ADVANCED_DATAPATH",
                enable_multi_networking=True,
                remove_default_node_pool=True,
                initial_node_count=1,
                release_channel=ClusterReleaseChannelArgs(channel=a.release_channel),
                min_master_version=a.min_master_version,
                maintenance_policy=_maintenance_policy(a),
                deletion_protection=a.deletion_protection,
                master_authorized_networks_config=_authorized_networks(a),
                addons_config=_addons(a),
                monitoring_config=_monitoring_config(a),
                authenticator_groups_config=(
                    ClusterAuthenticatorGroupsConfigArgs(security_group=a.rbac_security_group)
                    if a.rbac_security_group
                    else None
                ),
                workload_identity_config=ClusterWorkloadIdentityConfigArgs(
                    workload_pool=workload_pool(a.project)
                ),
                private_cluster_config=(
                    ClusterPrivateClusterConfigArgs(
                        enable_private_nodes=True,
                        # The public endpoint stays (behind the authorized networks): this
                        # program and kubectl reach the cluster through it, as cluster-toolkit's
                        # GPU blueprints set it (enable_private_endpoint: false).
                        enable_private_endpoint=False,
                        master_ipv4_cidr_block=a.control_plane_cidr,
                    )
                    if a.control_plane_cidr
                    else None
                ),
            ),
            # Pulumi's protect stops a replacement (any force-new field) or a destroy at preview;
            # gcp.deletionProtection: false lifts it together with GKE's own flag.
            opts=pulumi.ResourceOptions(parent=self, protect=a.deletion_protection),
        )
        self.system_pool = gcp.container.NodePool(
            f"{name}-{SYSTEM_POOL}",
            _system_pool_args(a, self.cluster.name),
            # initial_node_count is ForceNew (terraform-provider-google-beta v7.45.0
            # resource_container_node_pool.go:483) and only sizes the pool at creation;
            # autoscaling's minimum follows gcp.systemPool.minNodes in place.
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(a.nodes_after),
                ignore_changes=["initialNodeCount"],
            ),
        )
        cluster = self.cluster
        self.kubeconfig = pulumi.Output.all(
            cluster.name, cluster.endpoint, cluster.master_auth
        ).apply(lambda v: kubeconfig(v[0], v[1], v[2]["cluster_ca_certificate"]))
        self.register_outputs({"clusterName": cluster.name, "endpoint": cluster.endpoint})
