"""The GPU VPC set: the host VPC (nodes, pods, services) and one VPC per GPU NIC, each with a
firewall rule for traffic among its own ranges, and NAT for private nodes; on A3 Ultra / A4 also
the one RoCE VPC holding a subnet per RDMA NIC."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
from pulumi_gcp.compute import FirewallAllowArgs, RouterNatArgs, SubnetworkSecondaryIpRangeArgs

from gpu_cluster.facts.gcp_network import A3_VPC_MTU, RDMA_VPC_MTU, AddressPlan


@dataclass(frozen=True)
class GpuVpcsArgs:
    """project, region: where the networks live. name_prefix: their GCP names are
    <prefix>-host and <prefix>-gpu<N>. addresses: the address plan (host ranges and one range
    per GPU NIC; gpu_cluster.facts.gcp_network.plan_addresses). private_nodes: add a Cloud
    Router with NAT, as private nodes have no public IPs. mtu: of every VPC. rdma_zone: the
    zone of the RoCE network profile, needed when the plan has RDMA NIC ranges (the RoCE VPC
    is <prefix>-rdma, its subnets <prefix>-rdma-<N> from 0)."""

    project: str
    region: str
    name_prefix: str
    addresses: AddressPlan
    private_nodes: bool = True
    mtu: int = A3_VPC_MTU
    rdma_zone: str | None = None


class GpuVpcs(pulumi.ComponentResource):
    """Host VPC with subnet (pods/services secondary ranges) plus one VPC+subnet per GPU NIC."""

    host_network: gcp.compute.Network
    host_subnet: gcp.compute.Subnetwork
    gpu_nics: list[tuple[gcp.compute.Network, gcp.compute.Subnetwork]]
    rdma_network: gcp.compute.Network | None
    rdma_subnets: list[gcp.compute.Subnetwork]

    def __init__(
        self, name: str, args: GpuVpcsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:gcp_vpc:GpuVpcs", name, None, opts)
        a = args
        plan = a.addresses
        self.host_network, self.host_subnet = self._vpc(
            f"{name}-host",
            f"{a.name_prefix}-host",
            a,
            plan.nodes,
            firewall_sources=[plan.nodes, plan.pods],
            secondary_ranges={"pods": plan.pods, "services": plan.services},
        )
        if a.private_nodes:
            # Private nodes have no public IPs: NAT lets them pull images and reach Google APIs.
            router = gcp.compute.Router(
                f"{name}-host",
                name=f"{a.name_prefix}-host",
                project=a.project,
                region=a.region,
                network=self.host_network.id,
                opts=pulumi.ResourceOptions(parent=self),
            )
            gcp.compute.RouterNat(
                f"{name}-host",
                RouterNatArgs(
                    name=f"{a.name_prefix}-host",
                    project=a.project,
                    region=a.region,
                    router=router.name,
                    nat_ip_allocate_option="AUTO_ONLY",
                    source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.gpu_nics = [
            self._vpc(f"{name}-gpu{index}", f"{a.name_prefix}-gpu{index}", a, cidr, [cidr])
            for index, cidr in enumerate(plan.gpu_nics, start=1)
        ]
        self.rdma_network, self.rdma_subnets = None, []
        if plan.rdma_nics:
            assert a.rdma_zone is not None, "RDMA NIC ranges need the RoCE profile's zone"
            self._roce_vpc(name, a, a.rdma_zone, plan.rdma_nics)
        outputs: dict[str, object] = {
            "hostNetwork": self.host_network.name,
            "gpuNetworks": [network.name for network, _ in self.gpu_nics],
        }
        if self.rdma_network is not None:
            outputs["rdmaNetwork"] = self.rdma_network.name
        self.register_outputs(outputs)

    def _roce_vpc(self, name: str, a: GpuVpcsArgs, zone: str, ranges: tuple[str, ...]) -> None:
        """The RDMA NICs' VPC with Google's RoCE network profile, one subnet per NIC, as
        GoogleCloudPlatform/cluster-toolkit modules/network/gpu-rdma-vpc builds it (1047080).
        No firewall rule: RoCE VPCs take no VPC firewall rules and allow all traffic among
        their NICs (cloud.google.com/firewall/docs/firewall-for-roce)."""
        opts = pulumi.ResourceOptions(parent=self)
        self.rdma_network = gcp.compute.Network(
            f"{name}-rdma",
            name=f"{a.name_prefix}-rdma",
            project=a.project,
            auto_create_subnetworks=False,
            mtu=RDMA_VPC_MTU,
            routing_mode="REGIONAL",
            # Zonal profile: every NIC in the VPC is in this zone (docs.cloud.google.com/vpc/
            # docs/rdma-network-profiles); the partial URL form is valid (pulumi_gcp docs).
            network_profile=f"projects/{a.project}/global/networkProfiles/{zone}-vpc-roce",
            opts=opts,
        )
        self.rdma_subnets = [
            gcp.compute.Subnetwork(
                f"{name}-rdma-{index}",
                name=f"{a.name_prefix}-rdma-{index}",
                project=a.project,
                region=a.region,
                network=self.rdma_network.id,
                ip_cidr_range=cidr,
                opts=opts,
            )
            for index, cidr in enumerate(ranges)
        ]

    def _vpc(
        self,
        resource_name: str,
        gcp_name: str,
        a: GpuVpcsArgs,
        cidr: str,
        firewall_sources: list[str],
        secondary_ranges: dict[str, str] | None = None,
    ) -> tuple[gcp.compute.Network, gcp.compute.Subnetwork]:
        """A custom-mode VPC with one regional subnet, and a firewall rule allowing all
        TCP/UDP/ICMP between addresses of `firewall_sources`."""
        opts = pulumi.ResourceOptions(parent=self)
        network = gcp.compute.Network(
            resource_name,
            name=gcp_name,
            project=a.project,
            auto_create_subnetworks=False,
            mtu=a.mtu,
            opts=opts,
        )
        subnet = gcp.compute.Subnetwork(
            resource_name,
            name=gcp_name,
            project=a.project,
            region=a.region,
            network=network.id,
            ip_cidr_range=cidr,
            # Private nodes reach Google APIs (Artifact Registry, logging) without NAT.
            private_ip_google_access=True,
            secondary_ip_ranges=[
                SubnetworkSecondaryIpRangeArgs(range_name=k, ip_cidr_range=v)
                for k, v in (secondary_ranges or {}).items()
            ]
            or None,
            opts=opts,
        )
        gcp.compute.Firewall(
            f"{resource_name}-internal",
            name=f"{gcp_name}-internal",
            project=a.project,
            network=network.id,
            direction="INGRESS",
            source_ranges=firewall_sources,
            allows=[
                FirewallAllowArgs(protocol="tcp", ports=["0-65535"]),
                FirewallAllowArgs(protocol="udp", ports=["0-65535"]),
                FirewallAllowArgs(protocol="icmp"),
            ],
            opts=opts,
        )
        return network, subnet
