"""What GKE's GPUDirect modes' pods and networks share: the multi-networking annotations and the
Network objects of the GPU NICs."""

from __future__ import annotations

from typing import Any

# GKE multi-networking pod annotations (GKE docs; CEA gpudirect-tcpxo/nccl-test-latest.yaml).
GKE_DEFAULT_INTERFACE_ANNOTATION = "networking.gke.io/default-interface"
GKE_INTERFACES_ANNOTATION = "networking.gke.io/interfaces"


def gpu_network_name(index: int) -> str:
    """Name of the GKE Network / GKENetworkParamSet for GPU NIC `index` (1-based)."""
    return f"vpc{index}"


def gke_network_objects(
    name: str, vpc: str, subnet: str, device_mode: str = "NetDevice"
) -> list[dict[str, Any]]:
    """GKENetworkParamSet + Network (networking.gke.io/v1) for one GPU NIC's VPC and subnet;
    device_mode RDMA for an RDMA NIC, NetDevice for a gVNIC or a TCPX(O) NIC."""
    return [
        {
            "apiVersion": "networking.gke.io/v1",
            "kind": "GKENetworkParamSet",
            "metadata": {"name": name},
            "spec": {"vpc": vpc, "vpcSubnet": subnet, "deviceMode": device_mode},
        },
        {
            "apiVersion": "networking.gke.io/v1",
            "kind": "Network",
            "metadata": {"name": name},
            "spec": {
                "parametersRef": {
                    "group": "networking.gke.io",
                    "kind": "GKENetworkParamSet",
                    "name": name,
                },
                "type": "Device",
            },
        },
    ]
