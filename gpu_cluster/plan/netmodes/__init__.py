"""What each network mode adds to the (one, shared) training pod: annotations, NCCL env,
extended resources, capabilities, init containers / native sidecars, volumes and mounts. Pure:
no Pulumi here.

The modes are config/netmodes/'s plug-ins; those whose pod needs more than their NCCL
environment register its builder in POD_BUILDERS under their key, beside the pod types it uses.
"""

from __future__ import annotations

from collections.abc import Callable

from gpu_cluster.config.netmodes import gke_rdma as gke_rdma_mode
from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.netmodes import openshift_rdma as openshift_rdma_mode
from gpu_cluster.config.netmodes import tcpx as tcpx_mode
from gpu_cluster.config.netmodes import tcpxo as tcpxo_mode
from gpu_cluster.config.schema import Settings
from gpu_cluster.plan.nccl import nccl_env
from gpu_cluster.plan.netmodes.gke_rdma import gib_pod
from gpu_cluster.plan.netmodes.gpudirect_tcp import tcpx_pod, tcpxo_pod
from gpu_cluster.plan.netmodes.openshift_rdma import rdma_pod
from gpu_cluster.plan.podspec import PodNetworking

# (settings, the scripts ConfigMap's name) -> the pod's networking, by mode key.
PodBuilder = Callable[[Settings, str], PodNetworking]
POD_BUILDERS: dict[str, PodBuilder] = {
    openshift_rdma_mode.MODE.key: rdma_pod,
    tcpxo_mode.MODE.key: tcpxo_pod,
    tcpx_mode.MODE.key: tcpx_pod,
    gke_rdma_mode.MODE.key: gib_pod,
}


def pod_networking(s: Settings, scripts_config_map: str) -> PodNetworking:
    """The stack's mode's additions to the training pod; a mode that registered no builder
    adds its NCCL environment alone."""
    build = POD_BUILDERS.get(mode_of(s).key)
    return build(s, scripts_config_map) if build else PodNetworking(env=nccl_env(s))
