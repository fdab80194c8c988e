"""`tcpxo` on GKE: GPUDirect-TCPXO on A3 Mega (gpudirect_tcp.py), which also needs a minimum
GKE patch per minor."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_cluster.config.netmodes.gpudirect_tcp import GpuDirectTcpMode
from gpu_cluster.facts.fabric import TCPXO_FABRIC_GBPS
from gpu_cluster.facts.gpudirect import TCPXO_MIN_GKE, gke_version_key

if TYPE_CHECKING:
    from gpu_cluster.config.schema import Settings
    from gpu_cluster.config.sections.gcp import GcpSettings


class Tcpxo(GpuDirectTcpMode):
    key = "tcpxo"
    name = "tcpxo"
    transport = "tcpxo"
    line_rate_gbps = TCPXO_FABRIC_GBPS

    def gke_version_problems(self, s: Settings, gcp: GcpSettings, minor: int) -> list[str]:
        out = super().gke_version_problems(s, gcp, minor)
        version = gcp.min_master_version
        floor = TCPXO_MIN_GKE.get(max(minor, min(TCPXO_MIN_GKE)))
        if floor and "-gke." in version and gke_version_key(version) < gke_version_key(floor):
            out.append(
                f"gpu-cluster:gcp.minMasterVersion = {version!r} is older than TCPXO's minimum "
                f"for 1.{minor} on a3-megagpu-8g: use {floor} or newer"
            )
        return out


MODE = Tcpxo()
