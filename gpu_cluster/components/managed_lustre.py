"""Managed Lustre instances on a GKE cluster's host VPC, with the private services access and
firewall rule they need (a TrainingStorage's Lustre side; GKE only: it imports pulumi-gcp)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi
import pulumi_gcp as gcp

from gpu_cluster.facts.lustre import LUSTRE_PORT, PSA_PREFIX_LENGTH, PSA_SERVICE

if TYPE_CHECKING:
    from gpu_cluster.components.training_storage import LustreNetwork


def lustre_instances(
    name: str, net: LustreNetwork, parent: pulumi.Resource, keep: pulumi.ResourceOptions
) -> dict[str, gcp.lustre.Instance]:
    """The instances on the host VPC as cluster-toolkit's gke-a4 blueprint makes one (its
    private_service_access, lustre_firewall_rule and managed-lustre modules, 1047080): a private
    services access range GCP picks and the peering to Google's services, ingress from that
    range to the nodes on Lustre's port (its servers reach their clients), then each instance
    in the zone, after the peering."""
    child = pulumi.ResourceOptions(parent=parent)
    psa = gcp.compute.GlobalAddress(
        f"{name}-lustre-psa",
        name=f"{net.prefix}-lustre-psa",
        project=net.project,
        purpose="VPC_PEERING",
        address_type="INTERNAL",
        prefix_length=PSA_PREFIX_LENGTH,
        network=net.network,
        opts=child,
    )
    peering = gcp.servicenetworking.Connection(
        f"{name}-lustre-peering",
        network=net.network,
        service=PSA_SERVICE,
        reserved_peering_ranges=[psa.name],
        opts=child,
    )
    gcp.compute.Firewall(
        f"{name}-lustre-firewall",
        name=f"{net.prefix}-allow-lustre",
        project=net.project,
        network=net.network,
        direction="INGRESS",
        source_ranges=[pulumi.Output.concat(psa.address, "/", str(PSA_PREFIX_LENGTH))],
        allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[LUSTRE_PORT])],
        opts=child,
    )
    after_peering = pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(depends_on=[peering]))
    return {
        i.instance: gcp.lustre.Instance(
            f"{name}-lustre-{i.instance}",
            gcp.lustre.InstanceArgs(
                instance_id=i.instance,
                project=net.project,
                location=net.zone,
                network=net.network,
                capacity_gib=str(i.capacity_gib),
                per_unit_storage_throughput=str(i.throughput),
                filesystem=i.filesystem,
            ),
            opts=after_peering,
        )
        for i in net.create
    }
