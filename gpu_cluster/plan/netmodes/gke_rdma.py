"""The pod of `rdma` on GKE (config/netmodes/gke_rdma.py): gIB and the driver's libraries from
the node, the RDMA NICs as networks."""

from __future__ import annotations

import json

from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.gpudirect import (
    GIB_HOST_DIR,
    GIB_POD_DIR,
    NVIDIA_HOST_DIR,
    NVIDIA_POD_DIR,
    RDMA_NIC_COUNT,
)
from gpu_cluster.plan.nccl import nccl_env
from gpu_cluster.plan.netmodes.gke_networks import (
    GKE_DEFAULT_INTERFACE_ANNOTATION,
    GKE_INTERFACES_ANNOTATION,
)
from gpu_cluster.plan.podspec import HostPath, Mount, PodNetworking

# Network objects of an RDMA machine's NICs: the second gVNIC, then one per RDMA NIC, named as
# GoogleCloudPlatform/cluster-toolkit modules/scheduler/gke-cluster `k8s_network_names`
# defaults (1047080) and as CEA gpudirect-rdma/nccl-test.yaml's pods name them (992db81).
GVNIC_NETWORK = "gvnic-1"


def rdma_network_name(index: int) -> str:
    """Network / GKENetworkParamSet name of RDMA NIC `index` (0-based)."""
    return f"rdma-{index}"


def gib_interfaces() -> list[dict[str, str]]:
    """The pod's interfaces in the node's NIC order: eth0 the cluster network, eth1 the second
    gVNIC, eth2..eth9 the RDMA NICs (CEA gpudirect-rdma/nccl-test.yaml; the gvnic-1 entry as
    cluster-toolkit examples/gke-consumption-options/dws-flex-start-queued-provisioning/
    nccl-jobset-example.yaml and AI-Hypercomputer/gpu-recipes a4 jobset attach it)."""
    return [
        {"interfaceName": "eth0", "network": "default"},
        {"interfaceName": "eth1", "network": GVNIC_NETWORK},
        *(
            {"interfaceName": f"eth{i + 2}", "network": rdma_network_name(i)}
            for i in range(RDMA_NIC_COUNT)
        ),
    ]


def gib_pod(s: Settings, scripts_config_map: str) -> PodNetworking:
    """No sidecar and no added capability: the gIB plugin and the driver's libraries come from
    the node through read-only host paths (CEA gpudirect-rdma/nccl-test.yaml runs the test pod
    unprivileged, without host network). Non-root, where that pod is root without IPC_LOCK:
    the kernel creates /dev/infiniband/uverbsN mode 0666 (torvalds/linux 3beed9b
    drivers/infiniband/core/uverbs_main.c uverbs_devnode), and verbs registration is held to
    RLIMIT_MEMLOCK alike for root and any UID without CAP_IPC_LOCK (drivers/infiniband/core/
    umem.c), so Google's pod registers no more than this one may."""
    env = nccl_env(s)
    env["LD_LIBRARY_PATH"] = f"{NVIDIA_POD_DIR}/lib64"
    return PodNetworking(
        annotations={
            GKE_DEFAULT_INTERFACE_ANNOTATION: "eth0",
            GKE_INTERFACES_ANNOTATION: json.dumps(gib_interfaces(), separators=(",", ":")),
        },
        env=env,
        volumes=(HostPath("nvidia-install", NVIDIA_HOST_DIR), HostPath("gib", GIB_HOST_DIR)),
        mounts=(
            Mount("nvidia-install", NVIDIA_POD_DIR, read_only=True),
            Mount("gib", GIB_POD_DIR, read_only=True),
        ),
    )
