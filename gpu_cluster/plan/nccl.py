"""NCCL environment for each network mode (pure; sources beside each setting)."""

from __future__ import annotations

from gpu_cluster.config.gke import gib_release, gpudirect_release
from gpu_cluster.config.schema import RdmaSettings, Settings, TcpSettings
from gpu_cluster.facts.machines import MACHINES

# Where the RDMA detection init container writes the NCCL settings it works out per pod.
NCCL_ENV_FILE = "/var/run/gpu-cluster/nccl.env"


def nccl_env(s: Settings) -> dict[str, str]:
    """Every NCCL variable the training container gets, for the stack's network mode."""
    # The stack's level wins over a release's script (TCPXO's profile exports WARN): the launchers
    # put the pod's NCCL_* values back after sourcing it (scripts/launch-common.sh).
    env: dict[str, str] = {"NCCL_DEBUG": s.nccl.debug}
    if s.network_mode == "rdma" and s.platform == "gke":
        env.update(gib_env(s))
    elif s.network_mode == "rdma":
        assert s.rdma is not None  # guaranteed by the schema
        env.update(rdma_env(s.rdma))
    elif s.network_mode == "tcp":
        env.update(tcp_env(s.tcp))
    else:
        assert s.gcp is not None
        env.update(gpudirect_env(s))
    return env


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


def tcp_env(tcp: TcpSettings) -> dict[str, str]:
    env = {
        "NCCL_IB_DISABLE": "1",
        "NCCL_NET": "Socket",
        "NCCL_SOCKET_IFNAME": tcp.socket_ifname,
    }
    if tcp.socket_nthreads is not None:
        env["NCCL_SOCKET_NTHREADS"] = str(tcp.socket_nthreads)
    if tcp.nsocks_per_thread is not None:
        env["NCCL_NSOCKS_PERTHREAD"] = str(tcp.nsocks_per_thread)
    return env


def gpudirect_env(s: Settings) -> dict[str, str]:
    """The pinned TCPX(O) release's settings: TCPX's list, or TCPXO's profile and its directory."""
    return dict(gpudirect_release(s).nccl_env)


def gib_env(s: Settings) -> dict[str, str]:
    """The pinned gIB release's script, and what Google's workloads on the machine export after
    it."""
    assert s.gcp is not None
    return gib_release(s).env_for(MACHINES[s.gcp.machine_type])
