"""`rdma` on OpenShift: RoCE over the NICs Multus attaches (the `rdma` section), NCCL's own IB
transport. Its pod (NetworkAttachmentDefinitions, device resources, the detection init step) is
plan/netmodes/openshift_rdma.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_cluster.config.netmodes.base import ModePlugin
from gpu_cluster.facts.fabric import NIC_LINE_RATE_GBPS

if TYPE_CHECKING:
    from gpu_cluster.config.schema import Settings
    from gpu_cluster.config.sections.network import RdmaSettings


class OpenShiftRdma(ModePlugin):
    key = "openshift_rdma"
    name = "rdma"
    platforms = ("openshift",)
    transport = "ib"
    # A too-small memlock must stop training before it starts.
    preflight_by_default = True
    section = "rdma"

    def problems(self, s: Settings) -> list[str]:
        if s.rdma is None:
            return ["gpu-cluster:rdma is required when networkMode is 'rdma' (the NIC list)"]
        return []

    def rdma(self, s: Settings) -> RdmaSettings | None:
        return s.rdma

    def nccl_env(self, s: Settings) -> dict[str, str]:
        assert s.rdma is not None  # problems() refuses a stack without it
        return rdma_env(s.rdma)

    def fabric_gbps(self, s: Settings) -> float | None:
        return NIC_LINE_RATE_GBPS * len(s.rdma.nics) if s.rdma is not None else None

    def line_rate_interfaces(self, s: Settings) -> tuple[str, ...]:
        # No vendor floor for the cluster's own NICs: the check reads their link speeds.
        assert s.rdma is not None
        return tuple(nic.interface for nic in s.rdma.nics)


def rdma_env(rdma: RdmaSettings) -> dict[str, str]:
    env = {
        # Force the IB/RoCE transport: a broken fabric then fails loudly instead of silently
        # falling back to sockets (NVIDIA/nccl#451, #952).
        "NCCL_NET": "IB",
        "NCCL_IB_DISABLE": "0",
        # Bootstrap and out-of-band traffic over the pod's cluster interface; '=' makes the
        # name exact (a bare name is a prefix: eth0 would also match eth01, NCCL env docs).
        "NCCL_SOCKET_IFNAME": "=" + rdma.bootstrap_interface,
        "NCCL_CROSS_NIC": str(rdma.cross_nic),
    }
    hcas = [nic.hca for nic in rdma.nics]
    if all(hcas):
        # '=' makes the match exact: without it mlx5_1 also selects mlx5_10..mlx5_19.
        env["NCCL_IB_HCA"] = "=" + ",".join(f"{hca}:1" for hca in hcas if hca)
    if isinstance(rdma.gid, int):
        env["NCCL_IB_GID_INDEX"] = str(rdma.gid)
    elif rdma.gid == "nccl":
        # NCCL >= 2.21 picks the GID itself from these; NCCL_IB_GID_INDEX "should not be set"
        # there (NVIDIA/nccl docs/userguide/source/troubleshooting/networking_troubleshooting.rst).
        env["NCCL_IB_ROCE_VERSION_NUM"] = "2"
        env["NCCL_IB_ADDR_FAMILY"] = "AF_INET"
    optional = {
        "NCCL_NET_GDR_LEVEL": rdma.gdr_level,
        "NCCL_IB_TIMEOUT": rdma.ib_timeout,
        "NCCL_IB_TC": rdma.traffic_class,
        "NCCL_IB_SL": rdma.service_level,
        "NCCL_IB_QPS_PER_CONNECTION": rdma.qps_per_connection,
        "NCCL_MIN_CTAS": rdma.min_ctas,
    }
    env.update({k: str(v) for k, v in optional.items() if v is not None})
    return env


MODE = OpenShiftRdma()
