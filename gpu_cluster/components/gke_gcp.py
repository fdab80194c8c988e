"""GkePlatform's steps on Google Cloud (components/gke.py composes them): the address plan and
the VPCs, the cluster with its system pool, the GPU pool, each from the stack's settings."""

from __future__ import annotations

import pulumi

from gpu_cluster.components.gcp_vpc import GpuVpcs, GpuVpcsArgs
from gpu_cluster.components.gke_cluster import GkeCluster, GkeClusterArgs
from gpu_cluster.components.gpu_pool import GpuNodePool, GpuNodePoolArgs
from gpu_cluster.components.node_identity import NodeIdentity
from gpu_cluster.config.derived import gke_monitoring_components
from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.sections.gcp import GcpSettings
from gpu_cluster.facts.gcp_network import AddressPlan, plan_addresses
from gpu_cluster.facts.machines import MACHINES
from gpu_cluster.plan.data_volumes import uses_gcs_fuse, uses_lustre
from gpu_cluster.plan.gke_storage import uses_filestore


def pool_name(gcp_settings: GcpSettings) -> str:
    return MACHINES[gcp_settings.machine_type].pool_name


def gpu_networks(
    name: str, s: Settings, g: GcpSettings, opts: pulumi.ResourceOptions
) -> tuple[AddressPlan, GpuVpcs]:
    """The address plan and the VPCs: the host's, one per GPU NIC, the RDMA network's."""
    mode = mode_of(s)
    plan = plan_addresses(g.base_cidr, mode.gpu_nic_count(s), mode.rdma_nic_count(s))
    vpcs = GpuVpcs(
        name,
        GpuVpcsArgs(
            g.project,
            g.region,
            s.name,
            plan,
            g.private_nodes,
            mtu=MACHINES[g.machine_type].vpc_mtu,
            rdma_zone=g.zone if plan.rdma_nics else None,
        ),
        opts,
    )
    return plan, vpcs


def gke_cluster(
    name: str,
    s: Settings,
    g: GcpSettings,
    plan: AddressPlan,
    vpcs: GpuVpcs,
    identity: NodeIdentity,
    opts: pulumi.ResourceOptions,
) -> GkeCluster:
    """The cluster on the host VPC, with its system pool, its nodes running as `identity`."""
    return GkeCluster(
        name,
        GkeClusterArgs(
            cluster_name=s.name,
            project=g.project,
            zone=g.zone,
            network=vpcs.host_network.id,
            subnetwork=vpcs.host_subnet.id,
            control_plane_cidr=plan.control_plane if g.private_nodes else None,
            release_channel=g.release_channel,
            min_master_version=g.min_master_version,
            hold_minor_upgrades=g.hold_minor_upgrades,
            deletion_protection=g.deletion_protection,
            system_pool=g.system_pool,
            authorized_networks=[
                (net.cidr_block, net.display_name) for net in g.authorized_networks or ()
            ],
            node_service_account=identity.email,
            nodes_after=identity.ready,
            gcs_fuse_csi=uses_gcs_fuse(s),
            lustre_csi=uses_lustre(s),
            filestore_csi=uses_filestore(s),
            monitoring_components=gke_monitoring_components(s.monitoring),
            rbac_security_group=g.rbac_security_group,
        ),
        opts,
    )


def gpu_node_pool(
    name: str,
    s: Settings,
    g: GcpSettings,
    vpcs: GpuVpcs,
    cluster: GkeCluster,
    identity: NodeIdentity,
    opts: pulumi.ResourceOptions,
) -> GpuNodePool:
    """The GPU pool, one additional NIC per GPU VPC and RDMA subnet."""
    return GpuNodePool(
        name,
        GpuNodePoolArgs(
            cluster=cluster.cluster.name,
            project=g.project,
            zone=g.zone,
            region=g.region,
            pool_name=pool_name(g),
            machine_type=g.machine_type,
            node_count=s.nodes,
            gpu_nics=[
                *((vpc.name, subnet.name) for vpc, subnet in vpcs.gpu_nics),
                *(
                    (vpcs.rdma_network.name, subnet.name)
                    for subnet in vpcs.rdma_subnets
                    if vpcs.rdma_network is not None
                ),
            ],
            provisioning=g.provisioning,
            reservation=g.reservation,
            max_run_duration_seconds=g.max_run_duration_seconds,
            queued_provisioning=g.queued_provisioning,
            maintenance_interval=g.maintenance_interval,
            placement_policy_name=f"{s.name}-compact",
            placement_max_distance=g.placement_max_distance,
            service_account=identity.email,
            after=identity.ready,
            gke_metadata=True,
            image_streaming=g.image_streaming,
            secondary_boot_disk_image=g.secondary_boot_disk_image,
        ),
        opts,
    )
