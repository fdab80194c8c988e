"""`tcp`: NCCL over sockets on the pod network, on either platform (no GPUDirect, no extra NICs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_cluster.config.netmodes.base import ModePlugin

if TYPE_CHECKING:
    from gpu_cluster.config.schema import Settings


class Tcp(ModePlugin):
    key = "tcp"
    name = "tcp"
    platforms = ("openshift", "gke")
    transport = "socket"
    section = "tcp"

    def nccl_env(self, s: Settings) -> dict[str, str]:
        tcp = s.tcp
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


MODE = Tcp()
