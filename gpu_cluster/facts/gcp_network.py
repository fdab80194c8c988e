"""Address plan for a GKE GPU cluster, carved from one base CIDR (pure).

Host VPC: node subnet, pod and service secondary ranges, the private control plane's /28; then
one subnet per GPU NIC VPC. Sizes fit the largest pools a stack may ask for (4096 nodes).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

# Prefix lengths: nodes /20 (4096 nodes), pods /14 (GKE gives each node a /24 by default),
# services /20, control plane /28 (required size for a private cluster's master range),
# each GPU NIC subnet /20 (one address per node).
NODES_PREFIX = 20
PODS_PREFIX = 14
SERVICES_PREFIX = 20
CONTROL_PLANE_PREFIX = 28
GPU_NIC_PREFIX = 20
# MTU of the host VPC and every GPU NIC VPC: GoogleCloudPlatform/cluster-toolkit
# examples/gke-a3-megagpu/gke-a3-megagpu.yaml and examples/gke-a3-highgpu/gke-a3-highgpu.yaml
# (1047080, 2026-06-25) set 8244 on `network1` and `gpunets`. Updatable in place since
# GoogleCloudPlatform/magic-modules#13995 (2025-05), so adopting it does not replace a VPC.
A3_VPC_MTU = 8244
# MTU of every VPC of an A3 Ultra / A4 cluster: the host, the second gVNIC and the RoCE VPC
# (GoogleCloudPlatform/cluster-toolkit examples/gke-a4/gke-a4.yaml and modules/network/
# gpu-rdma-vpc variables.tf, 1047080; the RoCE profile's default, docs.cloud.google.com/vpc/docs/
# rdma-network-profiles).
RDMA_VPC_MTU = 8896


@dataclass(frozen=True)
class AddressPlan:
    nodes: str
    pods: str
    services: str
    control_plane: str
    gpu_nics: tuple[str, ...]
    # One subnet per RDMA NIC, all in the one RoCE VPC (A3 Ultra / A4).
    rdma_nics: tuple[str, ...] = ()

    def all_ranges(self) -> list[str]:
        return [
            self.nodes,
            self.pods,
            self.services,
            self.control_plane,
            *self.gpu_nics,
            *self.rdma_nics,
        ]


def plan_addresses(base_cidr: str, gpu_nic_count: int, rdma_nic_count: int = 0) -> AddressPlan:
    """Allocate every range inside `base_cidr`, aligned and non-overlapping.

    Raises ValueError when the base range is too small for them all.
    """
    base = ipaddress.IPv4Network(base_cidr)
    cursor = int(base.network_address)

    def take(prefix: int) -> str:
        nonlocal cursor
        size = 1 << (32 - prefix)
        cursor = (cursor + size - 1) // size * size  # align to the block size
        block = ipaddress.IPv4Network((cursor, prefix))
        if not block.subnet_of(base):
            raise ValueError(
                f"{base_cidr} is too small for the node, pod, service, control-plane and "
                f"{gpu_nic_count + rdma_nic_count} GPU NIC ranges; use a /12 or larger "
                "(e.g. 10.0.0.0/8)"
            )
        cursor += size
        return str(block)

    # Host ranges first and in a fixed order, so switching network mode (and with it the GPU
    # NIC count) never moves them: a moved range would replace the cluster.
    pods = take(PODS_PREFIX)
    nodes = take(NODES_PREFIX)
    services = take(SERVICES_PREFIX)
    control_plane = take(CONTROL_PLANE_PREFIX)
    gpu_nics = tuple(take(GPU_NIC_PREFIX) for _ in range(gpu_nic_count))
    rdma_nics = tuple(take(GPU_NIC_PREFIX) for _ in range(rdma_nic_count))
    return AddressPlan(nodes, pods, services, control_plane, gpu_nics, rdma_nics)
