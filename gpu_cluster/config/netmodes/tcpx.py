"""`tcpx` on GKE: GPUDirect-TCPX on A3 High (gpudirect_tcp.py)."""

from __future__ import annotations

from gpu_cluster.config.netmodes.gpudirect_tcp import GpuDirectTcpMode
from gpu_cluster.facts.fabric import TCPX_FABRIC_GBPS


class Tcpx(GpuDirectTcpMode):
    key = "tcpx"
    name = "tcpx"
    transport = "tcpx"
    line_rate_gbps = TCPX_FABRIC_GBPS


MODE = Tcpx()
